// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

@testable import QueueKit

// Test-only access to the condition lock's test seam (kept out of the test files that import the
// C header, so that names resolve to the header's declarations there).
extension ConditionLock {
    /// Threads queued for the lock right now: a waiter that is really waiting shows here.
    package var queuedWaiters: Int { waiterCount }
}

extension ConditionLock {
    /// Threads spinning for a release right now (before they queue).
    package var spinners: Int { spinningThreads.load(ordering: .relaxed) }

    /// Makes the next `count` spins ignore their limit: they end only when they take the lock or
    /// a waiter queues.
    package func grantUnboundedSpins(_ count: Int) { unboundedSpins.store(count, ordering: .relaxed) }

    /// The polls the next spin may make, and the spin's bounds.
    package var spinLimitNow: UInt32 { spinLimit }
    package static var spinFloor: UInt32 { SpinLimits.floor }
    package static var spinCeiling: UInt32 { SpinLimits.ceiling }

    /// Feeds the spin's estimate an outcome: a spin that took the lock after `polls`, or (`nil`)
    /// one that gave up.
    package func recordSpin(succeededAfter polls: UInt32?) { learnSpin(succeededAfter: polls) }

    /// Whether the first queued waiter sleeps in the kernel now (its word says so).
    package var firstWaiterSleeps: Bool {
        acquireGuard()
        defer { releaseGuard(.keep) }
        guard let parker = head?.pointee.parker else { return false }
        return qkshim_atomic_load32(parker.word) == Parker.sleeping
    }

    /// Makes the first queued waiter one that was first woken to take the lock itself
    /// `nanoseconds` ago and overtaken since (0: never woken so): a release hands it the lock
    /// when that is ``fairnessBound`` or more.
    package func setFirstWaiterOvertaken(for nanoseconds: UInt64) {
        acquireGuard()
        head?.pointee.since = nanoseconds == 0 ? 0 : MonotonicClock.now() &- nanoseconds
        releaseGuard(.keep)
    }

    /// Whether the holder was handed the lock while it slept (spinners then spin through its
    /// wake-up).
    package var holderWasHandedAsleep: Bool {
        line.pointee.state.load(ordering: .relaxed) & StateBit.handedToSleeper != 0
    }
}

extension ConditionLock {
    /// The address of the lock's hand-off line (its hot words), and whether the condition lives in
    /// that line's bits.
    package var handOffLineAddress: UInt { UInt(bitPattern: line) }
    package static var conditionIsInTheLine: Bool { mirrorsCondition }
}

extension ConditionLock {
    /// Takes the lock as a spinning waiter for `condition` does (one compare-and-swap, no guard),
    /// before it has counted or recorded anything: true when it took it.
    package func takeAsSpinner(for condition: Condition) -> Bool { takeIfSatisfied(.value(condition)) }

    /// Gives back a lock taken for nothing (the condition seen after the take was another).
    package func giveBackTakenLock() { giveBack() }
}

extension ConditionLock {
    /// Spins as a waiter for `condition` that saw the lock held does, and takes the lock for it
    /// (completing the acquisition) when the spin succeeds: true then.
    package func spinAsWaiter(for condition: Condition) -> Bool {
        guard spinForRelease(.value(condition), deadline: MonotonicClock.forever) else { return false }
        didAcquire(by: qkshim_thread_id(), waited: false)
        return true
    }
}
