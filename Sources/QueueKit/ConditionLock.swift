import Dispatch
import Glibc
import QueueKitShim
import Synchronization

/// The bits of a condition lock's state word.
private enum StateBit {
    /// The lock is held.
    static let locked: UInt = 1
    /// A thread is reading or changing the condition, the waiter queue or the name: a tiny spin
    /// lock, held for a few dozen instructions and never across a system call.
    static let guarded: UInt = 2
    /// The waiter queue is not empty: the fast unlock must take the slow path to hand off.
    static let queued: UInt = 4
    /// The last holder exited holding the lock (or did not survive a fork): the holder, or the
    /// next acquirer of a free lock, is told. Cleared by the holder's release. It makes the
    /// uncontended compare-and-swap of `lock` and `unlock` fail, which routes to the slow paths.
    static let abandoned: UInt = 8
}

/// A lock plus a condition value, with `NSConditionLock`'s semantics and none of its traps.
///
/// The lock and its condition are two independent states: ``lock()`` acquires the lock whatever
/// the condition (and keeps it), ``lock(whenCondition:)`` acquires it only when it is free *and*
/// the condition equals the wanted value. ``unlock(withCondition:)`` sets the condition and
/// releases in one step, so no thread ever sees the lock free with the old value.
///
/// How waiting works:
/// - **Direct hand-off, no herd.** A thread that must wait queues a record on its own stack and
///   sleeps on its own word. The releasing thread picks the *first* queued waiter, in arrival
///   order, that the new state satisfies (a plain `lock` waiter accepts any condition; a
///   `lock(whenCondition: c)` waiter needs the condition to be `c`), makes it the owner and wakes
///   only that thread. Waiters for other values are not touched, so a wake-up is never futile
///   (``Stats/futileWakeups`` counts only spurious kernel wake-ups).
/// - **Fairness.** Waiters for the same value are served strictly in arrival order. A newcomer
///   can only take a *free* lock, and the lock is never left free while a queued waiter could
///   take it (the release hands it over instead), so barging never overtakes a waiter that the
///   state satisfies: no starvation, at the price of a context switch per contended hand-off
///   under heavy plain-mutex contention.
/// - **Spin, then sleep.** A waiter polls its word for a bounded time (`Parker.spinBudget`,
///   12 µs) before it sleeps in the kernel: the first waiter in the queue polls hot for 2 µs and
///   then yields its CPU between polls, the ones behind it only yield. A two-thread ping-pong
///   thus costs well under a microsecond per round instead of two system calls and two
///   scheduler round trips, and a thread that yields never takes the CPU from the thread it
///   waits for.
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
        /// Acquisitions that had to wait.
        public var contended: UInt64 = 0
        /// Times a waiting thread resumed: by a hand-off (whether it was spinning or asleep) or
        /// spuriously.
        public var wakeups: UInt64 = 0
        /// Wake-ups after which the thread had to wait again (only spurious kernel wake-ups: the
        /// lock never wakes a waiter that the new state does not satisfy).
        public var futileWakeups: UInt64 = 0
        /// Timed calls that threw ``QueueKitError/timedOut``, past deadlines included.
        public var timeouts: UInt64 = 0
        /// Times a holder exited holding the lock, or did not survive a fork (see
        /// ``ConditionLock/previousOwnerDied``).
        public var abandonments: UInt64 = 0

        public init() {}
    }

    /// A queued waiter: a thread (on its stack, handed the lock directly) or a suspended task
    /// (on the heap for the wait, woken and then acquiring by itself: ``SuspendedWaiter``).
    private struct Waiter {
        /// The waiting thread's word; `nil` for a task.
        let parker: Parker?
        let threadID: UInt64
        /// The condition the waiter needs; `nil` for a plain `lock`, which accepts any.
        let wanted: Condition?
        /// The suspended task's record; `nil` for a thread.
        var task: Unmanaged<SuspendedWaiter>? = nil
        var next: UnsafeMutablePointer<Waiter>? = nil
        var previous: UnsafeMutablePointer<Waiter>? = nil
        /// Whether the node is in the queue.
        var isQueued = false
    }

    private enum WaitOutcome { case acquired, timedOut, refused }

    private enum LockChange { case keep, take, drop }

    /// What a release does with the abandonment news (``StateBit/abandoned``).
    private enum News {
        /// The holder knew: a plain release clears it.
        case clear
        /// ``set(_:)`` passes it on to the next acquirer.
        case keep
        /// The holder `thread` is exiting: the news starts here.
        case abandon(by: UInt64)
    }

    private let state = Atomic<UInt>(0)
    /// `qkshim_thread_id()` of the holder, 0 when free. Written by the acquiring thread, or by the
    /// releasing thread on a hand-off (before the new owner resumes).
    private let owner = Atomic<UInt64>(0)

    // Guarded by `StateBit.guarded`. (Exclusivity is provided by the guard, so the dynamic checks
    // would only add cost to every hand-off.)
    @exclusivity(unchecked) private var value: Condition
    @exclusivity(unchecked) private var head: UnsafeMutablePointer<Waiter>? = nil
    @exclusivity(unchecked) private var tail: UnsafeMutablePointer<Waiter>? = nil

    // Written only by the thread that holds the lock (a plain load and store, no read-modify-write
    // on the fast path); readable by anyone.
    private let acquisitionCount = Atomic<UInt64>(0)
    private let contendedCount = Atomic<UInt64>(0)
    private let handOffCount = Atomic<UInt64>(0)
    // Written by threads that do not hold the lock.
    private let futileCount = Atomic<UInt64>(0)
    private let timeoutCount = Atomic<UInt64>(0)
    // Written under the guard (by the exiting holder, or by the fork's child hook).
    private let abandonmentCount = Atomic<UInt64>(0)
    /// The number of the thread that died holding the lock while ``StateBit/abandoned`` is set, 0
    /// otherwise (or when the holder that did not survive a fork had not yet recorded itself).
    private let abandoner = Atomic<UInt64>(0)

    /// The name (`nil` when unnamed), kept as a C string so that `qk_condlock_name` can lend it
    /// out until the next change.
    let nameStorage = Lock<CString?>(nil)

    /// Creates an unlocked lock whose condition is `condition`.
    ///
    /// - Parameters:
    ///   - condition: the initial condition.
    ///   - name: a name for diagnostics (see ``name``).
    public init(condition: Condition, name: String? = nil) {
        self.value = condition
        if let name { self.name = name }
        LiveConditionLocks.register(self)
    }

    deinit {
        LockOrder.forget(self)
        LiveConditionLocks.unregister(self)
    }

    // MARK: Acquiring

    /// Acquires the lock whatever the condition, which it keeps; waits as long as needed.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    @inline(__always)
    public func lock() throws(QueueKitError) {
        if _fastPath(acquireIfIdle(recording: "qk_condlock_lock")) { return }
        try acquire(wanted: nil, deadline: MonotonicClock.forever, isTry: false, call: "qk_condlock_lock")
    }

    /// Acquires the lock if it is free, whatever the condition.
    ///
    /// - Throws: ``QueueKitError/busy`` when it is held (also by the calling thread).
    @inline(__always)
    public func tryLock() throws(QueueKitError) {
        if _fastPath(acquireIfIdle()) { return }
        try acquire(wanted: nil, deadline: 0, isTry: true, call: "qk_condlock_trylock")
    }

    /// Acquires the lock whatever the condition, giving up at `deadline`.
    ///
    /// - Parameter deadline: absolute nanoseconds on ``MonotonicClock``; ``MonotonicClock/forever``
    ///   never expires; a deadline already past tries once.
    /// - Throws: ``QueueKitError/timedOut`` (not holding the lock) when the deadline passed first;
    ///   ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    @inline(__always)
    public func lock(before deadline: UInt64) throws(QueueKitError) {
        if _fastPath(acquireIfIdle(recording: "qk_condlock_lock_until", deadline: deadline)) { return }
        try acquire(wanted: nil, deadline: deadline, isTry: false, call: "qk_condlock_lock_until")
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
        try acquire(wanted: condition, deadline: MonotonicClock.forever, isTry: false, call: "qk_condlock_lock_when")
    }

    /// Acquires the lock only if it is free and its condition equals `condition`.
    ///
    /// - Throws: ``QueueKitError/busy`` otherwise (also when the calling thread holds it).
    public func tryLock(whenCondition condition: Condition) throws(QueueKitError) {
        try acquire(wanted: condition, deadline: 0, isTry: true, call: "qk_condlock_trylock_when")
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
        try acquire(wanted: condition, deadline: deadline, isTry: false, call: "qk_condlock_lock_when_until")
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
    @inline(__always)
    public func unlock() throws(QueueKitError) {
        try relinquish()
        if _fastPath(state.compareExchange(expected: StateBit.locked, desired: 0, ordering: .releasing).exchanged) {
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
        try relinquish()
        release(setting: condition, news: .clear)
    }

    /// Acquires the lock, then ``unlock(withCondition:)``: sets the condition from a thread that
    /// does not hold the lock, waking a waiter for it. This is how a chain of tasks starts (the
    /// first task of a chain), without unlocking a lock nobody holds.
    ///
    /// On an abandoned lock it succeeds and leaves ``previousOwnerDied`` for the next acquirer.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread holds the lock (use
    ///   ``unlock(withCondition:)``).
    public func set(_ condition: Condition) throws(QueueKitError) {
        if !acquireIfIdle(recording: "qk_condlock_set") {
            try acquire(wanted: nil, deadline: MonotonicClock.forever, isTry: false, call: "qk_condlock_set")
        }
        try relinquish()
        release(setting: condition, news: .keep)
    }

    // MARK: Scoped forms

    /// Runs `body` holding the lock with the condition equal to `condition`, then releases it with
    /// the condition `body` returns: the next state cannot be forgotten.
    ///
    /// When `body` throws, the lock is released with the condition unchanged and the error is
    /// rethrown.
    ///
    /// - Parameters:
    ///   - condition: the condition the lock must have when `body` runs.
    ///   - deadline: as in ``lock(whenCondition:before:)-(_,UInt64)``; forever by default.
    ///   - body: runs holding the lock; returns the condition to release it with.
    /// - Throws: what `body` throws, or the ``QueueKitError`` of acquiring (`body` did not run).
    public func withLock(
        whenCondition condition: Condition,
        before deadline: UInt64 = MonotonicClock.forever,
        _ body: () throws -> Condition
    ) throws {
        try lock(whenCondition: condition, before: deadline)
        try runHeld(body)
    }

    /// Runs `body` in the lock the calling thread has just acquired, then releases it with the
    /// condition `body` returns, or unchanged when `body` throws (rethrown).
    func runHeld(_ body: () throws -> Condition) throws {
        let next: Condition
        do {
            next = try body()
        } catch {
            try? unlock()
            throw error
        }
        try unlock(withCondition: next)
    }

    /// As ``withLock(whenCondition:before:_:)``, with any ``QueueKitDeadline``.
    public func withLock(
        whenCondition condition: Condition,
        before deadline: some QueueKitDeadline,
        _ body: () throws -> Condition
    ) throws {
        try withLock(whenCondition: condition, before: deadline.monotonicDeadline, body)
    }

    /// Runs `body` holding the lock whatever the condition, which it keeps, and returns its result.
    ///
    /// - Throws: what `body` throws (the lock is released first), or
    ///   ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    public func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        try lock()
        defer { try? unlock() }
        return try body()
    }

    // MARK: Observing

    /// The current condition, read without a race (it is the value some moment between the call
    /// and its return). Thread-safe; never waits for the lock's holder.
    public var condition: Condition {
        acquireGuard()
        let current = value
        releaseGuard(.keep)
        return current
    }

    /// The lock's name, "" when unnamed (out of memory, setting it changes nothing). Thread-safe.
    public var name: String {
        get { nameStorage.withLock { $0?.string } ?? "" }
        set {
            guard let copy = CString(newValue) else { return }  // out of memory: unchanged
            nameStorage.withLock { $0 = copy }
        }
    }

    /// Counters since creation. Thread-safe.
    public var stats: Stats {
        var stats = Stats()
        stats.acquisitions = acquisitionCount.load(ordering: .relaxed)
        stats.contended = contendedCount.load(ordering: .relaxed)
        let futile = futileCount.load(ordering: .relaxed)
        stats.wakeups = handOffCount.load(ordering: .relaxed) &+ futile
        stats.futileWakeups = futile
        stats.timeouts = timeoutCount.load(ordering: .relaxed)
        stats.abandonments = abandonmentCount.load(ordering: .relaxed)
        return stats
    }

    #if QUEUEKIT_TESTING
    /// Test seam (debug builds only): how many threads and tasks are queued for the lock now (a
    /// snapshot), so tests can force interleavings without sleeping. Thread-safe.
    var waiterCount: Int {
        acquireGuard()
        var count = 0
        var node = head
        while let waiter = node {
            count += 1
            node = waiter.pointee.next
        }
        releaseGuard(.keep)
        return count
    }
    #endif

    /// Whether some thread holds the lock right now (a snapshot). Thread-safe.
    public var isLocked: Bool { state.load(ordering: .relaxed) & StateBit.locked != 0 }

    /// Whether the calling thread holds the lock and the holder before it exited holding it (or
    /// did not survive a fork): the data the lock guards may be half-updated. True from the
    /// acquisition (the one the C API reports as `EOWNERDEAD`) until this thread releases.
    /// Thread-safe; `false` on threads that do not hold the lock.
    public var previousOwnerDied: Bool {
        state.load(ordering: .acquiring) & StateBit.abandoned != 0
            && owner.load(ordering: .relaxed) == qkshim_thread_id()
    }

    /// The number (`qkshim_thread_id()`, as reports name threads) of the thread that exited
    /// holding the lock, while the news is pending: the lock is free and marked abandoned, or
    /// held by a thread that has not released it since. `nil` otherwise, and when the dead holder
    /// is unknown (it died at a fork in the instant between taking the lock and recording itself).
    /// For wait reports. Thread-safe.
    var abandonedBy: UInt64? {
        guard state.load(ordering: .acquiring) & StateBit.abandoned != 0 else { return nil }
        let thread = abandoner.load(ordering: .relaxed)
        return thread == 0 ? nil : thread
    }

    /// The number of the holding thread, `nil` when free (a snapshot, for wait reports).
    var holder: UInt64? {
        let thread = owner.load(ordering: .relaxed)
        return thread == 0 ? nil : thread
    }

    // MARK: Destroying

    /// Takes the lock for good if nobody holds it, waits for it or is inside a call that changes
    /// it: the first step of destroying it. False when it is in use.
    /// An abandoned lock nobody holds or waits for is idle too.
    func retireIfIdle() -> Bool {
        state.compareExchange(expected: 0, desired: StateBit.locked, ordering: .acquiring).exchanged
            || state.compareExchange(
                expected: StateBit.abandoned, desired: StateBit.locked, ordering: .acquiring).exchanged
    }

    // MARK: Implementation

    /// The uncontended acquisition: one compare-and-swap, then the holder's bookkeeping. `call`
    /// names a call that may wait (its lock-order edges are recorded here); `nil` for the try forms.
    @inline(__always)
    private func acquireIfIdle(recording call: StaticString? = nil, deadline: UInt64 = MonotonicClock.forever) -> Bool {
        guard state.compareExchange(expected: 0, desired: StateBit.locked, ordering: .acquiring).exchanged else {
            return false
        }
        didAcquire(by: qkshim_thread_id(), waited: false, recording: call, deadline: deadline)
        return true
    }

    /// Bookkeeping of the new holder: owner and counters (only the holder writes them, so a load
    /// and a store suffice).
    @inline(__always)
    private func didAcquire(
        by thread: UInt64, waited: Bool, recording call: StaticString? = nil, deadline: UInt64 = MonotonicClock.forever
    ) {
        ThreadSanitizer.conditionLockAcquired(self)
        LockOrder.acquired(self, recording: call, deadline: deadline)
        owner.store(thread, ordering: .relaxed)
        qkshim_condlock_acquired()
        acquisitionCount.store(acquisitionCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        if waited {
            contendedCount.store(contendedCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
            handOffCount.store(handOffCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        }
    }

    /// Every acquisition but the uncontended plain one: ownership check, an immediate take when
    /// the state allows it, otherwise a try's failure or a queued wait for a hand-off.
    ///
    /// `call` names the call in wait and deadlock reports (its C name).
    @inline(never)
    private func acquire(wanted: Condition?, deadline: UInt64, isTry: Bool, call: StaticString) throws(QueueKitError) {
        let me = qkshim_thread_id()
        if owner.load(ordering: .relaxed) == me { throw isTry ? .busy : .wouldDeadlock }
        if !isTry { guard LockOrder.willWait(for: self, .exclusive, call: call, deadline: deadline) else { throw .wouldDeadlock } }

        // A plain lock takes any free lock: a free lock has no queued waiter it could overtake.
        if wanted == nil && takeIfFree() {
            didAcquire(by: me, waited: false)
            return
        }

        let observed = acquireGuard()
        if observed & StateBit.locked == 0 && (wanted == nil || wanted == value) {
            if releaseGuard(.take) {
                didAcquire(by: me, waited: false)
                return
            }
            // A plain lock took it meanwhile; we still hold the guard: wait below.
        }
        if isTry {
            releaseGuard(.keep)
            throw .busy
        }
        if deadline != MonotonicClock.forever && deadline <= MonotonicClock.now() {
            timeoutCount.add(1, ordering: .relaxed)
            releaseGuard(.keep)
            throw .timedOut
        }
        let outcome = Parker.withParker { parker in
            withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer in
                let node = buffer.baseAddress!
                node.initialize(to: Waiter(parker: parker, threadID: me, wanted: wanted))
                defer { node.deinitialize(count: 1) }
                return wait(queuing: node, until: deadline, call: call)
            }
        }
        switch outcome {
        case .acquired: didAcquire(by: me, waited: true)
        case .timedOut: throw .timedOut
        case .refused: throw .wouldDeadlock
        }
    }

    /// Sets the locked bit if it is clear, whatever the other bits. True when it did.
    @inline(__always)
    private func takeIfFree() -> Bool { setIfClear(StateBit.locked) != nil }

    /// Sets `bit` in the state word if it is clear, whatever the other bits: the word as it was
    /// before, or `nil` (nothing changed) when `bit` was set.
    @inline(__always)
    private func setIfClear(_ bit: UInt) -> UInt? {
        var current = state.load(ordering: .relaxed)
        while current & bit == 0 {
            let (exchanged, now) = state.compareExchange(
                expected: current, desired: current | bit,
                successOrdering: .acquiring, failureOrdering: .relaxed)
            if exchanged { return current }
            current = now
        }
        return nil
    }

    /// Queues `node` (the caller holds the guard, which this releases) and waits for a hand-off
    /// or the deadline. On `.acquired` the releasing thread has already made us the owner; on
    /// `.refused` the wait would have closed a cycle across threads: `node` is unlinked, nothing
    /// was taken, and the deadlock handler has the report.
    private func wait(queuing node: UnsafeMutablePointer<Waiter>, until deadline: UInt64, call: StaticString) -> WaitOutcome {
        // Only the first waiter polls hot; the ones behind it only yield, so they never burn
        // the CPUs that the threads ahead of them need to run and release.
        let first = head == nil
        append(node)
        releaseGuard(.keep)

        let parker = node.pointee.parker!
        var futileWakeups = 0
        // Spin first: most hand-offs arrive within it, and a spinning waiter publishes nothing.
        // Only a waiter about to sleep publishes its wait (and, untimed, checks for a cycle).
        var handedOff = parker.spinUntilSet(deadline: deadline, pureSpin: first)
        if !handedOff {
            let record = ThreadRecord.current
            let refusal = WaitRegistry.enter(
                record, untimed: deadline == MonotonicClock.forever,
                holderMayWait: { WaitRegistry.ownerMayWait(owner.load(ordering: .relaxed), me: record) }
            ) { wait in
                wait.call = call
                wait.kind = node.pointee.wanted == nil ? .lock : .lockWhen
                wait.queue = nil
                wait.lock = self
                wait.detail = UnsafeRawPointer(node)
                wait.deadline = deadline
                wait.frame = ExecutionContext.innermost
            }
            if let refusal {
                // Refused (the wait is already withdrawn). A release may have handed us the lock
                // meanwhile: settled under the guard, as a timeout is. Then the ring was no ring.
                acquireGuard()
                let handed = parker.isSet
                if !handed { unlink(node) }
                releaseGuard(.keep)
                if handed { return .acquired }
                WaitRegistry.deliver(refusal)
                return .refused
            }
            handedOff = parker.park(until: deadline, futileWakeups: &futileWakeups, spin: false)
            WaitRegistry.withdraw(record)
        }
        if futileWakeups > 0 {
            futileCount.add(UInt64(futileWakeups), ordering: .relaxed)
        }
        if handedOff { return .acquired }

        // The deadline passed. A release may be handing us the lock right now: whichever of the
        // two got the guard first wins. The releaser sets our word under the guard.
        acquireGuard()
        handedOff = parker.isSet
        if !handedOff {
            unlink(node)
            timeoutCount.add(1, ordering: .relaxed)
        }
        releaseGuard(.keep)
        return handedOff ? .acquired : .timedOut
    }

    /// The holder's first step of every release: ownership check, owner cleared, one lock fewer.
    @inline(__always)
    private func relinquish() throws(QueueKitError) {
        guard owner.load(ordering: .relaxed) == qkshim_thread_id() else { throw .notPermitted }
        ThreadSanitizer.conditionLockReleasing(self)
        LockOrder.released(self)
        owner.store(0, ordering: .relaxed)
        qkshim_condlocks_held_decrement()
    }

    /// Releases the held lock (owner already cleared), optionally setting the condition, handing
    /// it to the first queued waiter that the new state satisfies. The abandonment news changes
    /// before the hand-off, so the new holder sees it as it resumes.
    private func release(setting newValue: Condition?, news: News) {
        acquireGuard()
        switch news {
        case .clear:
            if state.load(ordering: .relaxed) & StateBit.abandoned != 0 {
                abandoner.store(0, ordering: .relaxed)
                state.bitwiseAnd(~StateBit.abandoned, ordering: .relaxed)
            }
        case .keep:
            break
        case .abandon(let thread):
            abandoner.store(thread, ordering: .relaxed)
            abandonmentCount.add(1, ordering: .relaxed)
            state.bitwiseOr(StateBit.abandoned, ordering: .relaxed)
        }
        if let newValue { value = newValue }
        passOn(held: true)
    }

    /// The first queued waiter that the current state satisfies (the caller holds the guard).
    private func firstSatisfied() -> UnsafeMutablePointer<Waiter>? {
        var candidate = head
        while let waiter = candidate {
            if let wanted = waiter.pointee.wanted, wanted != value {
                candidate = waiter.pointee.next
            } else {
                return waiter
            }
        }
        return nil
    }

    /// Gives the lock on (the caller holds the guard, which this releases): to the first queued
    /// waiter that the state satisfies. A thread is handed the lock; a task is woken and the lock
    /// left free for it to take when it runs; a task already woken is on its way, so the lock is
    /// left free. `held`: the caller holds the lock (a release); otherwise the lock is free or
    /// held by someone else (who will pass it on at its release).
    private func passOn(held: Bool) {
        if !held && state.load(ordering: .relaxed) & StateBit.locked != 0 {
            releaseGuard(.keep)
            return
        }
        guard let chosen = firstSatisfied() else {
            releaseGuard(held ? .drop : .keep)
            return
        }
        if let task = chosen.pointee.task {
            let continuation = task._withUnsafeGuaranteedRef { $0.takeContinuationForWakeUp() }
            releaseGuard(held ? .drop : .keep)
            continuation?.resume(returning: false)
            return
        }
        if !held && !takeIfFree() {
            releaseGuard(.keep)
            return
        }
        unlink(chosen)
        owner.store(chosen.pointee.threadID, ordering: .relaxed)
        // Setting the word is the hand-off; from here on `chosen` may be gone.
        let parker = chosen.pointee.parker!
        let word = parker.word
        let asleep = parker.setWord()
        releaseGuard(.keep)
        if asleep { Parker.wake(word) }
    }

    // MARK: Suspended tasks

    /// Waits, suspending, until the calling task holds the lock with a state that satisfies
    /// `wanted` (`nil`: any condition). Returns on the thread that holds it.
    ///
    /// The task is woken, not handed the lock: it takes the lock itself when it runs again (here,
    /// in `takeOrQueue`), keeping its place in line when someone took it first.
    func acquireSuspending(wanted: Condition?, call: StaticString, isolation: isolated (any Actor)?) async throws {
        try Task.checkCancellation()
        if owner.load(ordering: .relaxed) == qkshim_thread_id() { throw QueueKitError.wouldDeadlock }
        if wanted == nil ? acquireIfIdle() : tryTake(wanted: wanted) { return }

        let record = SuspendedWaiter(call: call, object: self, wanted: wanted)
        let node = UnsafeMutablePointer<Waiter>.allocate(capacity: 1)
        node.initialize(to: Waiter(parker: nil, threadID: 0, wanted: wanted, task: .passUnretained(record)))
        SuspendedWaits.register(record)
        defer {
            SuspendedWaits.unregister(record)
            node.deinitialize(count: 1)
            node.deallocate()
        }
        let nodeAddress = UncheckedSendable(node)
        try await withTaskCancellationHandler {
            var attempts = 0
            while true {
                let took = try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                    takeOrQueue(node, continuation)
                }
                if took { break }
                attempts += 1
                if attempts > 1 { futileCount.add(1, ordering: .relaxed) }
            }
        } onCancel: {
            cancelWait(nodeAddress.value)
        }
        didAcquire(by: qkshim_thread_id(), waited: true)
    }

    /// An immediate acquisition for a task that wants `wanted`: the lock is free and the condition
    /// matches. No waiting, no counters on failure.
    private func tryTake(wanted: Condition?) -> Bool {
        let observed = acquireGuard()
        if observed & StateBit.locked == 0 && (wanted == nil || wanted == value) && releaseGuard(.take) {
            didAcquire(by: qkshim_thread_id(), waited: false)
            return true
        }
        releaseGuard(.keep)
        return false
    }

    /// Under the guard, on the task's current thread: ends the wait of a cancelled task, takes
    /// the lock when it is free and the state satisfies the task (a task still in line takes it
    /// only when nobody ahead of it could), or queues the task (again at its old place when it
    /// is already in line) and stores its continuation.
    private func takeOrQueue(_ node: UnsafeMutablePointer<Waiter>, _ continuation: UnsafeContinuation<Bool, any Error>) {
        let record = node.pointee.task!
        let observed = acquireGuard()
        if record._withUnsafeGuaranteedRef({ $0.isCancelled }) {
            leave(node)
            continuation.resume(throwing: CancellationError())
            return
        }
        let satisfied = node.pointee.wanted == nil || node.pointee.wanted == value
        if observed & StateBit.locked == 0 && satisfied && firstSatisfied().map({ $0 == node }) ?? true {
            if node.pointee.isQueued { unlink(node) }
            if releaseGuard(.take) {
                continuation.resume(returning: true)
                return
            }
            // A plain lock took it meanwhile; we still hold the guard: wait below.
        }
        if !node.pointee.isQueued { append(node) }
        record._withUnsafeGuaranteedRef { $0.suspend(with: continuation) }
        releaseGuard(.keep)
    }

    /// The cancellation handler of a suspended task: a task still waiting is taken out of line
    /// and resumed with `CancellationError`; one already woken finds out when it runs.
    private func cancelWait(_ node: UnsafeMutablePointer<Waiter>) {
        acquireGuard()
        let continuation = node.pointee.task!._withUnsafeGuaranteedRef { $0.cancel() }
        if continuation != nil { unlink(node) }
        releaseGuard(.keep)
        continuation?.resume(throwing: CancellationError())
    }

    /// Takes a cancelled task out of line (the caller holds the guard, which this releases). A
    /// woken task may have been the one the lock was left free for: pass it on.
    private func leave(_ node: UnsafeMutablePointer<Waiter>) {
        guard node.pointee.isQueued else {
            releaseGuard(.keep)
            return
        }
        unlink(node)
        passOn(held: false)
    }

    // MARK: Threads that die, processes that fork (see Lifecycle.swift)

    func abandon(heldBy thread: UInt64) {
        guard owner.load(ordering: .relaxed) == thread else { return }
        ThreadSanitizer.conditionLockReleasing(self)   // on the exiting holder's own thread
        owner.store(0, ordering: .relaxed)
        release(setting: nil, news: .abandon(by: thread))
    }

    func prepareForFork() {
        nameStorage.acquireForFork()
        acquireGuard()
    }

    func resumeInParent() {
        releaseGuard(.keep)
        nameStorage.releaseInParent()
    }

    func resumeInChild(survivor: UInt64) {
        // The queued waiters were other threads, parked on their own stacks: gone.
        head = nil
        tail = nil
        let holder = owner.load(ordering: .relaxed)
        if state.load(ordering: .relaxed) & StateBit.locked != 0 && holder != survivor {
            owner.store(0, ordering: .relaxed)
            abandoner.store(holder, ordering: .relaxed)
            abandonmentCount.add(1, ordering: .relaxed)
            state.bitwiseOr(StateBit.abandoned, ordering: .relaxed)
            releaseGuard(.drop)
        } else {
            releaseGuard(.keep)
        }
        nameStorage.releaseInChild()
    }

    // MARK: The guard

    /// Spins until this thread holds the guard. Returns the state word as it was taken.
    @discardableResult
    private func acquireGuard() -> UInt {
        var spins: UInt32 = 0
        while true {
            if let taken = setIfClear(StateBit.guarded) { return taken }
            // The holder may have been preempted (more threads than CPUs): let it run.
            spins &+= 1
            if spins < 64 { qkshim_cpu_relax() } else { sched_yield() }
        }
    }

    /// Releases the guard, publishing whether waiters are queued, and changes the locked bit:
    /// `.take` sets it if it is clear (false, guard still held, when a plain lock set it meanwhile),
    /// `.drop` clears it. Only plain locks change the word while the guard is held, and only by
    /// setting a clear locked bit.
    @discardableResult
    private func releaseGuard(_ change: LockChange) -> Bool {
        let queued = head == nil ? 0 : StateBit.queued
        var current = state.load(ordering: .relaxed)
        while true {
            var desired = (current & ~(StateBit.guarded | StateBit.queued)) | queued
            switch change {
            case .keep:
                break
            case .take:
                if current & StateBit.locked != 0 { return false }
                desired |= StateBit.locked
            case .drop:
                desired &= ~StateBit.locked
            }
            let (exchanged, now) = state.compareExchange(
                expected: current, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if exchanged { return true }
            current = now
        }
    }

    private func append(_ node: UnsafeMutablePointer<Waiter>) {
        node.pointee.isQueued = true
        node.pointee.previous = tail
        node.pointee.next = nil
        if let tail { tail.pointee.next = node } else { head = node }
        tail = node
    }

    private func unlink(_ node: UnsafeMutablePointer<Waiter>) {
        let previous = node.pointee.previous
        let next = node.pointee.next
        if let previous { previous.pointee.next = next } else { head = next }
        if let next { next.pointee.previous = previous } else { tail = previous }
        node.pointee.isQueued = false
        node.pointee.next = nil
        node.pointee.previous = nil
    }
}

// MARK: What the deadlock detector sees

extension ConditionLock: InspectableLock {
    var holderNumber: UInt64 { owner.load(ordering: .relaxed) }

    var diagnosticName: String {
        let name = self.name
        return name.isEmpty ? "condition lock (unnamed)" : "condition lock \"\(name)\""
    }

    func conditionDescription(waiter: UnsafeRawPointer) -> String {
        let wanted = waiter.assumingMemoryBound(to: Waiter.self).pointee.wanted
        return "condition \(wanted.map { "\($0)" } ?? "any"), now \(condition)"
    }
}
