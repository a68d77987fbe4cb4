// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// Publication of waits and the search for wait-for cycles across threads.
///
/// ## Protocol
/// A thread about to wait in a QueueKit call *publishes* the wait in its ``ThreadRecord``: it
/// writes ``PublishedWait`` while its state is `idle`, stores `waiting` (release), then increments
/// the global count of waiting threads (`qkshim_waiting_enter`, sequentially consistent). When
/// the wait is untimed and the count says another thread was waiting already, it searches for
/// a cycle under the *detector lock*. It *withdraws* the wait when it stops waiting: a
/// compare-and-swap `waiting → idle` (spinning while a walk has it `pinned`), then the decrement.
/// A `sync` publishes before dispatch's `sync` and is withdrawn by the block's wrapper when the
/// block starts (possibly on another thread: the main queue's), so an idle queue costs a few
/// uncontended atomics and no lock. Condition locks publish after their spin, before sleeping.
///
/// Every reader of other threads' waits (the cycle search, the wait report, the stall watch)
/// holds the detector lock and *pins* each waiting record (`waiting → pinned`, acquire) before it
/// reads it, and unpins it (`pinned → waiting`, release) before letting go of the lock.
///
/// ## Why a refused wait is a real cycle (no false refusals)
/// - Only waiting threads can be in a cycle, and a thread that waits cannot change what it holds:
///   its frame chain is frozen on its stack (it is inside the call), and it can neither release
///   nor take a condition lock, except the one it waits for being handed to it.
/// - While pinned, a thread cannot withdraw its wait, so during a search every pinned wait and
///   every holding derived from it (frame chains; `owner == thread` of a lock that thread does
///   not wait for) is fixed: all edges found hold at one instant, the search's.
/// - A wait that has been granted but not yet withdrawn is never taken for a waiter: a
///   condition-lock waiter whose lock's owner is itself has been handed the lock (the hand-off
///   sets the owner before it wakes the waiter); a granted serial-queue or barrier `sync` has
///   no other holder (dispatch runs nothing else of the queue, and the caller's own chain stops
///   at its caller frame). A plain `sync` onto a concurrent queue counts as waiting for the
///   queue's running blocks until its block starts (`WaitGraph.holds`): dispatch queues it
///   behind them whenever anything else is queued there, which QueueKit cannot see, so a ring
///   through it is refused whenever it could close rather than only when it does.
///
/// ## Why a cycle is never missed (two threads closing the same ring)
/// Let the ring's threads publish in any order; consider the last one, L, in the total order of
/// the sequentially consistent increments. Every other member published (state `waiting`, the
/// fields, its holdings) before its increment, and is still waiting when L increments (the ring
/// exists once L waits, and nobody leaves a ring), so L's increment returns at least 1 and L
/// searches; its increment reads from theirs, so it sees their publications. L's search takes
/// the detector lock, so it runs either before or after any other search; if an earlier search
/// refused a member, the ring is broken and nothing is left to refuse.
///
/// ## Skipping the search
/// The first edge of a ring from the new waiter W leads to a *waiting* holder of what W waits
/// for. W may skip the search when, after its increment, no such holder can be waiting: for a
/// queue, no other wait was published from inside a block (`qkshim_waiting_in_blocks`, which a
/// waiter increments before its count increment); for a condition lock, its owner's record is
/// idle (read after the increment). A holder H that published before W's increment is seen by
/// that read (its increments, and its state, precede its count increment, which W's increment
/// reads from); a holder that publishes after it is the later of the two and searches itself —
/// so the last member of a ring still searches, and still finds it.
///
/// ## Why exactly one call per cycle is refused
/// The searcher that finds a cycle withdraws its own wait *before* it releases the detector
/// lock. Every later search sees it not waiting, so no other member of that ring is refused; the
/// refused call then returns `EDEADLK` without having run or taken anything, and the ring's other
/// members proceed as soon as it unwinds.
@usableFromInline
enum WaitRegistry {
    /// Serialises every reader of other threads' waits (searches, reports, the stall watch).
    static let detector = Lock<Void>(())

    // MARK: Publishing

    /// Publishes a wait of the calling thread in `call` for `target`. Returns how many other
    /// threads had a wait published at that moment (an upper bound).
    ///
    /// `stamped: false` leaves the start time to the first reader that sees the wait (`stamp`):
    /// the `sync` path, which cannot know whether it will wait at all, does not read the clock
    /// (a coarse clock read costs ~20 ns on a virtual machine, a tenth of an idle `sync`).
    @inline(__always)
    static func publish(
        _ record: ThreadRecord, call: StaticString, target: WaitTarget, deadline: UInt64,
        frame: UnsafePointer<ExecutionFrame>?, stamped: Bool
    ) -> Int {
        record.wait.serial &+= 1
        record.wait.start = stamped ? qkshim_now_coarse_ns() : 0
        record.wait.startIsFirstSight = !stamped
        record.wait.describe(call: call, target: target, deadline: deadline, frame: frame)
        // Read before the store: from then on a reader may have the record pinned.
        let inBlock = record.wait.frame != nil
        record.waitState.store(WaitState.waiting, ordering: .releasing)
        if inBlock { qkshim_waiting_in_block_enter() }
        return qkshim_waiting_enter()
    }

    /// Withdraws the wait `record` published. Any thread may call it for `record`, once per wait.
    @inlinable @inline(__always)
    static func withdraw(_ record: ThreadRecord) {
        // Read before the withdrawal: afterwards the owner may publish its next wait.
        let inBlock = record.wait.frame != nil
        if !record.waitState.compareExchange(
            expected: WaitState.waiting, desired: WaitState.idle, ordering: .acquiringAndReleasing
        ).exchanged {
            withdrawPinned(record)
        }
        qkshim_waiting_leave()
        if inBlock { qkshim_waiting_in_block_leave() }
    }

    /// A walk has the record pinned: wait for it to let go (it holds the pin for the length of a
    /// search, a few microseconds).
    @inline(never) @usableFromInline
    static func withdrawPinned(_ record: ThreadRecord) {
        var backoff = Backoff()
        while !record.waitState.compareExchange(
            expected: WaitState.waiting, desired: WaitState.idle, ordering: .acquiringAndReleasing
        ).exchanged {
            backoff.pause()
        }
    }

    /// The one entry of every wait: publishes the calling thread's wait in `call` for `target`
    /// and, when the wait is `refusable` (untimed, and able to close a ring) and another thread
    /// waits too, searches for the cycle it would close. Returns `nil` to go on waiting (then
    /// `withdraw` when done), or the ``Refusal``: the wait was withdrawn, and the caller must
    /// either `deliver` it (the call gives up with `wouldDeadlock`) or `drop` it (a hand-off that
    /// raced with the search won: the ring was no ring).
    ///
    /// `stamped`: as in `publish`. `holderMayWait`, asked only when a search would otherwise
    /// run, answers whether what the wait is for may be held by a waiting thread; when it says
    /// no, the search is skipped (see "Skipping the search" above).
    @inline(__always)
    static func enter(
        _ record: ThreadRecord, call: StaticString, target: WaitTarget,
        deadline: UInt64 = MonotonicClock.forever, frame: UnsafePointer<ExecutionFrame>?,
        refusable: Bool, stamped: Bool = true, holderMayWait: () -> Bool
    ) -> Refusal? {
        let others = publish(record, call: call, target: target, deadline: deadline, frame: frame, stamped: stamped)
        if others == 0 || !refusable || !holderMayWait() { return nil }
        return refusal(of: record)
    }

    /// For a wait for a queue: whether some other waiting thread waits from inside a block (only
    /// such a thread can hold a queue).
    @inline(__always)
    static func queueHolderMayWait(_ record: ThreadRecord) -> Bool {
        qkshim_waiting_in_blocks_load() > (record.wait.frame != nil ? 1 : 0)
    }

    /// For a wait for a lock owned by thread `owner` (0: free): whether the owner is waiting.
    static func ownerMayWait(_ owner: UInt64, me: ThreadRecord) -> Bool {
        guard owner != 0, owner != me.number, let holder = ThreadRecord.record(numbered: owner) else { return false }
        return holder.waitState.load(ordering: .sequentiallyConsistent) != WaitState.idle
    }

    /// Gives a pinned wait published without a start time the time `now` (its first sighting).
    /// The pin keeps its owner off the record meanwhile.
    static func stamp(_ records: [ThreadRecord], now: UInt64) {
        for record in records where record.wait.start == 0 { record.wait.start = now }
    }

    /// The cycle search of `enter`, under the detector lock.
    @inline(never)
    static func refusal(of me: ThreadRecord) -> Refusal? {
        let report: String? = detector.withLock { _ in
            let others = pinWaiters(except: me)
            defer { unpin(others) }
            stamp(others, now: qkshim_now_coarse_ns())
            let nodes = others + [me]
            let graph = WaitGraph(nodes: nodes)
            guard let ring = graph.cycle(through: me) else { return nil }
            let report = DeadlockReport.refusal(ring: ring, nodes: nodes)
            // Leave the wait before any other search can run: exactly one refusal per cycle.
            // (Nobody else pins `me` while this thread holds the detector lock.)
            withdraw(me)
            return report
        }
        return report.map { Refusal(report: $0) }
    }

    // MARK: Reading other threads' waits

    /// Pins every waiting record but `me`; the caller holds the detector lock.
    static func pinWaiters(except me: ThreadRecord? = nil) -> [ThreadRecord] {
        ThreadRecord.registry.withLock { records in
            var pinned: [ThreadRecord] = []
            for record in records.values where record !== me {
                if record.waitState.compareExchange(
                    expected: WaitState.waiting, desired: WaitState.pinned, ordering: .acquiring
                ).exchanged {
                    pinned.append(record)
                }
            }
            return pinned
        }
    }

    static func unpin(_ records: [ThreadRecord]) {
        for record in records { record.waitState.store(WaitState.waiting, ordering: .releasing) }
    }

    /// Runs `body` with every waiting thread pinned (none of them can stop waiting meanwhile).
    static func withWaitersPinned<R>(_ body: ([ThreadRecord]) -> R) -> R {
        detector.withLock { _ in
            let pinned = pinWaiters()
            defer { unpin(pinned) }
            stamp(pinned, now: qkshim_now_coarse_ns())
            return body(pinned)
        }
    }
}
