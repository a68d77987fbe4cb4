// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// The wait-for graph of a set of pinned waiting threads: who waits for whom.
struct WaitGraph {
    let nodes: [ThreadRecord]

    /// The threads that hold what `waiter` waits for and are themselves waiting (among `nodes`);
    /// none when the wait has been granted, or is timed (it ends by itself: no cycle goes
    /// through it) unless `evenIfTimed`.
    func holders(of waiter: ThreadRecord, evenIfTimed: Bool = false) -> [ThreadRecord] {
        let wait = waiter.wait
        guard evenIfTimed || !wait.isTimed else { return [] }
        switch wait.kind {
        case .none:
            return []
        case .queueSync, .queueBarrierSync:
            guard let queue = wait.queue?.takeUnretainedValue() else { return [] }
            return nodes.filter { $0 !== waiter && Self.holds($0.wait.frame, of: queue) }
        case .lock, .lockWhen:
            guard let owner = wait.lock?.holderNumber, owner != 0, owner != waiter.number else { return [] }
            return nodes.filter { $0.number == owner }
        case .dbQueue:
            // Granted or woken waiters no longer wait; the DB queue is held by every thread
            // inside it (a read, counted or in a slot, a write, asynchronous writes being run).
            guard let identity = wait.queue?.takeUnretainedValue(), let db = wait.db, let word = wait.detail,
                db.isWaitingInLane(parkerWord: word)
            else { return [] }
            let visible = db.visibleReaders()
            return nodes.filter { node in
                node !== waiter
                    && (visible.contains(node.number)
                        || node.wait.frame.map { ExecutionContext.hold(of: identity, from: $0) != .none } ?? false)
            }
        }
    }

    /// Whether the chain starting at `frame` holds what a `sync` onto `queue` waits for: the
    /// queue itself, held in any way, and every queue it targets that dispatch acquires on the way
    /// down (``Queue/chainHoldsTarget(from:)``).
    ///
    /// A plain `sync` onto a concurrent queue counts as waiting for every block running there,
    /// not only behind a pending barrier: dispatch lets a `sync` in at once only while nothing is
    /// queued on the queue (no barrier pending or running, no earlier waiter, no wake-up in
    /// flight); otherwise it queues it, in order, and a queued plain `sync` is let in when the
    /// queue's running blocks complete. Which of the two happens depends on timing QueueKit
    /// cannot see, so the ring is refused whenever it could close (deterministic, as the
    /// single-thread rules of `syncRoute` are), never left to hang when it does.
    static func holds(_ frame: UnsafePointer<ExecutionFrame>?, of queue: Queue) -> Bool {
        guard let frame else { return false }
        return ExecutionContext.hold(of: queue, from: frame) != .none || queue.chainHoldsTarget(from: frame)
    }

    /// A ring of waits from `start` back to it: `[start, holder of start's wait, …]`, each
    /// waiting for something the next one holds, the last for something `start` holds.
    func cycle(through start: ThreadRecord) -> [ThreadRecord]? {
        var path = [start]
        var visited: Set<ObjectIdentifier> = [ObjectIdentifier(start)]
        func extend(from waiter: ThreadRecord) -> Bool {
            for holder in holders(of: waiter) {
                if holder === start { return true }
                if visited.insert(ObjectIdentifier(holder)).inserted {
                    path.append(holder)
                    if extend(from: holder) { return true }
                    path.removeLast()
                }
            }
            return false
        }
        return extend(from: start) ? path : nil
    }
}
