// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension ConditionLock {
    // MARK: Suspended tasks

    /// Waits, suspending, until the calling task holds the lock with a state that satisfies
    /// `wanted`. Returns on the thread that holds it.
    ///
    /// The task is woken, not handed the lock: it takes the lock itself when it runs again (here,
    /// in `takeOrQueue`), keeping its place in line when someone took it first.
    func acquireSuspending(wanted: Wanted, call: StaticString, isolation: isolated (any Actor)?) async throws {
        try Task.checkCancellation()
        if line.pointee.owner.load(ordering: .relaxed) == qkshim_thread_id() { throw QueueKitError.wouldDeadlock }
        if wanted.isAny ? acquireIfIdle() : tryTake(wanted: wanted) { return }

        let record = SuspendedWaiter(call: call, object: self, wanted: wanted.reportValue)
        let node = UnsafeMutablePointer<Waiter>.allocate(capacity: 1)
        node.initialize(to: Waiter(parker: nil, threadID: 0, wanted: wanted, task: .passUnretained(record)))
        defer {
            node.deinitialize(count: 1)
            node.deallocate()
        }
        let nodeAddress = UncheckedSendable(node)
        var retries = 0
        try await SuspendedTaskDriver.wait(
            record, isolation: isolation, attempt: { takeOrQueue(node, $0) },
            retried: {
                // The first wake-up is the one the task waited for; later ones were futile.
                retries += 1
                if retries > 1 { futileCount.add(1, ordering: .relaxed) }
            },
            cancel: { cancelWait(nodeAddress.value) })
        didAcquire(by: qkshim_thread_id(), waited: true)
    }

    /// An immediate acquisition for a task that wants `wanted`: the lock is free and the condition
    /// matches. No waiting, no counters on failure.
    func tryTake(wanted: Wanted) -> Bool {
        let observed = acquireGuard()
        if observed & StateBit.locked == 0 && satisfies(wanted) && releaseGuard(.take) {
            didAcquire(by: qkshim_thread_id(), waited: false)
            return true
        }
        releaseGuard(.keep)
        return false
    }

    /// Under the guard, on the task's current thread: ends the wait of a cancelled task, takes
    /// the lock when it is free and the state satisfies the task (a task still in line takes it
    /// only when nobody ahead of it could), or queues the task (again at its old place when it
    /// is already in line) and stores its continuation.
    func takeOrQueue(_ node: UnsafeMutablePointer<Waiter>, _ continuation: UnsafeContinuation<Bool, any Error>) {
        let record = node.pointee.task!
        let observed = acquireGuard()
        if record._withUnsafeGuaranteedRef({ $0.isCancelled }) {
            leave(node)
            continuation.resume(throwing: CancellationError())
            return
        }
        if observed & StateBit.locked == 0 && satisfies(node.pointee.wanted)
            && firstSatisfied().map({ $0 == node }) ?? true
        {
            if node.pointee.isQueued { unlink(node) }
            if releaseGuard(.take) {
                continuation.resume(returning: true)
                return
            }
            // A plain lock took it meanwhile; we still hold the guard: wait below.
        }
        if !node.pointee.isQueued { append(node) }
        record._withUnsafeGuaranteedRef { $0.suspend(with: continuation) }
        releaseGuard(.keep)
    }

    /// The cancellation handler of a suspended task: a task still waiting is taken out of line
    /// and resumed with `CancellationError`; one already woken finds out when it runs.
    func cancelWait(_ node: UnsafeMutablePointer<Waiter>) {
        acquireGuard()
        let continuation = node.pointee.task!._withUnsafeGuaranteedRef { $0.cancel() }
        if continuation != nil { unlink(node) }
        releaseGuard(.keep)
        continuation?.resume(throwing: CancellationError())
    }

    /// Takes a cancelled task out of line (the caller holds the guard, which this releases). A
    /// woken task may have been the one the lock was left free for: pass it on.
    func leave(_ node: UnsafeMutablePointer<Waiter>) {
        guard node.pointee.isQueued else {
            releaseGuard(.keep)
            return
        }
        unlink(node)
        passOn(held: false)
    }
}
