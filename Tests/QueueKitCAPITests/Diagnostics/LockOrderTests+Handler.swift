// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The violation handler (its own calls, the Swift API) and the limits of the graph (many edges,
// more edges than it keeps, more objects held than it tracks).
extension LockOrderTests {
    @Test("the handler's own calls are not witnessed, and one that would wait returns EDEADLK at once")
    func handlerCalls() {
        let tag = unique("handler")
        let a = CLock("\(tag).a")
        let b = CLock("\(tag).b")
        let free = CLock("\(tag).free")
        let busy = CLock("\(tag).busy")
        let c = CLock("\(tag).c")
        let queue = CQueue.create("\(tag).queue")
        let db = CDBQueue("\(tag).db")
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
        let locks = (0..<24).map { CLock("\(tag).\($0)") }
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
        let holder = CLock("\(tag).holder")
        let count = LockOrderGraph.edgeLimit + 1
        let locks = (0..<count).map { _ in CLock("\(tag).n") }
        defer {
            _ = holder.destroy()
            for lock in locks { _ = lock.destroy() }
        }
        let modes = Shared<[Int32]>([])
        LockOrder.recordsCallSites = false
        defer { LockOrder.recordsCallSites = true }
        // 65,537 acquisitions, each recording an edge: seconds under ThreadSanitizer on a loaded
        // machine. The bound only turns a hang into a failure.
        onThread("lo-limit", within: 300) {
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
        let locks = (0..<70).map { CLock("\(tag).\($0)") }
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
