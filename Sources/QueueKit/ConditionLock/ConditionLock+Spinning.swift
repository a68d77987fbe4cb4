// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// The adaptive spin of an acquisition that cannot take the lock at once: before it queues, a
/// thread watches the lock's own cache line (the state word and the count of releases beside it)
/// for a release that lets it in, and takes the lock as a newcomer takes a free one. A hand-off
/// between two running threads then costs the release's two atomic steps and the taker's, with no
/// record queued, no word of the waiter's to set and nothing published: the detector and the wait
/// report only see a thread once it queues to park.
///
/// The spin is bounded by what spinning achieved on this lock lately, as glibc's adaptive mutex
/// and parking_lot's spin-then-park bound theirs: an acquisition that got the lock while spinning
/// moves the lock's estimate toward the polls it took, one that gave up halves it. The limit is
/// twice the estimate plus a floor, so where the other side keeps being descheduled (more runnable
/// threads than CPUs), spins shrink to the floor (a few microseconds) within a few acquisitions
/// instead of burning the CPU that side needs; they grow back once spinning succeeds again.
///
/// Fairness is unchanged: a spinning thread is a newcomer, it takes only a free lock and only while
/// nobody is queued, and a release never leaves the lock free while a queued waiter could take it.
extension ConditionLock {
    /// The spin's bounds, in polls (each a CPU hint and a load of the lock's line).
    enum SpinLimits {
        /// Polls every spin may make, however badly spinning went lately.
        static var floor: UInt32 { 256 }
        /// The most polls a spin makes (tens of microseconds at most).
        static var ceiling: UInt32 { 1_000 }
        /// The estimate a new lock starts with.
        static var initialEstimate: UInt32 { 64 }
        /// The most polls a spin makes while the holder is a thread that was handed the lock
        /// asleep (about 100 µs: a wake-up's latency, with room).
        static var wakingCeiling: UInt32 { 4_000 }
    }

    /// The polls the next spin may make.
    var spinLimit: UInt32 {
        let limit = UInt64(SpinLimits.floor) + 2 * UInt64(line.pointee.spinEstimate.load(ordering: .relaxed))
        return UInt32(min(UInt64(SpinLimits.ceiling), limit))
    }

    /// Spins for a release after which the calling thread (which does not hold the lock and holds
    /// no guard) can take the lock for `wanted`. True when it took it: the acquisition is complete
    /// but for the holder's bookkeeping (``didAcquire(by:waited:recording:deadline:)``). False when
    /// the spin gave up (its limit, `deadline`, or a waiter queued): the caller queues.
    func spinForRelease(_ wanted: Wanted, deadline: UInt64) -> Bool {
        #if QUEUEKIT_TESTING
            // A spin the test seam left unbounded yields its CPU between polls: it may last as
            // long as a test takes, with the other tests running beside it.
            let unbounded =
                unboundedSpins.load(ordering: .relaxed) > 0
                && unboundedSpins.subtract(1, ordering: .relaxed).oldValue > 0
            let limit = unbounded ? UInt32.max : spinLimit
            let ceiling = unbounded ? UInt32.max : SpinLimits.wakingCeiling
            let yields = unbounded
            spinningThreads.add(1, ordering: .relaxed)
            defer { spinningThreads.subtract(1, ordering: .relaxed) }
        #else
            let limit = spinLimit
            let ceiling = SpinLimits.wakingCeiling
        #endif
        let timed = deadline != MonotonicClock.forever
        var seen = line.pointee.releases.load(ordering: .relaxed)
        // Whether the lock was seen held since the last look at the condition: its release may
        // have left a new condition, or the same one on a free lock. True at first: the caller
        // saw the lock held (or the condition another), and the release it waits for may have
        // come before `seen` was read; a spin that waited for a later change would wait for a
        // release that is not coming (in a ping-pong, the other thread waits for this one).
        var sawHeld = true
        var polls: UInt32 = 0
        // Polls made while the holder was waking up, which say nothing of how long holders hold.
        var wakingPolls: UInt32 = 0
        while polls &- wakingPolls < limit && polls < ceiling {
            polls &+= 1
            #if QUEUEKIT_TESTING
                if yields { sched_yield() } else { qkshim_cpu_relax() }
            #else
                qkshim_cpu_relax()
            #endif
            let word = line.pointee.state.load(ordering: .acquiring)
            if word & StateBit.queued != 0 { break }
            if word & (StateBit.locked | StateBit.guarded) != 0 {
                sawHeld = true
                if word & StateBit.handedToSleeper != 0 { wakingPolls &+= 1 }
            } else {
                let released = line.pointee.releases.load(ordering: .relaxed)
                if sawHeld || released != seen {
                    if mayHold(wanted) && takeIfSatisfied(wanted) {
                        learnSpin(succeededAfter: polls &- wakingPolls)
                        return true
                    }
                    seen = released
                    sawHeld = false
                }
            }
            if timed && polls & 15 == 0 && MonotonicClock.now() >= deadline { break }
        }
        learnSpin(succeededAfter: nil)
        return false
    }

    /// Whether the condition may satisfy `wanted`, read without the guard: false only for a wait
    /// for one value whose bits differ from the condition's. A hint, to spare a look under the
    /// guard (a write of the lock's line) that would find the wrong value: a waiter that gets it
    /// wrong only looks later, the bits being as new as the state word that the caller loaded with
    /// acquiring order (they are written under the guard, before the release's store), and every
    /// wait looks under the guard before it queues. Values equal under `==` with other bits
    /// (`-0.0` and `0.0`) are such a wrong hint: they wait for the next release or the queue.
    @inline(__always)
    func mayHold(_ wanted: Wanted) -> Bool {
        guard case .value(let condition) = wanted else { return true }
        return mayEqual(condition)
    }

    /// ``mayHold(_:)`` of a wait for `condition`.
    @inlinable @inline(__always)
    func mayEqual(_ condition: Condition) -> Bool {
        guard Self.mirrorsCondition else { return true }
        return Self.bits(of: condition) == line.pointee.conditionBits.load(ordering: .relaxed)
    }

    /// Takes the lock if it is free and its state satisfies `wanted` (a plain lock: if it is free).
    ///
    /// A wait on the condition takes the guard only while the lock is free and nobody is queued
    /// (a look that finds the lock taken meanwhile gives up without writing the line), and waits out
    /// a guard held by someone else: a newcomer's look, or the releaser's next call, takes a few
    /// dozen instructions and may leave the lock free for this thread.
    @inline(__always)
    func takeIfSatisfied(_ wanted: Wanted) -> Bool {
        if wanted.isAny { return takeIfFree() }
        if Self.mirrorsCondition, case .value(let condition) = wanted {
            let word = line.pointee.state.load(ordering: .relaxed)
            return word & (StateBit.locked | StateBit.queued | StateBit.guarded) == 0
                && take(from: word, holding: condition)
        }
        var word = line.pointee.state.load(ordering: .relaxed)
        while true {
            if word & (StateBit.locked | StateBit.queued) != 0 { return false }
            if word & StateBit.guarded != 0 {
                qkshim_cpu_relax()
                word = line.pointee.state.load(ordering: .relaxed)
                continue
            }
            let (exchanged, now) = line.pointee.state.compareExchange(
                expected: word, desired: word | StateBit.guarded,
                successOrdering: .acquiring, failureOrdering: .relaxed)
            if exchanged { break }
            word = now
        }
        if satisfies(wanted) && releaseGuard(.take) { return true }
        releaseGuard(.keep)
        return false
    }

    /// For a mirrored condition (``mirrorsCondition``): takes the lock, whose state word is `word`
    /// (free, nobody queued, nobody under the guard), if its condition is `condition`, with one
    /// compare-and-swap and no guard. The holder alone writes a mirrored condition, so once the
    /// lock is taken the condition is settled: the bits compared before the take are a hint (a
    /// release between them and the take may have left another condition, with the word back as
    /// it was), the condition read after it decides. A lock taken for nothing is given back as a
    /// release that changes nothing, which hands it to a waiter that came meanwhile. False (the
    /// lock not held) otherwise.
    @inlinable @inline(__always)
    func take(from word: UInt, holding condition: Condition) -> Bool {
        guard mayEqual(condition),
            line.pointee.state.compareExchange(
                expected: word, desired: word | StateBit.locked, ordering: .acquiring
            ).exchanged
        else { return false }
        if _fastPath(value == condition) { return true }
        giveBack()
        return false
    }

    /// Releases a lock that ``take(from:holding:)`` took for nothing, keeping the condition and
    /// any abandonment news for the next acquirer.
    @usableFromInline @inline(never)
    func giveBack() { release(setting: nil, news: .keep) }

    /// Moves the estimate toward the polls of a spin that took the lock; halves it after one that
    /// gave up. Racy by design: concurrent updates may lose one another, which only blurs a hint.
    @inline(__always)
    func learnSpin(succeededAfter polls: UInt32?) {
        let estimate = line.pointee.spinEstimate.load(ordering: .relaxed)
        let next: UInt32
        if let polls {
            next = polls >= estimate ? estimate &+ (polls &- estimate) / 8 : estimate &- (estimate &- polls) / 8
        } else {
            next = estimate / 2
        }
        if next != estimate { line.pointee.spinEstimate.store(next, ordering: .relaxed) }
    }
}
