// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Synchronization

// Running a block: the one path of every block a queue runs through dispatch (async,
// barrier_async, an actor's job, an async perform, a sync's round trip). `admit` decides how the
// block holds the queue; `runBlock` runs it, on whichever thread dispatch chose.

extension Queue {
    /// How a block submitted through dispatch runs, decided when it is submitted.
    @usableFromInline
    package struct Block: Sendable {
        /// The block is a dispatch barrier (a barrier on a queue that honours barriers).
        @usableFromInline let isBarrier: Bool
        /// The block holds the queue alone (a barrier, or any block of a serial queue).
        @usableFromInline let isExclusive: Bool
    }

    /// The checks every call that runs a block makes first: the queue runs blocks (it is not a
    /// DB queue's identity-only queue: `invalidArgument`), and the process is not a forked child
    /// (dispatch's threads are gone there: `notRecoverable`). It reads the raw `dispatch_queue_t`,
    /// so the round trips' hot path takes no reference to the `DispatchQueue`.
    @inline(__always)
    func checkRunnable() throws(QueueKitError) {
        guard dispatchObject != nil else { throw .invalidArgument }
        if _slowPath(Fork.isChild) { throw .notRecoverable }
    }

    /// A block about to be submitted through dispatch, a barrier or not (a barrier flag counts
    /// only on a queue that honours barriers).
    @inline(__always)
    func admit(barrier: Bool) -> Block {
        let barrier = barrier && honoursBarriers
        return Block(isBarrier: barrier, isExclusive: barrier || isSerial)
    }

    /// Runs `body` as the block `block` of this queue, on the thread dispatch runs it on: in a
    /// new innermost frame whose caller is `outer` (a `sync`'s caller; `nil` for a block
    /// submitted asynchronously), holding the queue (``Acquisitions``). It first waits for the
    /// queue's idle holders it conflicts with (`Queue+Idle.swift`), then withdraws the wait of
    /// `waiter` (a round trip's caller), and counts the block finished last.
    @inlinable @inline(__always)
    func runBlock<R, E: Error>(
        _ block: Block, outer: UnsafePointer<ExecutionFrame>?, withdrawing waiter: Unmanaged<ThreadRecord>? = nil,
        _ body: () throws(E) -> R
    ) throws(E) -> R {
        idleStarting(block)
        if let waiter { waiter._withUnsafeGuaranteedRef { WaitRegistry.withdraw($0) } }
        defer { idleFinished() }
        return try ThreadSanitizer.workerCode { () throws(E) -> R in try runHeld(block, outer: outer, body) }
    }

    /// Runs `body` as the block `block` of this queue on the calling thread, which holds the
    /// queue already (through dispatch, or on the idle path with `idleHold`).
    @inlinable @inline(__always)
    func runHeld<R, E: Error>(
        _ block: Block, outer: UnsafePointer<ExecutionFrame>?, idleHold: UnsafeMutableRawPointer? = nil,
        _ body: () throws(E) -> R
    ) throws(E) -> R {
        Acquisitions.acquired(self, .queue, exclusive: block.isExclusive)
        defer { Acquisitions.releasing(self, .queue, exclusive: block.isExclusive) }
        return try ExecutionContext.run(
            on: self, exclusive: block.isExclusive, outer: outer, idleHold: idleHold, body)
    }
}
