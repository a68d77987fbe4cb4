// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
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
