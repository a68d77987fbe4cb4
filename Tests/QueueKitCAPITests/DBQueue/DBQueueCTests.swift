// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitShim
import QueueKitTestSupport
import Synchronization
import Testing

// The DB queue through the C header (section 2 of the contract), plus the Swift `DBQueue` API at
// the end. Every wait is bounded: a deadlock fails the test instead of hanging it.

/// The outer block a nested call happens in.
enum Outer: String, CaseIterable, Sendable {
    case read, write
}

/// How a nested call reaches the DB queue from the outer block: directly, or through blocks of
/// other queues that the same call tree runs (the case `dispatch_get_specific` cannot see).
enum Hop: String, CaseIterable, Sendable {
    case direct
    case serialSync
    case serialPerform
    case concurrentSync
    case otherDBRead
    case otherDBWrite
    /// A serial queue's sync, then a read of another DB queue, then a perform on a serial queue.
    case threeHops
}

/// A DB queue under test and the queues a nested call can hop through.
final class DBFixture: @unchecked Sendable {
    let db: OpaquePointer
    let otherDB: OpaquePointer
    let serial: OpaquePointer
    let serial2: OpaquePointer
    let concurrent: OpaquePointer
    var destroyed = false

    init(label: String = "test.db") {
        db = qk_dbqueue_create(label)!
        otherDB = qk_dbqueue_create("test.other-db")!
        serial = qk_queue_create("test.serial", QK_QUEUE_SERIAL)!
        serial2 = qk_queue_create("test.serial2", QK_QUEUE_SERIAL)!
        concurrent = qk_queue_create("test.concurrent", QK_QUEUE_CONCURRENT)!
    }

    /// The test destroyed `db` itself.
    func markDestroyed() { destroyed = true }

    deinit {
        if !destroyed { #expect(qk_dbqueue_destroy(db) == 0) }
        #expect(qk_dbqueue_destroy(otherDB) == 0)
        qk_queue_release(serial)
        qk_queue_release(serial2)
        qk_queue_release(concurrent)
    }

    /// Runs `body` through `hop`, expecting every hop to succeed.
    func through(_ hop: Hop, _ body: () -> Void) {
        switch hop {
        case .direct:
            body()
        case .serialSync:
            expectStatus(0, callC(body) { qk_queue_sync(serial, $0, $1) })
        case .serialPerform:
            expectStatus(0, callC(body) { qk_queue_perform(serial, $0, $1) })
        case .concurrentSync:
            expectStatus(0, callC(body) { qk_queue_sync(concurrent, $0, $1) })
        case .otherDBRead:
            expectStatus(0, dbRead(otherDB, body))
        case .otherDBWrite:
            expectStatus(0, dbWrite(otherDB, body))
        case .threeHops:
            expectStatus(
                0,
                callC({
                    expectStatus(
                        0,
                        dbRead(otherDB) {
                            expectStatus(0, callC(body) { qk_queue_perform(serial2, $0, $1) })
                        })
                }) { qk_queue_sync(serial, $0, $1) })
        }
    }

    /// Runs `body` inside an outer block of `db`, returning the outer call's status.
    @discardableResult
    func inside(_ outer: Outer, _ body: () -> Void) -> Int32 {
        switch outer {
        case .read: dbRead(db, body)
        case .write: dbWrite(db, body)
        }
    }
}

func currentThread() -> pthread_t { pthread_self() }

// MARK: - Nesting: every pair, directly and through hops

@Suite("DB queue: nesting never deadlocks")
struct DBQueueNestingTests {
    @Test("read inside a read or a write runs inline", arguments: Outer.allCases, Hop.allCases)
    func readInsideRunsInline(outer: Outer, hop: Hop) {
        let f = DBFixture()
        let ok = finishes {
            let thread = currentThread()
            let ran = Shared(false)
            let status = f.inside(outer) {
                f.through(hop) {
                    let inner = dbRead(f.db) {
                        #expect(pthread_equal(thread, currentThread()) != 0, "runs on the calling thread")
                        #expect(qk_queue_current() == qk_dbqueue_queue(f.db))
                        #expect(qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE) == 0)
                        // Nested in a write, the thread still holds the exclusivity.
                        let asBarrier = qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE_AS_BARRIER)
                        #expect(asBarrier == (outer == .write ? 0 : EPERM))
                        // Deeper still.
                        expectStatus(0, dbRead(f.db) { ran.value = true })
                    }
                    #expect(inner == 0)
                    #expect(ran.value, "ran before the nested call returned")
                }
            }
            #expect(status == 0)
        }
        #expect(ok, "deadlocked")
    }

    @Test("write inside a write runs inline, also with a read in between", arguments: Hop.allCases)
    func writeInsideWriteRunsInline(hop: Hop) {
        let f = DBFixture()
        let ok = finishes {
            let events = Recorder()
            let status = dbWrite(f.db) {
                f.through(hop) {
                    expectStatus(
                        0,
                        dbWrite(f.db) {
                            #expect(qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE_AS_BARRIER) == 0)
                            events.record("write-in-write")
                        })
                    // write → read → write: the read does not give up the exclusivity. (A second
                    // sync onto a serial queue the thread holds would be EDEADLK itself: perform.)
                    let innerHop: Hop = hop == .serialSync || hop == .threeHops ? .serialPerform : hop
                    expectStatus(
                        0,
                        dbRead(f.db) {
                            f.through(innerHop) {
                                expectStatus(0, dbWrite(f.db) { events.record("write-in-read-in-write") })
                            }
                        })
                }
                events.record("outer-end")
            }
            #expect(status == 0)
            #expect(events.events == ["write-in-write", "write-in-read-in-write", "outer-end"])
        }
        #expect(ok, "deadlocked")
    }

    @Test("write inside a read (and no write) is EDEADLK and runs nothing", arguments: Hop.allCases)
    func writeInsideReadIsRefused(hop: Hop) {
        let f = DBFixture()
        let ok = finishes {
            let ran = Shared(false)
            expectStatus(
                0,
                dbRead(f.db) {
                    f.through(hop) {
                        expectStatus(EDEADLK, dbWrite(f.db) { ran.value = true })
                        // Deeper: read → read → write is still an upgrade.
                        expectStatus(
                            0,
                            dbRead(f.db) {
                                expectStatus(EDEADLK, dbWrite(f.db) { ran.value = true })
                            })
                    }
                })
            #expect(!ran.value, "the refused write must not run")
            // The queue is still usable afterwards.
            expectStatus(0, dbWrite(f.db) {})
        }
        #expect(ok, "deadlocked")
    }

    @Test("write_async inside a block runs after that block", arguments: Outer.allCases, Hop.allCases)
    func writeAsyncInsideRunsAfterTheBlock(outer: Outer, hop: Hop) {
        let label = "inside-\(outer)-\(hop)-\(UUID().uuidString.prefix(8))"
        let f = DBFixture(label: label)
        let ok = finishes {
            let events = Recorder()
            let flushed = Shared<DispatchSemaphore?>(nil)
            let status = f.inside(outer) {
                f.through(hop) {
                    expectStatus(
                        0,
                        dbWriteAsync(f.db) {
                            #expect(qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE_AS_BARRIER) == 0)
                            events.record("async")
                        })
                }
                // A flush from another thread waits (seen in the lane) and cannot complete while
                // this block runs, since the queued write must wait for it.
                let done = spawn { #expect(qk_dbqueue_flush(f.db) == 0) }
                flushed.value = done
                #expect(
                    eventually { DBQueueInternals.isWaiting(in: "qk_dbqueue_flush", label: label) },
                    "the flush never waited")
                #expect(done.wait(timeout: .now()) == .timedOut, "the write ran while its enclosing block ran")
                events.record("outer-end")
            }
            #expect(status == 0)
            #expect(waits(for: flushed.value!))
            #expect(events.events == ["outer-end", "async"])
        }
        #expect(ok, "deadlocked")
    }

    @Test("flush inside any block is EDEADLK", arguments: Outer.allCases, Hop.allCases)
    func flushInsideIsRefused(outer: Outer, hop: Hop) {
        let f = DBFixture()
        let ok = finishes {
            expectStatus(
                0,
                f.inside(outer) {
                    f.through(hop) { #expect(qk_dbqueue_flush(f.db) == EDEADLK) }
                })
            expectStatus(0, dbWriteAsync(f.db) { dbRead(f.db) { #expect(qk_dbqueue_flush(f.db) == EDEADLK) } })
            #expect(qk_dbqueue_flush(f.db) == 0)
        }
        #expect(ok, "deadlocked")
    }

    @Test("destroy inside any block is EBUSY and destroys nothing", arguments: Outer.allCases, Hop.allCases)
    func destroyInsideIsRefused(outer: Outer, hop: Hop) {
        let f = DBFixture()
        let ok = finishes {
            expectStatus(
                0,
                f.inside(outer) {
                    f.through(hop) { #expect(qk_dbqueue_destroy(f.db) == EBUSY) }
                })
            expectStatus(0, dbWriteAsync(f.db) { #expect(qk_dbqueue_destroy(f.db) == EBUSY) })
            #expect(qk_dbqueue_flush(f.db) == 0)
            expectStatus(0, dbRead(f.db) {}, "still usable")
        }
        #expect(ok, "deadlocked")
    }

    @Test("nesting across two DB queues both ways")
    func nestingAcrossDBQueues() {
        let f = DBFixture()
        let ok = finishes {
            let events = Recorder()
            expectStatus(
                0,
                dbWrite(f.db) {
                    expectStatus(
                        0,
                        dbRead(f.otherDB) {
                            expectStatus(
                                0,
                                dbRead(f.db) {
                                    expectStatus(EDEADLK, dbWrite(f.otherDB) {}, "other DB: upgrade inside its read")
                                    expectStatus(0, dbWrite(f.db) { events.record("inner write") })
                                })
                        })
                })
            #expect(events.events == ["inner write"])
        }
        #expect(ok, "deadlocked")
    }
}

// MARK: - The handle's tag

@Suite("DB queue: handles")
struct DBQueueHandleTests {
    /// The C face's constant tag (the metadata's Swift symbol) is what DB queue objects carry.
    @Test func theConstantTagIsTheClassMetadata() {
        let metadata = UInt(bitPattern: unsafeBitCast(DBQueue.self, to: UnsafeRawPointer.self))
        #expect(qkshim_dbqueue_tag() == metadata)
        let db = CDBQueue("test.tag")
        #expect(UnsafeRawPointer(db.raw).load(as: UInt.self) == metadata)
        #expect(db.destroy() == 0)
    }
}

// MARK: - Inside a test of a condition

@Suite("DB queue: calls inside a test of a condition")
struct DBQueueInsideATestTests {
    /// What a test of a condition tried: the statuses of a read and a write of `db`, and whether
    /// either ran its work.
    final class Probe: @unchecked Sendable {
        let db: OpaquePointer
        var readStatus: Int32 = -1
        var writeStatus: Int32 = -1
        var ran = false
        init(_ db: OpaquePointer) { self.db = db }
    }

    /// A read and a write from inside a test are EDEADLK and run nothing: outside any block of
    /// the queue, and inside a read of it, where the read would otherwise run inline.
    @Test(arguments: [false, true])
    func readsAndWritesRefuse(insideARead: Bool) {
        let f = DBFixture()
        let lock = CLock(1)
        let probe = Probe(f.db)
        let test: qk_condition_test_t = { condition, context in
            let probe = Unmanaged<Probe>.fromOpaque(context!).takeUnretainedValue()
            probe.readStatus = dbRead(probe.db) { probe.ran = true }
            probe.writeStatus = dbWrite(probe.db) { probe.ran = true }
            return condition == 1
        }
        let tryLock = {
            #expect(qk_condlock_trylock_if(lock.raw, test, Unmanaged.passUnretained(probe).toOpaque()) == 0)
        }
        if insideARead { expectStatus(0, dbRead(f.db, tryLock)) } else { tryLock() }
        #expect(probe.readStatus == EDEADLK)
        #expect(probe.writeStatus == EDEADLK)
        #expect(!probe.ran)
        #expect(lock.unlock() == 0)
        #expect(lock.destroy() == 0)
    }
}

// MARK: - The interleaving that deadlocks a get-specific reader/writer queue

enum PendingKind: String, CaseIterable, Sendable { case write, writeAsync }

@Suite("DB queue: a nested read while a write is pending")
struct DBQueueNestedReadDeadlockTests {
    /// Reader A is inside a read; another thread submits a write, which is really pending (it waits
    /// for A); a third thread's fresh read waits behind it. Then A nests a read, directly or
    /// through another queue: with a plain `dispatch_get_specific` check the hop hides the
    /// nesting, the nested read queues behind the barrier, and the barrier waits for A. Here the
    /// nested read completes and the write runs after A's outer read. (The third thread's read
    /// may overtake a parked synchronous write, never a submitted `write_async`.)
    @Test(
        arguments: [Hop.direct, .serialSync, .serialPerform, .concurrentSync, .otherDBRead, .threeHops],
        PendingKind.allCases)
    func nestedReadCompletesAndTheWriteRunsAfter(hop: Hop, pending: PendingKind) {
        let f = DBFixture()
        let events = Recorder()
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)

        let reader = spawn {
            dbRead(f.db) {
                inside.signal()
                #expect(waits(for: go))
                f.through(hop) {
                    expectStatus(0, dbRead(f.db) { events.record("nested read") })
                }
                events.record("outer read ends")
            }
        }
        #expect(waits(for: inside))

        let writer = spawn {
            switch pending {
            case .write: expectStatus(0, dbWrite(f.db) { events.record("write") })
            case .writeAsync: expectStatus(0, dbWriteAsync(f.db) { events.record("write") })
            }
        }
        #expect(eventually { DBQueueInternals.pendingWrites(f.db) == 1 }, "the write never became pending")
        let lateReader = spawn {
            expectStatus(0, dbRead(f.db) { events.record("late read") })
        }
        go.signal()

        #expect(waits(for: reader), "the nested read deadlocked")
        #expect(waits(for: writer))
        #expect(waits(for: lateReader))
        #expect(qk_dbqueue_flush(f.db) == 0)
        switch pending {
        case .writeAsync:
            // The late read began after write_async returned: nothing overtakes a submitted write.
            #expect(events.events == ["nested read", "outer read ends", "write", "late read"])
        case .write:
            // The late read and the parked write were in flight at once: the reader may go first.
            #expect(events.events.filter { $0 != "late read" } == ["nested read", "outer read ends", "write"])
            #expect(events.events.contains("late read"))
        }
    }
}

// MARK: - Readers and writers

final class Occupancy: Sendable {
    let readers = Atomic<Int>(0)
    let writers = Atomic<Int>(0)
    let violations = Atomic<Int>(0)
    let maxReaders = Atomic<Int>(0)

    func read() {
        let now = readers.add(1, ordering: .sequentiallyConsistent).newValue
        maxReaders.max(now, ordering: .relaxed)
        if writers.load(ordering: .sequentiallyConsistent) != 0 { violations.add(1, ordering: .relaxed) }
        readers.subtract(1, ordering: .sequentiallyConsistent)
    }

    func write() {
        if writers.add(1, ordering: .sequentiallyConsistent).newValue != 1 { violations.add(1, ordering: .relaxed) }
        if readers.load(ordering: .sequentiallyConsistent) != 0 { violations.add(1, ordering: .relaxed) }
        writers.subtract(1, ordering: .sequentiallyConsistent)
    }
}
