// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

@testable import QueueKit

// A plain `sync` onto a concurrent queue waits for the queue's running blocks whenever dispatch
// queues it (anything else queued there: a barrier, an earlier waiter), not only behind a
// barrier that QueueKit submitted. QueueKit cannot see dispatch's queue, so such a ring is
// refused whenever it could close.
extension DeadlockTests {
    /// A reader of concurrent queue C waits for lock L; the thread holding L syncs onto C while a
    /// barrier is queued behind the reader: submitted through QueueKit, or sent to C's dispatch
    /// queue directly (QueueKit never sees it), as a program holding `DispatchQueue.current` can.
    /// Dispatch queues the `sync` behind the barrier, which waits for the reader: a ring, refused
    /// once instead of hanging.
    func plainSyncBehindQueuedBarrier(submittedThroughQueueKit: Bool) {
        let tag = unique(submittedThroughQueueKit ? "behind-barrier" : "dispatch-queued")
        let queue = CQueue.create("\(tag).c", QK_QUEUE_CONCURRENT)
        let lock = CLock("\(tag).lock")
        defer {
            queue.release()
            _ = lock.destroy()
        }
        let readerIn = DispatchSemaphore(value: 0)
        let goOn = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let outcomes = Outcomes()
        let underneath = Shared<DispatchQueue?>(nil)
        queue.async {
            // The dispatch queue underneath, as a program would reach it.
            underneath.update { $0 = DispatchQueue.current }
            readerIn.signal()
            _ = goOn.wait(timeout: .now() + testTimeout)
            let status = lock.lock()
            outcomes.record("reader", status)
            if status == 0 { _ = lock.unlock() }
            done.signal()
        }
        #expect(waits(for: readerIn))
        let barrier: @Sendable () -> Void = {
            outcomes.didRun("barrier")
            done.signal()
        }
        if submittedThroughQueueKit {
            #expect(queue.barrierAsync(barrier) == 0)
        } else if let dispatchQueue = underneath.value {
            dispatchQueue.async(flags: .barrier, execute: barrier)
        } else {
            Issue.record("DispatchQueue.current is nil inside a block of a QueueKit queue")
            goOn.signal()
            _ = waits(for: done)
            return
        }
        let syncer = spawn {
            name("syncer")
            #expect(lock.lock() == 0)
            goOn.signal()
            let status = queue.sync { outcomes.didRun("sync") }
            outcomes.record("sync", status)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: syncer) && waits(for: done) && waits(for: done))
        #expect(outcomes.refusedCount == 1, "statuses: \(outcomes.all)")
        #expect(outcomes.runs.contains("barrier"))
        let report = ReportLog.shared.reports(mentioning: tag).first ?? ""
        #expect(report.contains("concurrent queue \"\(tag).c\""), "\(report)")
    }

    @Test("a sync behind a pending barrier, whose reader waits for the syncing thread's lock")
    func syncBehindPendingBarrier() { plainSyncBehindQueuedBarrier(submittedThroughQueueKit: true) }

    @Test(
        "a plain sync that dispatch queues behind a barrier QueueKit never saw, whose reader waits for the syncer's lock"
    )
    func plainSyncQueuedByDispatchAlone() { plainSyncBehindQueuedBarrier(submittedThroughQueueKit: false) }
}
