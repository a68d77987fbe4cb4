// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKit

// Kernels of the Swift-concurrency rows (each `@_cdecl`, loaded by the driver by symbol; each
// runs `n` operations and returns the nanoseconds per operation): QueueKit's suspending waits and queue-bound actors next
// to what Swift programs use without QueueKit (a continuation bridge onto a dispatch queue, as
// GRDB's async accessors do; an async semaphore over a queue of continuations; an actor on the
// default executor). Each kernel runs in a task started from the driver's (non-pool) thread.

/// Runs `body` in a task and blocks the calling (non-pool) thread until it returns its time.
private func runInTask(_ body: @escaping @Sendable () async -> Double) -> Double {
    let done = DispatchSemaphore(value: 0)
    let result = SampleBox()
    Task {
        result.sample = await body()
        done.signal()
    }
    done.wait()
    return result.sample
}

private final class SampleBox: @unchecked Sendable {
    var sample = Double.nan
}

private func sample(since begin: UInt64, _ n: UInt64) -> Double {
    Double(nowNs() - begin) / Double(n)
}

/// A counter that tasks bump under the synchronisation being measured.
private final class Count: @unchecked Sendable {
    var value = 0
}

nonisolated(unsafe) private var asyncSink = 0

// MARK: Uncontended

/// `try await db.read {}` from a nonisolated task, nobody else using the queue.
@_cdecl("qkbench_swift_async_db_read")
public func asyncDBQueueRead(_ n: UInt64) -> Double {
    runInTask {
        let db = try! DBQueue(label: "bench.async.read")
        let count = Count()
        let begin = nowNs()
        for _ in 0..<n { try! await db.read { count.value &+= 1 } }
        let result = sample(since: begin, n)
        asyncSink &+= count.value
        return result
    }
}

// MARK: Continuation bridge

/// The GRDB-style bridge: each access is a `withCheckedContinuation` whose body submits the work
/// to a dispatch queue with `DispatchQueue.async`, which resumes the task when done.
@_cdecl("qkbench_swift_bridge_read")
public func bridgeRead(_ n: UInt64) -> Double {
    runInTask {
        let queue = DispatchQueue(label: "bench.bridge", attributes: .concurrent)
        let count = Count()
        let begin = nowNs()
        for _ in 0..<n {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async {
                    count.value &+= 1
                    continuation.resume()
                }
            }
        }
        let result = sample(since: begin, n)
        asyncSink &+= count.value
        return result
    }
}

// MARK: Actors

/// The actors of the actor rows: one method call is measured.
private protocol Bumping: Actor {
    func bump()
    var total: Int { get }
}

/// An actor on the default executor.
private actor DefaultActor: Bumping {
    private var count = 0
    func bump() { count &+= 1 }
    var total: Int { count }
}

/// The same actor on a QueueKit queue.
private actor QueueActor: Bumping {
    private let queue: Queue
    private var count = 0
    init(queue: Queue) { self.queue = queue }
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func bump() { count &+= 1 }
    var total: Int { count }
}

/// A bare serial executor over a dispatch queue (what an actor on a queue costs without QueueKit's
/// identity frames): each job is one `DispatchQueue.async`.
private final class DispatchExecutor: SerialExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "bench.actor.dispatch")
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }
    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// The same actor on the bare dispatch executor.
private actor DispatchActor: Bumping {
    private let executor = DispatchExecutor()
    private var count = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    func bump() { count &+= 1 }
    var total: Int { count }
}

/// `await actor.bump()` from a nonisolated task, `n` times.
private func actorCall(_ n: UInt64, _ make: @escaping @Sendable () -> any Bumping) -> Double {
    runInTask {
        let actor = make()
        let begin = nowNs()
        for _ in 0..<n { await actor.bump() }
        let result = sample(since: begin, n)
        asyncSink &+= await actor.total
        return result
    }
}

/// The actor on the default executor.
@_cdecl("qkbench_swift_default_actor_call")
public func defaultActorCall(_ n: UInt64) -> Double { actorCall(n) { DefaultActor() } }

/// The actor on a serial `Queue`.
@_cdecl("qkbench_swift_queue_actor_call")
public func queueActorCall(_ n: UInt64) -> Double {
    actorCall(n) { QueueActor(queue: try! Queue(label: "bench.actor")) }
}

/// The actor on a bare `DispatchQueue` executor.
@_cdecl("qkbench_swift_dispatch_actor_call")
public func dispatchActorCall(_ n: UInt64) -> Double { actorCall(n) { DispatchActor() } }

// MARK: Contended hand-off

/// An async semaphore as the `AsyncSemaphore` packages make it: a count and a FIFO of
/// continuations under a mutex; `wait` suspends when the count is zero, `signal` resumes the
/// first waiter.
private final class ContinuationSemaphore: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var value: Int
    private var waiters: [UnsafeContinuation<Void, Never>] = []
    private var head = 0

    init(value: Int) {
        self.value = value
        pthread_mutex_init(&mutex, nil)
    }

    func wait() async {
        pthread_mutex_lock(&mutex)
        if value > 0 {
            value -= 1
            pthread_mutex_unlock(&mutex)
            return
        }
        await withUnsafeContinuation { continuation in
            waiters.append(continuation)
            pthread_mutex_unlock(&mutex)
        }
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        if head < waiters.count {
            let first = waiters[head]
            head += 1
            if head == waiters.count {
                waiters.removeAll(keepingCapacity: true)
                head = 0
            }
            pthread_mutex_unlock(&mutex)
            first.resume()
        } else {
            value += 1
            pthread_mutex_unlock(&mutex)
        }
    }
}

/// How many tasks contend in the hand-off rows (the driver names the workload after it).
private let contendingTasks = 4

/// `contendingTasks` tasks each run their share of `n` critical sections through `enter`.
private func contended(_ n: UInt64, _ section: @escaping @Sendable (Count) async -> Void) -> Double {
    runInTask {
        let count = Count()
        let share = n / UInt64(contendingTasks)
        let begin = nowNs()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<contendingTasks {
                group.addTask { for _ in 0..<share { await section(count) } }
            }
        }
        let result = sample(since: begin, share * UInt64(contendingTasks))
        asyncSink &+= count.value
        return result
    }
}

/// The anchor: `await semaphore.wait()`, the section, `semaphore.signal()`.
@_cdecl("qkbench_swift_semaphore_hand_off")
public func semaphoreHandOff(_ n: UInt64) -> Double {
    let semaphore = ContinuationSemaphore(value: 1)
    return contended(n) { count in
        await semaphore.wait()
        count.value &+= 1
        semaphore.signal()
    }
}

/// `try await db.write { }` on a DB queue.
@_cdecl("qkbench_swift_async_db_write_hand_off")
public func dbQueueWriteHandOff(_ n: UInt64) -> Double {
    let db = try! DBQueue(label: "bench.async.write")
    return contended(n) { count in
        try! await db.write { count.value &+= 1 }
    }
}

/// `try await lock.withLock { }` on a condition lock.
@_cdecl("qkbench_swift_async_lock_hand_off")
public func conditionLockHandOff(_ n: UInt64) -> Double {
    let lock = ConditionLock(condition: 0)
    return contended(n) { count in
        try! await lock.withLock { count.value &+= 1 }
    }
}
