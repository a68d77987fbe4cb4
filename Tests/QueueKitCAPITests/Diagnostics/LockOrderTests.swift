// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The lock-order witness through the C API as C programs call it. Each
// scenario takes its orders on named threads, one after the other (the two orders of a cycle at
// different times: nothing ever waits), and counts the reports that name its own labels (other
// suites run alongside and take orders of their own). The abort mode, the environment variable
// and fork() are tested by the C program Tests/Reliability/lock_order.c.

@Suite("Lock-order witness", .serialized)
final class LockOrderTests {
    init() {
        Diagnostics.onLockOrderViolation { OrderLog.shared.append($0) }
        #expect(qk_set_lock_order_mode(Int32(QK_LOCK_ORDER_REPORT.rawValue)) == 0)
    }

    deinit {
        _ = qk_set_lock_order_mode(Int32(QK_LOCK_ORDER_OFF.rawValue))
        Diagnostics.onLockOrderViolation(nil)
    }

    // MARK: Cycles reported once

    @Test(
        "two locks in opposite orders at different times: exactly one report, naming both labels, both threads and the closing call"
    )
    func twoLocksOppositeOrders() {
        let tag = unique("two-locks")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        defer {
            _ = a.destroy()
            _ = b.destroy()
        }
        onThread("lo-first") {
            #expect(a.lock() == 0)
            #expect(b.lock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-second") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0) // closes the cycle: reported, and the call still succeeds
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        // The same orders again, on other threads: no second report.
        onThread("lo-again") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.lock() == 0)
            #expect(b.lock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        guard let report = reports.first else { return }
        let lines = report.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(
            lines[0]
                == "QueueKit: lock-order inversion (potential deadlock): qk_condlock_lock(condition lock \"\(tag).a\") closes a cycle of 2"
        )
        #expect(
            lines[1].hasPrefix(
                "  condition lock \"\(tag).a\" -> condition lock \"\(tag).b\": qk_condlock_lock, first by thread "))
        #expect(lines[1].contains("\"lo-first\""))
        #expect(!lines[1].hasSuffix("<- new"))
        #expect(
            lines[2].hasPrefix(
                "  condition lock \"\(tag).b\" -> condition lock \"\(tag).a\": qk_condlock_lock, first by thread "))
        #expect(lines[2].contains("\"lo-second\""))
        #expect(lines[2].hasSuffix("  <- new"))
        // Call sites: the caller's return address, outside QueueKit.
        #expect(lines[1].contains(" at "))
        #expect(!lines[1].contains("$s8QueueKit"))
        #expect(report.hasSuffix("\n"))
    }

    @Test("a three-cycle: reported once, by the edge that closes it, as a cycle of 3")
    func threeCycle() {
        let tag = unique("three")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        let c = CLock("\(tag).c")
        defer {
            _ = a.destroy()
            _ = b.destroy()
            _ = c.destroy()
        }
        for (first, second) in [(a, b), (b, c)] {
            onThread("lo-pair") {
                #expect(first.lock() == 0)
                #expect(second.lock() == 0)
                #expect(second.unlock() == 0)
                #expect(first.unlock() == 0)
            }
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-closer") {
            #expect(c.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(c.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("closes a cycle of 3") == true)
        #expect(reports.first?.split(separator: "\n").count == 4)
    }

    @Test("queues: a lock taken inside a block, and a sync onto a queue that targets that block's queue")
    func queuesThroughTargets() {
        let tag = unique("queues")
        let outer = CQueue.create("\(tag).outer")
        let inner = CQueue.create("\(tag).inner", target: outer)
        let lock = CLock("\(tag).lock")
        defer {
            inner.release()
            outer.release()
            _ = lock.destroy()
        }
        onThread("lo-block") {
            ok(
                outer.sync {
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-sync") {
            #expect(lock.lock() == 0)
            // Asks for inner and, through its target, for outer: closes lock -> outer -> lock.
            #expect(inner.sync {} == 0)
            #expect(lock.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        guard let report = reports.first else { return }
        #expect(report.contains("serial queue \"\(tag).outer\" -> condition lock \"\(tag).lock\": qk_condlock_lock"))
        #expect(report.contains("condition lock \"\(tag).lock\" -> serial queue \"\(tag).outer\": qk_queue_sync"))
    }

    @Test("holding passes through sync hops: a lock taken in a block synced from another queue's block")
    func syncHops() {
        let tag = unique("hops")
        let first = CQueue.create("\(tag).first")
        let second = CQueue.create("\(tag).second")
        let lock = CLock("\(tag).lock")
        defer {
            first.release()
            second.release()
            _ = lock.destroy()
        }
        onThread("lo-hop") {
            ok(
                first.sync {
                    ok(
                        second.sync {
                            #expect(lock.lock() == 0)
                            #expect(lock.unlock() == 0)
                        })
                })
        }
        onThread("lo-back") {
            #expect(lock.lock() == 0)
            #expect(first.perform {} == 0) // not inline here: an edge
            #expect(lock.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("qk_queue_perform") == true)
        #expect(reports.first?.contains("serial queue \"\(tag).first\" -> condition lock \"\(tag).lock\"") == true)
    }

    @Test("a DB queue's write against a lock: the report names the modes, write and read")
    func dbWriteAgainstLock() {
        let tag = unique("db")
        let db = CDBQueue("\(tag).db")
        let cache = CLock("\(tag).cache")
        defer {
            #expect(db.destroy() == 0)
            _ = cache.destroy()
        }
        onThread("saver") {
            ok(
                db.write {
                    #expect(cache.lock() == 0)
                    #expect(cache.unlock() == 0)
                })
        }
        onThread("ui") {
            #expect(cache.lock() == 0)
            #expect(db.read {} == 0)
            #expect(cache.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        guard let report = reports.first else { return }
        let lines = report.split(separator: "\n").map(String.init)
        #expect(
            lines.first
                == "QueueKit: lock-order inversion (potential deadlock): qk_dbqueue_read(DB queue \"\(tag).db\") closes a cycle of 2"
        )
        #expect(lines.count == 3)
        guard lines.count == 3 else { return }
        #expect(
            lines[1].hasPrefix(
                "  DB queue \"\(tag).db\" (write) -> condition lock \"\(tag).cache\": qk_condlock_lock, first by thread "
            ))
        #expect(lines[1].contains("\"saver\""))
        #expect(
            lines[2].hasPrefix(
                "  condition lock \"\(tag).cache\" -> DB queue \"\(tag).db\" (read): qk_dbqueue_read, first by thread ")
        )
        #expect(lines[2].contains("\"ui\""))
        #expect(lines[2].hasSuffix("<- new"))
    }

    @Test(
        "reads of an unwritten DB queue do not conflict (0), until its first write reports the cycle (1), on the writer's thread"
    )
    func readReadUntilFirstWrite() {
        let tag = unique("read-read")
        let db = CDBQueue("\(tag).db")
        let lock = CLock("\(tag).lock")
        defer {
            #expect(db.destroy() == 0)
            _ = lock.destroy()
        }
        onThread("lo-reader") {
            ok(
                db.read {
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        onThread("lo-locker") {
            #expect(lock.lock() == 0)
            #expect(db.read {} == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-writer") { #expect(db.write {} == 0) }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(
            reports.first?.hasPrefix(
                "QueueKit: lock-order inversion (potential deadlock): qk_dbqueue_write(DB queue \"\(tag).db\") closes a cycle of 2"
            ) == true)
        #expect(reports.first?.contains("DB queue \"\(tag).db\" (read) -> condition lock") == true)
        // Later writes report nothing more.
        onThread("lo-writer-2") { #expect(db.write {} == 0) }
        #expect(OrderLog.shared.reports(mentioning: tag).count == 1)
    }

    @Test("at most one report per call: a first write that closes a remembered cycle and a new one reports once")
    func oneReportPerCall() {
        let tag = unique("one-per-call")
        let db = CDBQueue("\(tag).db")
        let first = CLock("\(tag).first")
        let second = CLock("\(tag).second")
        defer {
            #expect(db.destroy() == 0)
            _ = first.destroy()
            _ = second.destroy()
        }
        // Remembered: reads of db and `first` in both orders.
        onThread("lo-r1") {
            ok(
                db.read {
                    #expect(first.lock() == 0)
                    #expect(first.unlock() == 0)
                })
        }
        onThread("lo-r2") {
            #expect(first.lock() == 0)
            #expect(db.read {} == 0)
            #expect(first.unlock() == 0)
        }
        // A read of db, then `second`: the first write below, holding `second`, closes this too.
        onThread("lo-r3") {
            ok(
                db.read {
                    #expect(second.lock() == 0)
                    #expect(second.unlock() == 0)
                })
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-w") {
            #expect(second.lock() == 0)
            #expect(db.write {} == 0)
            #expect(second.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("qk_dbqueue_write(DB queue \"\(tag).db\")") == true)
    }

    @Test("a write_async marks the DB queue written too: a later read-read cycle is reported at once")
    func writeAsyncMarksWritten() {
        let tag = unique("async-written")
        let db = CDBQueue("\(tag).db")
        let lock = CLock("\(tag).lock")
        defer {
            #expect(db.destroy() == 0)
            _ = lock.destroy()
        }
        #expect(db.writeAsync {} == 0)
        #expect(db.flush() == 0)
        onThread("lo-reader") {
            ok(
                db.read {
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        onThread("lo-locker") {
            #expect(lock.lock() == 0)
            #expect(db.read {} == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).count == 1)
    }

    @Test("a concurrent queue's shared blocks conflict once it has had a barrier")
    func concurrentQueueBarrier() {
        let tag = unique("concurrent")
        let pool = CQueue.create("\(tag).pool", QK_QUEUE_CONCURRENT)
        let lock = CLock("\(tag).lock")
        defer {
            pool.release()
            _ = lock.destroy()
        }
        onThread("lo-shared") {
            ok(
                pool.sync {
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        onThread("lo-locker") {
            #expect(lock.lock() == 0)
            #expect(pool.sync {} == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-barrier") { #expect(pool.barrierSync {} == 0) }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("qk_queue_barrier_sync(concurrent queue \"\(tag).pool\")") == true)
        #expect(reports.first?.contains("concurrent queue \"\(tag).pool\" (shared) -> condition lock") == true)
    }

    @Test("a timed wait is an edge, marked (timed); a deadline already past is not")
    func timedEdges() {
        let tag = unique("timed")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        let c = CLock("\(tag).c")
        defer {
            _ = a.destroy()
            _ = b.destroy()
            _ = c.destroy()
        }
        onThread("lo-timed") {
            #expect(a.lock() == 0)
            #expect(b.lock(until: qk_now_ns() + 5_000_000_000) == 0)
            #expect(c.lock(until: 0) == 0) // past deadline: tries once, no edge
            #expect(c.unlock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-plain") {
            #expect(c.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(c.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-plain-2") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(
            reports.first?.contains(
                "condition lock \"\(tag).a\" -> condition lock \"\(tag).b\": qk_condlock_lock_until (timed), first by")
                == true)
    }

    @Test(
        "test waits: lock_if and await are edges (await waits to take its lock back); a real await keeps the held set whole"
    )
    func testWaits() {
        let tag = unique("test-waits")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        let c = CLock("\(tag).c")
        let d = CLock("\(tag).d")
        defer { for lock in [a, b, c, d] { _ = lock.destroy() } }
        let always: qk_condition_test_t = { _, _ in true }
        let isOne: qk_condition_test_t = { condition, _ in condition == 1 }
        // lock_if while holding a: a -> b; then b -> a closes it.
        onThread("lo-if") {
            #expect(a.lock() == 0)
            #expect(qk_condlock_lock_if(b.raw, always, nil) == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-if-back") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        let ifReports = OrderLog.shared.reports(mentioning: "\(tag).b")
        #expect(ifReports.count == 1)
        #expect(
            ifReports.first?.contains(
                "condition lock \"\(tag).a\" -> condition lock \"\(tag).b\": qk_condlock_lock_if,") == true)
        // await while holding c (both taken by try forms, which are no edges): c -> d.
        onThread("lo-await") {
            #expect(qk_condlock_trylock(d.raw) == 0)
            #expect(qk_condlock_trylock(c.raw) == 0)
            #expect(qk_condlock_await(d.raw, always, nil) == 0)
            #expect(c.unlock() == 0)
            #expect(d.unlock() == 0)
        }
        onThread("lo-await-back") {
            #expect(d.lock() == 0)
            #expect(c.lock() == 0)
            #expect(c.unlock() == 0)
            #expect(d.unlock() == 0)
        }
        let awaitReports = OrderLog.shared.reports(mentioning: "\(tag).d")
        #expect(awaitReports.count == 1)
        #expect(
            awaitReports.first?.contains(
                "condition lock \"\(tag).c\" -> condition lock \"\(tag).d\": qk_condlock_await,") == true)
        // A real wait: released, handed back, released again: nothing left held.
        let waiting = DispatchSemaphore(value: 0)
        let held = Shared(-1)
        let waiter = spawn {
            #expect(a.lock() == 0)
            waiting.signal()
            #expect(qk_condlock_await(a.raw, isOne, nil) == 0)
            #expect(a.unlock() == 0)
            held.value = LockOrder.heldByCurrentThread
        }
        #expect(waits(for: waiting))
        // Taken once the waiter's await released it (bounded).
        #expect(a.lock(until: qk_now_ns() + 10_000_000_000) == 0)
        #expect(qk_condlock_unlock_with(a.raw, 1) == 0)
        #expect(waits(for: waiter))
        #expect(held.value == 0)
    }
}
