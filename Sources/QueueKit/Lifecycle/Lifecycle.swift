// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

// Threads that die and processes that fork: what QueueKit does so that neither leaves a lock held
// forever or a call waiting forever.
//
// - A thread that exits holding condition locks abandons them. Its record's pthread key destructor
//   (`ThreadRecord.threadDidExit`) runs on the exiting thread; when the thread's count of held
//   condition locks is not 0, it walks the registry of live condition locks and hands each one it
//   still holds to the next waiter, or leaves it free, marked abandoned (`ConditionLock`).
// - fork(): the handlers installed at load (the shim) count forks, so a child knows it is one
//   (`Fork.isChild`), and call the hooks below. The prepare hook takes every internal lock that a
//   child could need (thread records, the registry of condition locks, each lock's guard and name
//   lock), so no other thread is inside one at the fork; the parent hook gives them back; the child
//   hook gives them back too, after forgetting the threads that did not survive: their records are
//   retired, the locks they held are abandoned, and waiter queues (records on the stacks of those
//   threads) are emptied. Dispatch has no fork handlers on Linux: its threads are gone in a child,
//   so queue submissions and asynchronous DB-queue writes fail there with `notRecoverable`.
//
// Lock order: the deadlock handler's, the deadlock detector's, `ThreadRecord.registry`, then the
// registry of condition locks, then a lock's guard; then the registry of queue specifics
// (`LiveSpecifics`), then each queue's specifics lock; then the DB queues' write-node pool's
// growth lock.

/// A lock that belongs to the thread holding it: what the exit hook and the fork hooks need of it.
/// Every method is called with the registry of live locks held.
protocol ThreadOwnedLock: AnyObject {
    /// On the exiting thread `thread`: releases the lock if `thread` holds it, marking it abandoned.
    func abandon(heldBy thread: UInt64)
    /// Takes the lock's internal locks (not the lock itself) before a fork.
    func prepareForFork()
    /// Gives them back in the parent.
    func resumeInParent()
    /// Gives them back in the child, where `survivor` is the only thread: the lock is abandoned
    /// when another thread held it, and its waiter queue is emptied.
    func resumeInChild(survivor: UInt64)
}

/// The registry of live condition locks, where a dying thread and a forked child find the locks
/// that a thread held. Locks register at creation and leave at deinit (a dictionary update under a
/// mutex); acquiring and releasing never touch it.
enum LiveConditionLocks {
    private struct Entry {
        /// Not retained: the lock's deinit removes the entry first, under the registry's lock.
        unowned(unsafe) let lock: any ThreadOwnedLock
    }

    private static let registry: Lock<[ObjectIdentifier: Entry]> = {
        Fork.installHooks()
        // Every lock registers before it can be acquired: from here on, acquisitions make the
        // records of the threads that have none.
        qkshim_record_maker_set(threadRecordMaker)
        return Lock([:])
    }()

    /// How many condition locks the calling thread holds right now (of every condition type).
    /// Code that must not run while the thread holds one (helping with other threads' work, say)
    /// asks this. Thread-local: a load.
    static var heldByCurrentThread: Int { Int(qkshim_condlocks_held()) }

    static func register(_ lock: some ThreadOwnedLock) {
        registry.withLock { $0[ObjectIdentifier(lock)] = Entry(lock: lock) }
    }

    static func unregister(_ lock: some ThreadOwnedLock) {
        registry.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(lock)) }
    }

    /// On the exiting thread `thread`: abandons every condition lock it still holds.
    static func abandonAll(heldBy thread: UInt64) {
        registry.withLock { locks in
            for entry in locks.values { entry.lock.abandon(heldBy: thread) }
        }
        qkshim_condlocks_held_reset()
    }

    fileprivate static func prepareForFork() {
        registry.acquireForFork()
        forEachLockHeld { $0.prepareForFork() }
    }

    fileprivate static func resumeInParent() {
        forEachLockHeld { $0.resumeInParent() }
        registry.releaseInParent()
    }

    fileprivate static func resumeInChild(survivor: UInt64) {
        forEachLockHeld { $0.resumeInChild(survivor: survivor) }
        registry.releaseInChild()
    }

    /// Runs `body` on every lock while the fork hooks hold the registry's lock.
    private static func forEachLockHeld(_ body: (any ThreadOwnedLock) -> Void) {
        registry.withStateWhileHeld { locks in
            for entry in locks.values { body(entry.lock) }
        }
    }

    /// The registry's generic types, for ``MetadataWarmUp``.
    static func warmUpMetadata() {
        MetadataWarmUp.dictionaryStorage(ObjectIdentifier.self, Entry.self)
    }
}

/// The calling process as fork() left it.
@usableFromInline
package enum Fork {
    /// Whether this process is a forked child of the one that loaded QueueKit (its other threads,
    /// dispatch's among them, are gone). A load.
    @inlinable @inline(__always)
    package static var isChild: Bool { qkshim_is_forked_child() }

    /// How many forks lie between the process that loaded QueueKit and this one (0 in it): an
    /// object that remembers the generation it last saw notices the first call after a fork.
    @inline(__always)
    static var generation: UInt64 { qkshim_fork_generation_get() }

    private static let hooks: Void = qkshim_fork_hooks_set(forkPrepare, forkParent, forkChild)

    /// Makes the fork handlers call the hooks below (once; the first registry created does it).
    static func installHooks() { _ = hooks }
}

private let forkPrepare: @convention(c) () -> Void = {
    // A mode change of the witness takes its graph's lock inside.
    LockOrder.prepareForFork()
    // The deadlock detector's locks come first: a search takes the records' registry, lock
    // guards and names inside them.
    Diagnostics.deadlockHandler.acquireForFork()
    StallWatch.prepareForFork()
    WaitRegistry.detector.acquireForFork()
    ThreadRecord.registry.acquireForFork()
    ThreadRecord.prepareExitedForFork()
    SuspendedWaits.prepareForFork()
    LiveConditionLocks.prepareForFork()
    LiveSpecifics.prepareForFork()
    WriteNodePool.prepareForFork()
}

private let forkParent: @convention(c) () -> Void = {
    WriteNodePool.resumeInParent()
    LiveSpecifics.resumeInParent()
    LiveConditionLocks.resumeInParent()
    SuspendedWaits.resumeInParent()
    ThreadRecord.resumeExitedInParent()
    ThreadRecord.registry.releaseInParent()
    WaitRegistry.detector.releaseInParent()
    StallWatch.resumeInParent()
    Diagnostics.deadlockHandler.releaseInParent()
    LockOrder.resumeInParent()
}

private let forkChild: @convention(c) () -> Void = {
    let survivor = qkshim_thread_id()
    WriteNodePool.resumeInChild()
    LiveSpecifics.resumeInChild()
    LiveConditionLocks.resumeInChild(survivor: survivor)
    SuspendedWaits.resumeInChild()
    ThreadRecord.resumeExitedInChild()
    ThreadRecord.registry.releaseInChild { records in ThreadRecord.forgetThreadsLostInFork(&records, survivor: survivor)
    }
    // The waits of the threads that did not survive went with them (the forking thread waits
    // for nothing while it forks).
    qkshim_waiting_reset()
    WaitRegistry.detector.releaseInChild()
    Diagnostics.deadlockHandler.releaseInChild()
    LockOrder.resumeInChild()
    // Last: the new watcher thread may take the locks above at once.
    StallWatch.resumeInChild()
}
