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
    /// are gone: forget them. The queue stays usable when no write was running, pending or
    /// waiting; otherwise the pending writes are dropped (they never run here) and the queue is
    /// marked unusable. A lane lock still held at the fork (by a thread in the middle of handing
    /// the queue on) means the same.
    func adoptFork() {
        let hold = ExecutionContext.hold(of: queue)
        let usable = lane.withLockIfAvailable { lane -> Bool in
            let current = state.load(ordering: .acquiring)
            let writing = current & StateBit.writer != 0 && hold != .exclusive
            let quiet =
                !writing && StateBit.asyncCount(current) == 0 && !lane.waiters.contains { $0.pointee.want == .write }
            lane.waiters.removeAll()
            lane.dueCount = 0
            nextTarget.store(.max, ordering: .relaxed)
            workerState.store(Self.workerIdle, ordering: .relaxed)
            // Only this thread's own read or write survives, and it will end as usual (a read in
            // its slot leaves its slot; the other readers in slots are gone).
            let ownSlot = forgetVisibleReaders()
            let own = hold == .exclusive ? StateBit.writer : hold == .shared && !ownSlot ? StateBit.oneReader : 0
            state.store(own | current & StateBit.biased, ordering: .releasing)
            return quiet
        }
        if usable != true { brokenByFork.store(true, ordering: .relaxed) }
        // A lane lock held by a thread that is gone can never be destroyed (that would trap):
        // such a queue is never freed in this process.
        if usable == nil { _ = Unmanaged.passRetained(self) }
    }
}
