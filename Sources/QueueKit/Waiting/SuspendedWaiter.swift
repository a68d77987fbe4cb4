// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// The record of a task suspended in a QueueKit wait (an `async` form of a condition-lock or DB
/// queue call): what the wait report lists for it, and how the object it waits for wakes it.
///
/// A suspended task is **woken, not handed** the object: the waker flips the record from
/// `waiting` to `woken` and resumes the continuation, leaving the object free; the task acquires
/// when it runs again, on the thread that then runs it (ownership is per thread), and if someone
/// took the object meanwhile it waits again from the same place in line. So a task whose
/// executor is busy never holds anything it cannot use, and a suspended task holds nothing: it is
/// never part of a wait-for cycle.
///
/// Every field but the descriptive ones is guarded by the waited-for object's own lock.
/// Thread safety: the descriptive fields are immutable; the rest is reached under that lock.
final class SuspendedWaiter: @unchecked Sendable {
    enum Phase {
        /// Queued and suspended (or about to suspend): a waker may wake it.
        case waiting
        /// Woken, on its way back to run: it tries to acquire when it runs; nobody wakes it again.
        case woken
    }

    /// The QueueKit call the task waits in, for the wait report ("withLock(whenCondition:)").
    let call: StaticString
    /// The object waited for; described only when a report is made (a wait that suspends pays
    /// for no string formatting).
    let object: any SuspendedWaitObject
    /// What the task waits for beyond the object being free (a condition value), if anything.
    let wanted: (any Sendable)?
    /// `MonotonicClock.now()` when the wait began.
    let since: UInt64

    var phase = Phase.waiting
    /// Set by the task's cancellation handler; the wait then ends with `CancellationError`.
    var isCancelled = false
    /// Set while the task is suspended; taken (set to `nil`) by whoever resumes it, exactly once.
    /// `true`: it acquired; `false`: it was woken and must try again.
    var continuation: UnsafeContinuation<Bool, any Error>?

    init(call: StaticString, object: any SuspendedWaitObject, wanted: (any Sendable)?) {
        self.call = call
        self.object = object
        self.wanted = wanted
        self.since = MonotonicClock.now()
    }

    /// Stores the continuation of a task about to suspend (under the object's lock).
    func suspend(with continuation: UnsafeContinuation<Bool, any Error>) {
        phase = .waiting
        self.continuation = continuation
    }

    /// Marks the task woken and hands out its continuation to resume (under the object's lock);
    /// `nil` when it is not suspended.
    func takeContinuationForWakeUp() -> UnsafeContinuation<Bool, any Error>? {
        guard phase == .waiting, let continuation else { return nil }
        phase = .woken
        self.continuation = nil
        return continuation
    }

    /// Marks the task cancelled and, when it is suspended, hands out its continuation to resume
    /// with `CancellationError` (under the object's lock); `nil` when it is on its way to run.
    func cancel() -> UnsafeContinuation<Bool, any Error>? {
        isCancelled = true
        guard phase == .waiting, let continuation else { return nil }
        self.continuation = nil
        return continuation
    }

    /// One line for the wait report: the call, the object, what it waits for, for how long.
    func describe(now: UInt64 = MonotonicClock.now()) -> String {
        let waited = now >= since ? (now - since) / 1_000_000 : 0
        let what = object.describeWanted(wanted).map { ", waits for \($0)" } ?? ""
        return "task: suspended in \(call)(\(object.waitReportName))\(what), for \(waited) ms, untimed, holds nothing"
    }
}

/// An object a task can wait for, as the wait report names it.
protocol SuspendedWaitObject: AnyObject, Sendable {
    /// Kind and name, e.g. `condition lock "cache"`.
    var waitReportName: String { get }
    /// What a waiter wants beyond the object being free, e.g. "condition 3, now 2".
    func describeWanted(_ wanted: (any Sendable)?) -> String?
}

/// Every task suspended in a QueueKit wait right now: the hook the wait report reads.
///
/// Registering costs a mutex round trip, paid only by waits that suspend (never on an uncontended
/// path). Thread safety: every member may be called from any thread.
enum SuspendedWaits {
    private static let registry = Lock([ObjectIdentifier: SuspendedWaiter]())

    /// Lists `waiter` until `unregister`.
    static func register(_ waiter: SuspendedWaiter) {
        registry.withLock { $0[ObjectIdentifier(waiter)] = waiter }
    }

    static func unregister(_ waiter: SuspendedWaiter) {
        registry.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(waiter)) }
    }

    // fork(): no thread is inside the registry at a fork (the hooks in `Lifecycle.swift`).
    static func prepareForFork() { registry.acquireForFork() }
    static func resumeInParent() { registry.releaseInParent() }
    static func resumeInChild() { registry.releaseInChild() }

    /// The suspended tasks, longest-waiting first (a snapshot).
    static var all: [SuspendedWaiter] {
        registry.withLock { Array($0.values) }.sorted { $0.since < $1.since }
    }

    /// One line per suspended task, longest-waiting first, for the wait report.
    static func reportLines() -> [String] {
        let now = MonotonicClock.now()
        return all.map { $0.describe(now: now) }
    }
}
