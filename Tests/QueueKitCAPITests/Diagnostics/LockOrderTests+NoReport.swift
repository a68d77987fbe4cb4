// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Orders that must not be reported: consistent orders, calls that do not wait (try forms, async
// submissions), the witness turned off or turned on late, and objects destroyed and made anew.
extension LockOrderTests {
    @Test("consistent orders on many threads: no report")
    func consistentOrders() {
        let tag = unique("consistent")
        let locks = (0..<4).map { CLock("\(tag).\($0)") }
        let db = CDBQueue("\(tag).db")
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
        let db = CDBQueue("\(tag).db")
        let queue = CQueue.create("\(tag).queue")
        let lock = CLock("\(tag).lock")
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
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
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
        let lock = CLock("\(tag).lock")
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
        // Its bit of the slow paths goes with it (nothing else sets one in this process).
        #expect(SlowPaths.areOff)
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
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
        #expect(!SlowPaths.areOff)
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
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
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
        let a = CLock("\(tag).a")
        defer { _ = a.destroy() }
        for round in 0..<50 {
            let b = CLock("\(tag).b\(round)")
            onThread("lo-before") {
                #expect(a.lock() == 0)
                #expect(b.lock() == 0)
                #expect(b.unlock() == 0)
                #expect(a.unlock() == 0)
            }
            #expect(b.destroy() == 0)
            let db = CDBQueue("\(tag).db\(round)")
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
            let b2 = CLock("\(tag).b\(round)'")
            let db2 = CDBQueue("\(tag).db\(round)'")
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
}
