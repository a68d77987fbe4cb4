// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Synchronization
import Testing

@Suite("DB queue: readers, writers, ordering")
struct DBQueueOrderingTests {
    @Test("two readers are inside at once (rendezvous inside the reads)")
    func readersRunConcurrently() {
        let f = DBFixture()
        let meet = Rendezvous(parties: 2)
        let a = spawn { dbRead(f.db) { #expect(meet.arrive(), "the other reader never came in") } }
        let b = spawn { dbRead(f.db) { #expect(meet.arrive(), "the other reader never came in") } }
        #expect(waits(for: a))
        #expect(waits(for: b))
    }

    @Test("a write never overlaps a read or another write")
    func writesAreExclusive() {
        let f = DBFixture()
        let occupancy = Occupancy()
        let threads = (0..<4).map { t in
            spawn {
                for i in 0..<3_000 {
                    switch (i + t) % 10 {
                    case 0: dbWrite(f.db) { occupancy.write() }
                    case 5: dbWriteAsync(f.db) { occupancy.write() }
                    default: dbRead(f.db) { occupancy.read() }
                    }
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
        #expect(occupancy.violations.load(ordering: .relaxed) == 0)
    }

    @Test("a read on another thread sees a write_async that returned before it began")
    func readYourWritesAcrossThreads() {
        let f = DBFixture()
        let value = Unprotected(0)
        let handOver = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let rounds = 2_000
        let submitter = spawn {
            for i in 1...rounds {
                dbWriteAsync(f.db) { value.value = i }
                handOver.signal()
                guard waits(for: checked) else { return }
            }
        }
        let reader = spawn {
            for i in 1...rounds {
                guard waits(for: handOver) else { return }
                var seen = 0
                dbRead(f.db) { seen = value.value }
                #expect(seen == i)
                checked.signal()
            }
        }
        #expect(waits(for: submitter))
        #expect(waits(for: reader))
    }

    @Test("writes from several threads run in each thread's submission order")
    func writesAreFIFO() {
        let f = DBFixture()
        let log = Unprotected<[(thread: Int, seq: Int)]>([])
        let perThread = 2_500
        let threads = (0..<4).map { t in
            spawn {
                for s in 0..<perThread {
                    if s % 10 == 0 {
                        dbWrite(f.db) { log.value.append((t, s)) }
                    } else {
                        dbWriteAsync(f.db) { log.value.append((t, s)) }
                    }
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
        var next = [Int](repeating: 0, count: 4)
        var inOrder = true
        dbRead(f.db) {
            for entry in log.value {
                if entry.seq != next[entry.thread] { inOrder = false }
                next[entry.thread] = entry.seq + 1
            }
        }
        #expect(inOrder)
        #expect(next == [Int](repeating: perThread, count: 4))
    }

    @Test("a write runs after every write submitted before it, by any thread")
    func writeRunsAfterEarlierWrites() {
        let f = DBFixture()
        let count = Unprotected(0)
        let blocker = DispatchSemaphore(value: 0)
        // Hold the lane so that the async writes really queue up.
        expectStatus(0, dbWriteAsync(f.db) { _ = waits(for: blocker) })
        let submitter = spawn {
            for _ in 0..<1_000 { dbWriteAsync(f.db) { count.value += 1 } }
        }
        #expect(waits(for: submitter))
        let writer = spawn {
            expectStatus(0, dbWrite(f.db) { #expect(count.value == 1_000) })
        }
        blocker.signal()
        #expect(waits(for: writer))
        // And on the same thread.
        for _ in 0..<100 { dbWriteAsync(f.db) { count.value += 1 } }
        expectStatus(0, dbWrite(f.db) { #expect(count.value == 1_100) })
    }

    @Test("flush waits for every write submitted before it")
    func flushWaits() {
        let f = DBFixture()
        let count = Unprotected(0)
        let blocker = DispatchSemaphore(value: 0)
        let released = Shared(false)
        expectStatus(0, dbWriteAsync(f.db) { _ = waits(for: blocker) })
        for _ in 0..<100 { dbWriteAsync(f.db) { count.value += 1 } }
        // However the threads are scheduled, the flush returns only after the first write was
        // released and every write ran (whether the worker or the flushing thread ran them).
        let flusher = spawn {
            #expect(qk_dbqueue_flush(f.db) == 0)
            #expect(released.value, "flush returned while writes were pending")
            #expect(count.value == 100)
        }
        released.value = true
        blocker.signal()
        #expect(waits(for: flusher))
        dbRead(f.db) { #expect(count.value == 100) }
    }
}

// MARK: - Identity

@Suite("DB queue: identity checks")
struct DBQueueIdentityTests {
    @Test func identityInsideReadsAndWrites() {
        let f = DBFixture()
        let q = qk_dbqueue_queue(f.db)
        #expect(q != nil)
        #expect(qk_dbqueue_queue(f.db) == q, "stable")
        #expect(qk_queue_check(q, QK_NOT_ON_QUEUE) == 0)
        #expect(qk_queue_check(q, QK_ON_QUEUE) == EPERM)
        let ok = finishes {
            let q = qk_dbqueue_queue(f.db)
            #expect(qk_queue_current() != q)
            dbRead(f.db) {
                #expect(qk_queue_current() == q)
                #expect(qk_queue_is_current(q))
                #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == EPERM)
                #expect(qk_queue_check(q, QK_NOT_ON_QUEUE) == EPERM)
                // Through a hop the current queue changes, the hold stays.
                expectStatus(
                    0,
                    callC({
                        #expect(qk_queue_current() == f.serial)
                        #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                    }) { qk_queue_sync(f.serial, $0, $1) })
            }
            dbWrite(f.db) {
                #expect(qk_queue_current() == q)
                #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == 0)
            }
            let inAsync = DispatchSemaphore(value: 0)
            dbWriteAsync(f.db) {
                let q = qk_dbqueue_queue(f.db)
                #expect(qk_queue_current() == q)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == 0)
                inAsync.signal()
            }
            #expect(waits(for: inAsync))
            var label = [CChar](repeating: 0, count: 64)
            dbRead(f.db) { _ = qk_queue_copy_current_label(&label, label.count) }
            #expect(label.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } == "test.db")
            #expect(String(cString: qk_queue_label(q)) == "test.db")
        }
        #expect(ok)
    }

    @Test func theIdentityQueueTakesNoWork() {
        let f = DBFixture()
        let q = qk_dbqueue_queue(f.db)
        let ran = Shared(false)
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_sync(q, $0, $1) })
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_barrier_sync(q, $0, $1) })
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_perform(q, $0, $1) })
        expectStatus(EINVAL, callCAsync({ ran.value = true }) { qk_queue_async(q, $0, $1) })
        expectStatus(EINVAL, callCAsync({ ran.value = true }) { qk_queue_barrier_async(q, $0, $1) })
        // Also from inside a block of the DB queue, where it is the current queue.
        dbRead(f.db) {
            expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_perform(q, $0, $1) })
        }
        errno = 0
        #expect(qk_queue_create_with_target("t", QK_QUEUE_SERIAL, q) == nil)
        #expect(errno == EINVAL)
        #expect(!ran.value)
    }
}

// MARK: - Misuse

@Suite("DB queue: misuse gets codes")
struct DBQueueMisuseTests {
    @Test func nullAndWrongTypeHandles() {
        let queue = qk_queue_create("not a db", QK_QUEUE_SERIAL)!
        defer { qk_queue_release(queue) }
        for bad in [nil, queue] as [OpaquePointer?] {
            #expect(qk_dbqueue_read(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_write(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_write_async(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_flush(bad) == EINVAL)
            #expect(qk_dbqueue_destroy(bad) == EINVAL)
            errno = 0
            #expect(qk_dbqueue_queue(bad) == nil)
            #expect(errno == EINVAL)
        }
        // A DB queue passed where a queue is expected.
        let f = DBFixture()
        let db = f.db
        #expect(qk_queue_sync(db, nil, noWork) == EINVAL)
        #expect(qk_queue_async(db, nil, noWork) == EINVAL)
        #expect(qk_queue_barrier_sync(db, nil, noWork) == EINVAL)
        #expect(qk_queue_barrier_async(db, nil, noWork) == EINVAL)
        #expect(qk_queue_perform(db, nil, noWork) == EINVAL)
        #expect(qk_queue_check(db, QK_ON_QUEUE) == EINVAL)
        #expect(!qk_queue_is_current(db))
        #expect(qk_dbqueue_read(db, nil, noWork) == 0, "the DB queue still works")
    }

    @Test func nullWork() {
        let f = DBFixture()
        #expect(qk_dbqueue_read(f.db, nil, nil) == EINVAL)
        #expect(qk_dbqueue_write(f.db, nil, nil) == EINVAL)
        #expect(qk_dbqueue_write_async(f.db, nil, nil) == EINVAL)
        expectStatus(0, dbRead(f.db) { #expect(qk_dbqueue_write(f.db, nil, nil) == EINVAL) })
    }

    @Test func anonymousQueue() {
        let db = qk_dbqueue_create(nil)
        #expect(db != nil)
        #expect(String(cString: qk_queue_label(qk_dbqueue_queue(db))) == "")
        #expect(qk_dbqueue_destroy(db) == 0)
    }
}
