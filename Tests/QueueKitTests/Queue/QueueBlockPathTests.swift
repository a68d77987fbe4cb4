// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Every block a queue runs goes through one path (admit, runBlock): an actor's job counts as a
// barrier where a barrier_async does, and the async perform refuses a forked child as the other
// calls do.

/// A task executor whose jobs the thread that calls `run` runs: tasks without any other thread.
private final class CallerDrivenExecutor: TaskExecutor, @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        lock.withLock { jobs.append(job) }
    }

    /// Runs jobs until `done` holds (true) or `seconds` passed (false).
    func run(for seconds: TimeInterval, until done: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while !done() {
            if Date() > deadline { return false }
            let next = lock.withLock { jobs.isEmpty ? nil : jobs.removeFirst() }
            if let next { next.runSynchronously(on: asUnownedTaskExecutor()) } else { sched_yield() }
        }
        return true
    }
}

/// An actor whose executor is a queue of QueueKit.
private actor QueueBound {
    let queue: Queue
    init(queue: Queue) { self.queue = queue }
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func touch() {}
}

@Suite("Blocks of a queue: one path for every way in", .serialized)
struct QueueBlockPathTests {
    @Test("a plain sync queued with an actor job behind a waiting reader of a concurrent queue: a ring, refused once")
    func pendingActorJobClosesARing() throws {
        let queue = try Queue(label: "block-path.concurrent", kind: .concurrent)
        let lock = ConditionLock(condition: 0)
        lock.name = "block-path.lock"
        let readerIn = DispatchSemaphore(value: 0)
        let goOn = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let outcomes = Shared<[String: QueueKitError?]>([:])
        @Sendable func record(_ who: String, _ body: () throws(QueueKitError) -> Void) {
            do throws(QueueKitError) {
                try body()
                outcomes.update { $0[who] = .some(nil) }
            } catch {
                outcomes.update { $0[who] = error }
            }
        }
        // A reader runs; it will wait for the lock the syncing thread holds.
        try queue.async {
            readerIn.signal()
            _ = goOn.wait(timeout: .now() + testTimeout)
            record("reader") { () throws(QueueKitError) in
                try lock.lock()
                try lock.unlock()
            }
            readerDone.signal()
        }
        #expect(waits(for: readerIn))
        // An actor job queued behind the running reader: on a concurrent queue it is a barrier.
        // (The task starts on a thread of its own: the global pool may be busy with other
        // tests' blocking waits.)
        let actor = QueueBound(queue: queue)
        let jobDone = DispatchSemaphore(value: 0)
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        Task(executorPreference: pool) {
            await actor.touch()
            jobDone.signal()
        }
        // Once the reader waits for the lock the syncing thread holds (its wait published), a
        // plain sync onto the queue waits for the running reader (and behind the job): a ring,
        // one of whose calls is refused.
        let syncer = spawn {
            record("locker") { () throws(QueueKitError) in try lock.lock() }
            goOn.signal()
            #expect(eventually { Diagnostics.waitReport().contains("block-path.lock") })
            record("sync") { () throws(QueueKitError) in
                do { try queue.sync {} } catch let error as QueueKitError { throw error } catch {}
            }
            try? lock.unlock()
        }
        #expect(waits(for: syncer) && waits(for: readerDone) && waits(for: jobDone))
        let refused = outcomes.value.filter { $0.value == .wouldDeadlock }.map(\.key)
        #expect(refused.count == 1, "outcomes: \(outcomes.value)")
    }

    @Test("the async perform in a forked child throws notRecoverable instead of waiting forever")
    func asyncPerformInAForkedChildThrows() throws {
        let child = try ChildRun(test: "asyncPerformForkChild", variable: forkPerformChildVariable)
        #expect(child.finished, "the child process did not finish")
        guard child.finished else { return }
        #expect(child.reason == .exit)
        #expect(child.status == 0, "stderr: \(child.lines)")
    }

    /// The child of `asyncPerformInAForkedChildThrows`: forks, and in the forked process awaits a
    /// `perform` on a queue, from a task on a thread of its own (no Swift concurrency pool runs
    /// there). Exits 0 when it threw `notRecoverable`.
    @Test(.enabled(if: isChildRun(forkPerformChildVariable), "the child process of asyncPerformInAForkedChildThrows"))
    func asyncPerformForkChild() throws {
        let queue = try Queue(label: "block-path.fork")
        try queue.sync {}
        let pid = fork()
        if pid == 0 {
            // No thread may be started here (ThreadSanitizer forbids it after a fork): this
            // thread runs the task's jobs itself.
            let executor = CallerDrivenExecutor()
            let outcome = Shared<Int32>(1)
            Task(executorPreference: executor) {
                do {
                    _ = try await queue.perform { 1 }
                    outcome.value = 2 // ran: impossible, no dispatch thread exists here
                } catch QueueKitError.notRecoverable {
                    outcome.value = 0
                } catch {
                    outcome.value = 3
                }
            }
            // A hang is the defect: give up after a bound and say so in the status.
            _exit(executor.run(for: 5) { outcome.value != 1 } ? outcome.value : 4)
        }
        #expect(pid > 0)
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        let exit = (status >> 8) & 0xFF
        #expect(status & 0x7F == 0 && exit == 0, "forked child: exit \(exit) (1/4: hung, 2: ran, 3: other error)")
    }
}

let forkPerformChildVariable = "QUEUEKIT_TEST_FORK_PERFORM_CHILD"
