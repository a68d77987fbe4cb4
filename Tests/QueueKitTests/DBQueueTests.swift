import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import Synchronization
import Testing

// The DB queue through the C header (section 2 of the contract), plus the Swift `DBQueue` API at
// the end. Every wait is bounded: a deadlock fails the test instead of hanging it.

// MARK: - Calling the C API with Swift closures

@discardableResult
func dbRead(_ db: OpaquePointer?, _ body: () -> Void) -> Int32 {
    callC(body) { qk_dbqueue_read(db, $0, $1) }
}

@discardableResult
func dbWrite(_ db: OpaquePointer?, _ body: () -> Void) -> Int32 {
    callC(body) { qk_dbqueue_write(db, $0, $1) }
}

@discardableResult
func dbWriteAsync(_ db: OpaquePointer?, _ body: @escaping @Sendable () -> Void) -> Int32 {
    callCAsync(body) { qk_dbqueue_write_async(db, $0, $1) }
}

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
    private var destroyed = false

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
            expectStatus(0, callC({
                expectStatus(0, dbRead(otherDB) {
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

private func currentThread() -> pthread_t { pthread_self() }

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
                    expectStatus(0, dbWrite(f.db) {
                        #expect(qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE_AS_BARRIER) == 0)
                        events.record("write-in-write")
                    })
                    // write → read → write: the read does not give up the exclusivity. (A second
                    // sync onto a serial queue the thread holds would be EDEADLK itself: perform.)
                    let innerHop: Hop = hop == .serialSync || hop == .threeHops ? .serialPerform : hop
                    expectStatus(0, dbRead(f.db) {
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
            expectStatus(0, dbRead(f.db) {
                f.through(hop) {
                    expectStatus(EDEADLK, dbWrite(f.db) { ran.value = true })
                    // Deeper: read → read → write is still an upgrade.
                    expectStatus(0, dbRead(f.db) {
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
        let f = DBFixture()
        let ok = finishes {
            let events = Recorder()
            let flushed = Shared<DispatchSemaphore?>(nil)
            let status = f.inside(outer) {
                f.through(hop) {
                    expectStatus(0, dbWriteAsync(f.db) {
                        #expect(qk_queue_check(qk_dbqueue_queue(f.db), QK_ON_QUEUE_AS_BARRIER) == 0)
                        events.record("async")
                    })
                }
                // Negative check: a flush from another thread cannot complete while this block
                // runs, since the queued write must wait for it.
                let done = spawn { #expect(qk_dbqueue_flush(f.db) == 0) }
                flushed.value = done
                #expect(!waits(for: done, within: 0.02), "the write ran while its enclosing block ran")
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
            expectStatus(0, f.inside(outer) {
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
            expectStatus(0, f.inside(outer) {
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
            expectStatus(0, dbWrite(f.db) {
                expectStatus(0, dbRead(f.otherDB) {
                    expectStatus(0, dbRead(f.db) {
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
    @Test(arguments: [Hop.direct, .serialSync, .serialPerform, .concurrentSync, .otherDBRead, .threeHops], PendingKind.allCases)
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

private final class Occupancy: Sendable {
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

/// A value that only the DB queue protects (no lock of its own): ThreadSanitizer checks that the
/// queue orders every access.
final class Unprotected<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

@Suite("DB queue: readers, writers, ordering")
struct DBQueueOrderingTests {
    @Test("two readers are inside at once (rendezvous inside the reads)")
    func readersRunConcurrently() {
        let f = DBFixture()
        let meet = Rendezvous(parties: 2)
        let a = spawn { dbRead(f.db) { #expect(meet.arrive(), "the other reader never came in") } }
        let b = spawn { dbRead(f.db) { #expect(meet.arrive(), "the other reader never came in") } }
        #expect(waits(for: a))
        #expect(waits(for: b))
    }

    @Test("a write never overlaps a read or another write")
    func writesAreExclusive() {
        let f = DBFixture()
        let occupancy = Occupancy()
        let threads = (0..<4).map { t in
            spawn {
                for i in 0..<3_000 {
                    switch (i + t) % 10 {
                    case 0: dbWrite(f.db) { occupancy.write() }
                    case 5: dbWriteAsync(f.db) { occupancy.write() }
                    default: dbRead(f.db) { occupancy.read() }
                    }
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
        #expect(occupancy.violations.load(ordering: .relaxed) == 0)
    }

    @Test("a read on another thread sees a write_async that returned before it began")
    func readYourWritesAcrossThreads() {
        let f = DBFixture()
        let value = Unprotected(0)
        let handOver = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let rounds = 2_000
        let submitter = spawn {
            for i in 1...rounds {
                dbWriteAsync(f.db) { value.value = i }
                handOver.signal()
                guard waits(for: checked) else { return }
            }
        }
        let reader = spawn {
            for i in 1...rounds {
                guard waits(for: handOver) else { return }
                var seen = 0
                dbRead(f.db) { seen = value.value }
                #expect(seen == i)
                checked.signal()
            }
        }
        #expect(waits(for: submitter))
        #expect(waits(for: reader))
    }

    @Test("writes from several threads run in each thread's submission order")
    func writesAreFIFO() {
        let f = DBFixture()
        let log = Unprotected<[(thread: Int, seq: Int)]>([])
        let perThread = 2_500
        let threads = (0..<4).map { t in
            spawn {
                for s in 0..<perThread {
                    if s % 10 == 0 {
                        dbWrite(f.db) { log.value.append((t, s)) }
                    } else {
                        dbWriteAsync(f.db) { log.value.append((t, s)) }
                    }
                }
            }
        }
        for thread in threads { #expect(waits(for: thread)) }
        #expect(qk_dbqueue_flush(f.db) == 0)
        var next = [Int](repeating: 0, count: 4)
        var inOrder = true
        dbRead(f.db) {
            for entry in log.value {
                if entry.seq != next[entry.thread] { inOrder = false }
                next[entry.thread] = entry.seq + 1
            }
        }
        #expect(inOrder)
        #expect(next == [Int](repeating: perThread, count: 4))
    }

    @Test("a write runs after every write submitted before it, by any thread")
    func writeRunsAfterEarlierWrites() {
        let f = DBFixture()
        let count = Unprotected(0)
        let blocker = DispatchSemaphore(value: 0)
        // Hold the lane so that the async writes really queue up.
        expectStatus(0, dbWriteAsync(f.db) { _ = waits(for: blocker) })
        let submitter = spawn {
            for _ in 0..<1_000 { dbWriteAsync(f.db) { count.value += 1 } }
        }
        #expect(waits(for: submitter))
        let writer = spawn {
            expectStatus(0, dbWrite(f.db) { #expect(count.value == 1_000) })
        }
        blocker.signal()
        #expect(waits(for: writer))
        // And on the same thread.
        for _ in 0..<100 { dbWriteAsync(f.db) { count.value += 1 } }
        expectStatus(0, dbWrite(f.db) { #expect(count.value == 1_100) })
    }

    @Test("flush waits for every write submitted before it")
    func flushWaits() {
        let f = DBFixture()
        let count = Unprotected(0)
        let blocker = DispatchSemaphore(value: 0)
        expectStatus(0, dbWriteAsync(f.db) { _ = waits(for: blocker) })
        for _ in 0..<100 { dbWriteAsync(f.db) { count.value += 1 } }
        let flusher = spawn { #expect(qk_dbqueue_flush(f.db) == 0) }
        #expect(!waits(for: flusher, within: 0.02), "flush returned while writes were pending")
        blocker.signal()
        #expect(waits(for: flusher))
        dbRead(f.db) { #expect(count.value == 100) }
    }
}

// MARK: - Identity

@Suite("DB queue: identity checks")
struct DBQueueIdentityTests {
    @Test func identityInsideReadsAndWrites() {
        let f = DBFixture()
        let q = qk_dbqueue_queue(f.db)
        #expect(q != nil)
        #expect(qk_dbqueue_queue(f.db) == q, "stable")
        #expect(qk_queue_check(q, QK_NOT_ON_QUEUE) == 0)
        #expect(qk_queue_check(q, QK_ON_QUEUE) == EPERM)
        let ok = finishes {
            let q = qk_dbqueue_queue(f.db)
            #expect(qk_queue_current() != q)
            dbRead(f.db) {
                #expect(qk_queue_current() == q)
                #expect(qk_queue_is_current(q))
                #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == EPERM)
                #expect(qk_queue_check(q, QK_NOT_ON_QUEUE) == EPERM)
                // Through a hop the current queue changes, the hold stays.
                expectStatus(0, callC({
                    #expect(qk_queue_current() == f.serial)
                    #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                }) { qk_queue_sync(f.serial, $0, $1) })
            }
            dbWrite(f.db) {
                #expect(qk_queue_current() == q)
                #expect(qk_queue_check(q, QK_ON_QUEUE) == 0)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == 0)
            }
            let inAsync = DispatchSemaphore(value: 0)
            dbWriteAsync(f.db) {
                let q = qk_dbqueue_queue(f.db)
                #expect(qk_queue_current() == q)
                #expect(qk_queue_check(q, QK_ON_QUEUE_AS_BARRIER) == 0)
                inAsync.signal()
            }
            #expect(waits(for: inAsync))
            var label = [CChar](repeating: 0, count: 64)
            dbRead(f.db) { _ = qk_queue_copy_current_label(&label, label.count) }
            #expect(label.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } == "test.db")
            #expect(String(cString: qk_queue_label(q)) == "test.db")
        }
        #expect(ok)
    }

    @Test func theIdentityQueueTakesNoWork() {
        let f = DBFixture()
        let q = qk_dbqueue_queue(f.db)
        let ran = Shared(false)
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_sync(q, $0, $1) })
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_barrier_sync(q, $0, $1) })
        expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_perform(q, $0, $1) })
        expectStatus(EINVAL, callCAsync({ ran.value = true }) { qk_queue_async(q, $0, $1) })
        expectStatus(EINVAL, callCAsync({ ran.value = true }) { qk_queue_barrier_async(q, $0, $1) })
        // Also from inside a block of the DB queue, where it is the current queue.
        dbRead(f.db) {
            expectStatus(EINVAL, callC({ ran.value = true }) { qk_queue_perform(q, $0, $1) })
        }
        errno = 0
        #expect(qk_queue_create_with_target("t", QK_QUEUE_SERIAL, q) == nil)
        #expect(errno == EINVAL)
        #expect(!ran.value)
    }
}

// MARK: - Misuse

private let noWork: qk_function_t = { _ in }

@Suite("DB queue: misuse gets codes")
struct DBQueueMisuseTests {
    @Test func nullAndWrongTypeHandles() {
        let queue = qk_queue_create("not a db", QK_QUEUE_SERIAL)!
        defer { qk_queue_release(queue) }
        for bad in [nil, queue] as [OpaquePointer?] {
            #expect(qk_dbqueue_read(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_write(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_write_async(bad, nil, noWork) == EINVAL)
            #expect(qk_dbqueue_flush(bad) == EINVAL)
            #expect(qk_dbqueue_destroy(bad) == EINVAL)
            errno = 0
            #expect(qk_dbqueue_queue(bad) == nil)
            #expect(errno == EINVAL)
        }
        // A DB queue passed where a queue is expected.
        let f = DBFixture()
        let db = f.db
        #expect(qk_queue_sync(db, nil, noWork) == EINVAL)
        #expect(qk_queue_async(db, nil, noWork) == EINVAL)
        #expect(qk_queue_barrier_sync(db, nil, noWork) == EINVAL)
        #expect(qk_queue_barrier_async(db, nil, noWork) == EINVAL)
        #expect(qk_queue_perform(db, nil, noWork) == EINVAL)
        #expect(qk_queue_check(db, QK_ON_QUEUE) == EINVAL)
        #expect(!qk_queue_is_current(db))
        #expect(qk_dbqueue_read(db, nil, noWork) == 0, "the DB queue still works")
    }

    @Test func nullWork() {
        let f = DBFixture()
        #expect(qk_dbqueue_read(f.db, nil, nil) == EINVAL)
        #expect(qk_dbqueue_write(f.db, nil, nil) == EINVAL)
        #expect(qk_dbqueue_write_async(f.db, nil, nil) == EINVAL)
        expectStatus(0, dbRead(f.db) { #expect(qk_dbqueue_write(f.db, nil, nil) == EINVAL) })
    }

    @Test func anonymousQueue() {
        let db = qk_dbqueue_create(nil)
        #expect(db != nil)
        #expect(String(cString: qk_queue_label(qk_dbqueue_queue(db))) == "")
        #expect(qk_dbqueue_destroy(db) == 0)
    }
}

// MARK: - Destroy: nothing lost

@Suite("DB queue: destroy loses nothing", .serialized)
struct DBQueueDestroyTests {
    @Test("100,000 write_async from 4 threads, then destroy: each ran exactly once")
    func hundredThousandWritesThenDestroy() {
        let handle = Unchecked(qk_dbqueue_create("test.lossless")!)
        let total = 100_000, threads = 4
        let counts = UnsafeMutablePointer<Int32>.allocate(capacity: total)
        counts.initialize(repeating: 0, count: total)
        defer { counts.deallocate() }
        let bump: qk_function_t = { context in context!.assumingMemoryBound(to: Int32.self).pointee += 1 }
        let base = UncheckedPointer(counts)
        let submitters = (0..<threads).map { t in
            spawn {
                for i in stride(from: t, to: total, by: threads) {
                    #expect(qk_dbqueue_write_async(handle.value, base.pointer + i, bump) == 0)
                }
            }
        }
        for submitter in submitters { #expect(waits(for: submitter, within: 60)) }
        let destroyed = finishes(within: 60) { expectStatus(0, qk_dbqueue_destroy(handle.value)) }
        #expect(destroyed, "\(destroyed ? "" : DBQueueInternals.debugState(handle.value))")
        let buffer = UnsafeBufferPointer(start: counts, count: total)
        #expect(buffer.allSatisfy { $0 == 1 })
    }

    @Test("destroy waits for a read on another thread, then runs the pending writes")
    func destroyWaitsForReadersAndRunsPendingWrites() {
        let handle = Unchecked(qk_dbqueue_create("test.destroy")!)
        let db = handle.value
        let events = Recorder()
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let reader = spawn {
            dbRead(handle.value) {
                inside.signal()
                #expect(waits(for: go))
                events.record("read ends")
            }
        }
        #expect(waits(for: inside))
        for i in 0..<3 { dbWriteAsync(handle.value) { events.record("write \(i)") } }
        let destroyer = spawn {
            #expect(qk_dbqueue_destroy(handle.value) == 0)
            events.record("destroyed")
        }
        // The destroy is really waiting: its exclusive pass is queued behind the writes.
        #expect(eventually { DBQueueInternals.pendingWrites(db) == 4 })
        go.signal()
        #expect(waits(for: reader))
        #expect(waits(for: destroyer))
        #expect(events.events == ["read ends", "write 0", "write 1", "write 2", "destroyed"])
    }

    /// Regression: the last reader to leave while a write is due decrements the reader count and
    /// then takes the lane's lock to start that write. A `destroy` arriving in between used to see
    /// no reader, run its pass and free the queue, under the reader's feet. Now the destroy waits
    /// for that reader to start the write.
    @Test("destroy waits for the last reader to finish leaving")
    func destroyWaitsForTheLastReaderToFinishLeaving() {
        let handle = Unchecked(qk_dbqueue_create("test.last-reader")!)
        let db = handle.value
        DBQueueInternals.retain(db) // observe a premature free without crashing
        defer { DBQueueInternals.release(db) }
        let inHook = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        DBQueueInternals.setHookBeforeLastReaderStarts(db) {
            inHook.signal()
            _ = waits(for: proceed)
        }
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let reader = spawn {
            dbRead(handle.value) {
                inside.signal()
                _ = waits(for: go)
            }
        }
        #expect(waits(for: inside))
        let ran = Shared(false)
        expectStatus(0, dbWriteAsync(handle.value) { ran.value = true }) // due, waiting for the reader
        go.signal()
        #expect(waits(for: inHook)) // the reader has left and not yet started the write
        DBQueueInternals.setHookBeforeLastReaderStarts(db, nil)
        let destroyed = Shared(false)
        let destroyer = spawn {
            #expect(qk_dbqueue_destroy(handle.value) == 0)
            destroyed.value = true
        }
        #expect(eventually { destroyed.value || DBQueueInternals.pendingWrites(db) == 2 })
        #expect(!destroyed.value, "destroy finished while the last reader was still using the queue")
        proceed.signal()
        #expect(waits(for: reader))
        #expect(waits(for: destroyer))
        #expect(ran.value)
    }
}

/// A pointer handed to other threads by a test that outlives them.
private struct UncheckedPointer: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Int32>
    init(_ pointer: UnsafeMutablePointer<Int32>) { self.pointer = pointer }
}

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
