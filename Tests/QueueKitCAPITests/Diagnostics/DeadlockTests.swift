// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Deadlocks across threads (the header's section 4): every scenario builds its ring with real
// synchronisation (a rendezvous once every thread holds its first resource), then lets each
// thread make its closing call. Exactly one call of a ring must be refused with EDEADLK, having
// run nothing; the others must then complete; every thread is waited for with a timeout, so a
// missed cycle fails in seconds instead of hanging. Non-cycles must never be refused.
//
// The worker-syncs-onto-main scenario needs a real main thread: examples/deadlock_main_queue.c.

@Suite("Deadlocks across threads", .serialized)
struct DeadlockTests {
    init() { ReportLog.install() }

    // MARK: Cycles: exactly one call refused, the rest completes

    @Test("two serial queues syncing into each other: one sync refused, the other completes")
    func twoSerialQueues() {
        let tag = unique("two-queues")
        let a = CQueue.create("\(tag).a")
        let b = CQueue.create("\(tag).b")
        defer {
            a.release()
            b.release()
        }
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let first = spawn {
            name("worker-a")
            outcomes.record(
                "a",
                a.sync {
                    _ = meet.arrive()
                    outcomes.record("a→b", b.sync { outcomes.didRun("a→b") })
                })
        }
        let second = spawn {
            name("worker-b")
            outcomes.record(
                "b",
                b.sync {
                    _ = meet.arrive()
                    outcomes.record("b→a", a.sync { outcomes.didRun("b→a") })
                })
        }
        #expect(waits(for: first) && waits(for: second))
        let statuses = outcomes.all
        #expect(statuses["a"] == 0 && statuses["b"] == 0)
        #expect(outcomes.refusedCount == 1, "statuses: \(statuses)")
        // The refused sync ran nothing; the other ran once.
        let refused = statuses["a→b"] == EDEADLK ? "a→b" : "b→a"
        let other = refused == "a→b" ? "b→a" : "a→b"
        #expect(statuses[other] == 0)
        #expect(outcomes.runs == [other])
        let reports = ReportLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        if let report = reports.first {
            let lines = report.split(separator: "\n").map(String.init)
            #expect(lines.count == 3)
            #expect(lines.first == "QueueKit: deadlock refused (EDEADLK): qk_queue_sync would wait in a cycle")
            // The refused thread holds its own queue and waits for the other's; the other waits
            // for the refused thread's queue.
            let (refusedName, held, wanted) = refused == "a→b" ? ("worker-a", "a", "b") : ("worker-b", "b", "a")
            let waiterName = refusedName == "worker-a" ? "worker-b" : "worker-a"
            #expect(
                lines.count > 1
                    && lines[1].hasSuffix(
                        "\"\(waiterName)\": in qk_queue_sync(serial queue \"\(tag).\(held)\"), holds serial queue \"\(tag).\(wanted)\""
                    ),
                "\(report)")
            #expect(
                lines.count > 2
                    && lines[2].hasSuffix(
                        "\"\(refusedName)\": holds serial queue \"\(tag).\(held)\"; waits in qk_queue_sync(serial queue \"\(tag).\(wanted)\")  <- refused"
                    ),
                "\(report)")
        }
    }

    @Test("two threads closing the same ring at the same instant, 300 times: exactly one refused each time (Swift API)")
    func simultaneousClosings() throws {
        let tag = unique("race")
        let a = try Queue(label: "\(tag).a")
        let b = try Queue(label: "\(tag).b")
        for round in 0..<300 {
            let meet = Rendezvous(parties: 2)
            let refusals = Shared(0)
            let ran = Shared(0)
            func closer(_ own: Queue, _ other: Queue) -> DispatchSemaphore {
                spawn {
                    do {
                        try own.sync {
                            _ = meet.arrive()
                            do {
                                try other.sync { ran.update { $0 += 1 } }
                            } catch QueueKitError.wouldDeadlock {
                                refusals.update { $0 += 1 }
                            }
                        }
                    } catch {
                        Issue.record("unexpected \(error)")
                    }
                }
            }
            let one = closer(a, b)
            let two = closer(b, a)
            #expect(waits(for: one) && waits(for: two), "round \(round) hung")
            #expect(
                refusals.value == 1 && ran.value == 1, "round \(round): \(refusals.value) refused, \(ran.value) ran")
            if refusals.value != 1 { break }
        }
        #expect(ReportLog.shared.reports(mentioning: tag).count == 300)
    }

    @Test(
        "two threads taking two locks in opposite orders at the same instant, 300 times: exactly one refused each time")
    func simultaneousLockOrders() throws {
        let tag = unique("lock-race")
        let first = ConditionLock(condition: 0, name: "\(tag).1")
        let second = ConditionLock(condition: 0, name: "\(tag).2")
        for round in 0..<300 {
            let meet = Rendezvous(parties: 2)
            let refusals = Shared(0)
            let ran = Shared(0)
            func taker(_ outer: ConditionLock<Int>, _ inner: ConditionLock<Int>) -> DispatchSemaphore {
                spawn {
                    do {
                        try outer.lock()
                        _ = meet.arrive()
                        do {
                            try inner.lock()
                            ran.update { $0 += 1 }
                            try inner.unlock()
                        } catch QueueKitError.wouldDeadlock {
                            refusals.update { $0 += 1 }
                        }
                        try outer.unlock()
                    } catch {
                        Issue.record("unexpected \(error)")
                    }
                }
            }
            let one = taker(first, second)
            let two = taker(second, first)
            #expect(waits(for: one) && waits(for: two), "round \(round) hung")
            #expect(
                refusals.value == 1 && ran.value == 1, "round \(round): \(refusals.value) refused, \(ran.value) ran")
            if refusals.value != 1 { break }
        }
    }

    @Test("a ring of three serial queues: one sync refused, the other two complete")
    func ringOfThreeQueues() {
        let tag = unique("ring3")
        let queues = (0..<3).map { CQueue.create("\(tag).\($0)") }
        defer { for queue in queues { queue.release() } }
        let meet = Rendezvous(parties: 3)
        let outcomes = Outcomes()
        let threads = (0..<3).map { i in
            spawn {
                name("ring-\(i)")
                outcomes.record(
                    "outer\(i)",
                    queues[i].sync {
                        _ = meet.arrive()
                        outcomes.record("inner\(i)", queues[(i + 1) % 3].sync { outcomes.didRun("inner\(i)") })
                    })
            }
        }
        #expect(threads.allSatisfy { waits(for: $0) })
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 2)
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.split(separator: "\n").count == 4, "\(report)")
        #expect(report.contains("<- refused"))
    }

    @Test("a queue block locking a condition lock held by the thread syncing onto that queue")
    func blockLocksWhatTheSyncerHolds() {
        let tag = unique("block-lock")
        let queue = CQueue.create("\(tag).q")
        let lock = CLock("\(tag).lock")
        defer {
            queue.release()
            _ = lock.destroy()
        }
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let blockDone = DispatchSemaphore(value: 0)
        queue.async {
            _ = meet.arrive()
            let status = lock.lock()
            outcomes.record("block-lock", status)
            if status == 0 {
                outcomes.didRun("block")
                _ = lock.unlock()
            }
            blockDone.signal()
        }
        let syncer = spawn {
            name("syncer")
            #expect(lock.lock() == 0)
            _ = meet.arrive()
            let status = queue.sync { outcomes.didRun("sync") }
            outcomes.record("sync", status)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: syncer) && waits(for: blockDone))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 1)
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.contains("condition lock \"\(tag).lock\""))
        #expect(report.contains("serial queue \"\(tag).q\""))
    }

    @Test("two condition locks taken in opposite orders: one lock refused")
    func twoLocksOppositeOrders() {
        let tag = unique("two-locks")
        let first = CLock("\(tag).first")
        let second = CLock("\(tag).second")
        defer {
            _ = first.destroy()
            _ = second.destroy()
        }
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        func taker(_ who: String, _ outer: CLock, _ inner: CLock) -> DispatchSemaphore {
            spawn {
                name(who)
                #expect(outer.lock() == 0)
                _ = meet.arrive()
                let status = inner.lock()
                outcomes.record(who, status)
                if status == 0 {
                    outcomes.didRun(who)
                    #expect(inner.unlock() == 0)
                }
                #expect(outer.unlock() == 0)
            }
        }
        let one = taker("taker-1", first, second)
        let two = taker("taker-2", second, first)
        #expect(waits(for: one) && waits(for: two))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 1)
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.hasPrefix("QueueKit: deadlock refused (EDEADLK): qk_condlock_lock would wait in a cycle"))
        #expect(report.contains("; waits in qk_condlock_lock(condition lock \"\(tag)."))
    }

    @Test("a reader block of a concurrent queue waiting for a lock held by the thread doing barrier_sync")
    func readerWaitsForBarrierSyncer() {
        let tag = unique("reader-barrier")
        let queue = CQueue.create("\(tag).c", QK_QUEUE_CONCURRENT)
        let lock = CLock("\(tag).lock")
        defer {
            queue.release()
            _ = lock.destroy()
        }
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let readerDone = DispatchSemaphore(value: 0)
        queue.async {
            _ = meet.arrive()
            let status = lock.lock()
            outcomes.record("reader", status)
            if status == 0 {
                outcomes.didRun("reader")
                _ = lock.unlock()
            }
            readerDone.signal()
        }
        let barrier = spawn {
            name("barrier")
            #expect(lock.lock() == 0)
            _ = meet.arrive()
            let status = queue.barrierSync { outcomes.didRun("barrier") }
            outcomes.record("barrier", status)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: barrier) && waits(for: readerDone))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 1)
        #expect(ReportLog.shared.reports(mentioning: tag).count == 1)
    }

    @Test("a DB-queue reader syncing onto a queue whose block writes the DB queue")
    func readerSyncsOntoAWritingBlock() {
        let tag = unique("db-reader")
        let db = tag.withCString { qk_dbqueue_create($0) }!
        let queue = CQueue.create("\(tag).q")
        defer {
            queue.release()
            _ = qk_dbqueue_destroy(db)
        }
        let handle = Unchecked(db)
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let reader = spawn {
            name("db-reader")
            outcomes.record(
                "read",
                callC({
                    _ = meet.arrive()
                    outcomes.record("read→sync", queue.sync { outcomes.didRun("sync") })
                }) { qk_dbqueue_read(handle.value, $0, $1) })
        }
        let writer = spawn {
            name("db-writer")
            outcomes.record(
                "block",
                queue.sync {
                    _ = meet.arrive()
                    outcomes.record(
                        "block→write", callC({ outcomes.didRun("write") }) { qk_dbqueue_write(handle.value, $0, $1) })
                })
        }
        #expect(waits(for: reader) && waits(for: writer))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 1)
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.contains("DB queue \"\(tag)\""), "\(report)")
        #expect(report.contains("serial queue \"\(tag).q\""), "\(report)")
    }

    @Test(
        "a block flushing a DB queue whose pending async write syncs back onto that block's queue: the write still runs"
    )
    func flushWhoseWriteSyncsBack() {
        let tag = unique("db-flush")
        let db = tag.withCString { qk_dbqueue_create($0) }!
        let queue = CQueue.create("\(tag).q")
        defer {
            queue.release()
            _ = qk_dbqueue_destroy(db)
        }
        let handle = Unchecked(db)
        let outcomes = Outcomes()
        let writeDone = DispatchSemaphore(value: 0)
        let blockThread = spawn {
            name("flusher")
            outcomes.record(
                "block",
                queue.sync {
                    outcomes.record(
                        "write_async",
                        callCAsync({
                            outcomes.record("write→sync", queue.sync { outcomes.didRun("inner sync") })
                            outcomes.didRun("async write")
                            writeDone.signal()
                        }) { qk_dbqueue_write_async(handle.value, $0, $1) })
                    outcomes.record("flush", qk_dbqueue_flush(handle.value))
                })
        }
        #expect(waits(for: blockThread) && waits(for: writeDone))
        #expect(qk_dbqueue_flush(db) == 0)
        let statuses = outcomes.all
        #expect(outcomes.refusedCount == 1, "statuses: \(statuses)")
        #expect(outcomes.runs.contains("async write"), "nothing lost: the write ran")
        #expect(statuses["flush"] == EDEADLK || statuses["write→sync"] == EDEADLK)
        #expect(ReportLog.shared.reports(mentioning: tag).count == 1)
    }
}
