// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Waits on a test of the condition and waiting while holding, through the Swift API:
// `lock(where:)`, `wait(until:)` and their async forms. Every wait is bounded.

@Suite("Condition lock: test waits in Swift")
struct ConditionLockSwiftTestWaitTests {
    enum Stage: Int, Sendable {
        case empty = 0
        case some = 1
        case full = 5
    }

    @Test func lockWhereAndWaitUntilKeepTheLockRules() throws {
        let lock = ConditionLock(condition: 0)
        let seen = Shared<Int>(-1)
        let waiter = spawn {
            do {
                try lock.lock(where: { $0 >= 5 })
                seen.value = lock.condition
                try lock.unlock()
            } catch { Issue.record("\(error)") }
        }
        #expect(eventually { lock.queuedWaiters == 1 })
        try lock.set(4)
        #expect(lock.queuedWaiters == 1)
        try lock.set(5)
        #expect(waits(for: waiter))
        #expect(seen.value == 5)

        // wait(until:): the holder releases, and is handed the lock back when 7 arrives.
        let holder = spawn {
            do {
                try lock.lock()
                try lock.wait(until: { $0 == 7 })
                seen.value = lock.condition
                try lock.unlock(withCondition: 8)
            } catch { Issue.record("\(error)") }
        }
        #expect(eventually { lock.queuedWaiters == 1 && !lock.isLocked })
        try lock.set(7)
        #expect(waits(for: holder))
        #expect(seen.value == 7)
        #expect(lock.condition == 8)
        #expect(lock.stats.futileWakeups == 0)

        // Timed: thrown holding the lock.
        try lock.lock()
        #expect(throws: QueueKitError.timedOut) {
            try lock.wait(until: { $0 == 99 }, before: MonotonicClock.now() + 20_000_000)
        }
        try lock.unlock()
        #expect(throws: QueueKitError.notPermitted) { try lock.wait(until: { _ in true }) }
        #expect(throws: QueueKitError.busy) { try lock.tryLock(where: { $0 == 99 }) }
        try lock.withLock(where: { $0 == 8 }) { 9 }
        #expect(lock.condition == 9)
    }

    @Test func asyncWithLockWhereSuspendsUntilTheTestHolds() async throws {
        // The task runs on a pool of its own: other tests' blocking waits cannot delay it.
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let lock = ConditionLock(condition: 0)
        let task = Task(executorPreference: pool) {
            try await lock.withLock(where: { $0 >= 3 }) { 10 }
        }
        #expect(eventually { lock.queuedWaiters == 1 })
        try lock.set(2)
        // The pool's thread is free: a task woken by 2 could run; it must still be waiting.
        let probe = try await withWatchdog { await Task(executorPreference: pool) { lock.queuedWaiters }.value }
        #expect(probe == 1)
        try lock.set(3)
        let finished: Void? = try await withWatchdog { try await task.value }
        #expect(finished != nil)
        #expect(lock.condition == 10)
    }
}
