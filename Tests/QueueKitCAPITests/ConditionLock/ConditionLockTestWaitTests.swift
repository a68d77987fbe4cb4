// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Synchronization
import Testing

@testable import QueueKit

// Waits on a test of the condition (lock_if) and waiting while holding (await), through the C
// API. Interleavings are forced by watching the lock's queue (never by sleeping); every wait is
// bounded, so a missed hand-off fails in seconds.

/// What a C test reads: a threshold, and a count of its calls (made under the lock's guard, on
/// whichever thread tests).
final class TestContext: @unchecked Sendable {
    let threshold: Int
    let calls = Atomic<Int>(0)
    init(_ threshold: Int) { self.threshold = threshold }
    var pointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
    static func from(_ raw: UnsafeMutableRawPointer?) -> TestContext {
        Unmanaged<TestContext>.fromOpaque(raw!).takeUnretainedValue()
    }
}

/// condition >= threshold, counting its calls.
let atLeast: qk_condition_test_t = { condition, context in
    let context = TestContext.from(context)
    context.calls.add(1, ordering: .relaxed)
    return condition >= context.threshold
}

/// condition == threshold.
let equalTo: qk_condition_test_t = { condition, context in
    let context = TestContext.from(context)
    context.calls.add(1, ordering: .relaxed)
    return condition == context.threshold
}

extension CLock {
    func lock(if test: qk_condition_test_t, _ context: TestContext) -> Int32 {
        qk_condlock_lock_if(raw, test, context.pointer)
    }
    func lock(if test: qk_condition_test_t, _ context: TestContext, until deadline: UInt64) -> Int32 {
        qk_condlock_lock_if_until(raw, test, context.pointer, deadline)
    }
    func trylock(if test: qk_condition_test_t, _ context: TestContext) -> Int32 {
        qk_condlock_trylock_if(raw, test, context.pointer)
    }
    func await(_ test: qk_condition_test_t, _ context: TestContext) -> Int32 {
        qk_condlock_await(raw, test, context.pointer)
    }
    func await(_ test: qk_condition_test_t, _ context: TestContext, until deadline: UInt64) -> Int32 {
        qk_condlock_await_until(raw, test, context.pointer, deadline)
    }
}

@Suite("Condition lock: waits on a test of the condition")
struct ConditionLockTestWaitTests {
    @Test func aWaiterForAtLeastFiveIsNotWokenByThreeOrFour() {
        let lock = CLock(0)
        let five = TestContext(5)
        let got = Shared<Int>(-1)
        let waiter = spawn {
            #expect(lock.lock(if: atLeast, five, until: bounded) == 0)
            got.value = lock.condition
            #expect(lock.unlock() == 0)
        }
        #expect(eventually { lock.waiters == 1 })
        #expect(lock.set(3) == 0)
        #expect(lock.set(4) == 0)
        // Neither release woke it: still queued, no wake-up counted, not finished.
        #expect(lock.waiters == 1)
        #expect(lock.stats.wakeups == 0)
        #expect(waiter.wait(timeout: .now()) == .timedOut)
        #expect(lock.set(6) == 0)
        #expect(waits(for: waiter))
        #expect(got.value == 6)
        #expect(lock.stats.futile_wakeups == 0)
        #expect(lock.stats.wakeups == 1)
        #expect(lock.destroy() == 0)
    }

    @Test func testWaitersAreServedInArrivalOrderAndOnlyTheSatisfiedOneIsHanded() {
        let lock = CLock(0)
        let log = Recorder()
        let high = TestContext(10)
        let low = TestContext(1)
        #expect(lock.lock() == 0)
        // Queued in this order: a waiter for >= 10, then three for >= 1.
        var workers: [DispatchSemaphore] = []
        workers.append(
            spawn {
                #expect(lock.lock(if: atLeast, high, until: bounded) == 0)
                log.record("high")
                #expect(lock.unlock() == 0)
            })
        #expect(eventually { lock.waiters == 1 })
        for index in 0..<3 {
            workers.append(
                spawn {
                    #expect(lock.lock(if: atLeast, low, until: bounded) == 0)
                    log.record("low\(index)")
                    #expect(lock.unlock() == 0)
                })
            #expect(eventually { lock.waiters == index + 2 })
        }
        // 3 satisfies the three ">= 1" waiters only: they go in arrival order, "high" stays.
        #expect(lock.unlock(with: 3) == 0)
        #expect(eventually { log.events.count == 3 })
        #expect(log.events == ["low0", "low1", "low2"])
        #expect(lock.waiters == 1)
        #expect(lock.set(10) == 0)
        for worker in workers { #expect(waits(for: worker)) }
        #expect(log.events == ["low0", "low1", "low2", "high"])
        #expect(lock.stats.futile_wakeups == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func trylockIfAndPastDeadlinesTestOnce() {
        let lock = CLock(4)
        let five = TestContext(5)
        #expect(lock.trylock(if: atLeast, five) == EBUSY)
        #expect(five.calls.load(ordering: .relaxed) == 1)
        #expect(lock.lock(if: atLeast, five, until: 0) == ETIMEDOUT)
        #expect(five.calls.load(ordering: .relaxed) == 2)
        #expect(lock.stats.timeouts == 1)
        #expect(lock.set(5) == 0)
        #expect(lock.trylock(if: atLeast, five) == 0)
        #expect(lock.trylock(if: atLeast, five) == EBUSY) // held by the caller
        #expect(lock.lock(if: atLeast, five) == EDEADLK)
        #expect(lock.unlock() == 0)
        #expect(qk_condlock_lock_if(lock.raw, nil, nil) == EINVAL)
        #expect(qk_condlock_lock_if(nil, atLeast, five.pointer) == EINVAL)
        #expect(qk_condlock_await(nil, atLeast, five.pointer) == EINVAL)
        #expect(lock.destroy() == 0)
    }

    // MARK: await

    @Test func awaitReturnsAtOnceWhenTheTestHoldsAndRefusesANonHolder() {
        let lock = CLock(7)
        let five = TestContext(5)
        #expect(lock.await(atLeast, five) == EPERM)
        #expect(lock.lock() == 0)
        #expect(lock.await(atLeast, five) == 0)
        #expect(lock.stats.acquisitions == 1) // nothing released, nothing acquired
        #expect(qk_condlock_await(lock.raw, nil, nil) == EINVAL)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func awaitReleasesWaitsAndReturnsHolding() {
        let lock = CLock(0)
        let five = TestContext(5)
        let awaited = Shared<Int>(-1)
        let waiter = spawn {
            #expect(lock.lock() == 0)
            #expect(lock.await(atLeast, five) == 0)
            awaited.value = lock.condition
            #expect(lock.unlock(with: 100) == 0) // holding: the unlock succeeds
        }
        #expect(eventually { lock.waiters == 1 && !lock.isLocked })
        #expect(lock.set(2) == 0) // not woken
        #expect(lock.waiters == 1)
        #expect(lock.set(5) == 0)
        #expect(waits(for: waiter))
        #expect(awaited.value == 5)
        #expect(lock.condition == 100)
        #expect(lock.stats.futile_wakeups == 0)
        #expect(lock.destroy() == 0)
    }

    @Test func awaitUntilTimesOutHoldingTheLock() {
        let lock = CLock(0)
        let five = TestContext(5)
        #expect(lock.lock() == 0)
        // Someone waits for the lock: the await's release must hand it over.
        let other = spawn {
            #expect(lock.lock(until: bounded) == 0)
            #expect(lock.unlock(with: 1) == 0) // 1 does not satisfy the await
        }
        #expect(eventually { lock.waiters == 1 })
        #expect(lock.await(atLeast, five, until: deadline(in: 0.2)) == ETIMEDOUT)
        #expect(waits(for: other)) // it had the lock in between
        #expect(lock.condition == 1)
        #expect(lock.trylock() == EBUSY) // held by the caller, again
        #expect(lock.unlock() == 0)
        #expect(lock.stats.timeouts == 1)
        #expect(lock.destroy() == 0)
    }

    @Test func awaitUntilWithAPastDeadlineTestsOnceWithoutReleasing() {
        let lock = CLock(0)
        let five = TestContext(5)
        #expect(lock.lock() == 0)
        let other = spawn {
            #expect(lock.lock(until: bounded) == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(eventually { lock.waiters == 1 })
        #expect(lock.await(atLeast, five, until: 0) == ETIMEDOUT)
        #expect(five.calls.load(ordering: .relaxed) == 1)
        #expect(lock.waiters == 1) // never released: the other thread still waits
        #expect(lock.unlock() == 0)
        #expect(waits(for: other))
        #expect(lock.destroy() == 0)
    }

    @Test func fourAwaitsWithDifferentTestsChainWithoutFutileWakeUps() {
        let lock = CLock(0)
        let log = Recorder()
        let contexts = (1...4).map { TestContext($0) }
        // Queued in reverse order, so each release must pick the right waiter, not the first.
        var workers: [DispatchSemaphore] = []
        for k in (1...4).reversed() {
            workers.append(
                spawn {
                    #expect(lock.lock() == 0)
                    #expect(lock.await(equalTo, contexts[k - 1]) == 0)
                    log.record("\(k)")
                    #expect(lock.unlock(with: k + 1) == 0)
                })
            #expect(eventually { lock.waiters == 5 - k && !lock.isLocked })
        }
        #expect(lock.set(1) == 0)
        let five = TestContext(5)
        #expect(lock.lock(if: equalTo, five, until: bounded) == 0)
        #expect(lock.unlock() == 0)
        for worker in workers { #expect(waits(for: worker)) }
        #expect(log.events == ["1", "2", "3", "4"])
        #expect(lock.stats.futile_wakeups == 0)
        #expect(lock.destroy() == 0)
    }

    // MARK: What a release costs

    @Test func sixtyFourWaitersOfOneTestCostOneCallPerRelease() {
        let lock = CLock(0)
        let shared = TestContext(1_000)
        let waiters = 64
        let workers = (0..<waiters).map { _ in
            spawn {
                #expect(lock.lock(if: atLeast, shared, until: bounded) == 0)
                #expect(lock.unlock() == 0)
            }
        }
        #expect(eventually(within: 30) { lock.waiters == waiters })
        shared.calls.store(0, ordering: .relaxed)
        #expect(lock.set(1) == 0)
        #expect(shared.calls.load(ordering: .relaxed) == 1, "one test and context: called once per release")

        // 64 different contexts: each is called once, none twice.
        let distinct = (0..<waiters).map { _ in TestContext(1_000) }
        let lock2 = CLock(0)
        let workers2 = distinct.map { context in
            spawn {
                #expect(lock2.lock(if: atLeast, context, until: bounded) == 0)
                #expect(lock2.unlock() == 0)
            }
        }
        #expect(eventually(within: 30) { lock2.waiters == waiters })
        for context in distinct { context.calls.store(0, ordering: .relaxed) }
        #expect(lock2.set(1) == 0)
        #expect(distinct.allSatisfy { $0.calls.load(ordering: .relaxed) == 1 })

        #expect(lock.set(1_000) == 0)
        #expect(lock2.set(1_000) == 0)
        for worker in workers + workers2 { #expect(waits(for: worker, within: 30)) }
        #expect(lock.stats.futile_wakeups == 0)
        #expect(lock2.stats.futile_wakeups == 0)
        #expect(lock.destroy() == 0)
        #expect(lock2.destroy() == 0)
    }

    // MARK: Inside a test

    @Test func queueKitCallsFromInsideATestRefuse() {
        final class Probe: @unchecked Sendable {
            var lock: OpaquePointer?
            var other: OpaquePointer?
            var lockStatus: Int32 = -1
            var otherCondition = -1
            var ownCondition = -1
            var created: OpaquePointer? = OpaquePointer(bitPattern: 1)
            var createErrno: Int32 = 0
            var now: UInt64 = 0
        }
        let probe = Probe()
        let lock = CLock(9)
        let other = CLock(3)
        probe.lock = lock.raw
        probe.other = other.raw
        let test: qk_condition_test_t = { condition, context in
            let probe = Unmanaged<Probe>.fromOpaque(context!).takeUnretainedValue()
            probe.lockStatus = qk_condlock_lock(probe.other)
            probe.ownCondition = qk_condlock_condition(probe.lock)
            probe.otherCondition = qk_condlock_condition(probe.other)
            probe.created = qk_condlock_create(0)
            probe.createErrno = errno
            probe.now = qk_now_ns()
            return condition == 9
        }
        #expect(qk_condlock_trylock_if(lock.raw, test, Unmanaged.passUnretained(probe).toOpaque()) == 0)
        #expect(probe.lockStatus == EDEADLK)
        #expect(!other.isLocked)
        #expect(probe.ownCondition == 9)
        #expect(probe.otherCondition == 0)
        #expect(probe.created == nil && probe.createErrno == EDEADLK)
        #expect(probe.now != 0)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
        #expect(other.destroy() == 0)
    }

    // MARK: Reports and abandonment

    @Test func aTestFunctionIsNamedByItsSymbol() throws {
        let handle = dlopen(nil, RTLD_NOW)
        let function = try #require(dlsym(handle, "getpid"))
        let identity = ConditionTestIdentity(function: UnsafeRawPointer(function), context: nil)
        #expect(identity.description.contains("getpid (context 0x0)"))
    }

    @Test func aTestWaiterHandedAnAbandonedLockGetsOwnerDead() {
        let lock = CLock(0)
        let any = TestContext(0)
        let locked = DispatchSemaphore(value: 0)
        let exit = DispatchSemaphore(value: 0)
        let holder = JoinableThread {
            expectStatus(0, qk_condlock_lock(lock.raw))
            locked.signal()
            _ = exit.wait(timeout: .now() + testTimeout)
        }
        #expect(waits(for: locked))
        let status = Shared<Int32>(-1)
        let waiter = spawn {
            status.value = lock.lock(if: atLeast, any, until: bounded)
            if status.value == EOWNERDEAD { #expect(lock.unlock() == 0) }
        }
        #expect(eventually { lock.waiters == 1 })
        exit.signal()
        holder.join()
        #expect(waits(for: waiter))
        #expect(status.value == EOWNERDEAD)
        #expect(lock.destroy() == 0)
    }
}

/// Always true: a test wait that waits only for the lock.
let always: qk_condition_test_t = { _, _ in true }

@Suite("Condition lock: rings through test waits", .serialized)
struct ConditionLockTestWaitRingTests {
    init() { ReportLog.install() }

    @Test func aRingThroughTwoTestWaitsIsRefusedOnce() {
        let tag = unique("ring-if")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        let outcomes = Outcomes()
        let both = DispatchGroup()
        both.enter()
        both.enter()
        let holding = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let first = spawn {
            #expect(a.lock() == 0)
            holding.signal()
            _ = go.wait(timeout: .now() + testTimeout)
            let status = qk_condlock_lock_if(b.raw, always, nil)
            outcomes.record("first", status)
            if status == 0 { #expect(b.unlock() == 0) }
            #expect(a.unlock() == 0)
        }
        let second = spawn {
            #expect(b.lock() == 0)
            holding.signal()
            _ = go.wait(timeout: .now() + testTimeout)
            let status = qk_condlock_lock_if(a.raw, always, nil)
            outcomes.record("second", status)
            if status == 0 { #expect(a.unlock() == 0) }
            #expect(b.unlock() == 0)
        }
        #expect(waits(for: holding) && waits(for: holding))
        go.signal()
        go.signal()
        #expect(waits(for: first))
        #expect(waits(for: second))
        #expect(outcomes.refusedCount == 1)
        #expect(outcomes.all.values.filter { $0 == 0 }.count == 1)
        let reports = ReportLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("qk_condlock_lock_if") == true)
        #expect(a.destroy() == 0)
        #expect(b.destroy() == 0)
    }
}
