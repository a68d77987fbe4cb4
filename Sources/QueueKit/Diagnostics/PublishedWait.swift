// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// The states of ``ThreadRecord/waitState``.
@usableFromInline
enum WaitState {
    /// No wait published; only the thread itself touches ``ThreadRecord/wait``.
    @inlinable static var idle: UInt32 { 0 }
    /// A wait is published and nobody reads it.
    @inlinable static var waiting: UInt32 { 1 }
    /// A wait is published and a diagnostic walk (holding the detector lock) is reading it and
    /// the thread's frame chain: the thread cannot withdraw the wait until the walk lets go.
    @inlinable static var pinned: UInt32 { 2 }
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
@usableFromInline
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
    @usableFromInline var frame: UnsafePointer<ExecutionFrame>?
    /// Numbers the thread's waits, so the stall watch reports each wait once.
    var serial: UInt64 = 0

    var isTimed: Bool { deadline != MonotonicClock.forever }

    /// Describes a wait in `call` for `target`: every field that says what is waited for is set
    /// here, from the target, so no field keeps a value of an earlier wait.
    @inline(__always)
    mutating func describe(
        call: StaticString, target: WaitTarget, deadline: UInt64, frame: UnsafePointer<ExecutionFrame>?
    ) {
        self.call = call
        self.deadline = deadline
        self.frame = frame
        switch target {
        case .queue(let queue, let barrier):
            kind = barrier ? .queueBarrierSync : .queueSync
            self.queue = queue
            lock = nil
            db = nil
            detail = nil
        case .lock(let lock, let waiter, let forCondition):
            kind = forCondition ? .lockWhen : .lock
            queue = nil
            self.lock = lock
            db = nil
            detail = waiter
        case .dbQueue(let db, let parkerWord):
            kind = .dbQueue
            queue = Unmanaged.passUnretained(db.takeUnretainedValue().queue)
            lock = nil
            self.db = db.takeUnretainedValue()
            detail = parkerWord
        }
    }
}

/// What a thread is about to wait for, with what the deadlock detector needs to follow the wait.
/// Objects are unretained: the waiting call keeps them alive.
enum WaitTarget {
    /// A `sync` or `perform` (`barrier: false`) or a `barrier_sync` onto `queue`.
    case queue(Unmanaged<Queue>, barrier: Bool)
    /// A condition lock; `waiter` is the lock's waiter record on the waiting thread's stack,
    /// `forCondition` when it waits for a condition value (`lock_when`).
    case lock(any InspectableLock, waiter: UnsafeRawPointer, forCondition: Bool)
    /// A DB queue; `parkerWord` names the waiter in the DB queue's lane.
    case dbQueue(Unmanaged<DBQueue>, parkerWord: UnsafeRawPointer)
}
