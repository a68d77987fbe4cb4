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
/// threads than CPUs), spins shrink to the floor (about a microsecond) within a few acquisitions
/// instead of burning the CPU that side needs; they grow back once spinning succeeds again.
///
/// Fairness is unchanged: a spinning thread is a newcomer, it takes only a free lock and only while
/// nobody is queued, and a release never leaves the lock free while a queued waiter could take it.
extension ConditionLock {
    /// The spin's bounds, in polls (each a CPU hint and a load of the lock's line).
    enum SpinLimits {
        /// Polls every spin may make, however badly spinning went lately.
        static var floor: UInt32 { 16 }
        /// The most polls a spin makes (tens of microseconds at most).
        static var ceiling: UInt32 { 1_000 }
        /// The estimate a new lock starts with.
        static var initialEstimate: UInt32 { 64 }
    }

    /// The polls the next spin may make.
    var spinLimit: UInt32 {
        let limit = UInt64(SpinLimits.floor) + 2 * UInt64(spinEstimate.load(ordering: .relaxed))
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
            let yields = unbounded
            spinningThreads.add(1, ordering: .relaxed)
            defer { spinningThreads.subtract(1, ordering: .relaxed) }
        #else
            let limit = spinLimit
        #endif
        let timed = deadline != MonotonicClock.forever
        var seen = releases.load(ordering: .relaxed)
        // Whether the lock was seen held since the last look at the condition: its release may
        // have left a new condition, or the same one on a free lock.
        var sawHeld = false
        var polls: UInt32 = 0
        while polls < limit {
            polls &+= 1
            #if QUEUEKIT_TESTING
                if yields { sched_yield() } else { qkshim_cpu_relax() }
            #else
                qkshim_cpu_relax()
            #endif
            let word = state.load(ordering: .relaxed)
            if word & StateBit.queued != 0 { break }
            if word & (StateBit.locked | StateBit.guarded) != 0 {
                sawHeld = true
            } else {
                let released = releases.load(ordering: .relaxed)
                if sawHeld || released != seen {
                    if takeIfSatisfied(wanted) {
                        learnSpin(succeededAfter: polls)
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

    /// Takes the lock if it is free and its state satisfies `wanted` (a plain lock: if it is free).
    @inline(__always)
    func takeIfSatisfied(_ wanted: Wanted) -> Bool {
        if wanted.isAny { return takeIfFree() }
        let observed = acquireGuard()
        if observed & StateBit.locked == 0 && satisfies(wanted) && releaseGuard(.take) { return true }
        releaseGuard(.keep)
        return false
    }

    /// Moves the estimate toward the polls of a spin that took the lock; halves it after one that
    /// gave up. Racy by design: concurrent updates may lose one another, which only blurs a hint.
    @inline(__always)
    func learnSpin(succeededAfter polls: UInt32?) {
        let estimate = spinEstimate.load(ordering: .relaxed)
        let next: UInt32
        if let polls {
            next = polls >= estimate ? estimate &+ (polls &- estimate) / 8 : estimate &- (estimate &- polls) / 8
        } else {
            next = estimate / 2
        }
        if next != estimate { spinEstimate.store(next, ordering: .relaxed) }
    }
}
