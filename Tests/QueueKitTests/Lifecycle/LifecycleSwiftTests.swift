// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

@Suite("Lifecycle: the Swift API of an abandoned lock")
struct AbandonedConditionLockSwiftTests {
    enum Stage: Hashable, Sendable { case idle, loading, ready }

    @Test func previousOwnerDiedHoldsUntilTheHolderReleases() throws {
        let lock = ConditionLock(condition: Stage.idle, name: "cache")
        let box = Unchecked(lock)
        onAThreadThatExits {
            // A half-done update: the condition says "loading" and the thread dies holding the lock.
            #expect(throws: Never.self) {
                try box.value.lock(whenCondition: .idle)
                try box.value.unlock(withCondition: .loading)
                try box.value.lock()
            }
        }
        #expect(!lock.previousOwnerDied) // nobody holds it
        try lock.lock(whenCondition: .loading) // returns normally
        #expect(lock.previousOwnerDied)
        #expect(lock.stats.abandonments == 1)
        try lock.unlock(withCondition: .ready)
        #expect(!lock.previousOwnerDied)
        try lock.lock(whenCondition: .ready)
        #expect(!lock.previousOwnerDied)
        try lock.unlock()
    }
}
