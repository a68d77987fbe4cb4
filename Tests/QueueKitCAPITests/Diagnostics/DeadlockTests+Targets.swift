// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Rings through a concurrent target queue: a serial queue's blocks run on its concurrent
// target, so a barrier of that target holds them back just as a serial target would.

/// A concurrent queue, a serial queue that targets it and a condition lock, labelled by `tag`
/// (the deadlock detector's and the lock-order witness's target scenarios).
struct TargetScenario {
    let concurrent: CQueue
    let serial: CQueue
    let lock: CLock

    init(_ tag: String) {
        concurrent = CQueue.create("\(tag).c", QK_QUEUE_CONCURRENT)
        serial = CQueue.create("\(tag).x", target: concurrent)
        lock = CLock("\(tag).lock")
    }

    func release() {
        serial.release()
        concurrent.release()
        _ = lock.destroy()
    }
}

extension DeadlockTests {
    /// T1 holds lock L and syncs onto serial X (target: concurrent C); T2 runs a barrier of C
    /// (`barrier_sync` from a thread, or `barrier_async`) and locks L. Exactly one is refused.
    func ringThroughConcurrentTarget(barrierAsync: Bool) {
        let tag = unique(barrierAsync ? "target-ring-async" : "target-ring-sync")
        let scenario = TargetScenario(tag)
        defer { scenario.release() }
        let (concurrent, serial, lock) = (scenario.concurrent, scenario.serial, scenario.lock)
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let barrierDone = DispatchSemaphore(value: 0)
        let barrier: @Sendable () -> Void = {
            _ = meet.arrive()
            let status = lock.lock()
            outcomes.record("barrier-lock", status)
            if status == 0 {
                outcomes.didRun("barrier")
                _ = lock.unlock()
            }
        }
        if barrierAsync {
            #expect(
                concurrent.barrierAsync {
                    barrier()
                    barrierDone.signal()
                } == 0)
        } else {
            _ = spawn {
                name("barrier")
                outcomes.record("barrier-sync", concurrent.barrierSync { barrier() })
                barrierDone.signal()
            }
        }
        let syncer = spawn {
            name("syncer")
            #expect(lock.lock() == 0)
            _ = meet.arrive()
            let status = serial.sync { outcomes.didRun("sync") }
            outcomes.record("sync", status)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: syncer) && waits(for: barrierDone))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.count == 1, "ran: \(outcomes.runs)")
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.contains("condition lock \"\(tag).lock\""), "\(report)")
    }

    @Test("a sync onto a serial queue whose concurrent target runs a barrier_sync that waits for the syncer's lock")
    func ringThroughConcurrentTargetBarrierSync() { ringThroughConcurrentTarget(barrierAsync: false) }

    @Test("a sync onto a serial queue whose concurrent target runs a barrier_async that waits for the syncer's lock")
    func ringThroughConcurrentTargetBarrierAsync() { ringThroughConcurrentTarget(barrierAsync: true) }
}
