// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import Glibc
import QueueKit

// Section 9 of the C API: the lock-order witness. Argument checks only; the behaviour is
// `LockOrder`'s.

@_cdecl("qk_set_lock_order_mode") @implementation
public func qk_set_lock_order_mode(_ mode: Int32) -> Int32 {
    Handle.withoutHandle {
        guard (0...2).contains(mode) else { return EINVAL }
        LockOrder.setMode(UInt8(mode))
        return 0
    }
}

@_cdecl("qk_lock_order_mode") @implementation
public func qk_lock_order_mode() -> Int32 {
    Handle.withoutHandle {
        Int32(LockOrder.mode)
    }
}

@_cdecl("qk_set_lock_order_handler") @implementation
public func qk_set_lock_order_handler(_ handler: qk_report_function_t?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    Handle.withoutHandle {
        LockOrder.setHandler(handler.map { .c($0, context) } ?? .standardError)
        return 0
    }
}
