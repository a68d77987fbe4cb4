// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

extension Diagnostics {
    /// What the lock-order witness does when an order closes a cycle.
    public enum LockOrderMode: Int32, Sendable, CaseIterable {
        /// Witnessing nothing (the default).
        case off = 0
        /// Reporting each potential deadlock once, then going on.
        case report = 1
        /// Reporting it, then stopping the process with `abort()` (SIGABRT) on the thread whose
        /// call closed the cycle: for test suites and CI (`QUEUEKIT_LOCK_ORDER=abort`).
        case abort = 2
    }

    /// The lock-order witness: remembers in which order threads take condition locks, queues
    /// and DB queues, and reports a potential deadlock the first time an order closes a cycle,
    /// even when the two orders ran at different times and nothing ever waited.
    ///
    /// Off unless asked: `QUEUEKIT_LOCK_ORDER=off|report|abort` in the environment (read once, at
    /// load), or this property at any time. Turning it on starts an empty graph (objects held at
    /// that moment are not witnessed); turning it off drops the graph; switching between report
    /// and abort keeps it. More than 65,536 edges turn it off by itself (one line on stderr).
    /// The witness only watches: every call behaves exactly as it does without it.
    public static var lockOrder: LockOrderMode {
        get { LockOrderMode(rawValue: Int32(LockOrder.mode)) ?? .off }
        set { LockOrder.setMode(UInt8(newValue.rawValue)) }
    }

    /// Sets where lock-order reports go: `handler` is called with each report on the thread whose
    /// call closed the cycle, before that call goes on, with no QueueKit lock held. Calls the
    /// handler makes are not witnessed, and one that would wait throws
    /// ``QueueKitError/wouldDeadlock`` at once. `nil` restores the default: the report to stderr
    /// in one write. Applies to the next report.
    public static func onLockOrderViolation(_ handler: (@Sendable (String) -> Void)?) {
        LockOrder.handler.withLock { $0 = handler.map { .swift($0) } ?? .standardError }
    }
}
