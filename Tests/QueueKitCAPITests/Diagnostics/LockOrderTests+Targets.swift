// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Orders through a concurrent target queue: a serial queue's blocks run on its concurrent target
// (shared), so a barrier of that target, which holds it alone, conflicts with them.
extension LockOrderTests {
    @Test("a sync onto a serial queue whose concurrent target's barrier takes the syncer's lock: reported once")
    func orderThroughConcurrentTarget() {
        let tag = unique("lo-target")
        let scenario = TargetScenario(tag)
        defer { scenario.release() }
        let (concurrent, serial, lock) = (scenario.concurrent, scenario.serial, scenario.lock)
        onThread("lo-syncer") {
            #expect(lock.lock() == 0)
            // Asks for the serial queue and, through its target, for the concurrent one (shared).
            ok(serial.sync {})
            #expect(lock.unlock() == 0)
        }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-barrier") {
            ok(
                concurrent.barrierSync {
                    // Holding the concurrent queue alone: closes lock -> c (shared) -> lock.
                    #expect(lock.lock() == 0)
                    #expect(lock.unlock() == 0)
                })
        }
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1, "\(reports)")
        guard let report = reports.first else { return }
        #expect(report.contains("condition lock \"\(tag).lock\" -> concurrent queue \"\(tag).c\""), "\(report)")
    }
}

// Calls that take the idle path (the queue held without dispatch) record their edges as the
// calls through dispatch do.
extension LockOrderTests {
    @Test("two idle serial queues synced into each other in opposite orders at different times: reported once")
    func idlePathEdges() {
        let tag = unique("lo-idle")
        let a = CQueue.create("\(tag).a")
        let b = CQueue.create("\(tag).b")
        defer {
            a.release()
            b.release()
        }
        // Which path each inner call took: the idle word of its queue, read inside its block.
        let idle = Shared(0)
        @Sendable func countIdle(_ queue: CQueue) {
            let object = Unmanaged<Queue>.fromOpaque(UnsafeRawPointer(queue.handle!)).takeUnretainedValue()
            let word = qkshim_idle_load(object.idleWord)
            if word & (1 << 24) != 0 && word & 0xFF_FFFF == qkshim_thread_id() { idle.update { $0 += 1 } }
        }
        onThread("lo-idle-first") { ok(a.sync { ok(b.sync { countIdle(b) }) }) }
        #expect(OrderLog.shared.reports(mentioning: tag).isEmpty)
        onThread("lo-idle-second") { ok(b.sync { ok(a.sync { countIdle(a) }) }) }
        #expect(idle.value == 2)
        let reports = OrderLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        #expect(reports.first?.contains("lo-idle-second") == true)
    }
}
