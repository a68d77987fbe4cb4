// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Testing

// A Queue as an actor's executor, and `await queue.perform { }` (the header's section 5). The actor's
// isolation must be known on the queue whatever entered it: a C callback submitted with
// qk_queue_async / qk_queue_sync may assert it, also further out through a sync hop.

/// An actor whose jobs run on a QueueKit queue.
private actor Counter {
    let queue: Queue
    private(set) var count = 0

    init(queue: Queue) { self.queue = queue }

    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }

    func bump() -> Int {
        count += 1
        return count
    }

    /// What the registry says inside an actor method.
    func identity() -> (current: Queue?, onQueue: Bool, asBarrier: Bool) {
        (Queue.current, queue.check(.onQueue), queue.check(.onQueueAsBarrier))
    }

    func performInline() async throws -> (sameThread: Bool, current: Bool) {
        let before = pthread_self()
        return try await queue.perform { (pthread_equal(before, pthread_self()) != 0, Queue.current === self.queue) }
    }
}

/// Asserts a queue-bound actor's isolation on a thread that runs no block of the queue.
private func assumeIsolationOffTheQueue() {
    let queue = try! Queue(label: "executor.elsewhere")
    let counter = Counter(queue: queue)
    _ = counter.assumeIsolated { $0.count }
}

@Suite struct QueueExecutorTests {
    @Test func currentInsideAnActorMethodIsTheQueue() async throws {
        let queue = try Queue(label: "executor.serial")
        let counter = Counter(queue: queue)
        let seen = try #require(try await withWatchdog { await counter.identity() })
        #expect(seen.current === queue)
        #expect(seen.onQueue)
        #expect(seen.asBarrier)
        #expect(Queue.current !== queue)
    }

    @Test func aConcurrentQueueRunsTheActorsJobsAsBarriers() async throws {
        let queue = try Queue(label: "executor.concurrent", kind: .concurrent)
        let counter = Counter(queue: queue)
        let seen = try #require(try await withWatchdog { await counter.identity() })
        #expect(seen.current === queue)
        #expect(seen.asBarrier)
        // Many concurrent callers: the actor's state is never raced (TSan checks it) and all count.
        let total = try await withWatchdog {
            await withTaskGroup(of: Int.self) { group in
                for _ in 0..<200 { group.addTask { await counter.bump() } }
                return await group.reduce(0) { max($0, $1) }
            }
        }
        #expect(total == 200)
    }

    @Test func aCCallbackOnTheQueueCanAssumeTheActorsIsolation() throws {
        let queue = CQueue.create("executor.c")
        defer { queue.release() }
        let counter = Counter(queue: queue.swift)
        let done = DispatchSemaphore(value: 0)
        let results = Shared<[Int]>([])
        // From C's qk_queue_async: no task, no Swift executor, only the queue's block.
        #expect(
            callCAsync({
                let value = counter.assumeIsolated { $0.bump() }
                results.update { $0.append(value) }
                done.signal()
            }) { qk_queue_async(queue.handle, $0, $1) } == 0)
        #expect(waits(for: done))
        // From C's qk_queue_sync, on a plain thread.
        #expect(
            finishes {
                _ = callC({
                    let value = counter.assumeIsolated { $0.bump() }
                    results.update { $0.append(value) }
                }) { qk_queue_sync(queue.handle, $0, $1) }
            })
        // Further out through a sync hop onto another queue: the block that holds the actor's
        // queue waits in that sync, so the isolation still holds inside it.
        let other = CQueue.create("executor.other")
        defer { other.release() }
        let inner = Shared<(current: Bool, isolated: Bool?)>((false, nil))
        #expect(
            finishes {
                _ = callC({
                    _ = callC({
                        inner.value = (Queue.current === other.swift, queue.swift.isIsolatingCurrentContext())
                        let value = counter.assumeIsolated { $0.bump() }
                        results.update { $0.append(value) }
                    }) { qk_queue_sync(other.handle, $0, $1) }
                }) { qk_queue_sync(queue.handle, $0, $1) }
            })
        #expect(inner.value.current)
        #expect(inner.value.isolated == true)
        #expect(results.value == [1, 2, 3])
        // Elsewhere the isolation is denied.
        #expect(queue.swift.isIsolatingCurrentContext() == false)
        let elsewhere = Shared<Bool?>(nil)
        #expect(
            finishes {
                _ = callC({ elsewhere.value = queue.swift.isIsolatingCurrentContext() }) {
                    qk_queue_sync(other.handle, $0, $1)
                }
            })
        #expect(elsewhere.value == false)
    }

    @Test func assumeIsolatedOffTheQueueFails() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            assumeIsolationOffTheQueue()
        }
        // The runtime asks isIsolatingCurrentContext(), gets false, and stops with its message.
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("Incorrect actor executor assumption"))
        // checkIsolated() itself (asked by runtimes that do not use isIsolatingCurrentContext):
        // one line naming the queue.
        let checked = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            try! Queue(label: "executor.checked").checkIsolated()
        }
        let line = String(decoding: checked?.standardErrorContent ?? [], as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("QueueKit precondition failed: expected to be on queue as barrier 'executor.checked'"))
        #expect(line.split(separator: "\n").count == 1)
    }

    @Test func globalAndIdentityQueuesRefuseToBeExecutors() async {
        let global = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = Queue.global().asUnownedSerialExecutor()
        }
        let globalMessage = String(decoding: global?.standardErrorContent ?? [], as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(globalMessage.contains("cannot be an actor's executor"))
        #expect(globalMessage.split(separator: "\n").count == 1)
        let identity = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = try! DBQueue(label: "db").queue.asUnownedSerialExecutor()
        }
        let identityMessage = String(decoding: identity?.standardErrorContent ?? [], as: UTF8.self)
        #expect(identityMessage.contains("identity-only"))
    }

    @Test func performRunsOnTheQueueAndResumesWithTheResult() async throws {
        let queue = try Queue(label: "perform.async")
        let result = try await withWatchdog {
            try await queue.perform { (Queue.current === queue, queue.check(.onQueueAsBarrier), 42) }
        }
        #expect(result?.0 == true)
        #expect(result?.1 == true)
        #expect(result?.2 == 42)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await queue.perform { throw Failure() } }
        await #expect(throws: QueueKitError.invalidArgument) {
            try await DBQueue(label: "db").queue.perform { 1 }
        }
    }

    @Test func performIsInlineWhenAlreadyOnTheQueue() async throws {
        let queue = try Queue(label: "perform.inline")
        let counter = Counter(queue: queue)
        let seen = try #require(try await withWatchdog { try await counter.performInline() })
        #expect(seen.sameThread)
        #expect(seen.current)
    }
}
