// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import Testing

@testable import QueueKit

// Condition-lock handles for the tests: every member calls the C API (section 3 of the header).

/// A `qk_condlock_t *` that may cross threads in the tests.
package struct CLock: @unchecked Sendable {
    package let raw: OpaquePointer

    package init(_ condition: Int = 0) { raw = qk_condlock_create(condition)! }

    /// A lock named `name` (what deadlock and lock-order reports show).
    package init(_ name: String, condition: Int = 0) {
        self.init(condition)
        _ = name.withCString { qk_condlock_set_name(raw, $0) }
    }

    package var swift: ConditionLock<Int> {
        Unmanaged<ConditionLock<Int>>.fromOpaque(UnsafeRawPointer(raw)).takeUnretainedValue()
    }
    package var waiters: Int { swift.queuedWaiters }
    package var isLocked: Bool { swift.isLocked }
    package var condition: Int { qk_condlock_condition(raw) }

    package func lock() -> Int32 { qk_condlock_lock(raw) }
    package func trylock() -> Int32 { qk_condlock_trylock(raw) }
    package func lock(until deadline: UInt64) -> Int32 { qk_condlock_lock_until(raw, deadline) }
    package func lock(when c: Int) -> Int32 { qk_condlock_lock_when(raw, c) }
    package func trylock(when c: Int) -> Int32 { qk_condlock_trylock_when(raw, c) }
    package func lock(when c: Int, until deadline: UInt64) -> Int32 { qk_condlock_lock_when_until(raw, c, deadline) }
    package func unlock() -> Int32 { qk_condlock_unlock(raw) }
    package func unlock(with c: Int) -> Int32 { qk_condlock_unlock_with(raw, c) }
    package func set(_ c: Int) -> Int32 { qk_condlock_set(raw, c) }
    package func destroy() -> Int32 { qk_condlock_destroy(raw) }

    package var stats: qk_condlock_stats_t {
        var stats = qk_condlock_stats_t()
        stats.size = MemoryLayout<qk_condlock_stats_t>.size
        precondition(qk_condlock_get_stats(raw, &stats) == 0)
        return stats
    }
}
