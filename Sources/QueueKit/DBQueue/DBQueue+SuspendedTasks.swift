// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    // MARK: Suspended tasks

    /// Waits, suspending, until the calling task may have `want` (a read or write: the access is
    /// taken and held by the thread that runs the task now; a completion: the writes up to
    /// `target` have run). Throws `CancellationError` (nothing taken) when the task is cancelled
    /// first.
    ///
    /// The task is woken, never granted: each time it runs it tries to take the queue itself under
    /// the lane's lock, and otherwise re-enters the lane with its first arrival time, so it keeps
    /// its place and becomes due after ``fairnessBound`` like a thread. A task does not run other
    /// threads' asynchronous writes (the worker does): its thread belongs to its executor.
    func acquireSuspending(
        _ want: SuspendedWant, call: StaticString, target: UInt64,
        isolation: isolated (any Actor)?
    ) async throws {
        let record = SuspendedWaiter(call: call, object: self, wanted: want == .completion ? target : nil)
        let since = MonotonicClock.now()
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        word.initialize(to: Parker.idle)
        let me = UnsafeMutablePointer<Waiter>.allocate(capacity: 1)
        me.initialize(
            to: Waiter(
                want: want.lane, call: call, mayHelp: false, target: target,
                since: since, parker: Parker(word: word)))
        me.pointee.task = .passUnretained(record)
        defer {
            me.deinitialize(count: 1)
            me.deallocate()
            word.deallocate()
        }
        let address = UncheckedSendable(me)
        var scheduledPoke = false
        try await SuspendedTaskDriver.wait(
            record, isolation: isolation, attempt: { step(me, $0) },
            retried: {
                if !scheduledPoke && want != .completion {
                    // Nobody polls a suspended task: make sure it becomes due in time.
                    scheduledPoke = true
                    pokeFairness(after: since)
                }
            },
            cancel: { cancelWait(address.value) })
    }

    /// The uncontended entries of the `async` forms (the fast paths of the blocking ones).
    @inline(__always)
    func tryEnterRead() -> Bool { tryRead() }

    @inline(__always)
    func tryEnterWrite() -> Bool { tryWrite() }

    /// Whether the asynchronous writes up to `target` have all run.
    func isCompleted(_ target: UInt64) -> Bool { completed.load(ordering: .acquiring) >= target }

    /// Runs `body` as a read whose access the calling thread has just taken, then releases it.
    @inline(__always)
    func withEnteredRead<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        try withAccess(Access(caller: ExecutionContext.innermost, isInline: false, isExclusive: false), body)
    }

    /// Runs `body` as a write whose access the calling thread has just taken, then releases it.
    @inline(__always)
    func withEnteredWrite<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        // Readers in slots are threads in synchronous reads: they leave without waiting for this
        // task, so the wait is not checked for cycles (it is still published).
        _ = revokeBias(call: "write", refusable: false)
        return try withAccess(Access(caller: ExecutionContext.innermost, isInline: false, isExclusive: true), body)
    }

    /// One attempt of a suspended task, on the thread that runs it, under the lane's lock: leave
    /// if cancelled, take the queue if it may, or (re-)enter the lane and store the continuation.
    func step(_ me: UnsafeMutablePointer<Waiter>, _ continuation: UnsafeContinuation<Bool, any Error>) {
        enum Result { case acquired, cancelled, waiting }
        var wake = Wakeups()
        let record = me.pointee.task!
        let result: Result = lane.withLock { lane in
            if record._withUnsafeGuaranteedRef({ $0.isCancelled }) {
                // It may have been woken as the next in line: let the lane hand on.
                handOn(&lane, &wake)
                return .cancelled
            }
            me.pointee.outcome = .waiting
            if takeUnderLock(me, &lane) != nil { return .acquired }
            lane.insert(me)
            if me.pointee.wantsAccess && !me.pointee.isDue
                && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound
            {
                makeDue(me, &lane)
            }
            record._withUnsafeGuaranteedRef { $0.suspend(with: continuation) }
            refreshBits(&lane)
            // A holder may have left before it could see the task: look again (this may wake
            // the task at once; it then tries again).
            handOn(&lane, &wake)
            return .waiting
        }
        wake.perform(on: self)
        switch result {
        case .acquired: continuation.resume(returning: true)
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .waiting: break
        }
    }

    /// The cancellation handler of a suspended task: a task still in the lane leaves it and is
    /// resumed with `CancellationError`; one already woken finds out when it runs.
    func cancelWait(_ me: UnsafeMutablePointer<Waiter>) {
        var wake = Wakeups()
        let continuation: UnsafeContinuation<Bool, any Error>? = lane.withLock { lane in
            let record = me.pointee.task!
            guard let continuation = record._withUnsafeGuaranteedRef({ $0.cancel() }) else { return nil }
            if me.pointee.isDue { lane.dueCount -= 1 }
            lane.remove(me)
            refreshBits(&lane)
            handOn(&lane, &wake)
            return continuation
        }
        wake.perform(on: self)
        continuation?.resume(throwing: CancellationError())
    }

    /// After ``fairnessBound`` from `since`, makes the suspended tasks that have waited that long
    /// due and lets the lane hand on (threads do this themselves, waking from a timed park).
    func pokeFairness(after since: UInt64) {
        let remaining = Self.fairnessBound &- min(Self.fairnessBound, MonotonicClock.now() &- since)
        workerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(remaining))) { [self] in
            var wake = Wakeups()
            lane.withLock { lane in
                let now = MonotonicClock.now()
                var changed = false
                for waiter in lane.waiters
                where waiter.pointee.task != nil && waiter.pointee.wantsAccess
                    && !waiter.pointee.isDue && now &- waiter.pointee.since >= Self.fairnessBound
                {
                    makeDue(waiter, &lane)
                    changed = true
                }
                guard changed else { return }
                refreshBits(&lane)
                handOn(&lane, &wake)
            }
            wake.perform(on: self)
        }
    }
}
