// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// A one-shot wake-up word that one thread parks on and another sets: the way every QueueKit
/// waiter sleeps. Each waiter owns its own word, so a wake-up goes to exactly the thread meant,
/// never to a herd.
///
/// The word lives in the waiter's stack frame (`Parker.withParker`, or inside a larger waiter
/// record), so parking allocates nothing. It has three states: `idle`, `sleeping` (the waiter has
/// announced that it is about to sleep in the kernel) and `set` (and `woken`, the condition lock's:
/// woken to retry rather than handed anything). The waker exchanges the word to
/// `set` and makes the `futex_wake` system call only when the waiter had announced its sleep, so a
/// hand-off to a spinning waiter costs no system call. The waiter returns as soon as it sees `set`
/// and may reuse the memory at once: the waker touches the word only through that one exchange,
/// and a late `futex_wake` on the address only risks a spurious wake-up, which every wait loop
/// here tolerates (and reports as futile). (A `woken` word may be exchanged again, to `set`, but
/// only under the condition lock's guard while its waiter is still queued, so still alive.)
struct Parker {
    /// How long a waiter polls its word before it sleeps in the kernel, in nanoseconds. A
    /// hand-off between two running threads completes in well under a microsecond, while a sleep
    /// and wake-up costs two system calls and a scheduler round trip of several microseconds, so a
    /// short spin wins whenever the waker is running (WebKit's and parking_lot's locks spin for
    /// the same reason). The bound is in time, not iterations, because `pause` costs from a few
    /// cycles to ~25 ns depending on the CPU.
    static let spinBudget: UInt64 = 12_000
    /// The first part of the spin only polls (unless the caller opts out); after it the waiter
    /// yields its CPU between polls, so that a waker that shares the CPU (more runnable threads
    /// than CPUs) gets to run, and the CPU does not go idle just before a wake-up (waking an idle
    /// virtual CPU costs several microseconds).
    static let pureSpinBudget: UInt64 = 2_000

    static let idle: UInt32 = 0
    static let set: UInt32 = 1
    static let sleeping: UInt32 = 2
    /// Set instead of `set` by a condition lock's release that wakes its waiter to take the lock
    /// itself, not handing it over (eventual fairness, see `ConditionLock+Waiting.swift`). The
    /// wait ends on `set` and on `woken` alike (both odd); only the condition lock uses `woken`.
    static let woken: UInt32 = 3

    let word: UnsafeMutablePointer<UInt32>

    /// Gives `body` a fresh, unset parker whose word lives on the stack for the call.
    @inline(__always)
    static func withParker<R, E: Error>(_ body: (Parker) throws(E) -> R) throws(E) -> R {
        try withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 1) { (buffer) throws(E) -> R in
            let word = buffer.baseAddress!
            word.initialize(to: idle)
            return try body(Parker(word: word))
        }
    }

    var isSet: Bool { qkshim_atomic_load32(word) == Self.set }

    /// Whether the wait has ended: the word is `set` or `woken`.
    var hasEnded: Bool { qkshim_atomic_load32(word) & 1 != 0 }

    /// Whether the word is `woken` (the waiter must now try to take what it waits for itself).
    var isWoken: Bool { qkshim_atomic_load32(word) == Self.woken }

    /// Sets the word to `woken` rather than `set`: as `setWord`, true when the waiter sleeps in the
    /// kernel and must be woken with `wake(_:)`.
    @inline(__always)
    func setWoken() -> Bool {
        qkshim_atomic_exchange32(word, Self.woken) == Self.sleeping
    }

    /// Back to `idle` after a `woken` wait that must go on (only the waiter, under the lock that
    /// its wakers hold when they set the word).
    @inline(__always)
    func rearm() {
        qkshim_atomic_store32(word, Self.idle)
    }

    /// Sets the word. Returns true when the waiter sleeps in the kernel and must be woken with
    /// `wake(_:)`; after this call the word's memory may already belong to someone else.
    @inline(__always)
    func setWord() -> Bool {
        qkshim_atomic_exchange32(word, Self.set) == Self.sleeping
    }

    /// Wakes the kernel sleeper of a word that `setWord` reported asleep. It does not read or
    /// write the memory, so it is safe after the waiter has returned.
    @inline(__always)
    static func wake(_ word: UnsafeMutablePointer<UInt32>) {
        qkshim_futex_wake(word, 1)
    }

    /// Sets the word and wakes its waiter. Call it at most once per parker, outside any lock when
    /// possible (waking may be a system call).
    func unpark() {
        if setWord() { Self.wake(word) }
    }

    /// Waits until `unpark` (or `setWoken`) or the deadline. Returns true when unparked, false at
    /// the deadline.
    /// `spin: false` goes to sleep at once (for a waiter that already spun on what it waits for).
    func park(until deadline: UInt64 = MonotonicClock.forever, spin: Bool = true) -> Bool {
        var futileWakeups = 0
        return park(until: deadline, futileWakeups: &futileWakeups, spin: spin)
    }

    /// As `park(until:)`, also counting the kernel wake-ups after which the word was still not
    /// set (for statistics). It spins first (`spinUntilSet`); `pureSpin: false` skips the polling
    /// part of the spin and only yields (for waiters that are not next in line).
    ///
    /// On `false` (the deadline passed) the word may still be set concurrently: the caller must
    /// settle that race under its own lock (see `ConditionLock`).
    /// `spin: false` skips the spin (for a caller that has spun already, with `spinUntilSet`).
    func park(until deadline: UInt64, futileWakeups: inout Int, pureSpin: Bool = true, spin: Bool = true) -> Bool {
        if spin && spinUntilSet(deadline: deadline, pureSpin: pureSpin) { return true }
        // Announce the sleep. If the word was set meanwhile, the exchange overwrote `set`: put it
        // back (the waker never looks at the word again) and we are done.
        let previous = qkshim_atomic_exchange32(word, Self.sleeping)
        if previous & 1 != 0 {
            qkshim_atomic_store32(word, previous)
            return true
        }
        while true {
            let result = qkshim_futex_wait(word, Self.sleeping, deadline)
            if hasEnded { return true }
            if result == ETIMEDOUT { return false }
            if deadline != MonotonicClock.forever && MonotonicClock.now() >= deadline { return false }
            futileWakeups += 1
        }
    }

    /// Polls the word for at most `spinBudget` (and not past `deadline`). True when it was set (or
    /// `woken`).
    @inline(__always)
    func spinUntilSet(deadline: UInt64, pureSpin: Bool) -> Bool {
        Self.spin(until: deadline, pureSpin: pureSpin) { hasEnded }
    }

    /// The spin policy of every QueueKit waiter: polls `condition` for at most `spinBudget` (and
    /// not past `deadline`), first, if `pureSpin`, for `pureSpinBudget` with a CPU hint between
    /// polls, then yielding the CPU between polls. True as soon as `condition` holds.
    @inline(__always)
    static func spin(
        until deadline: UInt64 = MonotonicClock.forever, pureSpin: Bool = true,
        _ condition: () -> Bool
    ) -> Bool {
        let start = MonotonicClock.now()
        let end = min(deadline, start &+ spinBudget)
        let pureEnd = min(end, start &+ (pureSpin ? pureSpinBudget : 0))
        var polls: UInt32 = 0
        while true {
            if condition() { return true }
            qkshim_cpu_relax()
            polls &+= 1
            if polls & 15 == 0 && MonotonicClock.now() >= pureEnd { break }
        }
        while MonotonicClock.now() < end {
            if condition() { return true }
            sched_yield()
        }
        return condition()
    }
}
