// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Eventual fairness: a release wakes a waiter asleep in the kernel to take the lock itself and
// leaves the lock free meanwhile, so a running thread may take it first; the overtaken waiter
// keeps its place in line, and one overtaken for `fairnessBound` is handed the lock. The seams show
// who sleeps (`firstWaiterSleeps`) and set how long a waiter has been overtaken, so
// each case below is forced rather than hoped for; the one thing no seam forces (whether the
// woken thread or the releasing one gets there first) is retried until the overtaking happened.

@Suite("Condition lock: eventual fairness")
struct ConditionLockFairnessTests {
    /// How the overtaken waiter waits.
    enum Kind: String, CaseIterable, Sendable {
        case when, test, await

        /// Waits as this kind of waiter for a condition of 5 or more and returns holding `lock`;
        /// an `await` first takes the lock and signals `holding`.
        func acquire(_ lock: ConditionLock<Int>, holding: DispatchSemaphore) throws {
            switch self {
            case .when: try lock.lock(whenCondition: 5)
            case .test: try lock.lock(where: { $0 >= 5 })
            case .await:
                try lock.lock()
                holding.signal()
                try lock.wait(until: { $0 >= 5 })
            }
        }
    }

    @Test(arguments: Kind.allCases)
    func aRunningThreadMayOvertakeASleepingWaiterWhichKeepsItsPlaceInLine(kind: Kind) throws {
        var overtaken = 0
        for _ in 0..<50 where overtaken == 0 {
            if try round(kind) { overtaken += 1 }
        }
        // The asking thread is running and takes a free lock within nanoseconds; the sleeper needs
        // microseconds to run: in 50 rounds the asking thread gets there first at least once.
        #expect(overtaken > 0)
    }

    /// One round: a waiter for 5 asleep first in line, a plain `lock` waiter behind it, a thread
    /// asking for the lock with tries; the main thread releases with 5. Returns whether the asking
    /// thread got the lock first.
    private func round(_ kind: Kind) throws -> Bool {
        let lock = ConditionLock(condition: 0)
        let order = Recorder()
        let holding = DispatchSemaphore(value: 0)
        let first = spawn {
            do {
                try kind.acquire(lock, holding: holding)
                order.record("first")
                try lock.unlock(withCondition: 6)
            } catch {
                Issue.record("the first waiter threw \(error)")
            }
        }
        if kind == .await { #expect(waits(for: holding)) }
        #expect(eventually { lock.firstWaiterSleeps })
        try lock.lock()
        let second = spawn {
            do {
                try lock.lock()
                order.record("second")
                try lock.unlock()
            } catch {
                Issue.record("the second waiter threw \(error)")
            }
        }
        #expect(eventually { lock.queuedWaiters == 2 })
        #expect(eventually { lock.firstWaiterSleeps })
        // The newcomer: a running thread that keeps asking for the lock until it gets it or the
        // first waiter has had it (it is not queued: a try never queues).
        let asking = DispatchSemaphore(value: 0)
        let overtook = Shared(false)
        let newcomer = spawn {
            asking.signal()
            while !order.events.contains("first") {
                do {
                    try lock.tryLock(whenCondition: 5)
                } catch {
                    continue
                }
                // Overtaken: the first waiter has not run its critical section, and both are
                // still in line.
                overtook.value = true
                order.record("newcomer")
                #expect(lock.queuedWaiters == 2)
                #expect(throws: Never.self) { try lock.unlock() }
                return
            }
        }
        #expect(waits(for: asking))
        lock.setFirstWaiterOvertaken(for: 0)
        try lock.unlock(withCondition: 5)
        #expect(waits(for: newcomer))
        #expect(waits(for: first))
        #expect(waits(for: second))
        // The one behind never overtakes the one ahead, whichever way the release went.
        #expect(order.events == (overtook.value ? ["newcomer", "first", "second"] : ["first", "second"]))
        #expect(lock.condition == 6)
        let stats = lock.stats
        #expect(stats.acquisitions == (kind == .await ? 4 : 3) + (overtook.value ? 1 : 0))
        #expect(stats.futileWakeups <= stats.wakeups)
        return overtook.value
    }

    @Test(arguments: Kind.allCases)
    func aWaiterOvertakenForTheFairnessBoundIsHandedTheLock(kind: Kind) throws {
        let lock = ConditionLock(condition: 0)
        let holding = DispatchSemaphore(value: 0)
        let taken = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let waiter = spawn {
            do {
                try kind.acquire(lock, holding: holding)
                taken.signal()
                _ = waits(for: release)
                try lock.unlock()
            } catch {
                Issue.record("the waiter threw \(error)")
            }
        }
        if kind == .await { #expect(waits(for: holding)) }
        #expect(eventually { lock.firstWaiterSleeps })
        try lock.lock()
        lock.setFirstWaiterOvertaken(for: ConditionLock<Int>.fairnessBound)
        try lock.unlock(withCondition: 5)
        // Handed over: the lock is the waiter's before it even runs.
        #expect(throws: QueueKitError.busy) { try lock.tryLock() }
        #expect(waits(for: taken))
        release.signal()
        #expect(waits(for: waiter))
        #expect(lock.stats.futileWakeups == 0)
    }
}
