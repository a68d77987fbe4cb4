// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Asking about holding: qk_condlock_check_held / ConditionLock.isHeldByCurrentThread (does the
// calling thread hold it, without side effects) and qk_condlock_owner_died (the EOWNERDEAD news,
// readable however the lock was acquired), through the C header as C programs call them.

@Suite("Condition lock: holding, asked")
struct ConditionLockHeldTests {
    @Test func checkHeldAnswersForTheCallingThreadOnly() {
        let lock = CLock(2)
        expectStatus(EPERM, qk_condlock_check_held(lock.raw))
        #expect(!lock.swift.isHeldByCurrentThread)
        expectStatus(0, qk_condlock_lock(lock.raw))
        expectStatus(0, qk_condlock_check_held(lock.raw))
        #expect(lock.swift.isHeldByCurrentThread)
        // Another thread is told EPERM while this one holds it.
        let otherStatus = Shared<Int32>(-1)
        let otherSwift = Shared<Bool>(true)
        onAThreadThatExits {
            otherStatus.value = qk_condlock_check_held(lock.raw)
            otherSwift.value = lock.swift.isHeldByCurrentThread
        }
        #expect(otherStatus.value == EPERM)
        #expect(!otherSwift.value)
        expectStatus(0, qk_condlock_unlock_with(lock.raw, 3))
        expectStatus(EPERM, qk_condlock_check_held(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }

    @Test func checkHeldChangesAndCountsNothing() {
        let lock = CLock(7)
        let before = lock.stats.acquisitions
        for _ in 0..<10 { expectStatus(EPERM, qk_condlock_check_held(lock.raw)) }
        #expect(lock.stats.acquisitions == before)
        #expect(!lock.swift.isLocked)
        #expect(qk_condlock_condition(lock.raw) == 7)
        expectStatus(0, qk_condlock_destroy(lock.raw)) // nothing left held or waited on
    }

    @Test func badHandles() throws {
        expectStatus(EINVAL, qk_condlock_check_held(nil))
        #expect(qk_condlock_owner_died(nil) == 0)
        let queue = try #require(qk_queue_create("not a lock", QK_QUEUE_SERIAL))
        defer { qk_queue_release(queue) }
        expectStatus(EINVAL, qk_condlock_check_held(queue))
        #expect(qk_condlock_owner_died(queue) == 0)
    }

    @Test func ownerDiedIsReadableHoweverTheLockWasAcquired() {
        let lock = CLock(1)
        #expect(qk_condlock_owner_died(lock.raw) == 0)
        // Acquired by plain lock, by a timed lock_when and by trylock after an abandonment.
        let acquisitions: [(CLock) -> Int32] = [
            { qk_condlock_lock($0.raw) },
            { qk_condlock_lock_when_until($0.raw, 1, qk_now_ns() + 5_000_000_000) },
            { qk_condlock_trylock($0.raw) },
        ]
        for acquire in acquisitions {
            onAThreadThatExits { expectStatus(0, qk_condlock_lock(lock.raw)) }
            #expect(qk_condlock_owner_died(lock.raw) == 0) // free and abandoned: nobody holds it
            expectStatus(EOWNERDEAD, acquire(lock))
            #expect(qk_condlock_owner_died(lock.raw) == 1)
            #expect(lock.swift.previousOwnerDied)
            let elsewhere = Shared<Int32>(-1)
            onAThreadThatExits { elsewhere.value = qk_condlock_owner_died(lock.raw) }
            #expect(elsewhere.value == 0) // only the holder is told
            expectStatus(0, qk_condlock_unlock(lock.raw))
            #expect(qk_condlock_owner_died(lock.raw) == 0)
        }
        // A healthy acquisition carries no news.
        expectStatus(0, qk_condlock_lock(lock.raw))
        #expect(qk_condlock_owner_died(lock.raw) == 0)
        expectStatus(0, qk_condlock_unlock(lock.raw))
        expectStatus(0, qk_condlock_destroy(lock.raw))
    }
}
