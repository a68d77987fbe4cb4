// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import Testing

@testable import QueueKit

// The lock-order witness through the C API as C programs call it. Each
// scenario takes its orders on named threads, one after the other (the two orders of a cycle at
// different times: nothing ever waits), and counts the reports that name its own labels (other
// suites run alongside and take orders of their own). The abort mode, the environment variable
// and fork() are tested by the C program Tests/LockOrder/lock_order.c.

/// The lock-order reports received, by the threads whose calls closed a cycle.
final class OrderLog: @unchecked Sendable {
    static let shared = OrderLog()
    private let lock = NSLock()
    private var reports: [String] = []

    func append(_ report: String) { lock.withLock { reports.append(report) } }
    func reports(mentioning marker: String) -> [String] { lock.withLock { reports.filter { $0.contains(marker) } } }
}

/// Runs `body` on a new thread named `name` and waits for it (bounded).
func onThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let finished = finishes {
        _ = qkshim_thread_set_name(name)
        body()
    }
    #expect(finished, "thread \(name) did not finish")
}

/// Expects a call's status to be 0 (usable around closures that expect things themselves).
func ok(_ status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(status == 0, sourceLocation: sourceLocation)
}

/// A DB queue handle through the C API.
private struct WDB: @unchecked Sendable {
    let raw: OpaquePointer
    init(_ label: String) { raw = qk_dbqueue_create(label)! }
    @discardableResult func read(_ body: () -> Void) -> Int32 { callC(body) { qk_dbqueue_read(raw, $0, $1) } }
    @discardableResult func write(_ body: () -> Void) -> Int32 { callC(body) { qk_dbqueue_write(raw, $0, $1) } }
    @discardableResult func writeAsync(_ body: @escaping @Sendable () -> Void) -> Int32 {
        callCAsync(body) { qk_dbqueue_write_async(raw, $0, $1) }
    }
    func flush() -> Int32 { qk_dbqueue_flush(raw) }
    func destroy() -> Int32 { qk_dbqueue_destroy(raw) }
}

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
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
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
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        let c = DLock("\(tag).c")
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
        let lock = DLock("\(tag).lock")
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
        let lock = DLock("\(tag).lock")
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
        let db = WDB("\(tag).db")
        let cache = DLock("\(tag).cache")
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
        let db = WDB("\(tag).db")
        let lock = DLock("\(tag).lock")
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
        let db = WDB("\(tag).db")
        let first = DLock("\(tag).first")
        let second = DLock("\(tag).second")
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
        let db = WDB("\(tag).db")
        let lock = DLock("\(tag).lock")
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
        let lock = DLock("\(tag).lock")
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
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        let c = DLock("\(tag).c")
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
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        let c = DLock("\(tag).c")
        let d = DLock("\(tag).d")
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

    // MARK: No report

    @Test("consistent orders on many threads: no report")
    func consistentOrders() {
        let tag = unique("consistent")
        let locks = (0..<4).map { DLock("\(tag).\($0)") }
        let db = WDB("\(tag).db")
        let queue = CQueue.create("\(tag).queue")
        defer {
            for lock in locks { _ = lock.destroy() }
            #expect(db.destroy() == 0)
            queue.release()
        }
        let threads = (0..<8).map { index in
            spawn {
                _ = qkshim_thread_set_name("lo-ordered-\(index)")
                for round in 0..<200 {
                    // Always queue, then DB, then locks by index (skipping some: still one order).
                    ok(
                        queue.sync {
                            ok(
                                db.write {
                                    for (position, lock) in locks.enumerated() where (round + position) % 3 != 0 {
                                        #expect(lock.lock() == 0)
                                    }
                                    for (position, lock) in locks.enumerated().reversed()
                                    where (round + position) % 3 != 0 { #expect(lock.unlock() == 0) }
                                })
                        })
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test(
        "inline nesting (read/write inside a write of the same DB queue, perform on the current queue) records no edge")
    func inlineNesting() {
        let tag = unique("inline")
        let db = WDB("\(tag).db")
        let queue = CQueue.create("\(tag).queue")
        let lock = DLock("\(tag).lock")
        defer {
            #expect(db.destroy() == 0)
            queue.release()
            _ = lock.destroy()
        }
        onThread("lo-inline") {
            ok(
                db.write {
                    #expect(lock.lock() == 0)
                    #expect(db.write {} == 0)
                    #expect(db.read {} == 0)
                    #expect(lock.unlock() == 0)
                })
            ok(
                queue.sync {
                    #expect(lock.lock() == 0)
                    #expect(queue.perform {} == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("try forms record no edge")
    func tryForms() {
        let tag = unique("try")
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        defer {
            _ = a.destroy()
            _ = b.destroy()
        }
        onThread("lo-try") {
            #expect(a.lock() == 0)
            #expect(qk_condlock_trylock(b.raw) == 0)
            #expect(b.unlock() == 0)
            #expect(qk_condlock_trylock_when(b.raw, 0) == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-plain") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("async submissions record no edge")
    func asyncSubmissions() {
        let tag = unique("async")
        let queue = CQueue.create("\(tag).queue")
        let lock = DLock("\(tag).lock")
        let done = DispatchSemaphore(value: 0)
        defer {
            queue.release()
            _ = lock.destroy()
        }
        onThread("lo-async") {
            #expect(lock.lock() == 0)
            #expect(queue.async { done.signal() } == 0)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: done))
        onThread("lo-block") {
            ok(
                queue.sync {
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("mode off: nothing witnessed, nothing reported; qk_lock_order_mode says so; a bad mode is EINVAL")
    func modeOff() {
        let tag = unique("off")
        #expect(qk_set_lock_order_mode(3) == EINVAL)
        #expect(qk_set_lock_order_mode(-1) == EINVAL)
        #expect(qk_lock_order_mode() == Int32(QK_LOCK_ORDER_REPORT.rawValue))
        #expect(qk_set_lock_order_mode(Int32(QK_LOCK_ORDER_OFF.rawValue)) == 0)
        #expect(qk_lock_order_mode() == Int32(QK_LOCK_ORDER_OFF.rawValue))
        #expect(Diagnostics.lockOrder == .off)
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        defer {
            _ = a.destroy()
            _ = b.destroy()
        }
        onThread("lo-off-1") {
            #expect(a.lock() == 0)
            #expect(b.lock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-off-2") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        #expect(LockOrder.edgeCount == 0)
        // On again: an empty graph, so the first order alone reports nothing.
        Diagnostics.lockOrder = .report
        #expect(Diagnostics.lockOrder == .report)
        onThread("lo-on") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("objects held when the witness is turned on are not witnessed")
    func heldWhenTurnedOn() {
        let tag = unique("held-at-on")
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        defer {
            _ = a.destroy()
            _ = b.destroy()
        }
        Diagnostics.lockOrder = .off
        onThread("lo-held") {
            #expect(a.lock() == 0)
            Diagnostics.lockOrder = .report
            #expect(b.lock() == 0) // a was taken while off: no edge a -> b
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-reverse") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("destroyed objects are forgotten: a new object (also at the same address) has no history")
    func destroyedObjects() {
        let tag = unique("destroyed")
        let a = DLock("\(tag).a")
        defer { _ = a.destroy() }
        for round in 0..<50 {
            let b = DLock("\(tag).b\(round)")
            onThread("lo-before") {
                #expect(a.lock() == 0)
                #expect(b.lock() == 0)
                #expect(b.unlock() == 0)
                #expect(a.unlock() == 0)
            }
            #expect(b.destroy() == 0)
            let db = WDB("\(tag).db\(round)")
            onThread("lo-db") {
                ok(
                    db.write {
                        #expect(a.lock() == 0)
                        #expect(a.unlock() == 0)
                    })
            }
            #expect(db.destroy() == 0)
            let queue = CQueue.create("\(tag).q\(round)")
            onThread("lo-queue") {
                ok(
                    queue.sync {
                        #expect(a.lock() == 0)
                        #expect(a.unlock() == 0)
                    })
            }
            queue.release()
            // New objects, often at the addresses just freed: the reverse orders are no cycle.
            let b2 = DLock("\(tag).b\(round)'")
            let db2 = WDB("\(tag).db\(round)'")
            let queue2 = CQueue.create("\(tag).q\(round)'")
            onThread("lo-after") {
                #expect(b2.lock() == 0)
                #expect(a.lock() == 0)
                #expect(a.unlock() == 0)
                #expect(b2.unlock() == 0)
                #expect(a.lock() == 0)
                #expect(db2.write {} == 0)
                #expect(queue2.sync {} == 0)
                #expect(a.unlock() == 0)
            }
            #expect(b2.destroy() == 0)
            #expect(db2.destroy() == 0)
            queue2.release()
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
    }

    // MARK: The handler

    @Test("the handler's own calls are not witnessed, and one that would wait returns EDEADLK at once")
    func handlerCalls() {
        let tag = unique("handler")
        let a = DLock("\(tag).a")
        let b = DLock("\(tag).b")
        let free = DLock("\(tag).free")
        let busy = DLock("\(tag).busy")
        let c = DLock("\(tag).c")
        let queue = CQueue.create("\(tag).queue")
        let db = WDB("\(tag).db")
        defer {
            _ = a.destroy()
            _ = b.destroy()
            _ = free.destroy()
            _ = busy.destroy()
            _ = c.destroy()
            queue.release()
            #expect(db.destroy() == 0)
        }
        let statuses = Shared<[Int32]>([])
        Diagnostics.onLockOrderViolation { report in
            OrderLog.shared.append(report)
            guard report.contains(tag) else { return }
            // A free lock is taken (no wait); a held one, a queue sync and a DB call would wait.
            var seen = [free.lock(), free.unlock(), busy.lock(), queue.sync {}, db.read {}, db.write {}]
            // Not witnessed: no edge from a and b (held by this thread) to c.
            seen.append(c.lock())
            seen.append(c.unlock())
            statuses.update { $0 += seen }
        }
        defer { Diagnostics.onLockOrderViolation { OrderLog.shared.append($0) } }
        #expect(busy.lock() == 0)
        onThread("lo-h1") {
            #expect(a.lock() == 0)
            #expect(b.lock() == 0)
            #expect(b.unlock() == 0)
            #expect(a.unlock() == 0)
        }
        onThread("lo-h2") {
            #expect(b.lock() == 0)
            #expect(a.lock() == 0)
            #expect(a.unlock() == 0)
            #expect(b.unlock() == 0)
        }
        #expect(busy.unlock() == 0)
        onThread("lo-h3") {
            #expect(c.lock() == 0)
            #expect(b.lock() == 0)
            #expect(b.unlock() == 0)
            #expect(c.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).count == 1)
        #expect(statuses.value == [0, 0, EDEADLK, EDEADLK, EDEADLK, EDEADLK, 0, 0])
    }

    @Test("the Swift API: Diagnostics.lockOrder and onLockOrderViolation, with ConditionLock and DBQueue")
    func swiftAPI() throws {
        let tag = unique("swift")
        let lock = ConditionLock(condition: 0, name: "\(tag).lock")
        let db = try DBQueue(label: "\(tag).db")
        let box = Unchecked((lock, db))
        onThread("lo-swift-1") { try? box.value.1.write { try? box.value.0.withLock {} } }
        onThread("lo-swift-2") { try? box.value.0.withLock { try? box.value.1.read {} } }
        #expect(OrderLog.shared.reports(mentioning: tag).count == 1)
        Diagnostics.lockOrder = .abort
        #expect(qk_lock_order_mode() == Int32(QK_LOCK_ORDER_ABORT.rawValue))
        Diagnostics.lockOrder = .report
        #expect(Diagnostics.LockOrderMode.allCases.map(\.rawValue) == [0, 1, 2])
    }

    // MARK: Limits

    @Test("the graph keeps a topological order through many edges, insertions in every order")
    func topologicalOrder() {
        let tag = unique("order")
        let locks = (0..<24).map { DLock("\(tag).\($0)") }
        defer { for lock in locks { _ = lock.destroy() } }
        // Edges i -> j for i < j, inserted in a scrambled order: never a cycle.
        var pairs: [(Int, Int)] = []
        for i in 0..<locks.count { for j in (i + 1)..<locks.count { pairs.append((i, j)) } }
        var generator = SystemRandomNumberGenerator()
        pairs.shuffle(using: &generator)
        let order = pairs
        onThread("lo-order") {
            for (i, j) in order {
                #expect(locks[i].lock() == 0)
                #expect(locks[j].lock() == 0)
                #expect(locks[j].unlock() == 0)
                #expect(locks[i].unlock() == 0)
            }
        }
        #expect(LockOrder.orderIsTopological)
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-back") {
            #expect(locks[23].lock() == 0)
            #expect(locks[0].lock() == 0)
            #expect(locks[0].unlock() == 0)
            #expect(locks[23].unlock() == 0)
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("closes a cycle of 2") == true) // the shortest: 0 -> 23 -> 0
        #expect(LockOrder.orderIsTopological)
    }

    @Test("more than 65,536 edges turn the witness off, freeing the graph")
    func edgeLimit() {
        let tag = unique("limit")
        let holder = DLock("\(tag).holder")
        let count = LockOrderGraph.edgeLimit + 1
        let locks = (0..<count).map { _ in DLock("\(tag).n") }
        defer {
            _ = holder.destroy()
            for lock in locks { _ = lock.destroy() }
        }
        let modes = Shared<[Int32]>([])
        LockOrder.recordsCallSites = false
        defer { LockOrder.recordsCallSites = true }
        onThread("lo-limit") {
            #expect(holder.lock() == 0)
            for lock in locks {
                #expect(lock.lock() == 0)
                #expect(lock.unlock() == 0)
            }
            modes.value = [qk_lock_order_mode()]
            #expect(holder.unlock() == 0)
        }
        #expect(modes.value == [Int32(QK_LOCK_ORDER_OFF.rawValue)])
        #expect(LockOrder.edgeCount == 0)
        #expect(qk_set_lock_order_mode(Int32(QK_LOCK_ORDER_REPORT.rawValue)) == 0)
    }

    @Test("more than 64 objects held: deeper ones are not witnessed, the rest still is")
    func deepNesting() {
        let tag = unique("deep")
        let locks = (0..<70).map { DLock("\(tag).\($0)") }
        defer { for lock in locks { _ = lock.destroy() } }
        onThread("lo-deep") {
            for lock in locks { #expect(lock.lock() == 0) }
            #expect(LockOrder.heldByCurrentThread == LockOrderThread.capacity)
            for lock in locks.reversed() { #expect(lock.unlock() == 0) }
            #expect(LockOrder.heldByCurrentThread == 0)
        }
        onThread("lo-deep-back") {
            #expect(locks[1].lock() == 0)
            #expect(locks[0].lock() == 0)
            #expect(locks[0].unlock() == 0)
            #expect(locks[1].unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).count == 1)
    }
}
