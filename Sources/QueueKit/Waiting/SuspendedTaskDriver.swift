// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// The one driver of every task suspended in a QueueKit wait (the `async` forms of the condition
/// lock and the DB queue): lists the task in the wait report for the length of the wait, suspends
/// it once per attempt until an attempt acquires, and routes its cancellation to the waited-for
/// object. The waiter queue stays the object's own: `attempt` (run on the task's thread, with
/// the continuation of this suspension) tries to acquire and otherwise queues the task and
/// stores the continuation, resuming it with `true` when it acquired, `false` when a waker woke
/// it to try again, or `CancellationError`.
enum SuspendedTaskDriver {
    /// Waits until an `attempt` resumes with `true`; `retried` runs after each attempt that did
    /// not acquire, `cancel` when the task is cancelled (on any thread).
    static func wait(
        _ record: SuspendedWaiter, isolation: isolated (any Actor)?,
        attempt: (UnsafeContinuation<Bool, any Error>) -> Void,
        retried: () -> Void = {},
        cancel: @Sendable () -> Void
    ) async throws {
        SuspendedWaits.register(record)
        defer { SuspendedWaits.unregister(record) }
        try await withTaskCancellationHandler {
            while true {
                let took = try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                    attempt(continuation)
                }
                if took { return }
                retried()
            }
        } onCancel: {
            cancel()
        }
    }
}
