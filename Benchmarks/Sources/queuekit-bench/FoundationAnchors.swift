// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import QueueKitBenchKernels

/// Foundation's `NSConditionLock`, the way it can be used on this toolchain: only with finite
/// deadlines, because `lock(whenCondition:)` (an infinite wait) traps whenever it has to wait
/// (its `Date.distantFuture` overflows the timespec conversion: swift-corelibs-foundation #3223).
enum FoundationAnchors {
    static let note =
        "Foundation NSConditionLock rows use lock(whenCondition:before:) with a deadline "
        + "an hour ahead: lock(whenCondition:) traps on this toolchain whenever it must wait "
        + "(Date.distantFuture overflows; swift-corelibs-foundation #3223)."

    /// A deadline far enough ahead never to expire during a run, fixed once so the timed loops
    /// do not read the clock for it.
    nonisolated(unsafe) static var deadline = Date(timeIntervalSinceNow: 3600)

    /// An NSConditionLock seen as the kernels' ops. Release the lock with `free`.
    static func ops(condition: Int) -> qkb_condlock_ops_t {
        deadline = Date(timeIntervalSinceNow: 3600)
        let lock = NSConditionLock(condition: condition)
        return qkb_condlock_ops_t(
            lock: Unmanaged.passRetained(lock).toOpaque(),
            lock_when: { opaque, condition in
                let lock = Unmanaged<NSConditionLock>.fromOpaque(opaque!).takeUnretainedValue()
                return lock.lock(whenCondition: condition, before: FoundationAnchors.deadline) ? 0 : ETIMEDOUT
            },
            unlock_with: { opaque, condition in
                Unmanaged<NSConditionLock>.fromOpaque(opaque!).takeUnretainedValue().unlock(withCondition: condition)
                return 0
            },
            counters: nil)
    }

    static func free(_ ops: qkb_condlock_ops_t) {
        Unmanaged<NSConditionLock>.fromOpaque(ops.lock).release()
    }

    /// Runs `body` with a fresh Foundation lock whose condition is 0.
    static func with(_ body: (qkb_condlock_ops_t) -> qkb_sample_t) -> qkb_sample_t {
        let lock = ops(condition: 0)
        defer { free(lock) }
        return body(lock)
    }
}
