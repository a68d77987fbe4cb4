// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Threads that die holding a condition lock (the header's section 7), through the C header as C programs
// call it, and the Swift API's `previousOwnerDied`. fork() is tested by the C program
// Tests/Reliability/lifecycle.c (forking a process that runs Swift Testing is not safe).
// Interleavings are forced with semaphores and by watching the lock's waiter queue; a thread's
// exit is awaited with pthread_join, so its exit hook has run when the test looks.

@Suite("Lifecycle: condition locks whose holder exits")
struct AbandonedConditionLockTests {
    @Test func aHolderThatExitsWhileNobodyWaitsLeavesTheLockFreeAndAbandoned() {
        let lock = CLock(5)
        let dead = Shared<UInt64>(0)
        onAThreadThatExits {
            expectStatus(0, qk_condlock_lock(lock.raw))
            dead.value = ThreadRecord.current.number
        }
        #expect(!lock.swift.isLocked)
        #expect(lock.swift.abandonedBy == dead.value)
        #expect(lock.stats.abandonments == 1)
        #expect(qk_condlock_condition(lock.raw) == 5)
        // The next acquirer is told, once; then the lock is healthy again.
        expectStatus(EOWNERDEAD, qk_condlock_trylock(lock.raw))
        #expect(lock.swift.previousOwnerDied)
        expectStatus(0, qk_condlock_unlock(lock.raw))
        #expect(!lock.swift.previousOwnerDied)
        #expect(lock.swift.abandonedBy == nil)
        expectStatus(0, qk_condlock_lock(lock.raw))
        expectStatus(0, qk_condlock_unlock(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func aQueuedWaiterIsHandedTheLockWithOwnerDead() {
        let lock = CLock(3)
        let locked = DispatchSemaphore(value: 0)
        let exit = DispatchSemaphore(value: 0)
        let holder = JoinableThread {
            expectStatus(0, qk_condlock_lock(lock.raw))
            locked.signal()
            _ = exit.wait(timeout: .now() + testTimeout)
        }
        #expect(waits(for: locked))
        let statuses = Shared<[Int32]>([])
        let waiters = (0..<2).map { _ in
            spawn {
                let status = qk_condlock_lock_until(lock.raw, bounded)
                statuses.update { $0.append(status) }
                if status == 0 || status == EOWNERDEAD { expectStatus(0, qk_condlock_unlock(lock.raw)) }
            }
        }
        // Both are queued before the holder exits: the hand-off itself carries the news.
        #expect(eventually { lock.swift.waiterCount == 2 })
        exit.signal()
        holder.join()
        for waiter in waiters { #expect(waits(for: waiter)) }
        #expect(statuses.value.sorted() == [0, EOWNERDEAD].sorted())
        #expect(statuses.value.first == EOWNERDEAD) // the first in line got it from the dead holder
        #expect(lock.stats.abandonments == 1)
        #expect(lock.stats.contended == 2)
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func aChainWhoseMiddleThreadDiesWaitsUntilSomeoneRepairsIt() {
        let lock = CLock(0)
        let last = spawn {
            expectStatus(0, qk_condlock_lock_when_until(lock.raw, 2, bounded))
            expectStatus(0, qk_condlock_unlock_with(lock.raw, 3))
        }
        #expect(eventually { lock.swift.waiterCount == 1 })
        expectStatus(0, qk_condlock_set(lock.raw, 1))
        let middle = Shared<UInt64>(0)
        onAThreadThatExits {
            expectStatus(0, qk_condlock_lock_when(lock.raw, 1))
            middle.value = ThreadRecord.current.number
            // dies without unlock_with(2)
        }
        // A waiter for another value is not handed a lock whose condition it does not want.
        #expect(lock.swift.waiterCount == 1)
        #expect(!lock.swift.isLocked)
        #expect(lock.swift.abandonedBy == middle.value)
        #expect(qk_condlock_condition(lock.raw) == 1)
        // Recovery: the repairer learns of the death, and the chain goes on.
        expectStatus(EOWNERDEAD, qk_condlock_lock_when(lock.raw, 1))
        expectStatus(0, qk_condlock_unlock_with(lock.raw, 2))
        #expect(waits(for: last))
        expectStatus(0, qk_condlock_lock_when_until(lock.raw, 3, bounded))
        expectStatus(0, qk_condlock_unlock(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func aWaiterForAnotherValueKeepsWaitingAfterTheAbandonment() {
        let lock = CLock(1)
        onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
        expectStatus(ETIMEDOUT, qk_condlock_lock_when_until(lock.raw, 2, deadline(in: 0.05)))
        expectStatus(EBUSY, qk_condlock_trylock_when(lock.raw, 2))
        expectStatus(EOWNERDEAD, qk_condlock_lock_when_until(lock.raw, 1, 0)) // a past deadline
        expectStatus(0, qk_condlock_unlock(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func setLeavesTheNewsForTheNextAcquirer() {
        let lock = CLock(0)
        onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
        expectStatus(0, qk_condlock_set(lock.raw, 9))
        #expect(qk_condlock_condition(lock.raw) == 9)
        #expect(lock.swift.abandonedBy != nil)
        expectStatus(EOWNERDEAD, qk_condlock_lock_when(lock.raw, 9))
        expectStatus(0, qk_condlock_unlock(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func statsCountAbandonmentsAndOldCallersKeepWorking() {
        let lock = CLock(0)
        for round in 1...3 {
            onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
            #expect(lock.stats.abandonments == UInt64(round))
            expectStatus(EOWNERDEAD, qk_condlock_lock(lock.raw))
            expectStatus(0, qk_condlock_unlock(lock.raw))
        }
        // A caller built before `abandonments` existed passes the shorter size: it is not written.
        var stats = qk_condlock_stats_t()
        stats.abandonments = 0xDEAD
        stats.size = MemoryLayout<qk_condlock_stats_t>.offset(of: \.abandonments)!
        expectStatus(0, qk_condlock_get_stats(lock.raw, &stats))
        #expect(stats.acquisitions == 6)
        #expect(stats.abandonments == 0xDEAD)
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func destroyFreesAnAbandonedLockNobodyWaitsFor() {
        let lock = CLock(0)
        onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func destroyRefusesAnAbandonedLockSomeoneWaitsFor() {
        let lock = CLock(0)
        onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
        let waiter = spawn {
            expectStatus(0, qk_condlock_lock_when_until(lock.raw, 1, bounded))
            expectStatus(0, qk_condlock_unlock(lock.raw))
        }
        #expect(eventually { lock.swift.waiterCount == 1 })
        expectStatus(EBUSY, qk_condlock_destroy(lock.raw))
        expectStatus(EOWNERDEAD, qk_condlock_lock(lock.raw))
        expectStatus(0, qk_condlock_unlock_with(lock.raw, 1))
        #expect(waits(for: waiter))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func theHeldCountFollowsAcquisitionsAndReleases() {
        let first = CLock(0)
        let second = CLock(0)
        let before = LiveConditionLocks.heldByCurrentThread
        expectStatus(0, qk_condlock_lock(first.raw))
        expectStatus(0, qk_condlock_lock_when(second.raw, 0))
        #expect(LiveConditionLocks.heldByCurrentThread == before + 2)
        expectStatus(EPERM, qk_condlock_unlock(CLock(0).raw))
        #expect(LiveConditionLocks.heldByCurrentThread == before + 2)
        expectStatus(0, qk_condlock_unlock_with(second.raw, 1))
        expectStatus(0, qk_condlock_set(second.raw, 2))
        #expect(LiveConditionLocks.heldByCurrentThread == before + 1)
        expectStatus(0, qk_condlock_unlock(first.raw))
        #expect(LiveConditionLocks.heldByCurrentThread == before)
        expectStatus(0, qk_condlock_destroy(first.raw))
        expectStatus(0, qk_condlock_destroy(second.raw))
    }

    /// A thread that has its record takes an uncontended lock on the C calls' shortest path (no
    /// check of the record, no call): the count of held locks still sees those acquisitions, so
    /// the thread's exit abandons exactly the locks it still holds.
    @Test func locksTakenOnTheShortestPathAreAbandonedAtExitToo() {
        let warmUp = CLock(0)
        let plain = CLock(0)
        let plainWhen = CLock(7)
        let handedBack = CLock(0)
        onAThreadThatExits {
            // The first acquisition makes the thread's record; the next ones need none.
            expectStatus(0, qk_condlock_lock(warmUp.raw))
            expectStatus(0, qk_condlock_unlock(warmUp.raw))
            #expect(qkshim_thread_id_if_recorded() == ThreadRecord.current.number)
            let before = LiveConditionLocks.heldByCurrentThread
            expectStatus(0, qk_condlock_lock(plain.raw))
            expectStatus(0, qk_condlock_lock_when(plainWhen.raw, 7))
            expectStatus(0, qk_condlock_lock(handedBack.raw))
            #expect(LiveConditionLocks.heldByCurrentThread == before + 3)
            expectStatus(0, qk_condlock_unlock_with(handedBack.raw, 1))
            #expect(LiveConditionLocks.heldByCurrentThread == before + 2)
        }
        #expect(plain.stats.abandonments == 1)
        #expect(plainWhen.stats.abandonments == 1)
        #expect(handedBack.stats.abandonments == 0)
        #expect(warmUp.stats.abandonments == 0)
        expectStatus(EOWNERDEAD, qk_condlock_trylock(plain.raw))
        expectStatus(0, qk_condlock_unlock(plain.raw))
        expectStatus(EOWNERDEAD, qk_condlock_lock_when(plainWhen.raw, 7))
        expectStatus(0, qk_condlock_unlock(plainWhen.raw))
        expectStatus(0, qk_condlock_lock_when(handedBack.raw, 1))
        expectStatus(0, qk_condlock_unlock(handedBack.raw))
        for lock in [warmUp, plain, plainWhen, handedBack] { expectStatus(0, qk_condlock_destroy(lock.raw)) }
    }

    @Test func anExitingThreadAbandonsOnlyTheLocksItStillHolds() {
        let kept = CLock(0)
        let released = CLock(0)
        let others = CLock(0)
        expectStatus(0, qk_condlock_lock(others.raw))
        onAThreadThatExits {
            expectStatus(0, qk_condlock_lock(kept.raw))
            expectStatus(0, qk_condlock_lock(released.raw))
            expectStatus(0, qk_condlock_unlock(released.raw))
        }
        #expect(kept.stats.abandonments == 1)
        #expect(released.stats.abandonments == 0)
        #expect(others.stats.abandonments == 0)
        #expect(others.swift.isLocked)
        expectStatus(0, qk_condlock_unlock(others.raw))
        expectStatus(0, qk_condlock_trylock(released.raw))
        expectStatus(0, qk_condlock_unlock(released.raw))
        expectStatus(EOWNERDEAD, qk_condlock_trylock(kept.raw))
        expectStatus(0, qk_condlock_unlock(kept.raw))
        for lock in [kept, released, others] { expectStatus(0, qk_condlock_destroy(lock.raw)) }
    }
}
