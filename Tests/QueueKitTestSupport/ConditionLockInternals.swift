// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

@testable import QueueKit

// Test-only access to the condition lock's test seam (kept out of the test files that import the
// C header, so that names resolve to the header's declarations there).
extension ConditionLock {
    /// Threads queued for the lock right now: a waiter that is really waiting shows here.
    package var queuedWaiters: Int { waiterCount }
}
