// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    // MARK: Running asynchronous writes

    /// Holding the exclusivity, runs pending asynchronous writes in order: a helper up to its
    /// `target` (only writes submitted before its call began), the worker until none is left or
    /// a waiter's writes have all run (it then lets that waiter go first). Flushers whose writes
    /// have run are woken on the way.
    ///
    /// The writes that ran are published (counted in `completed`, taken off the state, their
    /// nodes recycled) in batches of up to `publishBatch`, and whenever a waiter's target is
    /// reached: submitters and the worker then touch the shared lines once per batch instead of
    /// once per write. Until a batch is published the queue stays closed to newcomers, which only
    /// makes them wait for a write that already ran.
    /// `call` names the worker's wait for readers in slots in reports.
    func runAsyncWrites(upTo target: UInt64, isWorker: Bool, call: StaticString) {
        // The worker holds nothing else of QueueKit's: its wait for readers closes no ring.
        _ = revokeBias(call: call, refusable: false, isPendingCall: !isWorker)
        var done = completed.load(ordering: .relaxed)
        var unpublished: UInt = 0
        var available: UInt = 0
        defer { publish(&unpublished, done: done) }
        while done < target {
            if available == 0 {
                publish(&unpublished, done: done)
                available = StateBit.asyncCount(state.load(ordering: .acquiring))
                if available == 0 { return }
            }
            let work = writes.pop()
            ExecutionContext.run(on: queue, exclusive: true, outer: nil) { work() }
            done &+= 1
            available -= 1
            unpublished += 1
            if done >= nextTarget.load(ordering: .relaxed) {
                publish(&unpublished, done: done)
                if serveWaiters(isWorker: isWorker) { return }
            } else if unpublished >= Self.publishBatch {
                publish(&unpublished, done: done)
            }
        }
    }

    static let publishBatch: UInt = 64

    /// Counts `count` writes that ran in `completed` (now `done`) and takes them off the state,
    /// flagged so that `asyncTarget` never reads the pair half-updated.
    @inline(__always)
    func publish(_ count: inout UInt, done: UInt64) {
        guard count != 0 else { return }
        state.add(StateBit.publishing, ordering: .sequentiallyConsistent)
        completed.store(done, ordering: .sequentiallyConsistent)
        state.subtract(count &* StateBit.oneAsync &+ StateBit.publishing, ordering: .sequentiallyConsistent)
        count = 0
        writes.recycle()
    }

    /// Wakes the flushers whose writes have run; true when the worker should stop because a
    /// reader or writer waiting in the lane may now go.
    func serveWaiters(isWorker: Bool) -> Bool {
        var wake = Wakeups()
        let stop = lane.withLock { lane -> Bool in
            let current = state.load(ordering: .acquiring)
            for waiter in lane.waiters
            where waiter.pointee.want == .completion
                && writesHaveRun(upTo: waiter.pointee.target, state: current)
            {
                setOutcome(waiter, .woken, &lane, &wake)
            }
            refreshBits(&lane)
            return isWorker
                && lane.waiters.contains {
                    $0.pointee.wantsAccess && writesHaveRun(upTo: $0.pointee.target, state: current)
                }
        }
        wake.perform(on: self)
        return stop
    }

    /// A flush on a thread that may not help: waits until `completed` reaches `target`.
    func waitForCompletion(of target: UInt64, call: StaticString) -> Bool {
        Parker.withParker { parker in
            withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer -> Bool in
                let me = buffer.baseAddress!
                me.initialize(
                    to: Waiter(
                        want: .completion, call: call, mayHelp: false, target: target,
                        since: MonotonicClock.now(), parker: parker))
                defer { me.deinitialize(count: 1) }
                guard waitInLane(me) != nil else {
                    ThreadRecord.current.deliverPendingRefusal()
                    return false
                }
                ThreadRecord.current.dropPendingRefusal()
                return true
            }
        }
    }

    func startWorker() {
        if workerState.compareExchange(
            expected: Self.workerIdle, desired: Self.workerActive,
            ordering: .sequentiallyConsistent
        ).exchanged {
            workerQueue.async { ThreadSanitizer.internalCode { self.runWorker() } }
        }
    }

    /// Makes sure a worker runs soon: starts one, or (`start: false` only) wakes the lingering one.
    func wakeWorker(start: Bool = true) {
        if workerState.load(ordering: .sequentiallyConsistent) == Self.workerIdle {
            if start { startWorker() }
        } else {
            Parker(word: workerWord).unpark()
        }
    }

    /// The worker: runs the pending asynchronous writes, then waits a poll (1 ms) for more to
    /// gather, so that a stream of writes nobody waits for is run in batches; after a few empty
    /// polls it ends. Threads that need it sooner wake it.
    func runWorker() {
        let parker = Parker(word: workerWord)
        var idlePolls = 0
        while true {
            qkshim_atomic_store32(workerWord, Parker.idle)
            if StateBit.asyncCount(state.load(ordering: .sequentiallyConsistent)) != 0 {
                idlePolls = 0
                if tryAsyncWrites()
                    || acquireSlow(.asyncWrites, call: "the worker of asynchronous writes of", target: .max)
                {
                    runAsyncWrites(upTo: .max, isWorker: true, call: "the worker of asynchronous writes of")
                    releaseWrite()
                }
                // Caught up (or a waiter went first): let the next writes gather for a poll
                // instead of taking them one by one as they come, unless a thread that may not
                // run them itself needs them sooner (it sets the word).
                _ = parker.park(until: MonotonicClock.now() &+ Self.workerPoll, spin: false)
                continue
            }
            if closing.load(ordering: .acquiring) || idlePolls >= Self.workerLingerPolls {
                workerState.store(Self.workerIdle, ordering: .sequentiallyConsistent)
                // A write submitted meanwhile saw the worker active and started none.
                if StateBit.asyncCount(state.load(ordering: .sequentiallyConsistent)) != 0,
                    workerState.compareExchange(
                        expected: Self.workerIdle, desired: Self.workerActive,
                        ordering: .sequentiallyConsistent
                    ).exchanged
                {
                    continue
                }
                return
            }
            idlePolls += 1
            _ = parker.park(until: MonotonicClock.now() &+ Self.workerPoll, spin: false)
        }
    }
}
