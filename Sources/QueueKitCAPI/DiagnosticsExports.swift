// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import Glibc
import QueueKit
import QueueKitShim

// Section 4 of the C API: deadlock reports, wait reports, the stall watch. Argument conversion
// only; the behaviour is `Diagnostics`'s and `StallWatch`'s.

@_cdecl("qk_set_deadlock_handler") @implementation
public func qk_set_deadlock_handler(_ handler: qk_report_function_t?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    Handle.withoutHandle {
        if ConditionTesting.isRunning { return EDEADLK }
        Diagnostics.setDeadlockHandler(handler.map { .c($0, context) } ?? .standardError)
        return 0
    }
}

@_cdecl("qk_copy_wait_report") @implementation
public func qk_copy_wait_report(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int) -> Int {
    Handle.withoutHandle {
        // Inside a test of a condition (under a lock's guard) the report cannot be taken: "".
        if ConditionTesting.isRunning {
            if let buffer, size > 0 { buffer.pointee = 0 }
            return 0
        }
        let report = Diagnostics.waitReport()
        return report.withCString { text in
            guard let buffer, size > 0 else { return strlen(text) }
            return qkshim_strlcpy(buffer, text, size)
        }
    }
}

@_cdecl("qk_set_stall_handler") @implementation
public func qk_set_stall_handler(
    _ threshold: UInt64, _ handler: qk_report_function_t?, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    Handle.withoutHandle {
        if ConditionTesting.isRunning { return EDEADLK }
        return StallWatch.configure(threshold: threshold, handler: handler.map { .c($0, context) } ?? .standardError)
    }
}
