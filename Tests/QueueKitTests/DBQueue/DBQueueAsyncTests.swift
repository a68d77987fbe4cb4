// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitTestSupport
import Synchronization
import Testing

@testable import QueueKit

// The DB queue's async forms (the header's section 5). Tasks run on a pool of two plain threads, so a
// wait that blocked a thread instead of suspending would starve it; every wait is bounded by a
// watchdog; interleavings are forced with the lane's waiter count and semaphores, never sleeps.

/// A plain thread that holds a DB queue's write until told to let go.
private final class WriteHolder: Sendable {
    private let held = DispatchSemaphore(value: 0)
    private let letGo = DispatchSemaphore(value: 0)
    private let done: DispatchSemaphore

    init(_ db: DBQueue) {
        let held = held
        let letGo = letGo
        done = spawn {
            try? db.write {
                held.signal()
                _ = waits(for: letGo)
            }
        }
        #expect(waits(for: held))
    }

    func release() { letGo.signal() }
    var finished: Bool { waits(for: done) }
}

@inline(never) private func blackHole(_ value: Int) {}

@Suite struct DBQueueAsyncTests {
    @Test func thirtyTwoTasksWaitForAWriteThatOnlyAPoolTaskCanRelease() async throws {
        let pool = ThreadPool(threads: 2)
        defer { #expect(pool.shutdown()) }
        let db = try DBQueue(label: "async.32")
        let holder = WriteHolder(db)
        let count = Shared(0)
        let writers = (0..<32).map { index in
            Task(executorPreference: pool) {
                if index % 4 == 0 {
                    _ = try await db.read { count.value }
                } else {
                    try await db.write { count.update { $0 += 1 } }
                }
            }
        }
        // All 32 are waiting, and the two pool threads are still free: a task on the pool is
        // what lets the holder go. Blocking waits would have taken both threads (and hung here).
        #expect(eventually { db.waitingCallCount == 32 })
        let releaser = Task(executorPreference: pool) { holder.release() }
        let finished = try await withWatchdog {
            await releaser.value
            for writer in writers { try await writer.value }
            return true
        }
        #expect(finished == true)
        #expect(holder.finished)
        #expect(count.value == 24)
        #expect(db.waitingCallCount == 0)
    }

    @Test func aTaskReadSeesAnAsynchronousWriteSubmittedBeforeIt() async throws {
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let db = try DBQueue(label: "async.order")
        let holder = WriteHolder(db)
        let value = Shared(0)
        // Queued behind the held write; the read below begins after it was submitted, so it must
        // wait for it too (a task never runs other calls' writes: the queue's worker does).
        db.writeAsync { value.value = 1 }
        let reader = Task(executorPreference: pool) { try await db.read { value.value } }
        #expect(eventually { db.waitingCallCount == 1 })
        holder.release()
        let seen = try await withWatchdog { try await reader.value }
        #expect(seen == 1)
        #expect(holder.finished)
    }

    @Test func aTaskCancelledBeforeItWaitsTakesNothing() async throws {
        let db = try DBQueue(label: "async.cancel.before")
        let ran = Shared(false)
        let outcome = try await withWatchdog { () -> [String] in
            withUnsafeCurrentTask { $0?.cancel() }
            var outcomes: [String] = []
            do {
                try await db.write { ran.value = true }
                outcomes.append("write ran")
            } catch is CancellationError { outcomes.append("write cancelled") }
            do {
                try await db.read { ran.value = true }
                outcomes.append("read ran")
            } catch is CancellationError { outcomes.append("read cancelled") }
            do {
                try await db.flush()
                outcomes.append("flushed")
            } catch is CancellationError { outcomes.append("flush cancelled") }
            return outcomes
        }
        #expect(outcome == ["write cancelled", "read cancelled", "flush cancelled"])
        #expect(!ran.value)
        // Nothing was taken: a blocking write gets in at once.
        #expect(finishes { try? db.write {} })
    }

    @Test func aTaskCancelledWhileWaitingLeavesTheLaneAndTookNothing() async throws {
        let pool = ThreadPool(threads: 2)
        defer { #expect(pool.shutdown()) }
        let db = try DBQueue(label: "async.cancel.during")
        let holder = WriteHolder(db)
        let ran = Shared<[String]>([])
        let cancelled = Task(executorPreference: pool) { try await db.write { ran.update { $0.append("cancelled") } } }
        #expect(eventually { db.waitingCallCount == 1 })
        let reader = Task(executorPreference: pool) { try await db.read { ran.update { $0.append("reader") } } }
        #expect(eventually { db.waitingCallCount == 2 })
        cancelled.cancel()
        let outcome = try await withWatchdog { () -> String in
            do {
                try await cancelled.value
                return "ran"
            } catch is CancellationError {
                return "cancelled"
            }
        }
        #expect(outcome == "cancelled")
        // The reader may have been woken when the cancelled task left (it re-enters the lane as
        // soon as it runs again): the lane settles with the reader alone in it.
        #expect(eventually { db.waitingCallCount == 1 })
        holder.release()
        #expect(
            try await withWatchdog {
                try await reader.value
                return true
            } == true)
        #expect(holder.finished)
        #expect(ran.value == ["reader"])
    }

    @Test func identityInsideTheAsyncBodies() async throws {
        let db = try DBQueue(label: "async.identity")
        let read = try await db.read {
            (Queue.current === db.queue, db.queue.check(.onQueue), db.queue.check(.onQueueAsBarrier))
        }
        #expect(read.0 && read.1 && !read.2)
        let write = try await db.write { (Queue.current === db.queue, db.queue.check(.onQueueAsBarrier)) }
        #expect(write.0 && write.1)
        #expect(Queue.current !== db.queue)
    }

    @Test func flushSuspendsUntilEarlierWritesRan() async throws {
        let pool = ThreadPool(threads: 1)
        defer { #expect(pool.shutdown()) }
        let db = try DBQueue(label: "async.flush")
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let ran = Shared(false)
        db.writeAsync {
            started.signal()
            _ = waits(for: gate)
            ran.value = true
        }
        #expect(waits(for: started))
        let flush = Task(executorPreference: pool) { try await db.flush() }
        #expect(eventually { SuspendedWaits.all.contains { $0.object === db } })
        #expect(!ran.value)
        gate.signal()
        #expect(
            try await withWatchdog {
                try await flush.value
                return true
            } == true)
        #expect(ran.value)
    }

    @Test func aWaitingTaskWriterIsNotStarvedByAStormOfReaders() async throws {
        let db = try DBQueue(label: "async.storm")
        let stopped = Shared(false)
        let inside = Shared(0)
        // Two threads keep at least one read inside at any moment once both run.
        let readers = (0..<2).map { _ in
            spawn {
                while !stopped.value {
                    _ = try? db.read {
                        inside.update { $0 += 1 }
                        var spin = 0
                        for step in 0..<200 { spin &+= step }
                        blackHole(spin)
                        inside.update { $0 -= 1 }
                    }
                }
            }
        }
        #expect(eventually { inside.value > 0 })
        let wrote = try await withWatchdog { try await db.write { true } }
        stopped.value = true
        for reader in readers { #expect(waits(for: reader)) }
        #expect(wrote == true)
    }

    @Test func guardedResourceAsyncForms() async throws {
        let store = try GuardedResource([String: Int](), label: "async.store")
        try await store.write { $0["answer"] = 42 }
        store.writeAsync { $0["later"] = 1 }
        try await store.flush()
        let snapshot = try await store.read { $0 }
        #expect(snapshot == ["answer": 42, "later": 1])
    }

    @Test func theBodyRunsInTheCallersIsolation() async throws {
        let queue = try Queue(label: "db.actor")
        let owner = DBUser(queue: queue, db: try DBQueue(label: "async.actor"))
        let seen = try #require(try await withWatchdog { try await owner.writeAndLook() })
        #expect(seen.onActorQueue)
        #expect(seen.current)
    }
}

/// An actor on a queue that writes to a DB queue from its methods.
private actor DBUser {
    let queue: Queue
    let db: DBQueue
    private var writes = 0
    init(queue: Queue, db: DBQueue) {
        self.queue = queue
        self.db = db
    }
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    /// Inside the body: still on the actor's queue further out, and the DB queue is current.
    func writeAndLook() async throws -> (onActorQueue: Bool, current: Bool) {
        try await db.write {
            writes += 1
            return (queue.check(.onQueue), Queue.current === db.queue)
        }
    }
}
