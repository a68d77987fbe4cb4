import QueueKitShim

/// How the calling thread holds a queue: the answer every identity check and every deadlock
/// check is computed from.
enum Hold: Int, Comparable {
    /// The thread runs no block of the queue, here or further out.
    case none = 0
    /// The thread runs a non-barrier block of a concurrent queue (or a read of a DB queue).
    case shared = 1
    /// The thread runs the queue alone: a serial queue's block, a barrier block, a DB write.
    case exclusive = 2

    static func < (lhs: Hold, rhs: Hold) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One block that a thread is running on behalf of a queue, linked to the block further out
/// that is waiting for it.
///
/// Frames live on the stack of the call that runs the block; the calling thread's innermost frame
/// is in a thread-local. A `sync` hands its caller's chain to the block it submits, so the chain
/// stays whole even when dispatch runs that block on another thread (a `sync` onto the main
/// queue): "what does this call tree hold" is answered by walking `outer` links, which no
/// `dispatch_get_specific` can do.
struct ExecutionFrame {
    /// The queue whose block runs (for a DB queue, its identity queue).
    unowned(unsafe) let queue: Queue
    /// Whether the block runs the queue alone.
    let isExclusive: Bool
    /// The frame of the caller that waits for this block, if any.
    let outer: UnsafePointer<ExecutionFrame>?
}

/// The chain of frames of the calling thread, innermost first.
enum ExecutionContext {
    /// Set once `qk_main` hands the main thread to dispatch: from then on the main thread is not on
    /// the main queue outside its blocks.
    nonisolated(unsafe) static var mainThreadReleased = false

    /// The innermost frame of the calling thread. On the main thread outside any block that is
    /// the permanent frame of the main queue (until `qk_main`).
    @inline(__always)
    static var innermost: UnsafePointer<ExecutionFrame>? {
        if let frame = qkshim_frame_get() {
            return UnsafePointer(frame.assumingMemoryBound(to: ExecutionFrame.self))
        }
        return mainThreadFrame()
    }

    @inline(never)
    private static func mainThreadFrame() -> UnsafePointer<ExecutionFrame>? {
        // Only the main thread reads or writes `mainThreadReleased`: test the thread first.
        guard qkshim_is_main_thread(), !mainThreadReleased else { return nil }
        return Queue.mainThreadFrame
    }

    /// Runs `body` as a block of `queue`, inside a new innermost frame whose caller is `outer`.
    @inline(__always)
    static func run<R, E: Error>(
        on queue: Queue,
        exclusive: Bool,
        outer: UnsafePointer<ExecutionFrame>?,
        _ body: () throws(E) -> R
    ) throws(E) -> R {
        let saved = qkshim_frame_get()
        var frame = ExecutionFrame(queue: queue, isExclusive: exclusive, outer: outer)
        defer { qkshim_frame_set(saved) }
        return try withUnsafeMutablePointer(to: &frame) { (pointer) throws(E) -> R in
            qkshim_frame_set(UnsafeMutableRawPointer(pointer))
            return try body()
        }
    }

    /// How the chain starting at `start` holds `queue`, counting the queues each frame's queue
    /// targets (a block of a queue that targets a serial queue holds that queue exclusively).
    static func hold(of queue: Queue, from start: UnsafePointer<ExecutionFrame>?) -> Hold {
        var best = Hold.none
        var next = start
        while let frame = next {
            let running = frame.pointee.queue
            if running === queue {
                best = max(best, frame.pointee.isExclusive ? .exclusive : .shared)
            } else {
                var ancestor = running.target
                while let candidate = ancestor {
                    if candidate === queue {
                        best = max(best, candidate.isSerial ? .exclusive : .shared)
                        break
                    }
                    ancestor = candidate.target
                }
            }
            if best == .exclusive { return best }
            next = frame.pointee.outer
        }
        return best
    }

    /// How the calling thread holds `queue`.
    @inline(__always)
    static func hold(of queue: Queue) -> Hold {
        guard let start = innermost else { return .none }
        return hold(of: queue, from: start)
    }

    /// Whether the chain holds exclusively `queue` or any queue `queue` targets: then a block
    /// submitted synchronously to `queue` could never start.
    static func holdsExclusively(queueOrTargetOf queue: Queue, from start: UnsafePointer<ExecutionFrame>?) -> Bool {
        guard start != nil else { return false }
        var candidate: Queue? = queue
        while let current = candidate {
            if hold(of: current, from: start) == .exclusive { return true }
            candidate = current.target
        }
        return false
    }

    /// Whether the chain holds `queue`'s targets exclusively (not `queue` itself).
    static func holdsTargetExclusively(of queue: Queue, from start: UnsafePointer<ExecutionFrame>?) -> Bool {
        guard let target = queue.target else { return false }
        return holdsExclusively(queueOrTargetOf: target, from: start)
    }
}
