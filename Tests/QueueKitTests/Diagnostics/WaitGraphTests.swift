// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The wait-for graph alone: threads that hold real condition locks and queues, with waits
// described in their records by hand (no thread really waits, so nothing is refused and nothing
// hangs), and the graph asked who waits for whom.

/// A thread parked in a test: it runs `setUp` (taking what it holds and describing its wait),
/// then stays until `release`, then runs `tearDown`.
private final class ParkedThread: @unchecked Sendable {
    private let ready = DispatchSemaphore(value: 0)
    private let go = DispatchSemaphore(value: 0)
    private var done: DispatchSemaphore?
    private(set) var record: ThreadRecord?

    init(_ setUp: @escaping @Sendable () -> Void, tearDown: @escaping @Sendable () -> Void = {}) {
        done = spawn { [self] in
            setUp()
            record = ThreadRecord.current
            ready.signal()
            _ = waits(for: go)
            ThreadRecord.current.wait = PublishedWait()
            tearDown()
        }
        #expect(waits(for: ready))
    }

    func release() {
        go.signal()
        if let done { #expect(waits(for: done)) }
    }
}

/// Describes, on the calling thread, a wait in a test call for `target`.
private func describeWait(for target: WaitTarget, deadline: UInt64 = MonotonicClock.forever) {
    ThreadRecord.current.wait.describe(
        call: "test", target: target, deadline: deadline, frame: ExecutionContext.innermost)
}

/// A stand-in for a lock's waiter record (the graph does not read it for a plain lock).
private var noWaiter: UnsafeRawPointer { UnsafeRawPointer(bitPattern: 0x10)! }

@Suite("WaitGraph: who waits for whom")
struct WaitGraphTests {
    @Test("two threads, each holding the lock the other waits for: a cycle through both")
    func lockRing() throws {
        let first = ConditionLock(condition: 0)
        let second = ConditionLock(condition: 0)
        let a = ParkedThread(
            {
                try? first.lock()
                describeWait(for: .lock(second, waiter: noWaiter, forCondition: false))
            }, tearDown: { try? first.unlock() })
        let b = ParkedThread(
            {
                try? second.lock()
                describeWait(for: .lock(first, waiter: noWaiter, forCondition: false))
            }, tearDown: { try? second.unlock() })
        defer {
            a.release()
            b.release()
        }
        let ra = try #require(a.record)
        let rb = try #require(b.record)
        let graph = WaitGraph(nodes: [ra, rb])
        #expect(graph.holders(of: ra).map(ObjectIdentifier.init) == [ObjectIdentifier(rb)])
        #expect(graph.holders(of: rb).map(ObjectIdentifier.init) == [ObjectIdentifier(ra)])
        #expect(
            graph.cycle(through: ra).map { $0.map(ObjectIdentifier.init) } == [
                ObjectIdentifier(ra), ObjectIdentifier(rb),
            ])
        // Without the other thread among the waiting nodes there is no cycle.
        #expect(WaitGraph(nodes: [ra]).cycle(through: ra) == nil)
    }

    @Test("a timed wait ends by itself: no edge, no cycle")
    func timedWaitsCloseNothing() throws {
        let first = ConditionLock(condition: 0)
        let second = ConditionLock(condition: 0)
        let a = ParkedThread(
            {
                try? first.lock()
                describeWait(
                    for: .lock(second, waiter: noWaiter, forCondition: false),
                    deadline: MonotonicClock.now() + 1_000_000_000)
            }, tearDown: { try? first.unlock() })
        let b = ParkedThread(
            {
                try? second.lock()
                describeWait(for: .lock(first, waiter: noWaiter, forCondition: false))
            }, tearDown: { try? second.unlock() })
        defer {
            a.release()
            b.release()
        }
        let ra = try #require(a.record)
        let rb = try #require(b.record)
        let graph = WaitGraph(nodes: [ra, rb])
        #expect(graph.holders(of: ra).isEmpty)
        #expect(graph.holders(of: ra, evenIfTimed: true).map(ObjectIdentifier.init) == [ObjectIdentifier(rb)])
        #expect(graph.cycle(through: rb) == nil)
    }

    @Test("two threads inside blocks of serial queues, each syncing onto the other's queue: a cycle")
    func queueRing() throws {
        let q1 = try Queue(label: "wait-graph.1")
        let q2 = try Queue(label: "wait-graph.2")
        let inside = DispatchSemaphore(value: 0)
        let leave = DispatchSemaphore(value: 0)
        let records = Shared<[ThreadRecord]>([])
        // Each thread stays inside a block of its queue (the frame chain holds it) while its wait
        // for the other queue is described.
        let threads = [(q1, q2), (q2, q1)].map { own, other in
            spawn {
                try? own.sync {
                    describeWait(for: .queue(Unmanaged.passUnretained(other), barrier: false))
                    records.update { $0.append(ThreadRecord.current) }
                    inside.signal()
                    _ = waits(for: leave)
                    ThreadRecord.current.wait = PublishedWait()
                }
            }
        }
        #expect(waits(for: inside) && waits(for: inside))
        let nodes = records.value
        let graph = WaitGraph(nodes: nodes)
        #expect(graph.cycle(through: nodes[0])?.count == 2)
        #expect(graph.holders(of: nodes[1]).map(ObjectIdentifier.init) == [ObjectIdentifier(nodes[0])])
        leave.signal()
        leave.signal()
        for thread in threads { #expect(waits(for: thread)) }
    }
}
