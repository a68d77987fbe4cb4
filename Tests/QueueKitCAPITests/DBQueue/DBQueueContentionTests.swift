// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Synchronization
import Testing

// The DB queue under contention (section 2 of the contract, "Ordering is what a program can
// observe" and "Where write_async's work runs"): happens-before ordering through the barging
// lane, eventual fairness, and the threads that run pending writes while they wait.

/// A thread's identity, comparable across threads.
private func threadID() -> UInt { UInt(bitPattern: Int(pthread_self())) }

// MARK: - Happens-before

@Suite("DB queue: a call that begins after another returned is ordered after it")
struct DBQueueHappensBeforeTests {
    enum WriteKind: String, CaseIterable, Sendable { case write, writeAsync }

    /// A writer thread writes round `i` and signals; a reader thread that waited for the signal
    /// must see round `i`. Two more threads keep the queue busy with reads and writes, so that
    /// both sides often go through the lane (spinning, parking, helping) rather than the fast path.
    @Test(arguments: WriteKind.allCases)
    func theReadSeesTheWriteThatReturnedBeforeItBegan(kind: WriteKind) {
        let f = DBFixture()
        let value = Unprotected(0)
        let noise = Unprotected(0)
        let handOver = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let stop = Atomic<Bool>(false)
        let rounds = 2_000
        let busy = (0..<2).map { t in
            spawn {
                var i = 0
                while !stop.load(ordering: .relaxed) {
                    i += 1
                    if (i + t) % 4 == 0 {
                        dbWrite(f.db) { noise.value += 1 }
                    } else {
                        dbRead(f.db) { _ = noise.value }
                    }
                }
            }
        }
        let writer = spawn {
            for i in 1...rounds {
                switch kind {
                case .write: expectStatus(0, dbWrite(f.db) { value.value = i })
                case .writeAsync: expectStatus(0, dbWriteAsync(f.db) { value.value = i })
                }
                handOver.signal()
                guard waits(for: checked) else { return }
            }
        }
        let reader = spawn {
            for i in 1...rounds {
                guard waits(for: handOver) else { return }
                var seen = 0
                expectStatus(0, dbRead(f.db) { seen = value.value })
                #expect(seen == i)
                checked.signal()
            }
        }
        #expect(waits(for: writer), "\(DBQueueInternals.debugState(f.db))")
        #expect(waits(for: reader), "\(DBQueueInternals.debugState(f.db))")
        stop.store(true, ordering: .relaxed)
        for thread in busy { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
    }

    /// The same across two writers: a write that begins after a write_async returned runs after it.
    @Test func aWriteRunsAfterAWriteAsyncThatReturned() {
        let f = DBFixture()
        let log = Unprotected<[Int]>([])
        let handOver = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let rounds = 1_000
        let submitter = spawn {
            for i in 1...rounds {
                expectStatus(0, dbWriteAsync(f.db) { log.value.append(2 * i) })
                handOver.signal()
                guard waits(for: checked) else { return }
            }
        }
        let writer = spawn {
            for i in 1...rounds {
                guard waits(for: handOver) else { return }
                expectStatus(
                    0,
                    dbWrite(f.db) {
                        #expect(log.value.last == 2 * i, "the write overtook a write_async that had returned")
                        log.value.append(2 * i + 1)
                    })
                checked.signal()
            }
        }
        #expect(waits(for: submitter))
        #expect(waits(for: writer))
    }
}

// MARK: - No starvation

@Suite("DB queue: nobody starves", .serialized)
struct DBQueueFairnessTests {
    /// Readers that hold the queue hand over hand: each stays inside until the next one is inside
    /// (or 50 ms passed), so the reader count never falls to zero while new readers can enter. A
    /// lock that always lets readers in while others read would never let the writer in; with the
    /// fairness bound, new readers stop entering once the writer has waited about 1 ms.
    @Test("a parked writer gets in under a hand-over-hand storm of readers")
    func writerUnderAReaderStorm() {
        let f = DBFixture()
        let entered = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let storm = (0..<3).map { _ in
            spawn {
                while !stop.load(ordering: .acquiring) {
                    dbRead(f.db) {
                        let me = entered.add(1, ordering: .acquiringAndReleasing).newValue
                        let deadline = MonotonicDeadline(milliseconds: 50)
                        while entered.load(ordering: .acquiring) == me && !stop.load(ordering: .acquiring)
                            && !deadline.passed
                        {
                            sched_yield()
                        }
                    }
                }
            }
        }
        #expect(eventually { entered.load(ordering: .relaxed) > 20 }, "the storm never started")
        let wrote = Shared(false)
        let writer = spawn { expectStatus(0, dbWrite(f.db) { wrote.value = true }) }
        #expect(waits(for: writer, within: 1), "the writer starved under the readers")
        stop.store(true, ordering: .releasing)
        for thread in storm { #expect(waits(for: thread)) }
        #expect(wrote.value)
    }

    /// Writers that take the queue back the moment it is free (several threads, each writing in
    /// a loop and holding the queue for a while): a reader parked among them gets in.
    @Test("a parked reader gets in under a storm of writers")
    func readerUnderAWriterStorm() {
        let f = DBFixture()
        let writes = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let storm = (0..<3).map { _ in
            spawn {
                while !stop.load(ordering: .acquiring) {
                    dbWrite(f.db) {
                        writes.add(1, ordering: .relaxed)
                        let deadline = MonotonicDeadline(milliseconds: 0.05)
                        while !deadline.passed {}
                    }
                }
            }
        }
        #expect(eventually { writes.load(ordering: .relaxed) > 100 }, "the storm never started")
        for _ in 0..<20 {
            let reader = spawn { expectStatus(0, dbRead(f.db) {}) }
            #expect(waits(for: reader, within: 1), "the reader starved under the writers")
        }
        stop.store(true, ordering: .releasing)
        for thread in storm { #expect(waits(for: thread)) }
    }

    /// Two threads submit write_async without pause; a reader whose thread may not help (it is
    /// inside a block of another queue) waits only for the writes submitted before it began: the
    /// worker lets it in between writes instead of running until the stream dries up.
    @Test("a reader that may not help gets in under a stream of write_async")
    func readerUnderAWriteAsyncStream() {
        let f = DBFixture()
        let returned = Atomic<Int>(0)
        let ran = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let storm = (0..<2).map { _ in
            spawn {
                while !stop.load(ordering: .acquiring) {
                    // Keep at most a few thousand writes outstanding.
                    if returned.load(ordering: .relaxed) - ran.load(ordering: .relaxed) > 2_000 {
                        sched_yield()
                        continue
                    }
                    dbWriteAsync(f.db) { ran.add(1, ordering: .relaxed) }
                    returned.add(1, ordering: .releasing)
                }
            }
        }
        #expect(eventually { ran.load(ordering: .relaxed) > 1_000 }, "the stream never started")
        for _ in 0..<10 {
            let reader = spawn {
                expectStatus(
                    0,
                    callC({
                        let before = returned.load(ordering: .acquiring)
                        expectStatus(
                            0,
                            dbRead(f.db) {
                                #expect(
                                    ran.load(ordering: .relaxed) >= before,
                                    "the read overtook a write_async that had returned")
                            })
                    }) { qk_queue_sync(f.serial, $0, $1) })
            }
            #expect(waits(for: reader, within: 1), "the reader starved behind the write_async stream")
        }
        stop.store(true, ordering: .releasing)
        for thread in storm { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
        #expect(ran.load(ordering: .relaxed) == returned.load(ordering: .relaxed))
    }
}

/// A deadline on the monotonic clock, for busy loops inside test blocks.
private struct MonotonicDeadline {
    let end: UInt64
    init(milliseconds: Double) { end = qk_now_ns() + UInt64(milliseconds * 1_000_000) }
    var passed: Bool { qk_now_ns() >= end }
}

// MARK: - Helping

/// A write on another thread that holds the DB queue until `finish`.
private struct WriteHolder {
    private let release = DispatchSemaphore(value: 0)
    private let done: DispatchSemaphore

    init(_ db: OpaquePointer) {
        let handle = Unchecked(db)
        let inside = DispatchSemaphore(value: 0)
        let release = release
        done = spawn {
            expectStatus(
                0,
                dbWrite(handle.value) {
                    inside.signal()
                    #expect(waits(for: release))
                })
        }
        #expect(waits(for: inside), "the holder never got the queue")
    }

    /// Lets the write end and waits for its thread.
    func finish() {
        release.signal()
        #expect(waits(for: done))
    }
}

@Suite("DB queue: waiting threads run pending writes", .serialized)
struct DBQueueHelpingTests {
    enum Waiter: String, CaseIterable, Sendable { case read, write, flush }

    /// The queue is held by a write on another thread; a write_async is queued behind it; a
    /// thread that holds nothing else waits (read, write or flush). When the write ends, the
    /// waiting thread runs the pending write itself — with the DB queue as its current queue,
    /// exclusively, and nothing further out — and then does its own call.
    @Test(arguments: Waiter.allCases)
    func aWaitingThreadThatHoldsNothingRunsThePendingWrite(waiter: Waiter) {
        let label = "helper-\(waiter)-\(UUID().uuidString.prefix(8))"
        let f = DBFixture(label: label)
        let holder = WriteHolder(f.db)
        let ranOn = Shared<UInt?>(nil)
        let other = spawn {
            expectStatus(
                0,
                dbWriteAsync(f.db) {
                    let q = qk_dbqueue_queue(f.db)
                    #expect(qk_queue_current() == q)
                    #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == 0)
                    // Nothing further out: the helper's own call has not started its block.
                    #expect(qk_queue_check(f.serial, QK_ON_QUEUE) == EPERM)
                    expectStatus(EDEADLK, qk_dbqueue_flush(f.db))
                    ranOn.value = threadID()
                })
        }
        #expect(waits(for: other))
        let waiterThread = Shared<UInt>(0)
        let sawWrite = Shared(false)
        let done = spawn {
            waiterThread.value = threadID()
            switch waiter {
            case .read: expectStatus(0, dbRead(f.db) { sawWrite.value = ranOn.value != nil })
            case .write: expectStatus(0, dbWrite(f.db) { sawWrite.value = ranOn.value != nil })
            case .flush:
                expectStatus(0, qk_dbqueue_flush(f.db))
                sawWrite.value = ranOn.value != nil
            }
        }
        if waiter != .flush {
            #expect(eventually { DBQueueInternals.waitingCalls(f.db) >= 1 }, "the call never waited")
        } else {
            // Seen waiting in the lane; it cannot have returned while the holder holds on.
            #expect(
                eventually { DBQueueInternals.isWaiting(in: "qk_dbqueue_flush", label: label) },
                "the flush never waited")
            #expect(done.wait(timeout: .now()) == .timedOut, "flush returned while the write was pending")
        }
        holder.finish()
        #expect(waits(for: done))
        #expect(sawWrite.value, "the call did not come after the pending write")
        #expect(ranOn.value == waiterThread.value, "the waiting thread did not run the pending write")
    }

    enum Holding: String, CaseIterable, Sendable { case serialQueue, otherDBQueue, conditionLock }

    /// The same, but the waiting thread holds something else of QueueKit's: it must not run the
    /// pending write (that would run it inside a foreign block, or under a lock); the worker does.
    @Test(arguments: Holding.allCases)
    func aThreadThatHoldsSomethingNeverRunsThePendingWrite(holding: Holding) {
        let f = DBFixture()
        let lock = Unchecked(qk_condlock_create(0)!)
        defer { #expect(qk_condlock_destroy(lock.value) == 0) }
        let holder = WriteHolder(f.db)
        let ranOn = Shared<UInt?>(nil)
        expectStatus(0, dbWriteAsync(f.db) { ranOn.value = threadID() })
        let waiterThread = Shared<UInt>(0)
        let sawWrite = Shared(false)
        let done = spawn {
            waiterThread.value = threadID()
            let read = { expectStatus(0, dbRead(f.db) { sawWrite.value = ranOn.value != nil }) }
            switch holding {
            case .serialQueue: expectStatus(0, callC(read) { qk_queue_sync(f.serial, $0, $1) })
            case .otherDBQueue: expectStatus(0, dbRead(f.otherDB, read))
            case .conditionLock:
                expectStatus(0, qk_condlock_lock(lock.value))
                read()
                expectStatus(0, qk_condlock_unlock(lock.value))
            }
        }
        #expect(eventually { DBQueueInternals.waitingCalls(f.db) >= 1 }, "the read never waited")
        holder.finish()
        #expect(waits(for: done))
        #expect(sawWrite.value)
        #expect(ranOn.value != nil && ranOn.value != waiterThread.value, "a thread holding something ran the write")
    }

    /// A helper runs only the writes submitted before its call began: one submitted while it
    /// waits is left to the worker (or a later caller).
    @Test func aHelperRunsOnlyWritesSubmittedBeforeItsCall() {
        let f = DBFixture()
        let holder = WriteHolder(f.db)
        let early = Shared<UInt?>(nil)
        let late = Shared<UInt?>(nil)
        expectStatus(0, dbWriteAsync(f.db) { early.value = threadID() })
        let waiterThread = Shared<UInt>(0)
        let done = spawn {
            waiterThread.value = threadID()
            expectStatus(0, dbWrite(f.db) {})
        }
        #expect(eventually { DBQueueInternals.waitingCalls(f.db) >= 1 })
        expectStatus(0, dbWriteAsync(f.db) { late.value = threadID() })
        holder.finish()
        #expect(waits(for: done))
        #expect(qk_dbqueue_flush(f.db) == 0)
        #expect(early.value == waiterThread.value, "the helper did not run the write submitted before its call")
        #expect(
            late.value != nil && late.value != waiterThread.value,
            "the helper ran a write submitted after its call began")
    }
}
