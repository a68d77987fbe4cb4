// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension ConditionLock {
    // MARK: Implementation

    /// The uncontended acquisition: one compare-and-swap, then the holder's bookkeeping. `call`
    /// names a call that may wait (its lock-order edges are recorded here); `nil` for the try
    /// forms and the suspending ones.
    ///
    /// `plainBy`: for a call that runs plain (``SlowPaths/areOff``, no test of a condition running),
    /// the calling thread's `qkshim_thread_id_if_recorded()`, not 0: no sanitizer or witness to
    /// tell, and the count of held locks needs no check of the thread's record. 0: the general case.
    @inline(__always)
    @inlinable
    package func acquireIfIdle(
        recording call: StaticString? = nil, deadline: UInt64 = MonotonicClock.forever, plainBy plainThread: UInt64 = 0
    ) -> Bool {
        guard line.pointee.state.compareExchange(expected: 0, desired: StateBit.locked, ordering: .acquiring).exchanged
        else {
            return false
        }
        didAcquire(plainBy: plainThread, recording: call, deadline: deadline)
        return true
    }

    /// The uncontended `lock(whenCondition:)`: a free lock with no news, nobody queued and nobody
    /// looking, whose condition is `condition`, taken with the guard's compare-and-swap and the
    /// lock's. False (nothing changed) in every other case, which ``acquire(wanted:deadline:isTry:call:)``
    /// answers.
    /// `plainBy` as for ``acquireIfIdle(recording:deadline:plainBy:)``.
    @inlinable @inline(__always)
    package func acquireIfIdle(when condition: Condition, recording call: StaticString, plainBy plainThread: UInt64 = 0)
        -> Bool
    {
        if Self.mirrorsCondition {
            // A free lock with no news, nobody queued and nobody looking: one compare-and-swap.
            guard take(from: 0, holding: condition) else { return false }
            didAcquire(plainBy: plainThread, recording: call)
            return true
        }
        guard mayEqual(condition),
            line.pointee.state.compareExchange(expected: 0, desired: StateBit.guarded, ordering: .acquiring).exchanged
        else {
            return false
        }
        // Nobody queued (the word was 0), so none can be now: the guard goes and the lock comes in
        // one step, which fails only when a plain lock took the lock meanwhile.
        guard
            value == condition
                && line.pointee.state.compareExchange(
                    expected: StateBit.guarded, desired: StateBit.locked, ordering: .acquiringAndReleasing
                ).exchanged
        else {
            releaseGuard(.keep)
            return false
        }
        didAcquire(plainBy: plainThread, recording: call)
        return true
    }

    /// ``didAcquire(by:waited:recording:deadline:plain:)`` of an acquisition that did not wait:
    /// `plainThread` as for ``acquireIfIdle(recording:deadline:plainBy:)``.
    @inline(__always)
    @inlinable
    func didAcquire(
        plainBy plainThread: UInt64, recording call: StaticString?, deadline: UInt64 = MonotonicClock.forever
    ) {
        let plain = plainThread != 0
        didAcquire(
            by: plain ? plainThread : qkshim_thread_id(), waited: false, recording: call, deadline: deadline,
            plain: plain)
    }

    /// Bookkeeping of the new holder: owner and counters (only the holder writes them, so a load
    /// and a store suffice).
    @inline(__always)
    @inlinable
    func didAcquire(
        by thread: UInt64, waited: Bool, recording call: StaticString? = nil, deadline: UInt64 = MonotonicClock.forever,
        plain: Bool = false
    ) {
        Acquisitions.acquired(self, .conditionLock, exclusive: true, recording: call, deadline: deadline, plain: plain)
        line.pointee.owner.store(thread, ordering: .relaxed)
        line.pointee.acquisitionCount.store(
            line.pointee.acquisitionCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        if waited {
            line.pointee.contendedCount.store(
                line.pointee.contendedCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
            line.pointee.handOffCount.store(line.pointee.handOffCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        }
    }

    /// Every acquisition but the uncontended plain one: ownership check, an immediate take when
    /// the state allows it, otherwise a try's failure or a queued wait for a hand-off.
    ///
    /// `call` names the call in wait and deadlock reports (its C name).
    @inline(never)
    @usableFromInline
    func acquire(wanted: Wanted, deadline: UInt64, isTry: Bool, call: StaticString) throws(QueueKitError) {
        let me = qkshim_thread_id()
        if line.pointee.owner.load(ordering: .relaxed) == me { throw isTry ? .busy : .wouldDeadlock }
        if !isTry {
            guard LockOrder.willWait(for: self, .exclusive, call: call, deadline: deadline) else {
                throw .wouldDeadlock
            }
        }

        // A plain lock takes any free lock: a free lock has no queued waiter it could overtake.
        if wanted.isAny && takeIfFree() {
            didAcquire(by: me, waited: false)
            return
        }

        // A wait on the condition of a held lock that nobody queues for spins at once, without
        // taking the guard: the line stays with the holder until its release.
        var spun = false
        if !wanted.isAny && !isTry, case let word = line.pointee.state.load(ordering: .acquiring),
            word & StateBit.queued == 0,
            word & StateBit.locked != 0 || !mayHold(wanted),
            deadline == MonotonicClock.forever || deadline > MonotonicClock.now()
        {
            if spinForRelease(wanted, deadline: deadline) {
                didAcquire(by: me, waited: false)
                line.pointee.contendedCount.store(
                    line.pointee.contendedCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
                return
            }
            spun = true
        }

        if takeUnderGuard(wanted) {
            didAcquire(by: me, waited: false)
            return
        }
        // We hold the guard.
        if isTry {
            releaseGuard(.keep)
            throw .busy
        }
        try checkDeadline(deadline)
        if head == nil && !spun {
            releaseGuard(.keep)
            if spinForRelease(wanted, deadline: deadline) {
                didAcquire(by: me, waited: false)
                line.pointee.contendedCount.store(
                    line.pointee.contendedCount.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
                return
            }
            // A release may have come after the spin's last look: look again before queuing.
            if takeUnderGuard(wanted) {
                didAcquire(by: me, waited: false)
                return
            }
            try checkDeadline(deadline)
        }
        let outcome = Parker.withParker { parker in
            withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer in
                let node = buffer.baseAddress!
                node.initialize(to: Waiter(parker: parker, threadID: me, wanted: wanted))
                defer { node.deinitialize(count: 1) }
                return wait(queuing: node, until: deadline, call: call)
            }
        }
        switch outcome {
        case .acquired: didAcquire(by: me, waited: true)
        case .timedOut: throw .timedOut
        case .refused: throw .wouldDeadlock
        }
    }

    /// Takes the guard, then the lock if it is free and its state satisfies `wanted`: true when it
    /// did (the guard released), false holding the guard.
    @inline(__always)
    func takeUnderGuard(_ wanted: Wanted) -> Bool {
        let observed = acquireGuard()
        // `.take` fails when a plain lock took it meanwhile; the guard is still ours then.
        return observed & StateBit.locked == 0 && satisfies(wanted) && releaseGuard(.take)
    }

    /// Throws `.timedOut` (counted, the guard released) when `deadline` has passed; the caller
    /// holds the guard.
    @inline(__always)
    func checkDeadline(_ deadline: UInt64) throws(QueueKitError) {
        if deadline != MonotonicClock.forever && deadline <= MonotonicClock.now() {
            timeoutCount.add(1, ordering: .relaxed)
            releaseGuard(.keep)
            throw .timedOut
        }
    }

    /// Sets the locked bit if it is clear, whatever the other bits. True when it did.
    @inline(__always)
    func takeIfFree() -> Bool { setIfClear(StateBit.locked) != nil }

    /// Sets `bit` in the state word if it is clear, whatever the other bits: the word as it was
    /// before, or `nil` (nothing changed) when `bit` was set.
    @inline(__always)
    func setIfClear(_ bit: UInt) -> UInt? {
        var current = line.pointee.state.load(ordering: .relaxed)
        while current & bit == 0 {
            let (exchanged, now) = line.pointee.state.compareExchange(
                expected: current, desired: current | bit,
                successOrdering: .acquiring, failureOrdering: .relaxed)
            if exchanged { return current }
            current = now
        }
        return nil
    }

    /// Queues `node` (the caller holds the guard, which this releases) and waits for a hand-off
    /// or the deadline. On `.acquired` the releasing thread has already made us the owner; on
    /// `.refused` the wait would have closed a cycle across threads: `node` is unlinked, nothing
    /// was taken, and the deadlock handler has the report.
    func wait(
        queuing node: UnsafeMutablePointer<Waiter>, until deadline: UInt64, call: StaticString
    ) -> WaitOutcome {
        // Only the first waiter polls hot, also after a spin that gave up: a hand-off to a waiter
        // that yields between polls takes longer than the other side's spin, which then gives up
        // and queues too, and a ping-pong keeps going through the queue (measured: a tenth of the
        // hand-offs, several times the round's cost). The ones behind it only yield, so they
        // never burn the CPUs that the threads ahead of them need to run and release.
        let first = head == nil
        append(node)
        releaseGuard(.keep)
        return waitForHandOff(node, first: first, until: deadline, call: call)
    }

    /// Waits for a hand-off to the queued `node` or the deadline (the caller holds nothing); the
    /// outcomes of ``wait(queuing:until:call:)``. `first`: the node was the first in line.
    func waitForHandOff(
        _ node: UnsafeMutablePointer<Waiter>, first: Bool, until deadline: UInt64, call: StaticString
    ) -> WaitOutcome {
        let parker = node.pointee.parker!
        var futileWakeups = 0
        // Spin first: most hand-offs arrive within it, and a spinning waiter publishes nothing.
        // Only a waiter about to sleep publishes its wait (and, untimed, checks for a cycle).
        var handedOff = parker.spinUntilSet(deadline: deadline, pureSpin: first)
        if !handedOff {
            let record = ThreadRecord.current
            let target = WaitTarget.lock(self, waiter: UnsafeRawPointer(node), forCondition: !node.pointee.wanted.isAny)
            if let refusal = WaitRegistry.enter(
                record, call: call, target: target, deadline: deadline, frame: ExecutionContext.innermost,
                refusable: deadline == MonotonicClock.forever,
                holderMayWait: { WaitRegistry.ownerMayWait(line.pointee.owner.load(ordering: .relaxed), me: record) })
            {
                // Refused (the wait is already withdrawn). A release may have handed us the lock
                // meanwhile: settled under the guard, as a timeout is. Then the ring was no ring.
                acquireGuard()
                let handed = parker.isSet
                if !handed { unlink(node) }
                releaseGuard(.keep)
                if handed {
                    refusal.drop()
                    return .acquired
                }
                refusal.deliver()
                return .refused
            }
            // A release may wake us to take the lock ourselves (see ``passOn(held:)``): when a
            // running thread took it first, or the state no longer satisfies us, we wait again at
            // our place in line, and that wake-up was futile.
            var spin = false
            while true {
                handedOff = parker.park(until: deadline, futileWakeups: &futileWakeups, pureSpin: false, spin: spin)
                guard handedOff && parker.isWoken && !retake(node) else { break }
                futileWakeups += 1
                spin = true
            }
            WaitRegistry.withdraw(record)
        }
        if futileWakeups > 0 {
            futileCount.add(UInt64(futileWakeups), ordering: .relaxed)
        }
        if handedOff { return .acquired }

        // The deadline passed. A release may be handing us the lock right now: whichever of the
        // two got the guard first wins. The releaser sets our word under the guard. A release that
        // woke us to take the lock ourselves left it free for us: passed on to the next in line.
        acquireGuard()
        if parker.isSet {
            releaseGuard(.keep)
            return .acquired
        }
        unlink(node)
        timeoutCount.add(1, ordering: .relaxed)
        passOn(held: false)
        return .timedOut
    }

    /// A waiter woken to take the lock itself (``Parker/woken``, the caller holds nothing) takes
    /// it when it is free, the state satisfies it and nobody ahead of it in line is satisfied.
    /// Otherwise it stays at its place in line, its word back to idle, and a free lock is passed on
    /// to the first the state satisfies (normally nobody: the lock is held, or the state changed).
    /// True when the calling thread holds the lock: taken, or handed over meanwhile.
    func retake(_ node: UnsafeMutablePointer<Waiter>) -> Bool {
        let parker = node.pointee.parker!
        let observed = acquireGuard()
        if parker.isSet {
            releaseGuard(.keep)
            return true
        }
        if observed & StateBit.locked == 0 && satisfies(node.pointee.wanted) && firstSatisfied() == node
            && takeIfFree()
        {
            unlink(node)
            releaseGuard(.keep)
            return true
        }
        parker.rearm()
        passOn(held: false)
        return false
    }

    /// The holder's first step of every release: ownership check, owner cleared, one lock fewer.
    @inline(__always)
    @inlinable
    func relinquish() throws(QueueKitError) {
        guard relinquishIfHeld() else { throw .notPermitted }
    }

    /// ``relinquish()`` without the error: false (nothing changed) when the caller is not the holder.
    /// `plainBy` as for ``acquireIfIdle(recording:deadline:plainBy:)``.
    @inline(__always)
    @inlinable
    func relinquishIfHeld(plainBy plainThread: UInt64 = 0) -> Bool {
        let plain = plainThread != 0
        guard line.pointee.owner.load(ordering: .relaxed) == (plain ? plainThread : qkshim_thread_id()) else {
            return false
        }
        Acquisitions.releasing(self, .conditionLock, exclusive: true, plain: plain)
        line.pointee.owner.store(0, ordering: .relaxed)
        return true
    }

    /// Releases the held lock (owner already cleared), optionally setting the condition, handing
    /// it to the first queued waiter that the new state satisfies. The abandonment news changes
    /// before the hand-off, so the new holder sees it as it resumes.
    @usableFromInline
    func release(setting newValue: Condition?, news: News) {
        acquireGuard()
        switch news {
        case .clear:
            if line.pointee.state.load(ordering: .relaxed) & StateBit.abandoned != 0 {
                abandoner.store(0, ordering: .relaxed)
                line.pointee.state.bitwiseAnd(~StateBit.abandoned, ordering: .relaxed)
            }
        case .keep:
            break
        case .abandon(let thread):
            abandoner.store(thread, ordering: .relaxed)
            abandonmentCount.add(1, ordering: .relaxed)
            line.pointee.state.bitwiseOr(StateBit.abandoned, ordering: .relaxed)
        }
        recordRelease(setting: newValue)
        passOn(held: true)
    }

    /// What every release does while its thread still holds the lock (the holder is the only
    /// writer of both): counts itself (what spinners watch) and sets the condition, if it changes
    /// it. Under the guard, but for the fast release of a mirrored condition, which sets the atomic
    /// bits without it.
    @inlinable @inline(__always)
    func recordRelease(setting newValue: Condition?) {
        line.pointee.releases.store(line.pointee.releases.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        if let newValue {
            value = newValue
        }
    }

    /// The first queued waiter that the current state satisfies (the caller holds the guard).
    /// A release walks the line up to that waiter: one comparison per waiter ahead of it, and one
    /// call per test ahead of it, except that a test with a C identity that already said no in
    /// this walk is not called again (see ``RefusedTests``).
    func firstSatisfied() -> UnsafeMutablePointer<Waiter>? {
        RefusedTests.with { refused in
            var candidate = head
            while let waiter = candidate {
                if satisfies(waiter.pointee.wanted, refused: &refused) { return waiter }
                candidate = waiter.pointee.next
            }
            return nil
        }
    }

    /// Gives the lock on (the caller holds the guard, which this releases): to the first queued
    /// waiter that the state satisfies. A thread is handed the lock; a task is woken and the lock
    /// left free for it to take when it runs; a task already woken is on its way, so the lock is
    /// left free. `held`: the caller holds the lock (a release); otherwise the lock is free or
    /// held by someone else (who will pass it on at its release).
    func passOn(held: Bool) {
        if !held && line.pointee.state.load(ordering: .relaxed) & StateBit.locked != 0 {
            releaseGuard(.keep)
            return
        }
        guard head != nil, let chosen = firstSatisfied() else {
            releaseGuard(held ? .drop : .keep)
            return
        }
        if let task = chosen.pointee.task {
            let continuation = task._withUnsafeGuaranteedRef { $0.takeContinuationForWakeUp() }
            releaseGuard(held ? .drop : .keep)
            continuation?.resume(returning: false)
            return
        }
        // Eventual fairness: a thread asleep in the kernel (or woken and on its way) is not handed
        // the lock but woken to take it itself, and the lock stays free meanwhile: a running thread
        // may take it first instead of waiting for the wake-up's latency, during which a strict
        // hand-off leaves the lock held by a thread that is not running (a convoy: pigz's eight
        // threads on two CPUs left a tenth of the CPU time idle). Once it has been woken so for
        // `fairnessBound` (its clock starts at the first such wake-up: waiting for a condition is
        // not being overtaken), it is handed the lock, so nobody starves. A thread still polling
        // its word is handed the lock at once.
        let parker = chosen.pointee.parker!
        let word = parker.word
        let wordState = qkshim_atomic_load32(word)
        if wordState != Parker.idle {
            let now = MonotonicClock.now()
            if chosen.pointee.since == 0 { chosen.pointee.since = now }
            if now &- chosen.pointee.since < Self.fairnessBound {
                let asleep = wordState == Parker.sleeping && parker.setWoken()
                releaseGuard(held ? .drop : .keep)
                if asleep { Parker.wake(word) }
                return
            }
        }
        if !held && !takeIfFree() {
            releaseGuard(.keep)
            return
        }
        unlink(chosen)
        line.pointee.owner.store(chosen.pointee.threadID, ordering: .relaxed)
        // Setting the word is the hand-off; from here on `chosen` may be gone.
        let asleep = parker.setWord()
        releaseGuard(.keep, handedToSleeper: asleep)
        if asleep { Parker.wake(word) }
    }
}
