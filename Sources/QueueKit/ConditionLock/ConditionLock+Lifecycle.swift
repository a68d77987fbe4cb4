// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension ConditionLock {
    // MARK: Threads that die, processes that fork (see Lifecycle.swift)

    func abandon(heldBy thread: UInt64) {
        guard line.pointee.owner.load(ordering: .relaxed) == thread else { return }
        Acquisitions.abandoning(self) // on the exiting holder's own thread
        line.pointee.owner.store(0, ordering: .relaxed)
        release(setting: nil, news: .abandon(by: thread))
    }

    func prepareForFork() {
        nameStorage.acquireForFork()
        acquireGuard()
    }

    func resumeInParent() {
        releaseGuard(.keep)
        nameStorage.releaseInParent()
    }

    func resumeInChild(survivor: UInt64) {
        // The queued waiters were other threads, parked on their own stacks: gone.
        head = nil
        tail = nil
        let holder = line.pointee.owner.load(ordering: .relaxed)
        if line.pointee.state.load(ordering: .relaxed) & StateBit.locked != 0 && holder != survivor {
            line.pointee.owner.store(0, ordering: .relaxed)
            abandoner.store(holder, ordering: .relaxed)
            abandonmentCount.add(1, ordering: .relaxed)
            line.pointee.state.bitwiseOr(StateBit.abandoned, ordering: .relaxed)
            releaseGuard(.drop)
        } else {
            releaseGuard(.keep)
        }
        nameStorage.releaseInChild()
    }
}
