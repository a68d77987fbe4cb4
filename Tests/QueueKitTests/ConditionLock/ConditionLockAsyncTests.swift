// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The condition lock's async scoped forms (the header's section 5). Tasks run on a pool of two plain
// threads, so a wait that blocked a thread instead of suspending would visibly starve it; every
// wait is bounded by a watchdog; interleavings are forced with the lock's waiter count and
// semaphores, never with sleeps.

@Suite struct ConditionLockAsyncTests {
    @Test func manyTasksWaitingOnDistinctValuesOnATwoThreadPool() async throws {
        let pool = ThreadPool(threads: 2)
        defer { #expect(pool.shutdown()) }
        let lock = ConditionLock(condition: -1, name: "chain")
        let order = Recorder()
        let count = 64
        // Started in reverse: each waits for its own value; with blocking waits the first two
        // would take both threads and nobody else could even queue.
        let tasks = (0..<count).reversed().map { value in
            Task(executorPreference: pool) {
                try await lock.withLock(whenCondition: value) {
                    order.record("\(value)")
                    return value + 1
                }
            }
        }
        #expect(eventually { lock.waiterCount == count })
        try lock.set(0)
        let finished = try await withWatchdog {
            for task in tasks { try await task.value }
            return true
        }
        #expect(finished == true)
        #expect(order.events == (0..<count).map { "\($0)" })
        #expect(lock.condition == count)
        #expect(!lock.isLocked)
        // Each task was woken exactly once, by its own value.
        #expect(lock.stats.futileWakeups == 0)
    }

    @Test func aTaskWaitingForThreeIsNotWokenByTwo() async throws {
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let lock = ConditionLock(condition: 0, name: "three")
        let ran = Shared(false)
        let waiter = Task(executorPreference: pool) {
            try await lock.withLock(whenCondition: 3) {
                ran.value = true
                return 4
            }
        }
        #expect(eventually { lock.waiterCount == 1 })
        try lock.set(2)
        // The single pool thread is free: a task woken by 2 could run; it must still be waiting.
        let probe = try await withWatchdog { await Task(executorPreference: pool) { lock.waiterCount }.value }
        #expect(probe == 1)
        #expect(!ran.value)
        // The wait report's hook lists the suspended task, holding nothing.
        let line = SuspendedWaits.reportLines().first { $0.contains("condition lock \"three\"") }
        #expect(
            line?.hasPrefix(
                "task: suspended in withLock(whenCondition:)(condition lock \"three\"), waits for condition 3, now 2, lock free, for "
            ) == true)
        #expect(line?.hasSuffix("ms, untimed, holds nothing") == true)
        #expect(lock.stats.wakeups == 0)
        try lock.set(3)
        #expect(
            try await withWatchdog {
                try await waiter.value
                return true
            } == true)
        #expect(ran.value)
        #expect(lock.condition == 4)
    }

    @Test func aTaskCancelledBeforeItWaitsTakesNothing() async throws {
        let lock = ConditionLock(condition: 0)
        let ran = Shared(false)
        let outcome = try await withWatchdog {
            withUnsafeCurrentTask { $0?.cancel() }
            do {
                try await lock.withLock(whenCondition: 0) {
                    ran.value = true
                    return 1
                }
                return "acquired"
            } catch is CancellationError {
                return "cancelled"
            }
        }
        #expect(outcome == "cancelled")
        #expect(!ran.value)
        #expect(!lock.isLocked)
        #expect(lock.condition == 0)
        #expect(lock.stats.acquisitions == 0)
    }

    @Test func aTaskCancelledWhileWaitingLeavesTheLineAndTookNothing() async throws {
        let pool = ThreadPool(threads: 2)
        defer { #expect(pool.shutdown()) }
        let lock = ConditionLock(condition: 0)
        // Ownership is per thread and this test function may change threads at an await: a
        // plain thread holds the lock.
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = spawn {
            try? lock.lock()
            held.signal()
            _ = waits(for: release)
            try? lock.unlock(withCondition: 5)
        }
        #expect(waits(for: held))
        let order = Recorder()
        let first = Task(executorPreference: pool) {
            try await lock.withLock(whenCondition: 5) {
                order.record("first")
                return 6
            }
        }
        #expect(eventually { lock.waiterCount == 1 })
        let second = Task(executorPreference: pool) {
            try await lock.withLock(whenCondition: 5) {
                order.record("second")
                return 7
            }
        }
        #expect(eventually { lock.waiterCount == 2 })
        first.cancel()
        let firstOutcome = try await withWatchdog { () -> String in
            do {
                try await first.value
                return "acquired"
            } catch is CancellationError {
                return "cancelled"
            }
        }
        #expect(firstOutcome == "cancelled")
        #expect(lock.waiterCount == 1)
        #expect(lock.isLocked)
        // The release for 5 goes to the one still in line.
        release.signal()
        #expect(waits(for: holder))
        #expect(
            try await withWatchdog {
                try await second.value
                return true
            } == true)
        #expect(order.events == ["second"])
        #expect(lock.condition == 7)
    }

    @Test func aWokenTaskIsNotHandedTheLockAndKeepsItsPlace() async throws {
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let lock = ConditionLock(condition: 0, name: "woken")
        let order = Recorder()
        try lock.lock()
        let task = Task(executorPreference: pool) {
            try await lock.withLock { order.record("task") }
        }
        #expect(eventually { lock.waiterCount == 1 })
        // Make the task's executor busy: its only thread blocks until the gate opens.
        let busy = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let blocker = Task(executorPreference: pool) {
            busy.signal()
            gate.wait()
        }
        #expect(waits(for: busy))
        try lock.unlock()
        // Woken, not handed: the lock is free while the task cannot run.
        #expect(!lock.isLocked)
        try lock.tryLock()
        // A thread arriving now queues behind the task, which kept its place.
        let thread = spawn {
            try? lock.lock()
            order.record("thread")
            try? lock.unlock()
        }
        #expect(eventually { lock.waiterCount == 2 })
        try lock.unlock()
        gate.signal()
        let finished = try await withWatchdog {
            await blocker.value
            try await task.value
            return true
        }
        #expect(finished == true)
        #expect(waits(for: thread))
        #expect(order.events == ["task", "thread"])
    }

    @Test func aThrowingBodyReleasesWithTheConditionUnchanged() async throws {
        struct Failure: Error {}
        let lock = ConditionLock(condition: 1)
        await #expect(throws: Failure.self) {
            try await lock.withLock(whenCondition: 1) { throw Failure() }
        }
        #expect(!lock.isLocked)
        #expect(lock.condition == 1)
        let value = try await lock.withLock { 42 }
        #expect(value == 42)
    }

    @Test func theBodyRunsInTheCallersIsolation() async throws {
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let queue = try Queue(label: "condlock.actor")
        let lock = ConditionLock(condition: 0)
        let holder = LockUser(queue: queue, lock: lock)
        try lock.lock()
        let task = Task(executorPreference: pool) { try await holder.increment(when: 0) }
        #expect(eventually { lock.waiterCount == 1 })
        try lock.unlock()
        let seen = try await withWatchdog { try await task.value }
        #expect(seen == true)
        #expect(lock.condition == 1)
    }
}

/// An actor on a queue that takes a condition lock from its methods.
private actor LockUser {
    let queue: Queue
    let lock: ConditionLock<Int>
    init(queue: Queue, lock: ConditionLock<Int>) {
        self.queue = queue
        self.lock = lock
    }
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    /// Whether the body ran on the actor's queue.
    func increment(when value: Int) async throws -> Bool {
        var onQueue = false
        try await lock.withLock(whenCondition: value) {
            onQueue = Queue.current === queue
            return value + 1
        }
        return onQueue
    }
}
