// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// The states of ``ThreadRecord/waitState``.
enum WaitState {
    /// No wait published; only the thread itself touches ``ThreadRecord/wait``.
    static let idle: UInt32 = 0
    /// A wait is published and nobody reads it.
    static let waiting: UInt32 = 1
    /// A wait is published and a diagnostic walk (holding the detector lock) is reading it and
    /// the thread's frame chain: the thread cannot withdraw the wait until the walk lets go.
    static let pinned: UInt32 = 2
}

/// What kind of call a published wait is in.
enum WaitKind: UInt8 {
    case none
    /// `sync` or `perform` onto a queue (`object` is the `Queue`).
    case queueSync
    /// `barrier_sync` onto a concurrent queue (`object` is the `Queue`).
    case queueBarrierSync
    /// A condition lock's `lock`, `lock_until` or `set` (`object` is the lock).
    case lock
    /// A condition lock's `lock_when` (`detail` is the waiter, for the wanted value).
    case lockWhen
    /// A DB queue's read, write, flush or destroy, or its worker (`queue` is the DB queue's
    /// identity queue, `db` the DB queue, `detail` the waiter's parker word).
    case dbQueue
}

/// What a waiting thread published about its wait: plain values only (no reference counting on
/// the way in), valid while its ``ThreadRecord/waitState`` is not `idle`.
struct PublishedWait {
    /// The C name of the call ("qk_queue_sync"); Swift calls are named after their C twin.
    var call: StaticString = ""
    var kind = WaitKind.none
    /// The `Queue` waited for, unretained: the waiting call keeps it alive.
    var queue: Unmanaged<Queue>?
    /// The condition lock waited for, unretained: the waiting call keeps it alive.
    unowned(unsafe) var lock: (any InspectableLock)?
    /// The DB queue waited for, unretained: the waiting call keeps it alive.
    unowned(unsafe) var db: DBQueue?
    /// `lock_when`: the lock's waiter record on the waiting thread's stack (the wanted value); a
    /// DB queue wait: the waiter's parker word.
    var detail: UnsafeRawPointer?
    /// Absolute deadline; `MonotonicClock.forever` for an untimed wait.
    var deadline = MonotonicClock.forever
    /// When the wait began, on the coarse monotonic clock; 0 until a reader stamps it, for a
    /// `sync` (see `publish`).
    var start: UInt64 = 0
    /// `start` is when a reader first saw the wait, not when it began (a `sync`'s wait).
    var startIsFirstSight = false
    /// The thread's innermost frame: its chain, frozen while it waits, is what it holds.
    var frame: UnsafePointer<ExecutionFrame>?
    /// Numbers the thread's waits, so the stall watch reports each wait once.
    var serial: UInt64 = 0

    var isTimed: Bool { deadline != MonotonicClock.forever }
}
