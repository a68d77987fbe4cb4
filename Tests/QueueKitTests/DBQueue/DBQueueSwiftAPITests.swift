// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Synchronization
import Testing

// MARK: - The Swift API

private struct Oops: Error, Equatable {}

@Suite("DBQueue: the Swift API")
struct DBQueueSwiftAPITests {
    @Test func readAndWriteReturnAndRethrow() throws {
        let db = try DBQueue(label: "swift.db")
        let store = Unprotected([String: Int]())
        let old = try db.write { () -> Int? in
            defer { store.value["a"] = 1 }
            return store.value["a"]
        }
        #expect(old == nil)
        #expect(try db.read { store.value["a"] } == 1)
        #expect(throws: Oops.self) { try db.read { () throws -> Int in throw Oops() } }
        #expect(throws: Oops.self) { try db.write { () throws -> Int in throw Oops() } }
        #expect(db.queue.label == "swift.db")
        try db.read {
            #expect(Queue.current === db.queue)
            #expect(db.queue.check(.onQueue))
            #expect(!db.queue.check(.onQueueAsBarrier))
        }
        try db.write { #expect(db.queue.check(.onQueueAsBarrier)) }
    }

    @Test func writeInsideReadThrowsWouldDeadlock() throws {
        let db = try DBQueue()
        let ran = Shared(false)
        try db.read {
            #expect(throws: QueueKitError.wouldDeadlock) { try db.write { ran.value = true } }
            #expect(throws: QueueKitError.wouldDeadlock) { try db.flush() }
            #expect(throws: QueueKitError.busy) { try db.quiesce() }
        }
        #expect(!ran.value)
        // Inside a write, nested reads and writes run inline and return their values.
        let inner = try db.write { try db.read { try db.write { 42 } } }
        #expect(inner == 42)
    }

    @Test func writeAsyncAndFlush() throws {
        let db = try DBQueue()
        let count = Unprotected(0)
        for _ in 0..<1_000 { db.writeAsync { count.value += 1 } }
        try db.flush()
        #expect(try db.read { count.value } == 1_000)
        let order = Recorder()
        try db.write {
            db.writeAsync { order.record("async") }
            order.record("write ends")
        }
        try db.flush()
        #expect(order.events == ["write ends", "async"])
    }

    @Test func theIdentityQueueRefusesWork() throws {
        let db = try DBQueue()
        #expect(throws: QueueKitError.invalidArgument) { try db.queue.async {} }
        #expect(throws: QueueKitError.invalidArgument) { try db.queue.sync {} }
        #expect(throws: QueueKitError.invalidArgument) { try db.queue.perform {} }
    }
}
