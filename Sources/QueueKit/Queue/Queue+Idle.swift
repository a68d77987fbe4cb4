// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import QueueKitShim

// The idle path: a synchronous call onto a queue that nothing else runs or waits for takes the
// queue with one compare-and-swap on a word QueueKit owns (`queuekit_shim_idle.h`) and runs the
// block on the calling thread, as dispatch's own `sync` does on an idle queue, without dispatch
// and without publishing a wait (the thread does not wait).
//
// Why the queue's rules still hold:
// - Exclusivity and order. Every block QueueKit gives dispatch for the queue (async,
//   barrier_async, a round trip, an actor's job, an async perform) is counted in the word before
//   it is submitted and uncounted when it has finished, so an idle acquisition (which needs the
//   count at 0) never overtakes a block submitted before it, queued or running. A block dispatch
//   starts while the queue is held on the idle path first waits until the holder has left
//   (shared blocks wait for an exclusive holder; exclusive ones for every holder), so dispatch's
//   blocks never overlap an idle holder in a way the queue forbids. A queue with a target takes
//   the idle path never (dispatch acquires the targets on the way down), nor does a queue once a
//   queue targets it: its blocks reach it through dispatch uncounted, so they wait, on their own
//   way in, for the idle holders of every queue they target.
// - The deadlock checks. The calling thread's own frames are checked as on every route (a queue
//   it holds, a target it holds), and the lock-order witness records the call's edges. The holder
//   runs the block in a frame of the queue, so the deadlock detector finds it through its frames
//   exactly as a holder that dispatch runs; the word names it besides (its thread number while it
//   holds the queue alone). A call that finds the queue busy takes the dispatch route, publishing
//   its wait; a round trip whose block waits for an idle holder withdraws that wait only once the
//   holder has left.
// - Lifetime. A block may release the last reference to its queue (`qk_queue_release`). The
//   holder takes no reference of its own: the release of the queue, or of a queue that targets
//   it, made inside the block (on any thread its frame chain reaches) waits for the block's end
//   (`IdleHold`).
extension Queue {
    /// Takes the queue on the idle path for `block` if nothing of it runs or is pending.
    @inline(__always)
    func holdIdle(_ block: Block) -> Bool {
        guard runsIdle else { return false }
        return block.isExclusive
            ? qkshim_idle_try_exclusive(idleWord, qkshim_thread_id()) : qkshim_idle_try_shared(idleWord)
    }

    /// Gives back the queue `holdIdle` took (`word` is its idle word).
    @usableFromInline @inline(__always)
    static func releaseIdle(_ word: UnsafeMutablePointer<UInt64>, exclusive: Bool) {
        if exclusive {
            qkshim_idle_release_exclusive(word, qkshim_thread_id())
        } else {
            qkshim_idle_release_shared(word)
        }
    }

    /// A block is about to be handed to dispatch: counted until it has finished
    /// (``idleFinished()``).
    @usableFromInline @inline(__always)
    /// The dispatch queue, handed out to code outside QueueKit (`DispatchQueue.current`): blocks
    /// may now reach it without being counted, so the idle path closes for good and every later
    /// call goes through dispatch, which orders them.
    func handOutDispatchQueue() -> DispatchQueue? {
        if runsIdle { qkshim_idle_close(idleWord) }
        return dispatchQueue
    }

    func idleSubmitting() {
        if runsIdle { qkshim_idle_submitting(idleWord) }
    }

    /// A block dispatch started: waits until no idle holder of the queue, or of a queue it targets,
    /// conflicts with it.
    @usableFromInline @inline(__always)
    func idleStarting(_ block: Block) {
        if runsIdle {
            qkshim_idle_starting(idleWord, block.isExclusive)
        } else if parent != nil {
            idleStartingOnTargets()
        }
    }

    /// A block of a queue that targets others runs on them as an ordinary block: it waits for an
    /// exclusive idle holder of each (one that held it before a queue targeted it).
    @usableFromInline @inline(never)
    func idleStartingOnTargets() {
        var ancestor = parent
        while let next = ancestor {
            next._withUnsafeGuaranteedRef { target in
                if target.runsIdle { qkshim_idle_starting(target.idleWord, false) }
            }
            ancestor = next._withUnsafeGuaranteedRef { $0.parent }
        }
    }

    /// A block handed to dispatch has finished.
    @usableFromInline @inline(__always)
    func idleFinished() {
        if runsIdle { qkshim_idle_finished(idleWord) }
    }
}

/// A hold of a queue on the idle path, on the stack of the call that runs the block (the thread's
/// innermost in `qkshim_idle_hold_get`, and the block's frame's `idleHold`): the releases that
/// ``Queue/deferRelease()`` puts off until the block has ended and the queue has been given back.
@usableFromInline
struct IdleHold {
    /// The held queue's address.
    @usableFromInline let queue: UnsafeMutableRawPointer
    /// The thread's hold further out.
    @usableFromInline let outer: UnsafeMutableRawPointer?
    /// The dispatch queue current when the hold began, once a plain dispatch queue has been
    /// registered (`nil` before): while it is still current, no dispatch queue was entered since,
    /// and ``DispatchQueue/current`` answers from the frames.
    @usableFromInline let dispatchCurrent: UnsafeMutableRawPointer?
    /// The releases put off, newest first.
    @usableFromInline var deferred: UnsafeMutablePointer<DeferredRelease>?

    @inlinable @inline(__always)
    init(queue: UnsafeMutableRawPointer, outer: UnsafeMutableRawPointer?, dispatchCurrent: UnsafeMutableRawPointer?) {
        self.queue = queue
        self.outer = outer
        self.dispatchCurrent = dispatchCurrent
        self.deferred = nil
    }

    /// Makes the releases put off, oldest first.
    @usableFromInline @inline(never)
    static func release(_ first: UnsafeMutablePointer<DeferredRelease>) {
        var next: UnsafeMutablePointer<DeferredRelease>? = first
        var queues: [Unmanaged<Queue>] = []
        while let node = next {
            queues.append(node.pointee.queue)
            next = node.pointee.next
            node.deallocate()
        }
        for queue in queues.reversed() { queue.release() }
    }
}

/// A release put off until the end of an idle hold.
@usableFromInline
struct DeferredRelease {
    let queue: Unmanaged<Queue>
    let next: UnsafeMutablePointer<DeferredRelease>?
}

extension Queue {
    /// Runs `work` on the calling thread, which holds the idle queue as `route` says, then gives
    /// the queue back and makes the releases the block put off (also when `work` throws).
    @inlinable @inline(__always)
    func runIdle<R, E: Error>(_ route: SyncRoute, _ work: () throws(E) -> R) throws(E) -> R {
        var hold = IdleHold(
            queue: Unmanaged.passUnretained(self).toOpaque(), outer: qkshim_idle_hold_get(),
            dispatchCurrent: qkshim_plain_queue_registered_get() ? qkshim_dispatch_current_queue() : nil)
        defer {
            Queue.releaseIdle(idleWord, exclusive: route.block.isExclusive)
            if let deferred = hold.deferred { IdleHold.release(deferred) }
        }
        return try withUnsafeMutablePointer(to: &hold) { (hold) throws(E) -> R in
            qkshim_idle_hold_set(hold)
            defer { qkshim_idle_hold_set(hold.pointee.outer) }
            return try ThreadSanitizer.workerCode { () throws(E) -> R in
                try runHeld(route.block, outer: route.caller, idleHold: UnsafeMutableRawPointer(hold), work)
            }
        }
    }

    /// `qk_queue_release` inside a block that holds this queue, or a queue it targets, on the idle
    /// path, here or further out (the frame chain, which a sync onto the main queue hands to
    /// another thread): the release waits for the end of that hold (true), which needs the queue
    /// until then. The holding thread reads what is put off only once its block has returned,
    /// after every block of the chain inside it.
    package func deferRelease() -> Bool {
        var frame = ExecutionContext.innermostBlock
        while let current = frame {
            if let raw = current.pointee.idleHold {
                let hold = raw.assumingMemoryBound(to: IdleHold.self)
                var candidate: Unmanaged<Queue>? = Unmanaged.passUnretained(self)
                while let queue = candidate {
                    if queue.toOpaque() == hold.pointee.queue {
                        let node = UnsafeMutablePointer<DeferredRelease>.allocate(capacity: 1)
                        node.initialize(
                            to: DeferredRelease(queue: Unmanaged.passUnretained(self), next: hold.pointee.deferred))
                        hold.pointee.deferred = node
                        return true
                    }
                    candidate = queue._withUnsafeGuaranteedRef { $0.parent }
                }
            }
            frame = current.pointee.outer
        }
        return false
    }
}

extension IdleHold {
    /// Whether the calling thread's innermost idle hold began while the dispatch queue current now
    /// was already current: then no dispatch queue has been entered since, and what runs innermost
    /// is the hold's block (or a block inline in it), whatever dispatch's current queue says.
    static var innermostIsCurrent: Bool {
        guard let raw = qkshim_idle_hold_get() else { return false }
        let hold = raw.assumingMemoryBound(to: IdleHold.self)
        guard let noted = hold.pointee.dispatchCurrent else { return false }
        return noted == qkshim_dispatch_current_queue()
    }
}
