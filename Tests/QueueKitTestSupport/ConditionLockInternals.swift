// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

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
}
