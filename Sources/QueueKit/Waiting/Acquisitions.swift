// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The one seam through which every acquisition and every release of a QueueKit primitive
/// passes, the uncontended ones included: a condition lock taken or released, a DB queue's read
/// or write access taken or given back, a block of a queue started or finished (with the queues
/// it targets). What each acquisition means to the rest of the process hangs here, once:
/// ThreadSanitizer's lock annotations, the thread's count of held condition locks (what the
/// thread-exit hook abandons) and the lock-order witness's held set (``LockOrder``).
///
/// `acquired` and `releasing` are called by the thread that acquires or releases, after the real
/// acquisition and before the real release, outside every internal lock. Nested entries that
/// acquire nothing (a read inside a read, a `sync` that runs inline) do not pass through them;
/// every block, inline ones included, runs inside ``holdingBlock(of:exclusive:plain:_:)``, which
/// the witness needs (it counts a queue as held for each block of it on the thread's stack). (A
/// plain read nested right in a block of its DB queue runs in no block of its own:
/// `DBQueue.readInline`.)
/// Inlined: with the sanitizer absent and the witness off each call is a load and a branch per
/// primitive kind (the kind is a constant at every call site, so the switch folds away); a call
/// that runs plain (``SlowPaths``, `plain` a constant true) has nothing to tell, and no check.
@usableFromInline
enum Acquisitions {
    /// What was acquired.
    @usableFromInline
    enum Kind {
        /// A condition lock (always exclusive).
        case conditionLock
        /// A DB queue: a write (exclusive) or a read.
        case dbQueue
        /// A block of a queue: exclusive for a serial queue's block or a barrier, shared for a
        /// concurrent queue's other blocks; it holds the queues the queue targets too.
        case queue
    }

    /// The calling thread now holds `object`. For a condition lock, `call` names a call that may
    /// wait and took the lock without waiting, whose lock-order edges are recorded here (`nil`:
    /// recorded on the way in, or none: a try form, a task's acquisition). `plain`: the call runs
    /// plain (``SlowPaths/areOff``; a condition lock's count of held locks is kept either way, and
    /// its plain acquirer has a record).
    @inlinable @inline(__always)
    static func acquired(
        _ object: AnyObject, _ kind: Kind, exclusive: Bool, recording call: StaticString? = nil,
        deadline: UInt64 = MonotonicClock.forever, plain: Bool = false
    ) {
        switch kind {
        case .conditionLock:
            if plain {
                // The caller checked that the thread has a record (`qkshim_thread_id_if_recorded`).
                qkshim_condlocks_held_increment()
            } else {
                ThreadSanitizer.conditionLockAcquired(object)
                qkshim_condlock_acquired()
                LockOrder.acquired(object, recording: call, deadline: deadline)
            }
        case .dbQueue:
            if !plain { ThreadSanitizer.locked(object, shared: !exclusive) }
        case .queue:
            if !plain, ThreadSanitizer.isPresent {
                ThreadSanitizer.lockChain(unsafeDowncast(object, to: Queue.self), exclusive: exclusive)
            }
        }
    }

    /// The calling thread is about to release `object`, acquired as `acquired` said.
    @inlinable @inline(__always)
    static func releasing(_ object: AnyObject, _ kind: Kind, exclusive: Bool, plain: Bool = false) {
        switch kind {
        case .conditionLock:
            if !plain { ThreadSanitizer.conditionLockReleasing(object) }
            qkshim_condlocks_held_decrement()
            if !plain { LockOrder.released(object) }
        case .dbQueue:
            if !plain { ThreadSanitizer.unlocking(object, shared: !exclusive) }
        case .queue:
            if !plain, ThreadSanitizer.isPresent {
                ThreadSanitizer.unlockChain(unsafeDowncast(object, to: Queue.self), exclusive: exclusive)
            }
        }
    }

    /// Runs `body`, a block of `queue` (run by any call, also inline: a DB queue's accesses are
    /// blocks of its identity queue), with the calling thread holding `queue` (`exclusive` or
    /// shared) and the queues it targets, for the lock-order witness while it is on.
    @inlinable @inline(__always)
    static func holdingBlock<R, E: Error>(
        of queue: Queue, exclusive: Bool, plain: Bool = false, _ body: () throws(E) -> R
    ) throws(E) -> R {
        if !plain, _slowPath(LockOrder.isOn) { return try LockOrder.holding(queue, exclusive: exclusive, body) }
        return try body()
    }

    /// A condition lock released on behalf of its holder, whose thread is exiting holding it
    /// (the lock is abandoned; the thread's count of held locks dies with it).
    @inline(__always)
    static func abandoning(_ lock: AnyObject) {
        ThreadSanitizer.conditionLockReleasing(lock)
    }
}
