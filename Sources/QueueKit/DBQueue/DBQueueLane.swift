// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    /// What a suspended task waits for in a DB queue.
    enum SuspendedWant {
        case read, write
        /// The writes up to its target have run (a flush).
        case completion

        var lane: Want {
            switch self {
            case .read: .read
            case .write: .write
            case .completion: .completion
            }
        }
    }

    /// What a waiter waits for.
    @usableFromInline
    enum Want {
        case read, write
        /// The worker: the exclusivity, to run asynchronous writes.
        case asyncWrites
        /// A flush that may not help: no access, only its writes run.
        case completion
    }

    /// What a waiter was handed.
    enum Grant: Equatable {
        /// What it wanted.
        case access
        /// The exclusivity, to run the asynchronous writes it needs first.
        case asyncWrites
    }

    enum Outcome {
        case waiting
        /// Woken to compete for the queue again (a flusher: its writes have run).
        case woken
        case granted(Grant)
    }

    enum WaitResult { case woken, timedOut, refused }

    enum Step {
        case granted(Grant)
        case compete, refused, wait
    }

    /// A waiting thread's record, on its stack while it waits; the lane points at it.
    ///
    /// The wake-up is a `Parker` word, or for a suspended task (on the heap for its wait) the
    /// continuation in its ``SuspendedWaiter`` record. A task is only woken, never granted
    /// (`.woken`): it acquires when it resumes, and since it re-enters with its first arrival time
    /// (`since`), it keeps its place in line and becomes due like a thread.
    struct Waiter {
        let want: Want
        let call: StaticString
        /// The thread holds nothing else of QueueKit's: it may run asynchronous writes.
        let mayHelp: Bool
        /// `completed` must reach this before it may have access.
        let target: UInt64
        /// When the call arrived: the lane is ordered by it and the fairness bound counts from it.
        let since: UInt64
        var isDue = false
        var outcome = Outcome.waiting
        /// A thread's wake-up word (a task's record carries an unused one).
        let parker: Parker
        /// A suspended task's record; `nil` for a thread. A task is never granted the queue, only
        /// woken.
        var task: Unmanaged<SuspendedWaiter>? = nil

        init(want: Want, call: StaticString, mayHelp: Bool, target: UInt64, since: UInt64, parker: Parker) {
            self.want = want
            self.call = call
            self.mayHelp = mayHelp
            self.target = target
            self.since = since
            self.parker = parker
        }

        var wantsAccess: Bool { want == .read || want == .write }
    }

    /// The state behind `DBQueue.lane`: the waiters in arrival order.
    struct Lane {
        var waiters: [UnsafeMutablePointer<Waiter>] = []
        /// Waiters that are due.
        var dueCount = 0

        init() { waiters.reserveCapacity(16) }

        mutating func insert(_ waiter: UnsafeMutablePointer<Waiter>) {
            let since = waiter.pointee.since
            var index = waiters.count
            while index > 0 && waiters[index - 1].pointee.since > since { index -= 1 }
            waiters.insert(waiter, at: index)
        }

        mutating func remove(_ waiter: UnsafeMutablePointer<Waiter>) {
            if let index = waiters.firstIndex(of: waiter) { waiters.remove(at: index) }
        }
    }

    /// Wake-ups to do once the lane's lock is released. The first two are kept inline: most
    /// hand-offs wake one thread, and the contended paths should not allocate.
    struct Wakeups {
        var first: Parker?
        var second: Parker?
        var more: [Parker] = []
        /// Suspended tasks to wake (`false`: woken, not granted; they compete when they run).
        var tasks: [UnsafeContinuation<Bool, any Error>] = []
        var wakesWorker = false

        mutating func append(_ parker: Parker) {
            if first == nil {
                first = parker
            } else if second == nil {
                second = parker
            } else {
                more.append(parker)
            }
        }

        func perform(on db: DBQueue) {
            first?.unpark()
            second?.unpark()
            for parker in more { parker.unpark() }
            for task in tasks { task.resume(returning: false) }
            if wakesWorker { db.wakeWorker() }
        }
    }
}
