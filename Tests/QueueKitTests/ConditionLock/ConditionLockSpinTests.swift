// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The spin before queuing: a thread that cannot take the lock watches the lock's line for a
// release that lets it in, bounded by what spinning achieved lately. The test seams make a spin
// last until it ends by itself (`grantUnboundedSpins`) and show who spins (`spinners`), so every
// interleaving below is forced, not hoped for.

@Suite("Condition lock: spinning before queuing")
struct ConditionLockSpinTests {
    @Test func aSpinningThreadTakesTheLockAtTheReleaseThatLetsItInWithoutQueuing() throws {
        let lock = ConditionLock(condition: 0)
        try lock.lock()
        lock.grantUnboundedSpins(1)
        let taken = Shared<Int>(-1)
        let waiter = spawn {
            do {
                try lock.lock(whenCondition: 1)
                taken.value = lock.condition
                try lock.unlock(withCondition: 2)
            } catch {
                Issue.record("lock(whenCondition:) threw \(error)")
            }
        }
        #expect(eventually { lock.spinners == 1 })
        // Spinning, it is in no queue, and a release that leaves another value does not let it in.
        #expect(lock.queuedWaiters == 0)
        try lock.unlock(withCondition: 3)
        try lock.lock()
        #expect(lock.spinners == 1)
        try lock.unlock(withCondition: 1)
        #expect(waits(for: waiter))
        #expect(taken.value == 1)
        #expect(lock.condition == 2)
        let stats = lock.stats
        // It waited (contended), but nobody handed it the lock or woke it.
        #expect(stats.contended == 1)
        #expect(stats.wakeups == 0)
        #expect(stats.acquisitions == 3)
    }

    @Test func aSpinningThreadQueuesOnceSomeoneQueuesAndKeepsTheLineOrder() throws {
        let lock = ConditionLock(condition: 0)
        try lock.lock()
        lock.grantUnboundedSpins(1)
        let order = Recorder()
        let spinner = spawn {
            do {
                try lock.lock(whenCondition: 2)
                order.record("spinner")
                try lock.unlock(withCondition: 1)
            } catch {
                Issue.record("lock(whenCondition: 2) threw \(error)")
            }
        }
        #expect(eventually { lock.spinners == 1 })
        // This one spins within its limit, then queues; the unbounded spinner sees the queue and
        // queues behind it.
        let queued = spawn {
            do {
                try lock.lock(whenCondition: 1)
                order.record("queued")
                try lock.unlock()
            } catch {
                Issue.record("lock(whenCondition: 1) threw \(error)")
            }
        }
        #expect(eventually { lock.queuedWaiters == 2 })
        #expect(lock.spinners == 0)
        // The release hands the lock to the first waiter it satisfies, wherever it is in line.
        try lock.unlock(withCondition: 2)
        #expect(waits(for: spinner))
        #expect(waits(for: queued))
        #expect(order.events == ["spinner", "queued"])
        #expect(lock.stats.wakeups == 2)
        #expect(lock.stats.futileWakeups == 0)
    }

    @Test func theSpinLimitFollowsWhatSpinningAchieved() {
        let lock = ConditionLock(condition: 0)
        let floor = ConditionLock<Int>.spinFloor
        let ceiling = ConditionLock<Int>.spinCeiling
        #expect(lock.spinLimitNow > floor)
        // Spins that give up (the other side descheduled) shrink it to the floor within a few.
        for _ in 0..<12 { lock.recordSpin(succeededAfter: nil) }
        #expect(lock.spinLimitNow == floor)
        // Spins that take the lock after 100 polls bring it toward twice that, plus the floor.
        for _ in 0..<200 { lock.recordSpin(succeededAfter: 100) }
        #expect(lock.spinLimitNow >= floor + 2 * 90 && lock.spinLimitNow <= floor + 2 * 100)
        // Never beyond the ceiling.
        for _ in 0..<200 { lock.recordSpin(succeededAfter: 100_000) }
        #expect(lock.spinLimitNow == ceiling)
        // And quick hand-offs bring it back down.
        for _ in 0..<200 { lock.recordSpin(succeededAfter: 2) }
        #expect(lock.spinLimitNow <= floor + 2 * 10)
    }

    @Test func twoThreadsPingPongingKeepEveryCountAndWakeNobodyInVain() {
        let lock = ConditionLock(condition: 0)
        let rounds = 5_000
        let players = (0..<2).map { me in
            spawn {
                do {
                    for _ in 0..<rounds {
                        try lock.lock(whenCondition: me)
                        try lock.unlock(withCondition: 1 - me)
                    }
                } catch {
                    Issue.record("ping-pong threw \(error)")
                }
            }
        }
        for player in players { #expect(waits(for: player)) }
        let stats = lock.stats
        #expect(lock.condition == 0)
        #expect(stats.acquisitions == UInt64(2 * rounds))
        #expect(stats.futileWakeups == 0)
        // Every wake-up was a hand-off to a thread that had to wait.
        #expect(stats.wakeups <= stats.contended)
        #expect(!lock.isLocked)
    }

    /// The release a spinner waits for may come between the caller's look (the lock held) and the
    /// spin's first poll: the spin then finds the lock free with its condition and takes it at
    /// once, instead of waiting for a later release that may never come (in a ping-pong the other
    /// thread waits for this one: the spin ran to its limit, and the thread queued to sleep).
    @Test func aSpinThatStartsAfterTheReleaseItWaitsForTakesTheLock() throws {
        for condition in [3, 7] {
            let lock = ConditionLock(condition: 0)
            try lock.lock()
            try lock.unlock(withCondition: condition)
            lock.recordSpin(succeededAfter: nil) // the smallest limit: no luck to rely on
            #expect(lock.spinAsWaiter(for: condition))
            #expect(lock.isLocked && lock.condition == condition)
            try lock.unlock()
        }
        // A free lock with another condition is not taken: the spin gives up at its limit.
        let other = ConditionLock(condition: 1)
        #expect(!other.spinAsWaiter(for: 2))
        #expect(!other.isLocked)
    }

    /// A spinner takes a free lock whose condition's bits match with one compare-and-swap; when
    /// the condition it then reads is another (a release came between its look and its take), it
    /// gives the lock back as a release that changes nothing: a waiter that queued meanwhile is
    /// handed the lock, the condition and the counts are as if the take never happened.
    @Test func aLockTakenForNothingIsGivenBackToTheWaiterThatCameMeanwhile() throws {
        let lock = ConditionLock(condition: 4)
        #expect(!lock.takeAsSpinner(for: 5), "bits that differ: no take")
        #expect(!lock.isLocked)
        #expect(lock.takeAsSpinner(for: 4))
        #expect(lock.isLocked && lock.stats.acquisitions == 0)
        let got = Shared<Int?>(nil)
        let waiter = spawn {
            do {
                try lock.lock(before: MonotonicClock.deadline(after: .seconds(10)))
                got.value = lock.condition
                try lock.unlock()
            } catch { Issue.record("lock threw \(error)") }
        }
        #expect(eventually { lock.queuedWaiters == 1 })
        lock.giveBackTakenLock()
        #expect(waits(for: waiter))
        #expect(got.value == 4)
        let stats = lock.stats
        #expect(stats.acquisitions == 1 && stats.futileWakeups == 0)
        #expect(lock.condition == 4 && !lock.isLocked)
        // Given back with nobody waiting, the lock is simply free again.
        #expect(lock.takeAsSpinner(for: 4))
        lock.giveBackTakenLock()
        #expect(!lock.isLocked)
        try lock.lock(whenCondition: 4)
        try lock.unlock()
    }

    @Test func aWaiterForAValueEqualUnderEqualityWithOtherBitsIsLetIn() throws {
        // The bits of a plain condition spare spinners a look under the guard when they differ;
        // equality decides all the same: 0.0 == -0.0, with other bits.
        let lock = ConditionLock(condition: 1.0)
        try lock.lock()
        let taken = Shared<Double>(.nan)
        let waiter = spawn {
            do {
                try lock.lock(whenCondition: 0.0)
                taken.value = lock.condition
                try lock.unlock()
            } catch {
                Issue.record("lock(whenCondition: 0.0) threw \(error)")
            }
        }
        #expect(eventually { lock.spinners == 1 || lock.queuedWaiters == 1 })
        try lock.unlock(withCondition: -0.0)
        #expect(waits(for: waiter))
        #expect(taken.value == 0.0 && taken.value.sign == .minus)
    }

    @Test func aHandOffToASleepingWaiterIsMarkedUntilItsHolderReleases() throws {
        let lock = ConditionLock(condition: 0)
        try lock.lock()
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let sleeper = spawn {
            do {
                try lock.lock(whenCondition: 1)
                holding.signal()
                _ = waits(for: release)
                try lock.unlock(withCondition: 2)
            } catch {
                Issue.record("lock(whenCondition: 1) threw \(error)")
            }
        }
        // Overtaken for the fairness bound: the release hands it the lock (before that it would
        // only be woken to take it itself).
        #expect(eventually { lock.firstWaiterSleeps })
        lock.setFirstWaiterOvertaken(for: ConditionLock<Int>.fairnessBound)
        #expect(!lock.holderWasHandedAsleep)
        try lock.unlock(withCondition: 1)
        #expect(waits(for: holding))
        // Handed the lock asleep: a spinner would now spin through its wake-up.
        #expect(lock.holderWasHandedAsleep)
        release.signal()
        #expect(waits(for: sleeper))
        // Its release ends the mark, and a lock taken and released in passing never has it.
        #expect(!lock.holderWasHandedAsleep)
        try lock.lock(whenCondition: 2)
        #expect(!lock.holderWasHandedAsleep)
        try lock.unlock()
        #expect(lock.stats.wakeups == 1)
    }
}
