// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// The DB queue for `async` code: the same calls, suspending the task while they wait.
///
/// Inside `async` code Swift picks these overloads, so a blocking `db.read { }` written in an
/// `async` function needs `await` (a source change). The bodies are synchronous and run in the
/// caller's isolation, on the thread that then runs the task, which takes and releases the access
/// around them. While a call waits, the task is suspended (no thread is blocked) in the same lane
/// as waiting threads, with the same order and fairness; it is woken, not handed the queue, and
/// takes it when it runs again, keeping its place in line. A task cancelled while it waits throws
/// `CancellationError` and took nothing; once a body started, it runs to the end.
///
/// Reentrancy: a task cannot be inside a block across an `await`, so an `async` call is never
/// nested in the caller's blocks: it waits for the queue like any other call. (A thread that
/// runs a block of the queue and, inside it, a task's code synchronously gets
/// ``QueueKitError/wouldDeadlock`` instead of a wait for itself.)
extension DBQueue {
    /// Runs `body` with read access, concurrently with other reads and never with a write, and
    /// returns its value; suspends while a write runs or is due. It sees every write whose call
    /// returned before this call began.
    ///
    /// Thread safety: callable from any task; `body` runs in the caller's isolation.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it got access (`body` did
    ///   not run); ``QueueKitError/wouldDeadlock`` when the running thread already holds the
    ///   queue; ``QueueKitError/notRecoverable`` in a forked child when a fork left the queue
    ///   unusable; what `body` throws.
    public func read<R>(isolation: isolated (any Actor)? = #isolation, _ body: () throws -> R) async throws -> R {
        try await enterSuspending(.read, call: "read", isolation: isolation)
        return try withEnteredRead(body)
    }

    /// Runs `body` exclusively, after every write submitted before it, and returns its value;
    /// suspends while it waits.
    ///
    /// Thread safety: callable from any task; `body` runs in the caller's isolation.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it got access (`body` did
    ///   not run); ``QueueKitError/wouldDeadlock`` when the running thread already holds the
    ///   queue; ``QueueKitError/notRecoverable`` in a forked child when a fork left the queue
    ///   unusable; what `body` throws.
    public func write<R>(isolation: isolated (any Actor)? = #isolation, _ body: () throws -> R) async throws -> R {
        LockOrder.writing(queue, call: "write")
        try await enterSuspending(.write, call: "write", isolation: isolation)
        return try withEnteredWrite(body)
    }

    /// Suspends until every write submitted before the call has run.
    ///
    /// Thread safety: callable from any task.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first;
    ///   ``QueueKitError/wouldDeadlock`` when the running thread holds the queue.
    public func flush(isolation: isolated (any Actor)? = #isolation) async throws {
        try Task.checkCancellation()
        if _slowPath(Fork.isChild) { try checkFork() }
        if ExecutionContext.hold(of: queue) != .none { throw QueueKitError.wouldDeadlock }
        let target = asyncTarget()
        if isCompleted(target) { return }
        try await acquireSuspending(.completion, call: "flush", target: target, isolation: isolation)
    }

    /// Takes read or write access for the running task: at once when the queue lets it in,
    /// otherwise suspending in the lane. Cancellation and misuse are checked first.
    private func enterSuspending(_ want: SuspendedWant, call: StaticString, isolation: isolated (any Actor)?)
        async throws
    {
        try Task.checkCancellation()
        if _slowPath(Fork.isChild) { try checkFork() }
        if ExecutionContext.hold(of: queue) != .none { throw QueueKitError.wouldDeadlock }
        if want == .read ? tryEnterRead() : tryEnterWrite() { return }
        try await acquireSuspending(want, call: call, target: asyncTarget(), isolation: isolation)
    }
}

extension DBQueue: SuspendedWaitObject {
    var waitReportName: String { "DB queue \"\(queue.label)\"" }

    /// A flush waits for the writes up to its target.
    func describeWanted(_ wanted: (any Sendable)?) -> String? {
        (wanted as? UInt64).map { "its writes to run (\($0) submitted before it)" }
    }
}
