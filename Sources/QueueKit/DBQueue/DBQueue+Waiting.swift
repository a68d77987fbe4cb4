// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    // MARK: Fast paths

    /// Applies `change` to the state with one compare-and-swap, retried while `allowed` holds
    /// for the state it finds. True when it did. Every lock-free transition of the state but
    /// the releases goes through here.
    @inlinable @inline(__always)
    func updateState(while allowed: (UInt) -> Bool, _ change: (UInt) -> UInt) -> Bool {
        var current = state.load(ordering: .relaxed)
        while allowed(current) {
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: change(current),
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// A counted reader entering a queue that only readers hold (nobody waits, no write pending)
    /// sets the bias again (`DBQueue+ReaderSlots.swift`).
    @inlinable @inline(__always)
    func tryRead() -> Bool {
        updateState(while: { $0 & StateBit.closedToReaders == 0 }) {
            $0 & ~StateBit.readerMask == 0 ? ($0 &+ StateBit.oneReader) | rebiasBit : $0 &+ StateBit.oneReader
        }
    }

    /// What a counted reader that finds the queue idle sets: the bias (nothing in the tests that
    /// turn it off).
    @inlinable @inline(__always)
    var rebiasBit: UInt {
        #if QUEUEKIT_TESTING
            if biasDisabled.load(ordering: .relaxed) { return 0 }
        #endif
        return StateBit.biased
    }

    /// Takes a free queue: barging past parked threads, unless one is due or a write is pending.
    /// Readers in slots may still be inside: the taker revokes the bias (`revokeBias`).
    @inlinable @inline(__always)
    func tryWrite() -> Bool {
        updateState(while: { $0 & ~(StateBit.parked | StateBit.biased) == 0 }) { $0 | StateBit.writer }
    }

    /// Takes the exclusivity to run pending asynchronous writes: the queue is free and nobody
    /// waits in the lane (then the lane hands that turn out, to a waiting thread that may
    /// help before the worker, without a window for a third thread between release and grant).
    @inline(__always)
    func tryAsyncWrites() -> Bool {
        updateState(while: {
            $0 & (StateBit.writer | StateBit.readerMask | StateBit.flags) == 0 && StateBit.asyncCount($0) != 0
        }) {
            $0 | StateBit.writer
        }
    }

    @inlinable @inline(__always)
    func tryFast(_ want: Want) -> Bool { want == .read ? tryRead() : tryWrite() }

    @inlinable @inline(__always)
    func acquire(_ want: Want, call: StaticString) -> Bool {
        if tryFast(want) { return true }
        return acquireSlow(want, call: call, target: asyncTarget())
    }

    @inlinable @inline(__always)
    func releaseRead() {
        var current = state.load(ordering: .relaxed)
        while true {
            if current & StateBit.readerMask == StateBit.oneReader && current & StateBit.needsLane != 0 {
                lastReaderLeaves()
                return
            }
            // The only reader leaving an idle queue sets the bias again (readers the lane let in
            // did not pass through `tryRead`).
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: current == StateBit.oneReader ? rebiasBit : current &- StateBit.oneReader,
                successOrdering: .releasing, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    @inlinable @inline(__always)
    func releaseWrite() {
        if state.compareExchange(expected: StateBit.writer, desired: 0, ordering: .releasing).exchanged { return }
        releaseWriteSlow()
    }

    // MARK: Waiting

    /// Whether the calling thread may run other threads' asynchronous writes while it waits: it
    /// holds nothing of QueueKit's (no frame, so not the main thread before `qk_main`, and no
    /// condition lock).
    @inline(__always)
    static func threadMayHelp() -> Bool {
        ExecutionContext.innermost == nil && qkshim_condlocks_held() == 0
    }

    /// The asynchronous writes a call beginning now must come after: `completed` plus the ones
    /// pending, read as a consistent pair. The thread running asynchronous writes publishes the ones that ran by flagging the
    /// state, storing `completed`, then taking them off the state and the flag in one step; a
    /// pair read while the flag was clear and with the state's count unchanged around it is
    /// exact (otherwise it could count a finished batch twice, or miss it).
    @usableFromInline func asyncTarget() -> UInt64 {
        while true {
            let before = state.load(ordering: .sequentiallyConsistent)
            if before & StateBit.publishing != 0 { continue }
            let done = completed.load(ordering: .sequentiallyConsistent)
            let after = state.load(ordering: .sequentiallyConsistent)
            if (before ^ after) & (StateBit.asyncMask | StateBit.publishing) == 0 {
                return done &+ UInt64(StateBit.asyncCount(before))
            }
        }
    }

    /// Whether the writes a waiter with `target` must come after have run: `completed` reached it,
    /// or none is pending at all.
    @inline(__always)
    func writesHaveRun(upTo target: UInt64, state current: UInt) -> Bool {
        StateBit.asyncCount(current) == 0 || completed.load(ordering: .acquiring) >= target
    }

    /// A read or write (or a flush or destroy, which acquire as writers) that could not enter at
    /// once: spin, then wait in the lane. When it needs asynchronous writes to run first and may
    /// help, it runs them itself. False when the wait was refused (nothing taken).
    @inline(never)
    @usableFromInline func acquireSlow(_ want: Want, call: StaticString, target: UInt64) -> Bool {
        let mayHelp = want == .asyncWrites || Self.threadMayHelp()
        var grant = Grant.access
        // The common case of a write_async followed by a read on the same thread: the queue is
        // free but for the pending writes, which this thread may run at once.
        var entered = mayHelp && tryAsyncWrites()
        if entered {
            grant = .asyncWrites
        }
        // The worker does not spin: it is in no hurry, and its spinning would take a CPU from
        // the threads it waits for.
        if !entered && want != .asyncWrites {
            entered = Parker.spin {
                // The fast paths succeed only while no asynchronous write is pending.
                if tryFast(want) { return true }
                if mayHelp && tryAsyncWrites() {
                    grant = .asyncWrites
                    return true
                }
                return false
            }
        }
        if !entered {
            let since = MonotonicClock.now()
            let granted = Parker.withParker { parker in
                withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer -> Grant? in
                    let me = buffer.baseAddress!
                    me.initialize(
                        to: Waiter(
                            want: want, call: call, mayHelp: mayHelp, target: target,
                            since: since, parker: parker))
                    defer { me.deinitialize(count: 1) }
                    return waitInLane(me)
                }
            }
            guard let granted else {
                ThreadRecord.current.deliverPendingRefusal()
                return false
            }
            ThreadRecord.current.dropPendingRefusal()
            grant = granted
        }
        if grant == .asyncWrites && want != .asyncWrites {
            runAsyncWrites(upTo: target, isWorker: false, call: call)
            if want == .read { downgrade() }
        }
        return true
    }

    /// Queues `me` and waits until it is granted the queue (or the turn to run the asynchronous writes), or is woken
    /// to compete for it again (then it tries the fast paths and queues again, keeping its
    /// arrival time). Nil when the wait was refused: `me` has left the lane, taking nothing.
    func waitInLane(_ me: UnsafeMutablePointer<Waiter>) -> Grant? {
        let want = me.pointee.want
        while true {
            // Enter (or re-enter after a wake-up that granted nothing).
            var wake = Wakeups()
            let taken: Grant? = lane.withLock { lane in
                me.pointee.outcome = .waiting
                if let grant = takeUnderLock(me, &lane) { return grant }
                lane.insert(me)
                if me.pointee.wantsAccess && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound {
                    makeDue(me, &lane)
                }
                refreshBits(&lane)
                // A holder may have left before it could see the waiter: look again.
                handOn(&lane, &wake)
                if case .granted(let grant) = me.pointee.outcome { return grant }
                return nil
            }
            wake.perform(on: self)
            if let taken {
                // Granted by `handOn` (its wake-up was just sent), or taken directly.
                if case .granted = me.pointee.outcome { settle(me) }
                return taken
            }
            // Park until granted, woken, due or refused.
            while true {
                let deadline =
                    me.pointee.isDue || !me.pointee.wantsAccess
                    ? MonotonicClock.forever : me.pointee.since &+ Self.fairnessBound
                let result = wait(
                    me.pointee.parker, for: me.pointee.call, isWorker: me.pointee.want == .asyncWrites, until: deadline)
                var wake = Wakeups()
                let step: Step = lane.withLock { lane in
                    switch me.pointee.outcome {
                    case .granted(let grant): return .granted(grant)
                    case .woken: return .compete
                    case .waiting: break
                    }
                    if result == .refused {
                        if me.pointee.isDue { lane.dueCount -= 1 }
                        lane.remove(me)
                        refreshBits(&lane)
                        handOn(&lane, &wake)
                        return .refused
                    }
                    if !me.pointee.isDue && me.pointee.wantsAccess
                        && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound
                    {
                        makeDue(me, &lane)
                        refreshBits(&lane)
                        handOn(&lane, &wake)
                        if case .granted(let grant) = me.pointee.outcome { return .granted(grant) }
                    }
                    return .wait
                }
                wake.perform(on: self)
                switch step {
                case .granted(let grant):
                    settle(me)
                    return grant
                case .compete:
                    settle(me)
                    qkshim_atomic_store32(me.pointee.parker.word, Parker.idle)
                    switch want {
                    case .completion: return .access // its writes have run
                    case .asyncWrites: return nil // nothing left to run: the worker goes back to lingering
                    case .read, .write:
                        if tryFast(want) { return .access }
                        if me.pointee.mayHelp && tryAsyncWrites() { return .asyncWrites }
                    }
                case .refused:
                    return nil
                case .wait:
                    continue
                }
                break
            }
        }
    }

    /// A waiter that left the lane granted or woken leaves only once its word is set: the
    /// waker sets it after releasing the lock, and the word lives on the waiter's stack.
    @inline(__always)
    func settle(_ me: UnsafeMutablePointer<Waiter>) {
        if !me.pointee.parker.isSet { _ = me.pointee.parker.park() }
    }

    /// The one place where a thread waits in this DB queue (a read behind a write, a write, a
    /// flush, a destroy, the worker waiting for the queue).
    ///
    /// The cross-thread deadlock check hooks in here: the wait may be refused, and the caller
    /// then leaves the lane under its lock having taken nothing (or, if it was granted the queue
    /// concurrently, proceeds), and the call reports `EDEADLK`. Who holds the queue is derivable
    /// from the frame chains: readers and writers run inside `ExecutionContext.run(on: queue, …)`
    /// frames; a thread running asynchronous writes runs them in such a frame too. Two other
    /// parks wait for nobody and stay outside: `settle`, which only waits out a wake-up already
    /// decided, and the worker's idle poll.
    ///
    /// Each park publishes the wait (`WaitRegistry`): the DB queue is held by the threads whose
    /// frame chains hold its identity queue, and a waiter counts as waiting only while it is in
    /// the lane unwoken (`isWaitingInLane`). A refusal's report is kept in the thread's record
    /// until the call gives up (`deliverPendingRefusal`): if the queue was granted meanwhile, it
    /// is dropped.
    func wait(_ parker: Parker, for call: StaticString, isWorker: Bool, until deadline: UInt64) -> WaitResult {
        let record = ThreadRecord.current
        // A refusal of an earlier wait of this call that the lane granted after all.
        record.dropPendingRefusal()
        // The worker holds nothing while it waits for the queue: it closes no ring.
        if let refusal = WaitRegistry.enter(
            record, call: call,
            target: .dbQueue(Unmanaged.passUnretained(self), parkerWord: UnsafeRawPointer(parker.word)),
            frame: ExecutionContext.innermost, refusable: !isWorker,
            holderMayWait: { WaitRegistry.queueHolderMayWait(record) })
        {
            record.holdRefusal(refusal)
            return .refused
        }
        defer { WaitRegistry.withdraw(record) }
        return parker.park(until: deadline, spin: false) ? .woken : .timedOut
    }

    /// For the deadlock detector (which holds its lock, and takes the lane's inside it): whether
    /// the waiter parked on `word` is still waiting in the lane, neither granted nor woken, or is
    /// the revoker waiting for a reader in a slot.
    func isWaitingInLane(parkerWord word: UnsafeRawPointer) -> Bool {
        if isRevoking(parkerWord: word) { return true }
        return lane.withLock { lane in
            lane.waiters.contains { waiter in
                guard UnsafeRawPointer(waiter.pointee.parker.word) == word else { return false }
                if case .waiting = waiter.pointee.outcome { return true }
                return false
            }
        }
    }

    /// Under the lane's lock: take the queue now if `me` may (its writes have run, the queue is
    /// free for it, and nobody due is ahead), or the turn to run the asynchronous writes if it needs writes run first.
    func takeUnderLock(_ me: UnsafeMutablePointer<Waiter>, _ lane: inout Lane) -> Grant? {
        let current = state.load(ordering: .acquiring)
        if current & StateBit.due != 0 && !me.pointee.isDue { return nil }
        if me.pointee.want != .asyncWrites && writesHaveRun(upTo: me.pointee.target, state: current) {
            switch me.pointee.want {
            case .read: return addReaders(1) ? .access : nil
            case .write: return takeExclusive() ? .access : nil
            case .asyncWrites: break
            case .completion: return .access
            }
        }
        if me.pointee.mayHelp || me.pointee.want == .asyncWrites, StateBit.asyncCount(current) != 0, takeExclusive() {
            return .asyncWrites
        }
        return nil
    }

    /// Marks `me` (a reader or writer) due: from now on nobody overtakes it.
    func makeDue(_ me: UnsafeMutablePointer<Waiter>, _ lane: inout Lane) {
        me.pointee.isDue = true
        lane.dueCount += 1
    }
}
