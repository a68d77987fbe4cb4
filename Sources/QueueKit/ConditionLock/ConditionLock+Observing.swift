// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension ConditionLock {
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
    ///
    /// Inside a test of this lock's condition (``lock(where:)``, ``wait(until:)``) it is the
    /// value under test.
    public var condition: Condition {
        // The testing thread holds the guard already.
        if _slowPath(isTestedByCallingThread) { return value }
        acquireGuard()
        let current = value
        releaseGuard(.keep)
        return current
    }

    /// The lock's name, "" when unnamed (out of memory, setting it changes nothing). Thread-safe.
    public var name: String {
        get { nameStorage.withLock { $0?.string } ?? "" }
        set { newValue.withCString { try? setName(copying: $0) } }
    }

    /// The one setter of the name: a copy of `name` (`nil`: unnamed). Out of memory it leaves the
    /// name unchanged and throws `outOfMemory` (the Swift setter ignores it, the C call returns it).
    package func setName(copying name: UnsafePointer<CChar>?) throws(QueueKitError) {
        var copy: CString?
        if let name {
            guard let made = CString(copying: name) else { throw .outOfMemory }
            copy = made
        }
        nameStorage.withLock { $0 = copy }
    }

    /// The lock's name as a C string, valid until the name is next set; "" when unnamed.
    package var cName: UnsafePointer<CChar> { nameStorage.withLock { $0?.pointer } ?? CString.empty }

    /// Counters since creation. Thread-safe.
    public var stats: Stats {
        var stats = Stats()
        stats.acquisitions = line.pointee.acquisitionCount.load(ordering: .relaxed)
        stats.contended = line.pointee.contendedCount.load(ordering: .relaxed)
        let futile = futileCount.load(ordering: .relaxed)
        stats.wakeups = line.pointee.handOffCount.load(ordering: .relaxed) &+ futile
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
    public var isLocked: Bool { line.pointee.state.load(ordering: .relaxed) & StateBit.locked != 0 }

    /// Whether the calling thread holds the lock: for assertions, and for layers that must refuse
    /// a call from a thread that does not hold it before they act. Changes nothing, counts
    /// nothing, never waits. Thread-safe.
    @inlinable
    public var isHeldByCurrentThread: Bool { line.pointee.owner.load(ordering: .relaxed) == qkshim_thread_id() }

    /// Whether the calling thread holds the lock and the holder before it exited holding it (or
    /// did not survive a fork): the data the lock guards may be half-updated. True from the
    /// acquisition (the one the C API reports as `EOWNERDEAD`) until this thread releases.
    /// Thread-safe; `false` on threads that do not hold the lock.
    @inlinable
    public var previousOwnerDied: Bool {
        line.pointee.state.load(ordering: .acquiring) & StateBit.abandoned != 0
            && line.pointee.owner.load(ordering: .relaxed) == qkshim_thread_id()
    }

    /// The number (`qkshim_thread_id()`, as reports name threads) of the thread that exited
    /// holding the lock, while the news is pending: the lock is free and marked abandoned, or
    /// held by a thread that has not released it since. `nil` otherwise, and when the dead holder
    /// is unknown (it died at a fork in the instant between taking the lock and recording itself).
    /// For wait reports. Thread-safe.
    var abandonedBy: UInt64? {
        guard line.pointee.state.load(ordering: .acquiring) & StateBit.abandoned != 0 else { return nil }
        let thread = abandoner.load(ordering: .relaxed)
        return thread == 0 ? nil : thread
    }

    /// The number of the holding thread, `nil` when free (a snapshot, for wait reports).
    var holder: UInt64? {
        let thread = line.pointee.owner.load(ordering: .relaxed)
        return thread == 0 ? nil : thread
    }

    // MARK: Destroying

    /// Takes the lock for good if nobody holds it, waits for it or is inside a call that changes
    /// it: the first step of destroying it. False when it is in use.
    /// An abandoned lock nobody holds or waits for is idle too.
    package func retireIfIdle() -> Bool {
        line.pointee.state.compareExchange(expected: 0, desired: StateBit.locked, ordering: .acquiring).exchanged
            || line.pointee.state.compareExchange(
                expected: StateBit.abandoned, desired: StateBit.locked, ordering: .acquiring
            ).exchanged
    }
}
