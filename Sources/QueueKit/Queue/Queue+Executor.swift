// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import QueueKitShim

/// A serial queue (or a concurrent one, whose jobs then run as barriers) as the executor of
/// actors, and `perform` for `async` code.
///
/// ```swift
/// actor Store {
///     let queue: Queue
///     nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
/// }
/// ```
///
/// Jobs run as blocks of the queue, with QueueKit's identity: inside an actor method
/// ``Queue/current`` is the queue and `check(.onQueue)` holds. The actor's isolation is known on
/// the queue whatever entered it: a block submitted with ``Queue/async(_:)``, ``Queue/sync(_:)``
/// or from C (`qk_queue_async`, `qk_queue_sync`), also further out through `sync` hops, may call
/// `actor.assumeIsolated { }`, because ``isIsolatingCurrentContext()`` and ``checkIsolated()``
/// answer from the same registry as ``check(_:)``.
extension Queue: SerialExecutor {
    /// Runs `job` as a block of the queue: on a serial queue in order with its other blocks, on a
    /// concurrent queue as a barrier (an actor's jobs never overlap).
    ///
    /// Thread safety: called by the Swift runtime from any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // Only executor-capable queues hand out an executor, so the queue runs blocks; in a
        // forked child no thread could ever run the job.
        let dispatchQueue: DispatchQueue
        do {
            try checkRunnable()
            dispatchQueue = self.dispatchQueue.unsafelyUnwrapped
        } catch {
            qkshim_fatal(
                "QueueKit: an actor job enqueued on queue '\(label)' in a forked child: no thread can run it there")
        }
        let block = admit(barrier: !isSerial)
        idleSubmitting()
        dispatchQueue.async(flags: block.isBarrier ? .barrier : []) {
            self.runBlock(block, outer: nil) { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }
    }

    /// The queue as an actor's executor: `nonisolated var unownedExecutor: UnownedSerialExecutor
    /// { queue.asUnownedSerialExecutor() }`.
    ///
    /// For serial queues (the main queue included) and concurrent queues (the actor's jobs run as
    /// barriers). The global queues (they have no barriers, so nothing could keep an actor's jobs
    /// apart) and identity-only queues (a DB queue's: nothing runs on them) refuse it: the call
    /// aborts with one line saying so. Thread-safe.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        if dispatchQueue == nil || !honoursBarriers {
            qkshim_fatal(
                "QueueKit precondition failed: queue '\(label)' cannot be an actor's executor "
                    + "(only serial and non-global concurrent queues can; it is "
                    + (dispatchQueue == nil ? "an identity-only queue)" : "a global queue)"))
        }
        return UnownedSerialExecutor(ordinary: self)
    }

    /// Whether the calling thread runs the queue exclusively, as ``check(_:)`` with
    /// ``Predicate/onQueueAsBarrier`` sees it (on a serial queue that is the same as
    /// ``Predicate/onQueue``): also inside a block that entered from C or a `sync`, and further
    /// out through `sync` hops. Thread-safe.
    public func isIsolatingCurrentContext() -> Bool? { check(.onQueueAsBarrier) }

    /// Aborts with one line unless the calling thread runs the queue exclusively
    /// (``isIsolatingCurrentContext()``): what `assumeIsolated` and `preconditionIsolated` call
    /// when the current task's executor is not the queue. Thread-safe.
    public func checkIsolated() { precondition(.onQueueAsBarrier) }
}

extension Queue {
    /// Runs `body` on the queue and resumes with its result: inline, without suspending, when the
    /// calling thread is already on the queue (``check(_:)`` with ``Predicate/onQueue``: an actor
    /// whose executor is the queue, or a block of it further out); otherwise `body` is submitted
    /// as an ordinary block and the task suspends until it has run (no thread waits).
    ///
    /// Thread safety: callable from any task. The body runs on the queue's thread, so it is
    /// `@Sendable`; what it returns crosses back to the caller.
    ///
    /// - Throws: ``QueueKitError/invalidArgument`` (nothing ran) for an identity-only queue;
    ///   whatever `body` throws.
    public func perform<R: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        try checkRunnable()
        let dispatchQueue = self.dispatchQueue.unsafelyUnwrapped
        if check(.onQueue) { return try body() }
        let block = admit(barrier: false)
        return try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
            idleSubmitting()
            dispatchQueue.async {
                continuation.resume(with: self.runBlock(block, outer: nil) { Result { try body() } })
            }
        }
    }
}
