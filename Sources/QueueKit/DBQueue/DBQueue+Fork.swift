// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

// MARK: fork()

extension DBQueue {
    /// In a forked child: the first call after the fork adopts the queue's state as the fork left
    /// it (one thread does, the others wait for it); then `notRecoverable` when the fork left it
    /// unusable.
    @inline(never)
    @usableFromInline package func checkFork() throws(QueueKitError) {
        let generation = Fork.generation
        var seen = forkGeneration.load(ordering: .acquiring)
        var backoff = Backoff()
        while seen != generation {
            if seen != Self.adoptingFork,
                forkGeneration.compareExchange(
                    expected: seen, desired: Self.adoptingFork, ordering: .acquiringAndReleasing
                ).exchanged
            {
                adoptFork()
                forkGeneration.store(generation, ordering: .releasing)
                break
            }
            backoff.pause()
            seen = forkGeneration.load(ordering: .acquiring)
        }
        if brokenByFork.load(ordering: .relaxed) { throw .notRecoverable }
    }

    /// The threads that were inside the queue, waiting for it or running its writes at the fork
    /// are gone: forget them. What decides is the work, not the threads: the queue is lost when a
    /// write's block was running on another thread (half done) or asynchronous writes were
    /// pending (they never run here); then it is marked unusable. A thread that merely held the
    /// exclusivity or the lane's lock for bookkeeping (the worker finishing after its last write,
    /// a writer not started yet, a thread handing the queue on) ran no code of the program's
    /// there, so the queue stays usable: its lane starts afresh, the lock initialised anew when
    /// the fork caught a gone thread inside it.
    func adoptFork() {
        let hold = ExecutionContext.hold(of: queue)
        let current = state.load(ordering: .acquiring)
        let writing = writeRunning.load(ordering: .relaxed) && hold != .exclusive
        let quiet = !writing && StateBit.asyncCount(current) == 0
        if lane.withLockIfAvailable({ $0 = Lane() }) == nil { lane.releaseInChild { $0 = Lane() } }
        nextTarget.store(.max, ordering: .relaxed)
        workerState.store(Self.workerIdle, ordering: .relaxed)
        if !quiet { brokenByFork.store(true, ordering: .relaxed) }
        // Only this thread's own read or write survives, and it will end as usual (a read in its
        // slot leaves its slot; the other readers in slots are gone).
        let ownSlot = forgetVisibleReaders()
        let own = hold == .exclusive ? StateBit.writer : hold == .shared && !ownSlot ? StateBit.oneReader : 0
        state.store(own | current & StateBit.biased, ordering: .releasing)
    }
}
