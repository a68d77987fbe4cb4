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
            return nodes.filter { $0 !== waiter && Self.holds($0.wait.frame, what: wait, of: queue) }
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

    /// Whether the chain starting at `frame` holds what a `sync` described by `wait` onto `queue`
    /// waits for: the queue itself (a serial queue; a concurrent one for a barrier, or behind an
    /// unfinished barrier), and every queue it targets, serial or concurrent: a serial one held
    /// in any way; a concurrent one that honours barriers where the frame's block runs as a
    /// barrier, or holds it shared while a barrier is pending there (the `sync`'s block queues
    /// behind that barrier, which waits for the frame's block).
    static func holds(_ frame: UnsafePointer<ExecutionFrame>?, what wait: PublishedWait, of queue: Queue) -> Bool {
        guard let frame else { return false }
        let wholeQueue = queue.isSerial || wait.kind == .queueBarrierSync || queue.hasUnfinishedBarrier
        if wholeQueue && ExecutionContext.hold(of: queue, from: frame) != .none { return true }
        var ancestor = queue.target
        while let target = ancestor {
            switch ExecutionContext.hold(of: target, from: frame) {
            case .none: break
            case .exclusive where target.isSerial || target.honoursBarriers: return true
            case .shared where target.isSerial: return true
            case .shared where target.honoursBarriers && target.hasUnfinishedBarrier: return true
            case .exclusive, .shared: break
            }
            ancestor = target.target
        }
        return false
    }

    /// A barrier on a concurrent queue also makes waits of *other* threads: every plain `sync`
    /// onto the queue that dispatch has not let run yet now waits behind it, for the blocks the
    /// barrier waits for. So the barrier can close a ring it is not part of (a thread inside the
    /// queue waiting for what a plain `sync`-er holds). Such a ring goes through one of those
    /// `sync`-ers; the barrier's `barrier_sync` is then refused before it is submitted:
    /// `[barrier's thread] + the ring`.
    func cycleClosedByBarrier(of waiter: ThreadRecord) -> [ThreadRecord]? {
        let wait = waiter.wait
        guard wait.kind == .queueBarrierSync, !wait.isTimed, let queue = wait.queue,
            !queue.takeUnretainedValue().isSerial
        else { return nil }
        for node in nodes
        where node !== waiter && node.wait.kind == .queueSync && !node.wait.isTimed
            && node.wait.queue?.toOpaque() == queue.toOpaque()
        {
            if let ring = cycle(through: node) { return [waiter] + ring }
        }
        return nil
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
