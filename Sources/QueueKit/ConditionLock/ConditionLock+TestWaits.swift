// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// Waits on a test of the condition, and waiting while holding.
///
/// Equality is not enough for real programs: a pool waits for "count != 0", a pipeline for
/// "sequence >= n". ``lock(where:)`` acquires the lock when a test of the condition holds;
/// ``wait(until:)`` is `pthread_cond_wait` without the loop: the holder releases, waits until the
/// test holds and returns holding the lock. Both keep the lock's rules: a release passes the lock
/// to the first queued waiter, in arrival order, that the new state satisfies (a plain `lock`
/// any, `lock(whenCondition: c)` on equality, a test waiter when its test is true) and wakes only
/// that one; nobody else is woken (a wake-up is futile only when a running thread took the lock
/// first: see ``ConditionLock/fairnessBound``).
///
/// **The test** is called by the releasing thread under the lock's internal guard (or by the
/// waiting thread on its way in), any number of times: it must be cheap, must not block, must
/// depend only on the condition and on state that changes only under the lock, and must not use
/// this lock (``condition`` answers the value under test; any other use is a fatal error).
/// **What a release costs** with N queued waiters: it walks the line up to the waiter it hands
/// the lock to, one comparison for each waiter ahead of that one and one call of each test ahead
/// of it (tests with the same C function and context are called once per release: see the C
/// face); the tests of waiters behind it are not called.
extension ConditionLock {
    // MARK: Acquiring when a test holds

    /// Returns holding the lock with `test(condition)` true, waiting as long as needed.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock,
    ///   or when the wait would close a ring of waiting threads (nothing was taken).
    public func lock(where test: @Sendable (Condition) -> Bool) throws(QueueKitError) {
        try lock(
            where: test, identity: nil, deadline: MonotonicClock.forever, isTry: false,
            call: "ConditionLock.lock(where:)")
    }

    /// Acquires the lock only if it is free and `test(condition)` is true.
    ///
    /// - Throws: ``QueueKitError/busy`` otherwise (also when the calling thread holds it).
    public func tryLock(where test: @Sendable (Condition) -> Bool) throws(QueueKitError) {
        try lock(where: test, identity: nil, deadline: 0, isTry: true, call: "ConditionLock.tryLock(where:)")
    }

    /// As ``lock(where:)``, giving up at `deadline` (absolute nanoseconds on ``MonotonicClock``;
    /// a deadline already past tests once).
    ///
    /// - Throws: ``QueueKitError/timedOut`` (not holding the lock) when the deadline passed first;
    ///   ``QueueKitError/wouldDeadlock`` when the calling thread already holds the lock.
    public func lock(where test: @Sendable (Condition) -> Bool, before deadline: UInt64) throws(QueueKitError) {
        try lock(
            where: test, identity: nil, deadline: deadline, isTry: false, call: "ConditionLock.lock(where:before:)")
    }

    /// As ``lock(where:before:)-(_,UInt64)``, with any ``QueueKitDeadline``.
    public func lock(where test: @Sendable (Condition) -> Bool, before deadline: some QueueKitDeadline)
        throws(QueueKitError)
    {
        try lock(where: test, before: deadline.monotonicDeadline)
    }

    /// The acquisitions on a test: `identity` names a C test (for the once-per-release rule and
    /// the reports), `deadline` 0 with `isTry` for the try form; `call` names it in reports.
    package func lock(
        where test: (Condition) -> Bool, identity: ConditionTestIdentity?, deadline: UInt64, isTry: Bool,
        call: StaticString
    ) throws(QueueKitError) {
        let failure: QueueKitError? = withoutActuallyEscaping(test) { test in
            do throws(QueueKitError) {
                try acquire(
                    wanted: .test(Test(evaluate: test, identity: identity)), deadline: deadline, isTry: isTry,
                    call: call)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    // MARK: Waiting while holding

    /// For the holder: returns at once when `test(condition)` is true; otherwise releases the lock
    /// as ``unlock()`` does, waits until a release leaves a condition the test accepts, and
    /// returns holding the lock again. The wait is queued before the lock is released, so no
    /// release is missed; a release wakes it only when its test is true (never "just in case").
    ///
    /// - Throws: ``QueueKitError/notPermitted`` (nothing changed) when the calling thread does not
    ///   hold the lock; ``QueueKitError/wouldDeadlock`` when waiting would close a ring of waiting
    ///   threads: then, and only then, it returns **without** the lock.
    public func wait(until test: @Sendable (Condition) -> Bool) throws(QueueKitError) {
        _ = try wait(until: test, identity: nil, deadline: MonotonicClock.forever, call: "ConditionLock.wait(until:)")
    }

    /// As ``wait(until:)``, giving up at `deadline`: ``QueueKitError/timedOut`` **holding the lock
    /// again** (as `pthread_cond_timedwait` does), whatever the condition. A deadline already past
    /// tests once without releasing.
    ///
    /// - Throws: ``QueueKitError/timedOut`` (holding the lock); ``QueueKitError/notPermitted``
    ///   (nothing changed) when the calling thread does not hold the lock;
    ///   ``QueueKitError/wouldDeadlock`` **without the lock** when retaking it after the deadline
    ///   would close a ring of waiting threads.
    public func wait(until test: @Sendable (Condition) -> Bool, before deadline: UInt64) throws(QueueKitError) {
        _ = try wait(until: test, identity: nil, deadline: deadline, call: "ConditionLock.wait(until:before:)")
    }

    /// As ``wait(until:before:)-(_,UInt64)``, with any ``QueueKitDeadline``.
    public func wait(until test: @Sendable (Condition) -> Bool, before deadline: some QueueKitDeadline)
        throws(QueueKitError)
    {
        try wait(until: test, before: deadline.monotonicDeadline)
    }

    /// The waits of the holder. Returns whether it released the lock and was handed it back (a
    /// new acquisition, which may bring the news of a holder that died); false when the test held
    /// at once.
    package func wait(
        until test: (Condition) -> Bool, identity: ConditionTestIdentity?, deadline: UInt64, call: StaticString
    ) throws(QueueKitError) -> Bool {
        let me = qkshim_thread_id()
        guard line.pointee.owner.load(ordering: .relaxed) == me else { throw .notPermitted }
        // It may wait to take the lock back: an edge from everything else the thread holds.
        guard LockOrder.willWait(for: self, .exclusive, call: call, deadline: deadline) else { throw .wouldDeadlock }
        let step: AwaitStep = withoutActuallyEscaping(test) { test in
            let wanted = Wanted.test(Test(evaluate: test, identity: identity))
            acquireGuard()
            if satisfies(wanted) {
                releaseGuard(.keep)
                return .satisfied
            }
            if deadline != MonotonicClock.forever && deadline <= MonotonicClock.now() {
                timeoutCount.add(1, ordering: .relaxed)
                releaseGuard(.keep)
                return .pastDeadline
            }
            return Parker.withParker { parker in
                withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer in
                    let node = buffer.baseAddress!
                    node.initialize(to: Waiter(parker: parker, threadID: me, wanted: wanted))
                    defer { node.deinitialize(count: 1) }
                    // Queued first, then released as `unlock` releases: a release that leaves a
                    // condition the test accepts finds this wait in line.
                    let first = head == nil
                    append(node)
                    releaseGuard(.keep)
                    Acquisitions.releasing(self, .conditionLock, exclusive: true)
                    line.pointee.owner.store(0, ordering: .relaxed)
                    release(setting: nil, news: .clear)
                    return .waited(waitForHandOff(node, first: first, until: deadline, call: call))
                }
            }
        }
        switch step {
        case .satisfied:
            return false
        case .pastDeadline:
            throw .timedOut
        case .waited(.acquired):
            didAcquire(by: me, waited: true)
            return true
        case .waited(.refused):
            throw .wouldDeadlock
        case .waited(.timedOut):
            // Back to the holder, whatever the condition: an untimed wait for the lock alone,
            // refused (without the lock) only where it would close a ring.
            try lock(call: call)
            throw .timedOut
        }
    }

    /// How far a holder's wait got.
    enum AwaitStep {
        case satisfied, pastDeadline
        case waited(WaitOutcome)
    }

    // MARK: Scoped

    /// Runs `body` holding the lock with `test(condition)` true, then releases it with the
    /// condition `body` returns (unchanged when `body` throws, which is rethrown).
    ///
    /// - Parameters:
    ///   - test: the test the condition must pass when `body` runs.
    ///   - deadline: as in ``lock(where:before:)-(_,UInt64)``; forever by default.
    ///   - body: runs holding the lock; returns the condition to release it with.
    /// - Throws: what `body` throws, or the ``QueueKitError`` of acquiring (`body` did not run).
    public func withLock(
        where test: @Sendable (Condition) -> Bool,
        before deadline: UInt64 = MonotonicClock.forever,
        _ body: () throws -> Condition
    ) throws {
        try lock(where: test, before: deadline)
        try runHeld(body)
    }

    /// Runs `body` holding the lock with `test(condition)` true, then releases it with the
    /// condition `body` returns; suspends while it waits (see the async forms: the task is woken
    /// when a release leaves a condition its test accepts, and takes the lock when it runs).
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it acquired (nothing was
    ///   taken, `body` did not run); ``QueueKitError/wouldDeadlock`` when the calling thread holds
    ///   the lock; what `body` throws (the lock is released with the condition unchanged).
    public func withLock(
        isolation: isolated (any Actor)? = #isolation,
        where test: @escaping @Sendable (Condition) -> Bool,
        _ body: () throws -> Condition
    ) async throws {
        try await acquireSuspending(
            wanted: .test(Test(evaluate: test, identity: nil)), call: "withLock(where:)", isolation: isolation)
        try runHeld(body)
    }
}
