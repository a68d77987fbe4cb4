// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Synchronization
import Testing

// Helpers of the Swift-concurrency tests: a small pool of plain threads that tasks can be pinned
// to (so "the pool has two threads" is a fact of the test, not of the machine), and a watchdog
// that bounds an async wait from outside the Swift concurrency pools.

/// A task executor with a fixed number of plain threads. Tasks created with
/// `Task(executorPreference: pool)` run their nonisolated code only on these threads, so a wait
/// that blocks a thread instead of suspending visibly takes one of them away.
package final class ThreadPool: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false
    private var running = 0
    private let finished = DispatchSemaphore(value: 0)
    package let size: Int

    package init(threads: Int) {
        size = threads
        for index in 0..<threads {
            let thread = Thread { [self] in work() }
            thread.name = "pool-\(index)"
            thread.start()
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                finished.signal()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// Lets the threads finish once the queued jobs ran; waits for them (bounded). Call it when
    /// no task pinned to the pool can still run.
    package func shutdown(within timeout: TimeInterval = testTimeout) -> Bool {
        stop()
        for _ in 0..<size where !waits(for: finished, within: timeout) { return false }
        return true
    }

    /// As `shutdown`, without waiting for the threads to end.
    package func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }
}

/// Runs `body` in a new task and waits at most `timeout` seconds for it, without occupying a
/// thread of any Swift concurrency pool while waiting (the timer is a dispatch timer). The task
/// runs on threads of its own: the global pool may be busy with other tests' blocking waits
/// (Swift Testing runs tests in parallel), which must not count against this one. Returns the
/// body's result, or nil when it did not finish in time (the test has failed: the task and its
/// threads are left behind).
package func withWatchdog<T: Sendable>(
    seconds timeout: TimeInterval = testTimeout,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    let once = Once()
    let pool = ThreadPool(threads: 2)
    defer { pool.stop() }
    let outcome: Result<T, any Error>? = await withUnsafeContinuation {
        (continuation: UnsafeContinuation<Result<T, any Error>?, Never>) in
        let resume = UncheckedBox(continuation)
        Task(executorPreference: pool) {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            if once.claim() { resume.value.resume(returning: result) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            if once.claim() { resume.value.resume(returning: nil) }
        }
    }
    return try outcome?.get()
}

package struct UncheckedBox<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// True for the first caller of `claim` only.
package final class Once: Sendable {
    package init() {}
    private let flag = Atomic<Bool>(false)
    package func claim() -> Bool { !flag.exchange(true, ordering: .acquiringAndReleasing) }
}
