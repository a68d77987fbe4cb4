// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKit
import QueueKitTestSupport
import Testing

private struct Oops: Error {}

/// Counts its live instances, to check that the resource is freed with its guard.
private final class Tracked: @unchecked Sendable {
    static let live = Shared(0)
    var value = 0
    init() { Tracked.live.update { $0 += 1 } }
    deinit { Tracked.live.update { $0 -= 1 } }
}

@Suite("GuardedResource: a resource only its DB queue reaches")
struct GuardedResourceTests {
    @Test func readAndWriteReturnAndRethrow() throws {
        let store = try GuardedResource([String: Int](), label: "store")
        let old = try store.write { dict -> Int? in
            defer { dict["a"] = 1 }
            return dict["a"]
        }
        #expect(old == nil)
        #expect(try store.read { $0["a"] } == 1)
        #expect(throws: Oops.self) { try store.read { _ throws -> Int in throw Oops() } }
        #expect(throws: Oops.self) { try store.write { _ throws -> Int in throw Oops() } }
        #expect(store.queue.label == "store")
        #expect(store.queue === store.dbQueue.queue)
    }

    @Test func writeInsideReadThrowsAndChangesNothing() throws {
        let store = try GuardedResource(0)
        try store.read { _ in
            #expect(throws: QueueKitError.wouldDeadlock) { try store.write { $0 = 1 } }
            #expect(throws: QueueKitError.wouldDeadlock) { try store.flush() }
            #expect(store.queue.check(.onQueue))
            #expect(!store.queue.check(.onQueueAsBarrier))
        }
        #expect(try store.read { $0 } == 0)
    }

    @Test func nestedCallsInsideAWriteSeeTheSameStorage() throws {
        let store = try GuardedResource([Int]())
        let other = try Queue(label: "other", kind: .serial)
        let seen = try store.write { list -> [Int] in
            list.append(1)
            #expect(store.queue.check(.onQueueAsBarrier))
            // A business helper that reads, called from inside the write, through another queue.
            let inner = try other.sync { try store.read { Array($0) } }
            #expect(inner == [1])
            try store.write { $0.append(2) }
            #expect(list == [1, 2], "the nested write's change is visible once it returned")
            list.append(3)
            return list
        }
        #expect(seen == [1, 2, 3])
        #expect(try store.read { Array($0) } == [1, 2, 3])
    }

    @Test func writeAsyncRunsInOrderAfterTheEnclosingBlock() throws {
        let store = try GuardedResource([String]())
        try store.read { _ in store.writeAsync { $0.append("after the read") } }
        try store.write { log in
            store.writeAsync { $0.append("after the write") }
            log.append("write")
        }
        try store.flush()
        #expect(try store.read { Array($0) } == ["after the read", "write", "after the write"])
    }

    @Test func readersRunConcurrentlyAndWritesAddUp() throws {
        let store = try GuardedResource(0)
        let meet = Rendezvous(parties: 2)
        let a = spawn { _ = try? store.read { _ in #expect(meet.arrive()) } }
        let b = spawn { _ = try? store.read { _ in #expect(meet.arrive()) } }
        #expect(waits(for: a))
        #expect(waits(for: b))

        let threads = (0..<4).map { t in
            spawn {
                for i in 0..<1_000 {
                    if (i + t) % 2 == 0 {
                        store.writeAsync { $0 += 1 }
                    } else {
                        _ = try? store.write { $0 += 1 }
                    }
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        try store.flush()
        #expect(try store.read { $0 } == 4_000)
    }

    /// The get-specific reader/writer deadlock, through the Swift API: a reader nests a read through another queue
    /// while a write is pending.
    @Test func nestedReadThroughAHopWhileAWriteIsPending() throws {
        let store = try GuardedResource([String]())
        let hop = try Queue(label: "hop", kind: .serial)
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let nested = Shared<[String]?>(nil)
        let reader = spawn {
            #expect(throws: Never.self) {
                try store.read { _ in
                    inside.signal()
                    _ = waits(for: go)
                    nested.value = try? hop.sync { try store.read { Array($0) } }
                }
            }
        }
        #expect(waits(for: inside))
        store.writeAsync { $0.append("write") }
        go.signal()
        #expect(waits(for: reader), "the nested read deadlocked")
        #expect(nested.value == [], "the nested read ran before the pending write")
        try store.flush()
        #expect(try store.read { Array($0) } == ["write"])
    }

    @Test func theResourceIsFreedWithItsGuard() throws {
        do {
            let store = try GuardedResource(Tracked())
            try store.write { $0.value = 1 }
            #expect(Tracked.live.value >= 1)
        }
        #expect(Tracked.live.value == 0)
    }
}
