// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    // MARK: Handing the queue on (all called with the lane locked)

    /// Looks at the queue and the lane after anything changed and does what is due: wakes the
    /// flushers whose writes have run; grants or wakes the next waiters; finds a thread to run
    /// pending asynchronous writes.
    ///
    /// Waiters are granted the queue directly (it is theirs when they wake) when one is due or
    /// the queue is closed to newcomers by a pending asynchronous write; otherwise they are only
    /// woken and compete, so that the queue is never reserved for a thread that is not running.
    func handOn(_ lane: inout Lane, _ wake: inout Wakeups) {
        guard !lane.waiters.isEmpty else { return }
        let current = state.load(ordering: .acquiring)
        let done = completed.load(ordering: .acquiring)
        let noneQueued = StateBit.asyncCount(current) == 0
        func ready(_ waiter: UnsafeMutablePointer<Waiter>) -> Bool { noneQueued || waiter.pointee.target <= done }
        // Flushers want no access: wake the satisfied ones.
        for waiter in lane.waiters where waiter.pointee.want == .completion && ready(waiter) {
            setOutcome(waiter, .woken, &lane, &wake)
        }
        defer { refreshBits(&lane) }
        if current & StateBit.writer != 0 { return }
        let closed = current & (StateBit.due | StateBit.asyncMask) != 0
        let readersInside = current & StateBit.readerMask != 0

        // The waiter whose turn it is: the first due one, or else the first whose writes have run.
        let head: UnsafeMutablePointer<Waiter>? =
            lane.dueCount > 0
            ? lane.waiters.first { $0.pointee.isDue && $0.pointee.wantsAccess }
            : lane.waiters.first { $0.pointee.wantsAccess && ready($0) }
        if let head, ready(head) {
            if head.pointee.want == .read {
                func isReadyReader(_ waiter: UnsafeMutablePointer<Waiter>) -> Bool {
                    waiter.pointee.want == .read && ready(waiter)
                }
                if closed {
                    // Threads are let in as one batch; suspended tasks are only woken (they
                    // take their read when they run again).
                    guard addReaders(lane.waiters.count { isReadyReader($0) && $0.pointee.task == nil }) else { return }
                }
                while let reader = lane.waiters.first(where: isReadyReader) {
                    setOutcome(
                        reader, closed && reader.pointee.task == nil ? .granted(.access) : .woken, &lane, &wake)
                }
            } else if !readersInside {
                if closed && head.pointee.task == nil {
                    guard takeExclusive() else { return }
                    setOutcome(head, .granted(.access), &lane, &wake)
                } else {
                    setOutcome(head, .woken, &lane, &wake)
                }
            }
            return
        }
        guard !noneQueued else {
            // Nothing to run: a worker waiting for the queue goes back to lingering.
            if let worker = lane.waiters.first(where: { $0.pointee.want == .asyncWrites }) {
                setOutcome(worker, .woken, &lane, &wake)
            }
            return
        }
        // Asynchronous writes come first: a waiter that may run them does, else the worker.
        guard !readersInside else { return }
        let taker =
            lane.waiters.first { $0.pointee.mayHelp && $0.pointee.wantsAccess && !ready($0) }
            ?? lane.waiters.first { $0.pointee.want == .asyncWrites }
        if let taker {
            guard takeExclusive() else { return }
            setOutcome(taker, .granted(.asyncWrites), &lane, &wake)
        } else {
            wake.wakesWorker = true
        }
    }

    /// Takes `waiter` out of the lane with `outcome`; its wake-up happens after the unlock.
    func setOutcome(
        _ waiter: UnsafeMutablePointer<Waiter>, _ outcome: Outcome,
        _ lane: inout Lane, _ wake: inout Wakeups
    ) {
        waiter.pointee.outcome = outcome
        if waiter.pointee.isDue { lane.dueCount -= 1 }
        lane.remove(waiter)
        if let task = waiter.pointee.task {
            if let continuation = task._withUnsafeGuaranteedRef({ $0.takeContinuationForWakeUp() }) {
                wake.tasks.append(continuation)
            }
        } else {
            wake.append(waiter.pointee.parker)
        }
    }

    /// Keeps the `parked` and `due` bits and `nextTarget` true to the lane.
    func refreshBits(_ lane: inout Lane) {
        var wanted: UInt = 0
        if !lane.waiters.isEmpty { wanted |= StateBit.parked }
        if lane.dueCount > 0 { wanted |= StateBit.due }
        var current = state.load(ordering: .relaxed)
        while current & StateBit.flags != wanted {
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: current & ~StateBit.flags | wanted, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        nextTarget.store(lane.waiters.lazy.map { $0.pointee.target }.min() ?? .max, ordering: .releasing)
    }

    /// Counts `count` readers in, if no writer holds the queue.
    func addReaders(_ count: Int) -> Bool {
        updateState(while: { $0 & StateBit.writer == 0 }) { $0 &+ UInt(count) &* StateBit.oneReader }
    }

    /// Takes the exclusivity if the queue is free, whatever the flags.
    func takeExclusive() -> Bool {
        updateState(while: { $0 & (StateBit.writer | StateBit.readerMask) == 0 }) { $0 | StateBit.writer }
    }

    // MARK: Leaving

    /// The last reader leaves while the lane needs attention: it decrements under the lane's
    /// lock, so that no thread can take the queue and free it (`destroy`) while it is still on
    /// its way out.
    @inline(never)
    @usableFromInline func lastReaderLeaves() {
        #if QUEUEKIT_TESTING
            testHookBeforeLastReaderStarts?()
        #endif
        var wake = Wakeups()
        lane.withLock { lane in
            state.subtract(StateBit.oneReader, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }

    @inline(never)
    @usableFromInline func releaseWriteSlow() {
        var wake = Wakeups()
        lane.withLock { lane in
            state.bitwiseAnd(~StateBit.writer, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }

    /// A reader that ran the asynchronous writes it needed turns its exclusivity into a read,
    /// letting in the waiting readers whose writes have run with it.
    func downgrade() {
        let current = state.load(ordering: .relaxed)
        if current & (StateBit.parked | StateBit.due) == 0,
            state.compareExchange(
                expected: current, desired: current &- StateBit.writer &+ StateBit.oneReader,
                ordering: .acquiringAndReleasing
            ).exchanged
        {
            return
        }
        var wake = Wakeups()
        lane.withLock { lane in
            state.add(StateBit.oneReader &- StateBit.writer, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }
}
