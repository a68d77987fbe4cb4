// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

/// The bits of a condition lock's state word.
@usableFromInline
enum StateBit {
    /// The lock is held.
    @inlinable static var locked: UInt { 1 }
    /// A thread is reading or changing the condition, the waiter queue or the name: a tiny spin
    /// lock, held for a few dozen instructions and never across a system call.
    @inlinable static var guarded: UInt { 2 }
    /// The waiter queue is not empty: the fast unlock must take the slow path to hand off.
    @inlinable static var queued: UInt { 4 }
    /// The last holder exited holding the lock (or did not survive a fork): the holder, or the
    /// next acquirer of a free lock, is told. Cleared by the holder's release. It makes the
    /// uncontended compare-and-swap of `lock` and `unlock` fail, which routes to the slow paths.
    @inlinable static var abandoned: UInt { 8 }
    /// The holder was handed the lock while it slept in the kernel: it runs again only after a
    /// wake-up's latency (microseconds, tens of them on an idle virtual CPU). A spinning acquirer
    /// keeps spinning through that (see `ConditionLock+Spinning.swift`) instead of queuing to
    /// sleep too, which would make the next hand-off wait for a wake-up again, and the next.
    /// Cleared by the holder's release. It makes the uncontended compare-and-swap of `unlock`
    /// fail, which routes to the slow path.
    @inlinable static var handedToSleeper: UInt { 16 }
}

/// A lock plus a condition value, with `NSConditionLock`'s semantics and none of its traps.
///
/// The lock and its condition are two independent states: ``lock()`` acquires the lock whatever
/// the condition (and keeps it), ``lock(whenCondition:)`` acquires it only when it is free *and*
/// the condition equals the wanted value. ``unlock(withCondition:)`` sets the condition and
/// releases in one step, so no thread ever sees the lock free with the old value.
///
/// How waiting works:
/// - **One waiter woken, no herd.** A thread that must wait queues a record on its own stack and
///   sleeps on its own word. The releasing thread picks the *first* queued waiter, in arrival
///   order, that the new state satisfies (a plain `lock` waiter accepts any condition; a
///   `lock(whenCondition: c)` waiter needs the condition to be `c`) and wakes only that thread.
///   Waiters for other values are not touched. A waiter still polling its word, or one that has
///   been overtaken for ``fairnessBound``, is handed the lock: made the owner before it runs.
/// - **Eventual fairness.** A waiter asleep in the kernel is woken to take the lock itself, and
///   the lock stays free meanwhile: a running thread may take it first (barging), instead of
///   waiting for the sleeper's wake-up while the lock is held by a thread that is not running,
///   which under contention on few CPUs becomes a convoy. The woken waiter takes the lock if it is
///   still free and the state still satisfies it; otherwise it waits again at its place in line
///   (a futile wake-up, counted in ``Stats/futileWakeups``). Queued waiters never overtake one
///   another, and a waiter overtaken for ``fairnessBound`` (1 ms, counted from the first release
///   that woke it so: waiting for a condition is not being overtaken) is handed the lock, so
///   nobody starves (parking_lot's rule).
/// - **Spin, then queue, then sleep.** A thread that cannot take the lock first spins on the
///   lock's own line while nobody is queued, for as long as spinning succeeded on this lock
///   lately, and takes the lock as a newcomer when a release lets it in (see
///   `ConditionLock+Spinning.swift`); a waiter for a value that a plain condition's mirrored bits
///   rule out does not even look under the guard, and a holder that was handed the lock asleep is
///   spun through, not queued behind. Then it queues and polls its own word for a bounded time
///   (`Parker.spinBudget`, 12 µs): the first waiter in the queue polls hot for 2 µs, then every
///   waiter yields its CPU between polls; then it sleeps in the kernel.
///   A two-thread ping-pong thus costs a few atomic steps per hand-off instead of two system
///   calls and two scheduler round trips, and a thread that yields never takes the CPU from the
///   thread it waits for.
/// - **Deadlines** are absolute nanoseconds on `CLOCK_MONOTONIC` (``MonotonicClock``); a deadline
///   already past tries once. A waiter whose deadline passes at the moment it is handed the lock
///   keeps the lock and succeeds: which one happened first is settled under the queue's guard.
///
/// **A holder that dies.** A thread that exits holding the lock (returning from its start routine,
/// `pthread_exit`, cancellation; also `qk_main`, which ends the main thread) abandons it, as a
/// robust pthread mutex is: the lock goes to the first waiter that its condition satisfies, or is
/// left free, with the condition as the dead thread left it. Whoever acquires it next (by any
/// `lock` or `tryLock`) gets it normally and finds ``previousOwnerDied`` true until it releases: the
/// data the lock guards may be half-updated. ``set(_:)`` takes and releases an abandoned lock
/// without consuming that news. In a forked child, the locks that other threads held at the fork
/// are abandoned the same way (see `Lifecycle.swift`). ``Stats/abandonments`` counts both.
///
/// Ownership is checked: unlocking from a thread that does not hold the lock throws
/// ``QueueKitError/notPermitted`` and changes nothing; locking again from the holder throws
/// ``QueueKitError/wouldDeadlock``; a try from the holder throws ``QueueKitError/busy``.
///
/// The uncontended ``lock()`` is one compare-and-swap, ``unlock()`` one more, with no allocation
/// and no reference counting; waiting allocates nothing either.
///
/// Thread safety: every member may be called from any thread. The lock is not recursive.
public final class ConditionLock<Condition: Equatable & Sendable>: @unchecked Sendable, ThreadOwnedLock {
    /// Counters since creation, a snapshot (each field is read atomically, not all of them at once).
    public struct Stats: Sendable, Hashable {
        /// Successful `lock*` and `tryLock*` calls of every kind, and each ``ConditionLock/set(_:)``.
        public var acquisitions: UInt64 = 0
        /// Acquisitions that had to wait: spinning until a release let them in, or queued until
        /// they were handed the lock.
        public var contended: UInt64 = 0
        /// Times a queued thread resumed: by a hand-off (whether it was polling its word or
        /// asleep), woken to take the lock itself, or spuriously. A thread that took the lock
        /// while spinning was not woken.
        public var wakeups: UInt64 = 0
        /// Wake-ups after which the thread had to wait again: a waiter woken to take the lock
        /// itself that a running thread overtook (see ``ConditionLock/fairnessBound``), and
        /// spurious kernel wake-ups. The lock never wakes a waiter that the state it releases with
        /// does not satisfy.
        public var futileWakeups: UInt64 = 0
        /// Timed calls that threw ``QueueKitError/timedOut``, past deadlines included.
        public var timeouts: UInt64 = 0
        /// Times a holder exited holding the lock, or did not survive a fork (see
        /// ``ConditionLock/previousOwnerDied``).
        public var abandonments: UInt64 = 0

        public init() {}
    }

    /// How long a waiter may be overtaken by running threads, from the first release that woke it
    /// to take the lock itself, before a release hands it the lock: 1 ms, in nanoseconds (the
    /// bound of ``DBQueue/fairnessBound``).
    public static var fairnessBound: UInt64 { Fairness.bound }

    /// A queued waiter: a thread (on its stack, handed the lock directly) or a suspended task
    /// (on the heap for the wait, woken and then acquiring by itself: ``SuspendedWaiter``).
    struct Waiter {
        /// The waiting thread's word; `nil` for a task.
        let parker: Parker?
        let threadID: UInt64
        /// What the waiter needs of the condition.
        let wanted: Wanted
        /// The suspended task's record; `nil` for a thread.
        var task: Unmanaged<SuspendedWaiter>? = nil
        var next: UnsafeMutablePointer<Waiter>? = nil
        var previous: UnsafeMutablePointer<Waiter>? = nil
        /// Whether the node is in the queue.
        var isQueued = false
        /// When a release first woke it to take the lock itself (`MonotonicClock`), for eventual
        /// fairness; 0 before.
        var since: UInt64 = 0
    }

    enum WaitOutcome { case acquired, timedOut, refused }

    @usableFromInline
    enum LockChange { case keep, take, drop }

    /// What a release does with the abandonment news (``StateBit/abandoned``).
    @usableFromInline
    enum News {
        /// The holder knew: a plain release clears it.
        case clear
        /// ``set(_:)`` passes it on to the next acquirer.
        case keep
        /// The holder `thread` is exiting: the news starts here.
        case abandon(by: UInt64)
    }

    /// The words of a hand-off (see ``HandOffLine``), on a cache line of their own.
    @usableFromInline let line: UnsafeMutablePointer<HandOffLine>
    // Guarded by `StateBit.guarded`. (Exclusivity is provided by the guard, so the dynamic checks
    // would only add cost to every hand-off.) The condition when it is not mirrored in the line's
    // bits (see ``value``); for a mirrored one, the initial condition, never read again.
    @exclusivity(unchecked) @usableFromInline var storedValue: Condition
    #if QUEUEKIT_TESTING
        /// Test seam: spins that ignore their limit (each spin that starts takes one while any are
        /// left), and the threads spinning now.
        let unboundedSpins = Atomic<Int>(0)
        let spinningThreads = Atomic<Int>(0)
    #endif
    // Guarded by `StateBit.guarded` too.
    @exclusivity(unchecked) var head: UnsafeMutablePointer<Waiter>? = nil
    @exclusivity(unchecked) var tail: UnsafeMutablePointer<Waiter>? = nil

    // Written by threads that do not hold the lock.
    let futileCount = Atomic<UInt64>(0)
    let timeoutCount = Atomic<UInt64>(0)
    // Written under the guard (by the exiting holder, or by the fork's child hook).
    let abandonmentCount = Atomic<UInt64>(0)
    /// The number of the thread that died holding the lock while ``StateBit/abandoned`` is set, 0
    /// otherwise (or when the holder that did not survive a fork had not yet recorded itself).
    let abandoner = Atomic<UInt64>(0)

    /// The name (`nil` when unnamed), kept as a C string so that `qk_condlock_name` can lend it
    /// out until the next change.
    let nameStorage = Lock<CString?>(nil)

    /// Creates an unlocked lock whose condition is `condition`.
    ///
    /// - Parameters:
    ///   - condition: the initial condition.
    ///   - name: a name for diagnostics (see ``name``).
    public init(condition: Condition, name: String? = nil) {
        line = HandOffLine.allocate(spinEstimate: SpinLimits.initialEstimate)
        storedValue = condition
        value = condition
        if let name { self.name = name }
        LiveConditionLocks.register(self)
    }

    deinit {
        LockOrder.forget(self)
        LiveConditionLocks.unregister(self)
        HandOffLine.deallocate(line)
    }

    // MARK: Acquiring

    /// Acquires the lock whatever the condition, which it keeps; waits as long as needed.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    @inline(__always)
    public func lock() throws(QueueKitError) { try lock(call: "ConditionLock.lock") }

    /// ``lock()``, named `call` in reports.
    @inlinable @inline(__always)
    package func lock(call: StaticString) throws(QueueKitError) {
        if _fastPath(acquireIfIdle(recording: call)) { return }
        try acquire(wanted: .any, deadline: MonotonicClock.forever, isTry: false, call: call)
    }

    /// Acquires the lock if it is free, whatever the condition.
    ///
    /// - Throws: ``QueueKitError/busy`` when it is held (also by the calling thread).
    @inline(__always)
    public func tryLock() throws(QueueKitError) { try tryLock(call: "ConditionLock.tryLock") }

    /// ``tryLock()``, named `call` in reports.
    @inlinable @inline(__always)
    package func tryLock(call: StaticString) throws(QueueKitError) {
        if _fastPath(acquireIfIdle()) { return }
        try acquire(wanted: .any, deadline: 0, isTry: true, call: call)
    }

    /// Acquires the lock whatever the condition, giving up at `deadline`.
    ///
    /// - Parameter deadline: absolute nanoseconds on ``MonotonicClock``; ``MonotonicClock/forever``
    ///   never expires; a deadline already past tries once.
    /// - Throws: ``QueueKitError/timedOut`` (not holding the lock) when the deadline passed first;
    ///   ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    @inline(__always)
    public func lock(before deadline: UInt64) throws(QueueKitError) {
        try lock(before: deadline, call: "ConditionLock.lock")
    }

    /// ``lock(before:)-(UInt64)``, named `call` in reports.
    @inline(__always)
    package func lock(before deadline: UInt64, call: StaticString) throws(QueueKitError) {
        if _fastPath(acquireIfIdle(recording: call, deadline: deadline)) { return }
        try acquire(wanted: .any, deadline: deadline, isTry: false, call: call)
    }

    /// As ``lock(before:)-(UInt64)``, with any ``QueueKitDeadline`` (a `ContinuousClock.Instant`,
    /// a `DispatchTime`). The timed calls come in this pair: nanoseconds, and any deadline type.
    public func lock(before deadline: some QueueKitDeadline) throws(QueueKitError) {
        try lock(before: deadline.monotonicDeadline)
    }

    /// Returns holding the lock with the condition equal to `condition`, waiting as long as needed.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    public func lock(whenCondition condition: Condition) throws(QueueKitError) {
        try lock(whenCondition: condition, call: "ConditionLock.lock")
    }

    /// ``lock(whenCondition:)``, named `call` in reports.
    package func lock(whenCondition condition: Condition, call: StaticString) throws(QueueKitError) {
        if _fastPath(acquireIfIdle(when: condition, recording: call)) { return }
        try acquire(wanted: .value(condition), deadline: MonotonicClock.forever, isTry: false, call: call)
    }

    /// Acquires the lock only if it is free and its condition equals `condition`.
    ///
    /// - Throws: ``QueueKitError/busy`` otherwise (also when the calling thread holds it).
    public func tryLock(whenCondition condition: Condition) throws(QueueKitError) {
        try tryLock(whenCondition: condition, call: "ConditionLock.tryLock")
    }

    /// ``tryLock(whenCondition:)``, named `call` in reports.
    package func tryLock(whenCondition condition: Condition, call: StaticString) throws(QueueKitError) {
        try acquire(wanted: .value(condition), deadline: 0, isTry: true, call: call)
    }

    /// As ``lock(whenCondition:)``, giving up at `deadline`.
    ///
    /// - Parameters:
    ///   - condition: the condition the lock must have when it is acquired.
    ///   - deadline: absolute nanoseconds on ``MonotonicClock``; ``MonotonicClock/forever`` never
    ///     expires; a deadline already past tries once.
    /// - Throws: ``QueueKitError/timedOut`` (not holding the lock) when the deadline passed first;
    ///   ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    public func lock(whenCondition condition: Condition, before deadline: UInt64) throws(QueueKitError) {
        try lock(whenCondition: condition, before: deadline, call: "ConditionLock.lock")
    }

    /// ``lock(whenCondition:before:)-(_,UInt64)``, named `call` in reports.
    package func lock(whenCondition condition: Condition, before deadline: UInt64, call: StaticString)
        throws(QueueKitError)
    {
        try acquire(wanted: .value(condition), deadline: deadline, isTry: false, call: call)
    }

    /// As ``lock(whenCondition:before:)-(_,UInt64)``, with any ``QueueKitDeadline``.
    public func lock(whenCondition condition: Condition, before deadline: some QueueKitDeadline) throws(QueueKitError) {
        try lock(whenCondition: condition, before: deadline.monotonicDeadline)
    }

    // MARK: Releasing

    /// Releases the lock, keeping the condition; hands it to the first waiter that the condition
    /// satisfies, if any.
    ///
    /// - Throws: ``QueueKitError/notPermitted`` (nothing changed) when the calling thread does not
    ///   hold the lock.
    @inlinable @inline(__always)
    public func unlock() throws(QueueKitError) {
        guard unlockIfHeld() else { throw .notPermitted }
    }

    /// ``unlock()`` without the error: false (nothing changed) when the calling thread does not
    /// hold the lock. `plainBy` as for ``acquireIfIdle(recording:deadline:plainBy:)``.
    @inlinable @inline(__always)
    package func unlockIfHeld(plainBy plainThread: UInt64 = 0) -> Bool {
        guard relinquishIfHeld(plainBy: plainThread) else { return false }
        freeHeldWord()
        return true
    }

    /// The last step of a release whose condition is settled (owner cleared): frees a word that
    /// says only "held" with one compare-and-swap; anything more (waiters, news, a holder handed
    /// the lock asleep) goes through the guard and hands the lock on.
    @inlinable @inline(__always)
    func freeHeldWord() {
        if _fastPath(
            line.pointee.state.compareExchange(expected: StateBit.locked, desired: 0, ordering: .releasing).exchanged)
        {
            return
        }
        release(setting: nil, news: .clear)
    }

    /// Sets the condition and releases the lock in one step: no thread sees the lock free with the
    /// old condition. Wakes only the first waiter that the new state satisfies.
    ///
    /// - Throws: ``QueueKitError/notPermitted`` (nothing changed) when the calling thread does not
    ///   hold the lock.
    public func unlock(withCondition condition: Condition) throws(QueueKitError) {
        guard unlockIfHeld(setting: condition) else { throw .notPermitted }
    }

    /// ``unlock(withCondition:)`` without the error: false (nothing changed) when the calling
    /// thread does not hold the lock. With nobody queued and no news, the release of a mirrored
    /// condition is one compare-and-swap after the condition's store, any other one the guard's
    /// compare-and-swap and one store (a held lock's word changes only under its guard). `plainBy`
    /// as for ``acquireIfIdle(recording:deadline:plainBy:)``.
    @inlinable @inline(__always)
    package func unlockIfHeld(setting condition: Condition, plainBy plainThread: UInt64 = 0) -> Bool {
        guard relinquishIfHeld(plainBy: plainThread) else { return false }
        if Self.mirrorsCondition {
            // The holder alone writes a mirrored condition (atomic bits): it sets it while it
            // still holds the lock, then frees the word with one compare-and-swap, whose release
            // ordering publishes the condition with the free lock.
            recordRelease(setting: condition)
            freeHeldWord()
            return true
        }
        if _fastPath(
            line.pointee.state.compareExchange(
                expected: StateBit.locked, desired: StateBit.locked | StateBit.guarded, ordering: .acquiring
            ).exchanged)
        {
            recordRelease(setting: condition)
            line.pointee.state.store(0, ordering: .releasing)
            return true
        }
        release(setting: condition, news: .clear)
        return true
    }

    /// Acquires the lock, then ``unlock(withCondition:)``: sets the condition from a thread that
    /// does not hold the lock, waking a waiter for it. This is how a chain of tasks starts (the
    /// first task of a chain), without unlocking a lock nobody holds.
    ///
    /// On an abandoned lock it succeeds and leaves ``previousOwnerDied`` for the next acquirer.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread holds the lock (use
    ///   ``unlock(withCondition:)``).
    public func set(_ condition: Condition) throws(QueueKitError) { try set(condition, call: "ConditionLock.set") }

    /// ``set(_:)``, named `call` in reports.
    package func set(_ condition: Condition, call: StaticString) throws(QueueKitError) {
        if !acquireIfIdle(recording: call) {
            try acquire(wanted: .any, deadline: MonotonicClock.forever, isTry: false, call: call)
        }
        try relinquish()
        release(setting: condition, news: .keep)
    }
}
