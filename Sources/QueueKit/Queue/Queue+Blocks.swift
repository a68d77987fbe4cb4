// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Synchronization

// Running a block: the one path of every block a queue runs through dispatch (async,
// barrier_async, an actor's job, an async perform, a sync's round trip). `admit` makes the
// checks and counts a barrier; `runBlock` runs it, on whichever thread dispatch chose.

extension Queue {
    /// How a block submitted through dispatch runs, decided when it is submitted.
    @usableFromInline
    package struct Block: Sendable {
        /// The block is a dispatch barrier (a barrier on a queue that honours barriers).
        @usableFromInline let isBarrier: Bool
        /// The block holds the queue alone (a barrier, or any block of a serial queue).
        @usableFromInline let isExclusive: Bool
        /// A barrier on a concurrent queue, counted in `barriersSubmitted` until it has run (the
        /// deadlock detector reads the count: a plain `sync` waits behind a pending barrier).
        @usableFromInline let countsBarrier: Bool
    }

    /// The checks every call that runs a block makes first: the queue runs blocks (it is not a
    /// DB queue's identity-only queue: `invalidArgument`), and the process is not a forked child
    /// (dispatch's threads are gone there: `notRecoverable`).
    @inline(__always)
    func checkRunnable() throws(QueueKitError) -> DispatchQueue {
        guard let dispatchQueue else { throw .invalidArgument }
        if _slowPath(Fork.isChild) { throw .notRecoverable }
        return dispatchQueue
    }

    /// A block about to be submitted through dispatch, a barrier or not: counts a barrier on a
    /// concurrent queue (``unadmit(_:)`` takes the count back when nothing is submitted after all).
    @inline(__always)
    func admit(barrier: Bool) -> Block {
        let barrier = barrier && honoursBarriers
        let block = Block(isBarrier: barrier, isExclusive: barrier || isSerial, countsBarrier: barrier && !isSerial)
        if block.countsBarrier { barriersSubmitted.add(1, ordering: .sequentiallyConsistent) }
        return block
    }

    /// A block admitted but not submitted (its call was refused): as if it had run.
    @inlinable @inline(__always)
    func unadmit(_ block: Block) {
        if block.countsBarrier { barriersFinished.add(1, ordering: .releasing) }
    }

    /// Runs `body` as the block `block` of this queue, on the thread dispatch runs it on: in a
    /// new innermost frame whose caller is `outer` (a `sync`'s caller; `nil` for a block
    /// submitted asynchronously), holding the queue (``Acquisitions``), and counted as finished
    /// when it is a counted barrier.
    @inlinable @inline(__always)
    func runBlock<R, E: Error>(
        _ block: Block, outer: UnsafePointer<ExecutionFrame>?, _ body: () throws(E) -> R
    ) throws(E) -> R {
        defer { unadmit(block) }
        return try ThreadSanitizer.workerCode { () throws(E) -> R in
            Acquisitions.acquired(self, .queue, exclusive: block.isExclusive)
            defer { Acquisitions.releasing(self, .queue, exclusive: block.isExclusive) }
            return try ExecutionContext.run(on: self, exclusive: block.isExclusive, outer: outer, body)
        }
    }
}
