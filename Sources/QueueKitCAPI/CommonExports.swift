// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import QueueKit
import QueueKitShim

// The general conventions of the C API: version, status text, clock. No logic of their own.

@_cdecl("qk_version") @implementation
public func qk_version() -> UnsafePointer<CChar>? {
    versionText.pointer
}

/// `QueueKitVersion.string` as a C string, made once and never freed.
private let versionText = CString(QueueKitVersion.string)!

@_cdecl("qk_version_number") @implementation
public func qk_version_number() -> Int32 {
    Int32(QueueKitVersion.number)
}

@_cdecl("qk_strerror") @implementation
public func qk_strerror(_ status: Int32) -> UnsafePointer<CChar>? {
    qkshim_status_description(status)
}

@_cdecl("qk_status_name") @implementation
public func qk_status_name(_ status: Int32) -> UnsafePointer<CChar>? {
    qkshim_status_name(status)
}

@_cdecl("qk_now_ns") @implementation
public func qk_now_ns() -> UInt64 {
    MonotonicClock.now()
}
