// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// How the calling thread holds a queue: the answer every identity check and every deadlock
/// check is computed from.
@usableFromInline
enum Hold: Int, Comparable {
    /// The thread runs no block of the queue, here or further out.
    case none = 0
    /// The thread runs a non-barrier block of a concurrent queue (or a read of a DB queue).
    case shared = 1
    /// The thread runs the queue alone: a serial queue's block, a barrier block, a DB write.
    case exclusive = 2

    @usableFromInline static func < (lhs: Hold, rhs: Hold) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One block that a thread is running on behalf of a queue, linked to the block further out
/// that is waiting for it.
///
/// Frames live on the stack of the call that runs the block; the calling thread's innermost frame
/// is in a thread-local. A `sync` hands its caller's chain to the block it submits, so the chain
/// stays whole even when dispatch runs that block on another thread (a `sync` onto the main
/// queue): "what does this call tree hold" is answered by walking `outer` links, which no
/// `dispatch_get_specific` can do.
@usableFromInline
struct ExecutionFrame {
    /// The queue whose block runs (for a DB queue, its identity queue); unmanaged because the
    /// call that runs the block keeps the queue alive, and walks must not touch reference counts.
    @usableFromInline let running: Unmanaged<Queue>
    /// Whether the block runs the queue alone.
    @usableFromInline let isExclusive: Bool
    /// The frame of the caller that waits for this block, if any.
    @usableFromInline let outer: UnsafePointer<ExecutionFrame>?
    /// The `IdleHold` of a block that holds its queue on the idle path (`Queue+Idle.swift`), on
    /// the stack of the holding thread: where a release of the queue from inside the block, on
    /// any thread the chain reaches, waits for the block's end.
    @usableFromInline let idleHold: UnsafeMutableRawPointer?

    @usableFromInline init(
        queue: Queue, isExclusive: Bool, outer: UnsafePointer<ExecutionFrame>?, idleHold: UnsafeMutableRawPointer? = nil
    ) {
        self.running = Unmanaged.passUnretained(queue)
        self.isExclusive = isExclusive
        self.outer = outer
        self.idleHold = idleHold
    }

    /// A frame of the queue `running` (no reference counting).
    @inlinable init(running: Unmanaged<Queue>, isExclusive: Bool, outer: UnsafePointer<ExecutionFrame>?) {
        self.running = running
        self.isExclusive = isExclusive
        self.outer = outer
        self.idleHold = nil
    }

    /// The queue whose block runs.
    @usableFromInline var queue: Queue { running.takeUnretainedValue() }

    /// Whether this frame is a block of `queue` itself (the common case of a nested call, decided
    /// without the walk of ``ExecutionContext/hold(of:from:)``).
    @inlinable @inline(__always)
    func runs(_ queue: Queue) -> Bool { running.toOpaque() == Unmanaged.passUnretained(queue).toOpaque() }
}

/// The chain of frames of the calling thread, innermost first.
@usableFromInline
package enum ExecutionContext {
    /// The queue whose block the calling thread runs innermost, if any.
    @inlinable @inline(__always)
    package static var currentQueue: Queue? { innermost.map { $0.pointee.queue } }

    /// The queue of the innermost block the calling thread runs, if any: ``currentQueue`` without
    /// the main thread's frame outside blocks (one thread-local read, nothing made lazily).
    @inlinable @inline(__always)
    package static var currentBlockQueue: Queue? { innermostBlock.map { $0.pointee.queue } }

    /// The innermost frame of the calling thread. On the main thread outside any block that is
    /// the permanent frame of the main queue (until `qk_main`).
    @inlinable @inline(__always)
    static var innermost: UnsafePointer<ExecutionFrame>? {
        if let frame = qkshim_frame_get() {
            return UnsafePointer(frame.assumingMemoryBound(to: ExecutionFrame.self))
        }
        return mainThreadFrame()
    }

    /// The innermost frame of a block the calling thread runs, if any (``innermost`` without the
    /// main thread's permanent frame).
    @inlinable @inline(__always)
    static var innermostBlock: UnsafePointer<ExecutionFrame>? {
        qkshim_frame_get().map { UnsafePointer($0.assumingMemoryBound(to: ExecutionFrame.self)) }
    }

    @inlinable @inline(__always)
    static func mainThreadFrame() -> UnsafePointer<ExecutionFrame>? {
        guard qkshim_is_main_thread(), !qkshim_main_released_get() else { return nil }
        if let frame = qkshim_main_frame_get() {
            return UnsafePointer(frame.assumingMemoryBound(to: ExecutionFrame.self))
        }
        return makeMainThreadFrame()
    }

    @usableFromInline @inline(never)
    static func makeMainThreadFrame() -> UnsafePointer<ExecutionFrame> {
        let frame = Queue.mainThreadFrame
        qkshim_main_frame_set(UnsafeMutableRawPointer(mutating: frame))
        return frame
    }

    /// Hands the main thread over to dispatch (`qk_main`): from then on it is not on the main
    /// queue outside the main queue's blocks.
    static func releaseMainThread() { qkshim_main_released_set() }

    /// Runs `body` as a block of `queue`, inside a new innermost frame whose caller is `outer`
    /// (and whose `idleHold` is `idleHold`). `plain`: the call began with ``SlowPaths/areOff``
    /// (nothing to tell the witness or the sanitizer).
    @inlinable @inline(__always)
    static func run<R, E: Error>(
        on queue: Queue,
        exclusive: Bool,
        outer: UnsafePointer<ExecutionFrame>?,
        idleHold: UnsafeMutableRawPointer? = nil,
        plain: Bool = false,
        _ body: () throws(E) -> R
    ) throws(E) -> R {
        let saved = qkshim_frame_get()
        var frame = ExecutionFrame(queue: queue, isExclusive: exclusive, outer: outer, idleHold: idleHold)
        defer { qkshim_frame_set(saved) }
        // The frame is three words, never indexed: no stack protector around it (it would cost
        // every block, nested reads included, a canary store and check).
        return try _withUnprotectedUnsafeMutablePointer(to: &frame) { (pointer) throws(E) -> R in
            qkshim_frame_set(UnsafeMutableRawPointer(pointer))
            return try Acquisitions.holdingBlock(of: queue, exclusive: exclusive, plain: plain) { () throws(E) -> R in
                try plain ? body() : ThreadSanitizer.userCode(body)
            }
        }
    }

    /// How the chain starting at `start` holds `queue`, counting the queues each frame's queue
    /// targets (a block of a queue that targets a serial queue holds that queue exclusively).
    @inlinable
    static func hold(of queue: Queue, from start: UnsafePointer<ExecutionFrame>?) -> Hold {
        let wanted = Unmanaged.passUnretained(queue).toOpaque()
        var best = Hold.none
        var next = start
        while let frame = next {
            let running = frame.pointee.running
            if running.toOpaque() == wanted {
                best = max(best, frame.pointee.isExclusive ? .exclusive : .shared)
            } else {
                var ancestor = running._withUnsafeGuaranteedRef { $0.parent }
                while let candidate = ancestor {
                    if candidate.toOpaque() == wanted {
                        best = max(best, candidate._withUnsafeGuaranteedRef { $0.isSerial } ? .exclusive : .shared)
                        break
                    }
                    ancestor = candidate._withUnsafeGuaranteedRef { $0.parent }
                }
            }
            if best == .exclusive { return best }
            next = frame.pointee.outer
        }
        return best
    }

    /// How the calling thread holds `queue`.
    @inlinable @inline(__always)
    static func hold(of queue: Queue) -> Hold {
        guard let start = innermost else { return .none }
        return hold(of: queue, from: start)
    }
}
