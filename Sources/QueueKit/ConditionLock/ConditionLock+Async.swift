// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// The condition lock for `async` code: scoped forms that suspend the task while they wait.
///
/// Only scoped forms exist: ownership is per thread and a task may change threads at an `await`,
/// so the body is synchronous and the lock is taken and released on one thread, in the caller's
/// isolation. While it waits, the task is suspended (no thread is blocked), in the same per-value
/// line as waiting threads: a task waiting for value 3 is woken only by a release that leaves 3,
/// and waiters for one value are served in arrival order. A woken task is not handed the lock: it
/// takes it when it runs again, so a task whose executor is busy never holds what it cannot use;
/// if a newly arriving thread took the lock in between, the task waits again at its old place.
extension ConditionLock {
    /// Runs `body` holding the lock with the condition equal to `condition`, then releases it with
    /// the condition `body` returns; suspends while it waits.
    ///
    /// When `body` throws, the lock is released with the condition unchanged and the error is
    /// rethrown. Thread safety: callable from any task; `body` runs synchronously in the caller's
    /// isolation, on the thread that holds the lock. Not reentrant: the lock is not recursive.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it acquired (nothing was
    ///   taken, `body` did not run); ``QueueKitError/wouldDeadlock`` when the calling thread holds
    ///   the lock; what `body` throws.
    public func withLock(
        isolation: isolated (any Actor)? = #isolation,
        whenCondition condition: Condition,
        _ body: () throws -> Condition
    ) async throws {
        try await acquireSuspending(wanted: .value(condition), call: "withLock(whenCondition:)", isolation: isolation)
        try runHeld(body)
    }

    /// Runs `body` holding the lock whatever the condition, which it keeps, and returns its result;
    /// suspends while it waits.
    ///
    /// Thread safety: callable from any task; `body` runs synchronously in the caller's isolation,
    /// on the thread that holds the lock. Not reentrant.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it acquired (nothing was
    ///   taken, `body` did not run); ``QueueKitError/wouldDeadlock`` when the calling thread holds
    ///   the lock; what `body` throws (the lock is released first).
    public func withLock<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: () throws -> sending Result
    ) async throws -> sending Result {
        try await acquireSuspending(wanted: .any, call: "withLock()", isolation: isolation)
        defer { try? unlock() }
        return try body()
    }
}

extension ConditionLock: SuspendedWaitObject {
    var waitReportName: String { "condition lock \"\(name)\"" }

    func describeWanted(_ wanted: (any Sendable)?) -> String? {
        guard let wanted else { return nil }
        if wanted is ConditionTestMarker {
            return "a test of the condition, now \(condition)\(isLocked ? "" : ", lock free")"
        }
        return "condition \(wanted), now \(condition)\(isLocked ? "" : ", lock free")"
    }
}
