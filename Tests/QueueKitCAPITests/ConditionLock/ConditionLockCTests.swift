// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Testing

// The condition lock (the header's section 3), through the C header as C programs call it, plus the
// Swift generic API with an enum condition. Every wait is bounded: a thread that blocks runs in
// the spawn and the test waits for it with a timeout; interleavings are forced by watching
// the lock's waiter count, never by sleeping.

@Suite("Condition lock: the C API")
struct ConditionLockCTests {
    // MARK: The two independent states

    @Test func createStartsUnlockedWithTheCondition() {
        let lock = CLock(42)
        #expect(lock.condition == 42)
        #expect(!lock.isLocked)
        #expect(lock.trylock() == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func plainLockIgnoresAndKeepsTheCondition() {
        let lock = CLock(7)
        #expect(lock.lock() == 0)
        #expect(lock.condition == 7)
        #expect(lock.unlock() == 0)
        #expect(lock.condition == 7)
        #expect(lock.lock(until: bounded) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func trylockWhenOnAFreeLockWithAnotherValueFails() {
        let lock = CLock(1)
        #expect(lock.trylock(when: 2) == EBUSY)
        #expect(!lock.isLocked)
        #expect(lock.trylock(when: 1) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func lockWhenNeedsBothTheFreeLockAndTheValue() {
        let lock = CLock(3)
        #expect(lock.lock() == 0)
        // Held by another thread with the right value: a try fails, a past deadline times out.
        let other = spawn {
            #expect(lock.trylock(when: 3) == EBUSY)
            #expect(lock.lock(when: 3, until: 0) == ETIMEDOUT)
            #expect(lock.trylock() == EBUSY)
        }
        #expect(waits(for: other))
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func unlockWithSetsTheConditionAndReleases() {
        let lock = CLock(0)
        #expect(lock.lock(when: 0) == 0)
        #expect(lock.unlock(with: 5) == 0)
        #expect(lock.condition == 5)
        #expect(!lock.isLocked)
        #expect(lock.trylock(when: 0) == EBUSY)
        #expect(lock.trylock(when: 5) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func conditionReadDoesNotWaitForTheHolder() {
        let lock = CLock(9)
        #expect(lock.lock() == 0)
        let reader = spawn { #expect(lock.condition == 9) }
        #expect(waits(for: reader))
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func setStartsAChainFromANonHolder() {
        let lock = CLock(0)
        #expect(lock.set(4) == 0)
        #expect(lock.condition == 4)
        #expect(!lock.isLocked)
        #expect(lock.unlock() == EPERM, "set leaves the lock free")
        #expect(lock.stats.acquisitions == 1)
        #expect(lock.destroy() == 0)
    }

    // MARK: Ownership

    @Test func unlockByANonHolderIsEPERMAndChangesNothing() {
        let lock = CLock(1)
        #expect(lock.unlock() == EPERM, "free lock")
        #expect(lock.unlock(with: 2) == EPERM)
        #expect(lock.condition == 1)
        #expect(lock.lock() == 0)
        let other = spawn {
            #expect(lock.unlock() == EPERM)
            #expect(lock.unlock(with: 8) == EPERM)
        }
        #expect(waits(for: other))
        #expect(lock.isLocked)
        #expect(lock.condition == 1)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func relockByTheHolderIsEDEADLKAndTryIsEBUSY() {
        let lock = CLock(1)
        #expect(lock.lock() == 0)
        #expect(lock.lock() == EDEADLK)
        #expect(lock.lock(when: 1) == EDEADLK)
        #expect(lock.lock(until: QK_FOREVER) == EDEADLK)
        #expect(lock.lock(until: 0) == EDEADLK)
        #expect(lock.lock(when: 1, until: QK_FOREVER) == EDEADLK)
        #expect(lock.set(2) == EDEADLK)
        #expect(lock.trylock() == EBUSY)
        #expect(lock.trylock(when: 1) == EBUSY)
        #expect(lock.condition == 1)
        #expect(lock.unlock() == 0)
        #expect(lock.unlock() == EPERM, "released once only")
        #expect(lock.stats.acquisitions == 1)
        #expect(lock.destroy() == 0)
    }

    // MARK: Destroy

    @Test func destroyWhileHeldIsEBUSY() {
        let lock = CLock(0)
        #expect(lock.lock() == 0)
        #expect(lock.destroy() == EBUSY)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func destroyWhileWaitedOnIsEBUSY() {
        let lock = CLock(0)
        let waiter = spawn {
            #expect(lock.lock(when: 1, until: bounded) == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(eventually { lock.waiters == 1 })
        #expect(!lock.isLocked)
        #expect(lock.destroy() == EBUSY, "free but waited on")
        #expect(lock.set(1) == 0)
        #expect(waits(for: waiter))
        #expect(lock.destroy() == 0)
    }

    // MARK: Timeouts: deadline {past, finite, forever} × condition {met now, met later, never}

    enum Call: CaseIterable, Sendable { case lockUntil, lockWhenUntil }
    enum Deadline: CaseIterable, Sendable { case past, finite, forever }
    enum Met: CaseIterable, Sendable { case now, later, never }

    @Test(arguments: Call.allCases, Deadline.allCases)
    func timeoutMatrix(call: Call, deadlineKind: Deadline) {
        for met in Met.allCases { timeoutCell(call: call, deadlineKind: deadlineKind, met: met) }
    }

    func timeoutCell(call: Call, deadlineKind: Deadline, met: Met) {
        let wanted = 1
        let lock = CLock(call == .lockWhenUntil && met == .now ? wanted : 0)
        let holder = Holder(lock: lock)
        // "Later" and "never": the state does not satisfy the call when it is made.
        switch (call, met) {
        case (_, .now): break
        case (.lockUntil, _): holder.acquire()
        case (.lockWhenUntil, _): break // free, but the condition is 0
        }
        let finiteWait = met == .never ? 0.05 : testTimeout
        let deadline: UInt64 =
            switch deadlineKind {
            case .past: qk_now_ns() - 1
            case .finite: qk_now_ns() + UInt64(finiteWait * 1e9)
            case .forever: QK_FOREVER
            }
        let result = Shared<Int32>(-1)
        let started = qk_now_ns()
        let elapsed = Shared<UInt64>(0)
        let caller = spawn {
            let status = call == .lockUntil ? lock.lock(until: deadline) : lock.lock(when: wanted, until: deadline)
            elapsed.value = qk_now_ns() - started
            result.value = status
            if status == 0 {
                #expect(lock.condition == (call == .lockWhenUntil ? wanted : lock.condition))
                #expect(lock.unlock() == 0)
            } else {
                #expect(lock.unlock() == EPERM, "no lock held after ETIMEDOUT")
            }
        }
        let label = "\(call) × \(deadlineKind) × \(met)"
        let satisfy = {
            switch call {
            case .lockUntil: holder.release()
            case .lockWhenUntil: #expect(lock.set(wanted) == 0, "\(label)")
            }
        }
        switch (deadlineKind, met) {
        case (_, .now), (.past, _):
            #expect(waits(for: caller), "\(label)")
            #expect(result.value == (met == .now ? 0 : ETIMEDOUT), "\(label)")
            if met == .now { #expect(elapsed.value < 1_000_000_000, "\(label): no wait") }
        case (_, .later):
            #expect(eventually { lock.waiters == 1 }, "\(label)")
            satisfy()
            #expect(waits(for: caller), "\(label)")
            #expect(result.value == 0, "\(label)")
        case (.finite, .never):
            #expect(waits(for: caller), "\(label)")
            #expect(result.value == ETIMEDOUT, "\(label)")
            #expect(elapsed.value >= 50_000_000, "\(label): waited until the deadline")
            #expect(lock.waiters == 0, "\(label): left the queue")
        case (.forever, .never):
            #expect(eventually { lock.waiters == 1 }, "\(label)")
            // Still waiting after a while (not synchronisation: the absence of an event).
            #expect(caller.wait(timeout: .now() + 0.2) == .timedOut, "\(label): still waiting")
            #expect(lock.waiters == 1, "\(label)")
            satisfy()
            #expect(waits(for: caller), "\(label)")
            #expect(result.value == 0, "\(label)")
        }
        // No lock is left held by the caller; the holder (if any) still holds it.
        if holder.holds { holder.release() }
        #expect(eventually { !lock.isLocked }, "\(label): nothing left held")
        #expect(lock.stats.timeouts == (result.value == ETIMEDOUT ? 1 : 0), "\(label)")
        holder.finish()
        #expect(lock.destroy() == 0, "\(label)")
    }
}
