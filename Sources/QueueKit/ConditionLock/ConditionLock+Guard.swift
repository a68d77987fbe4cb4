// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension ConditionLock {
    // MARK: The guard

    /// Spins until this thread holds the guard. Returns the state word as it was taken.
    @discardableResult
    func acquireGuard() -> UInt {
        var backoff = Backoff()
        var firstPoll = true
        while true {
            if let taken = setIfClear(StateBit.guarded) { return taken }
            // A test of this lock's condition calling into the lock: the guard is its own caller's.
            if firstPoll && isTestedByCallingThread {
                qkshim_fatal("QueueKit: a test of a condition lock's condition used that lock")
            }
            firstPoll = false
            backoff.pause()
        }
    }

    /// Releases the guard, publishing whether waiters are queued, and changes the locked bit:
    /// `.take` sets it if it is clear (false, guard still held, when a plain lock set it meanwhile),
    /// `.drop` clears it. Only plain locks change the word while the guard is held, and only by
    /// setting a clear locked bit.
    ///
    /// `handedToSleeper` (a hand-off's): whether the lock was just handed to a thread asleep in the
    /// kernel (see ``StateBit/handedToSleeper``); `nil` leaves that bit, which `.drop` clears.
    @discardableResult
    @usableFromInline
    func releaseGuard(_ change: LockChange, handedToSleeper: Bool? = nil) -> Bool {
        let queued = head == nil ? 0 : StateBit.queued
        var current = line.pointee.state.load(ordering: .relaxed)
        // A held lock's word changes only under its guard (every other write is a compare-and-swap
        // that expects the guard or the locked bit clear): a store releases it, no second atomic
        // read-modify-write on the way out of a release or a queuing.
        if current & StateBit.locked != 0 && change != .take {
            var desired = (current & ~(StateBit.guarded | StateBit.queued)) | queued
            if change == .drop { desired &= ~(StateBit.locked | StateBit.handedToSleeper) }
            desired = marking(desired, handedToSleeper: handedToSleeper)
            line.pointee.state.store(desired, ordering: .releasing)
            return true
        }
        while true {
            var desired = (current & ~(StateBit.guarded | StateBit.queued)) | queued
            switch change {
            case .keep:
                break
            case .take:
                if current & StateBit.locked != 0 { return false }
                desired |= StateBit.locked
            case .drop:
                desired &= ~(StateBit.locked | StateBit.handedToSleeper)
            }
            desired = marking(desired, handedToSleeper: handedToSleeper)
            let (exchanged, now) = line.pointee.state.compareExchange(
                expected: current, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if exchanged { return true }
            current = now
        }
    }

    /// `word` with ``StateBit/handedToSleeper`` as `handedToSleeper` says (`nil`: as it is).
    @inline(__always)
    func marking(_ word: UInt, handedToSleeper: Bool?) -> UInt {
        guard let handedToSleeper else { return word }
        return handedToSleeper ? word | StateBit.handedToSleeper : word & ~StateBit.handedToSleeper
    }

    func append(_ node: UnsafeMutablePointer<Waiter>) {
        node.pointee.isQueued = true
        node.pointee.previous = tail
        node.pointee.next = nil
        if let tail { tail.pointee.next = node } else { head = node }
        tail = node
    }

    func unlink(_ node: UnsafeMutablePointer<Waiter>) {
        let previous = node.pointee.previous
        let next = node.pointee.next
        if let previous { previous.pointee.next = next } else { head = next }
        if let next { next.pointee.previous = previous } else { tail = previous }
        node.pointee.isQueued = false
        node.pointee.next = nil
        node.pointee.previous = nil
    }
}
