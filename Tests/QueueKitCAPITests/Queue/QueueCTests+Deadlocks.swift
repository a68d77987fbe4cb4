// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

extension QueueTests {
    // MARK: EDEADLK

    @Test func syncOntoTheSerialQueueYouAreOnIsEDEADLK() {
        let queue = CQueue.create("qk.test.deadlk.serial")
        defer { queue.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(
            queue.async {
                var ran = false
                facts.status("sync", queue.sync { ran = true })
                facts.status("barrier_sync", queue.barrierSync { ran = true })
                facts.flag("work ran", ran)
                done.signal()
            } == 0)
        #expect(waits(for: done))
        #expect(
            bounded {
                var ran = false
                _ = queue.sync { facts.status("nested in sync", queue.sync { ran = true }) }
                facts.flag("nested work ran", ran)
            })
        #expect(
            facts.all == [
                "sync": "EDEADLK", "barrier_sync": "EDEADLK", "work ran": "false",
                "nested in sync": "EDEADLK", "nested work ran": "false",
            ])
    }

    @Test func syncBackThroughAHopIsEDEADLK() {
        let a = CQueue.create("qk.test.deadlk.hop.a")
        let b = CQueue.create("qk.test.deadlk.hop.b")
        let c = CQueue.create("qk.test.deadlk.hop.c", QK_QUEUE_CONCURRENT)
        defer {
            a.release()
            b.release()
            c.release()
        }
        let facts = Facts()
        #expect(
            bounded {
                var ran = false
                _ = a.sync {
                    _ = b.sync {
                        facts.status("A→B→sync(A)", a.sync { ran = true })
                        facts.status("A→B→barrier_sync(A)", a.barrierSync { ran = true })
                        _ = c.sync {
                            facts.status("A→B→C→sync(A)", a.sync { ran = true })
                            facts.status("A→B→C→sync(B)", b.sync { ran = true })
                        }
                    }
                }
                facts.flag("work ran", ran)
            })
        #expect(
            facts.all == [
                "A→B→sync(A)": "EDEADLK", "A→B→barrier_sync(A)": "EDEADLK",
                "A→B→C→sync(A)": "EDEADLK", "A→B→C→sync(B)": "EDEADLK", "work ran": "false",
            ])
    }

    @Test func syncOntoAQueueThatTargetsAHeldSerialQueueIsEDEADLK() {
        let serial = CQueue.create("qk.test.deadlk.target.serial")
        let inner = CQueue.create("qk.test.deadlk.target.inner", QK_QUEUE_CONCURRENT, target: serial)
        let deeper = CQueue.create("qk.test.deadlk.target.deeper", target: inner)
        let pool = CQueue.create("qk.test.deadlk.target.pool", QK_QUEUE_CONCURRENT)
        let onPool = CQueue.create("qk.test.deadlk.target.onpool", target: pool)
        defer {
            serial.release()
            inner.release()
            deeper.release()
            pool.release()
            onPool.release()
        }
        let facts = Facts()
        let hop = CQueue.create("qk.test.deadlk.target.hop")
        defer { hop.release() }
        #expect(
            bounded {
                var ran = false
                _ = serial.sync {
                    facts.status("serial→sync(inner)", inner.sync { ran = true })
                    facts.status("serial→sync(deeper)", deeper.sync { ran = true })
                    facts.status("serial→barrier_sync(inner)", inner.barrierSync { ran = true })
                    facts.status("serial→perform(deeper)", deeper.perform { ran = true })
                    _ = hop.sync { facts.status("serial→hop→sync(deeper)", deeper.sync { ran = true }) }
                }
                _ = pool.barrierSync {
                    facts.status("pool barrier→sync(onPool)", onPool.sync { ran = true })
                }
                facts.flag("work ran", ran)
            })
        #expect(
            facts.all == [
                "serial→sync(inner)": "EDEADLK", "serial→sync(deeper)": "EDEADLK",
                "serial→barrier_sync(inner)": "EDEADLK", "serial→perform(deeper)": "EDEADLK",
                "serial→hop→sync(deeper)": "EDEADLK", "pool barrier→sync(onPool)": "EDEADLK", "work ran": "false",
            ])
    }

    @Test func barrierSyncFromInsideAReaderIsEDEADLK() {
        let queue = CQueue.create("qk.test.deadlk.reader", QK_QUEUE_CONCURRENT)
        let hop = CQueue.create("qk.test.deadlk.reader.hop")
        let onQueue = CQueue.create("qk.test.deadlk.reader.child", target: queue)
        defer {
            queue.release()
            hop.release()
            onQueue.release()
        }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(
            queue.async {
                var ran = false
                facts.status("async reader→barrier_sync", queue.barrierSync { ran = true })
                facts.flag("async reader: work ran", ran)
                done.signal()
            } == 0)
        #expect(waits(for: done))
        #expect(
            bounded {
                var ran = false
                _ = queue.sync {
                    facts.status("reader→barrier_sync", queue.barrierSync { ran = true })
                    _ = hop.sync { facts.status("reader→hop→barrier_sync", queue.barrierSync { ran = true }) }
                }
                // A block of a queue that targets the concurrent queue is a reader of it too.
                _ = onQueue.sync { facts.status("child→barrier_sync", queue.barrierSync { ran = true }) }
                facts.flag("work ran", ran)
            })
        #expect(
            facts.all == [
                "async reader→barrier_sync": "EDEADLK", "async reader: work ran": "false",
                "reader→barrier_sync": "EDEADLK", "reader→hop→barrier_sync": "EDEADLK",
                "child→barrier_sync": "EDEADLK", "work ran": "false",
            ])
    }

    @Test func syncFromInsideABarrierBlockIsEDEADLK() {
        let queue = CQueue.create("qk.test.deadlk.barrier", QK_QUEUE_CONCURRENT)
        defer { queue.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(
            queue.barrierAsync {
                var ran = false
                facts.status("barrier_async→sync", queue.sync { ran = true })
                facts.status("barrier_async→barrier_sync", queue.barrierSync { ran = true })
                facts.flag("barrier_async: work ran", ran)
                done.signal()
            } == 0)
        #expect(waits(for: done))
        #expect(
            bounded {
                var ran = false
                _ = queue.barrierSync {
                    facts.status("barrier_sync→sync", queue.sync { ran = true })
                    facts.status("barrier_sync→barrier_sync", queue.barrierSync { ran = true })
                }
                facts.flag("barrier_sync: work ran", ran)
            })
        #expect(
            facts.all == [
                "barrier_async→sync": "EDEADLK", "barrier_async→barrier_sync": "EDEADLK",
                "barrier_async: work ran": "false",
                "barrier_sync→sync": "EDEADLK", "barrier_sync→barrier_sync": "EDEADLK",
                "barrier_sync: work ran": "false",
            ])
    }

    // MARK: Readers never wait behind a pending barrier

    @Test(arguments: [false, true])
    func aNestedReaderSyncRunsInlineWhileABarrierIsPending(throughAHop: Bool) {
        let queue = CQueue.create("qk.test.pending", QK_QUEUE_CONCURRENT)
        let hop = CQueue.create("qk.test.pending.hop")
        defer {
            queue.release()
            hop.release()
        }
        let facts = Facts()
        let inside = DispatchSemaphore(value: 0)
        let pending = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let barrierDone = DispatchSemaphore(value: 0)
        let barrierRan = Shared(false)

        #expect(
            queue.async {
                inside.signal()
                // Wait until the barrier is queued behind this reader.
                facts.flag("saw the barrier pending", waits(for: pending))
                let nested = {
                    var ran = false
                    facts.status(
                        "nested sync",
                        queue.sync {
                            ran = true
                            facts.flag("nested ran before the barrier", !barrierRan.value)
                            facts.checks("nested checks", queue)
                        })
                    facts.flag("nested work ran", ran)
                    facts.status("nested perform", queue.perform {})
                }
                if throughAHop { _ = hop.sync(nested) } else { nested() }
                readerDone.signal()
            } == 0)
        #expect(waits(for: inside))
        // Another thread submits a barrier: it cannot start until the reader above returns.
        #expect(
            bounded {
                _ = queue.barrierAsync {
                    barrierRan.value = true
                    barrierDone.signal()
                }
            })
        pending.signal()
        #expect(waits(for: readerDone), "the nested sync must not wait behind the pending barrier")
        #expect(waits(for: barrierDone))
        #expect(
            facts.all == [
                "saw the barrier pending": "true", "nested sync": "0", "nested work ran": "true",
                "nested ran before the barrier": "true", "nested checks": joined(heldShared), "nested perform": "0",
            ])
    }

    /// Plain dispatch hangs here: a sync onto a queue that targets a concurrent queue must reserve
    /// a slot on that target, and a pending barrier there refuses it while waiting for the reader
    /// that makes the sync. QueueKit refuses deterministically, barrier pending or not.
    @Test func syncOntoAChildOfAConcurrentQueueFromItsReaderIsEDEADLK() {
        let pool = CQueue.create("qk.test.child.pool", QK_QUEUE_CONCURRENT)
        let serialChild = CQueue.create("qk.test.child.serial", target: pool)
        let concurrentChild = CQueue.create("qk.test.child.concurrent", QK_QUEUE_CONCURRENT, target: pool)
        let sibling = CQueue.create("qk.test.child.sibling", target: pool)
        let onGlobal = CQueue.create("qk.test.child.onglobal", target: .global())
        defer {
            pool.release()
            serialChild.release()
            concurrentChild.release()
            sibling.release()
            onGlobal.release()
        }
        let facts = Facts()
        let inside = DispatchSemaphore(value: 0)
        let pending = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let barrierDone = DispatchSemaphore(value: 0)

        #expect(
            pool.async {
                inside.signal()
                facts.flag("saw the barrier pending", waits(for: pending))
                var ran = false
                facts.status("reader→sync(serial child)", serialChild.sync { ran = true })
                facts.status("reader→barrier_sync(serial child)", serialChild.barrierSync { ran = true })
                facts.status("reader→sync(concurrent child)", concurrentChild.sync { ran = true })
                facts.status("reader→perform(serial child)", serialChild.perform { ran = true })
                facts.flag("work ran", ran)
                readerDone.signal()
            } == 0)
        #expect(waits(for: inside))
        #expect(bounded { _ = pool.barrierAsync { barrierDone.signal() } })
        pending.signal()
        #expect(waits(for: readerDone))
        #expect(waits(for: barrierDone))

        #expect(
            bounded {
                // A block of one child is a reader of the pool too: a sibling is out of reach as well.
                _ = serialChild.sync { facts.status("child→sync(sibling)", sibling.sync {}) }
                // Global queues have no barriers: nothing can be pending there.
                _ = CQueue.global().sync { facts.status("global→sync(child of global)", onGlobal.sync {}) }
            })
        #expect(
            facts.all == [
                "saw the barrier pending": "true",
                "reader→sync(serial child)": "EDEADLK", "reader→barrier_sync(serial child)": "EDEADLK",
                "reader→sync(concurrent child)": "EDEADLK", "reader→perform(serial child)": "EDEADLK",
                "work ran": "false", "child→sync(sibling)": "EDEADLK", "global→sync(child of global)": "0",
            ])
    }

    @Test func aNestedReaderSyncRunsInlineWhateverTheQueueTargets() {
        let serial = CQueue.create("qk.test.inline.serial")
        let pool = CQueue.create("qk.test.inline.pool", QK_QUEUE_CONCURRENT)
        let onSerial = CQueue.create("qk.test.inline.onserial", QK_QUEUE_CONCURRENT, target: serial)
        let onPool = CQueue.create("qk.test.inline.onpool", QK_QUEUE_CONCURRENT, target: pool)
        defer {
            serial.release()
            pool.release()
            onSerial.release()
            onPool.release()
        }
        let facts = Facts()
        #expect(
            bounded {
                for queue in [onSerial, onPool] {
                    _ = queue.sync {
                        var ran = false
                        facts.status(
                            "\(queue.label): nested sync",
                            queue.sync {
                                ran = true
                                facts.flag("\(queue.label): current", CQueue.current == queue)
                            })
                        facts.flag("\(queue.label): ran", ran)
                        facts.status("\(queue.label): nested barrier_sync", queue.barrierSync {})
                    }
                }
            })
        var expected: [String: String] = [:]
        for label in ["qk.test.inline.onserial", "qk.test.inline.onpool"] {
            expected["\(label): nested sync"] = "0"
            expected["\(label): current"] = "true"
            expected["\(label): ran"] = "true"
            expected["\(label): nested barrier_sync"] = "EDEADLK"
        }
        #expect(facts.all == expected)
    }

    // MARK: perform

    @Test func performRunsInlineOnAHeldQueueAndOtherwiseAsSync() {
        let a = CQueue.create("qk.test.perform.a")
        let b = CQueue.create("qk.test.perform.b")
        let c = CQueue.create("qk.test.perform.c", QK_QUEUE_CONCURRENT)
        defer {
            a.release()
            b.release()
            c.release()
        }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(
            a.async {
                var ran = false
                facts.status(
                    "A→perform(A)",
                    a.perform {
                        ran = true
                        facts.flag("A→perform(A): current", CQueue.current == a)
                    })
                facts.flag("A→perform(A): ran before returning", ran)
                done.signal()
            } == 0)
        #expect(waits(for: done))
        #expect(
            bounded {
                facts.status(
                    "outside→perform(A)",
                    a.perform {
                        facts.flag("outside→perform(A): current", CQueue.current == a)
                        facts.checks("outside→perform(A): checks", a)
                    })
                _ = a.sync {
                    _ = b.sync {
                        // A is held further out by the block waiting in sync(B): perform runs inline.
                        facts.status(
                            "A→B→perform(A)",
                            a.perform {
                                facts.flag("A→B→perform(A): current", CQueue.current == a)
                                facts.checks("A→B→perform(A): B", b)
                            })
                        facts.flag("A→B→perform(A): current is B again", CQueue.current == b)
                    }
                }
                _ = c.barrierSync {
                    facts.status("C barrier→perform(C)", c.perform { facts.checks("C barrier→perform(C): checks", c) })
                }
                _ = c.sync {
                    facts.status("C reader→perform(C)", c.perform { facts.checks("C reader→perform(C): checks", c) })
                }
            })
        #expect(
            facts.all == [
                "A→perform(A)": "0", "A→perform(A): current": "true", "A→perform(A): ran before returning": "true",
                "outside→perform(A)": "0", "outside→perform(A): current": "true",
                "outside→perform(A): checks": joined(heldExclusively),
                "A→B→perform(A)": "0", "A→B→perform(A): current": "true", "A→B→perform(A): B": joined(heldExclusively),
                "A→B→perform(A): current is B again": "true",
                "C barrier→perform(C)": "0", "C barrier→perform(C): checks": joined(heldExclusively),
                "C reader→perform(C)": "0", "C reader→perform(C): checks": joined(heldShared),
            ])
    }

    // MARK: Specifics

    @Test func specificsSetGetReplaceAndRemove() {
        let queue = CQueue.create("qk.test.specific")
        defer { queue.release() }
        let key = SpecificKey()
        let otherKey = SpecificKey()
        let probe = DestructorProbe()

        let first = probe.value("first")
        #expect(qk_queue_set_specific(queue.handle, key.raw, first, DestructorProbe.destructor) == 0)
        #expect(qk_queue_get_specific(queue.handle, key.raw) == first)
        #expect(qk_queue_get_specific(queue.handle, otherKey.raw) == nil)

        // Replacing runs the old value's destructor (possibly asynchronously: wait, bounded).
        let second = probe.value("second")
        #expect(qk_queue_set_specific(queue.handle, key.raw, second, DestructorProbe.destructor) == 0)
        #expect(qk_queue_get_specific(queue.handle, key.raw) == second)
        #expect(waits(for: probe.fired))
        #expect(probe.log.events == ["first"])

        // Removing (NULL) runs it too.
        #expect(qk_queue_set_specific(queue.handle, key.raw, nil, nil) == 0)
        #expect(qk_queue_get_specific(queue.handle, key.raw) == nil)
        #expect(waits(for: probe.fired))
        #expect(probe.log.events == ["first", "second"])

        // A value without a destructor is simply forgotten.
        #expect(qk_queue_set_specific(queue.handle, key.raw, UnsafeMutableRawPointer(bitPattern: 0x5)!, nil) == 0)
        #expect(qk_queue_set_specific(queue.handle, key.raw, nil, nil) == 0)

        // Inside the queue, qk_get_specific sees it.
        let facts = Facts()
        #expect(qk_queue_set_specific(queue.handle, otherKey.raw, UnsafeMutableRawPointer(bitPattern: 0x77)!, nil) == 0)
        #expect(
            bounded {
                facts["outside"] = "\(Int(bitPattern: qk_get_specific(otherKey.raw)))"
                queue.sync { facts["inside"] = "\(Int(bitPattern: qk_get_specific(otherKey.raw)))" }
            })
        #expect(facts.all == ["outside": "0", "inside": "\(0x77)"])
    }

    @Test func specificsWithANullKeyAreEINVAL() {
        let queue = CQueue.create("qk.test.specific.null")
        defer { queue.release() }
        #expect(qk_queue_set_specific(queue.handle, nil, UnsafeMutableRawPointer(bitPattern: 1), nil) == EINVAL)
        #expect(qk_queue_set_specific(queue.handle, nil, nil, nil) == EINVAL)
        #expect(qk_queue_get_specific(queue.handle, nil) == nil)
        #expect(qk_get_specific(nil) == nil)
        #expect(bounded { queue.sync { _ = qk_get_specific(nil) } })
    }

    @Test func specificsOnAGlobalQueueAreVisibleInItsBlocks() {
        let key = SpecificKey()
        let global = CQueue.global(QK_QOS_UTILITY)
        #expect(qk_queue_set_specific(global.handle, key.raw, UnsafeMutableRawPointer(bitPattern: 0x99)!, nil) == 0)
        defer { _ = qk_queue_set_specific(global.handle, key.raw, nil, nil) }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(
            global.async {
                facts["global block"] = "\(Int(bitPattern: qk_get_specific(key.raw)))"
                done.signal()
            } == 0)
        #expect(waits(for: done))
        #expect(facts.all == ["global block": "\(0x99)"])
    }

    // MARK: Preconditions

    @Test func passingPreconditionsReturn() {
        let serial = CQueue.create("qk.test.precondition.serial")
        let concurrent = CQueue.create("qk.test.precondition.concurrent", QK_QUEUE_CONCURRENT)
        defer {
            serial.release()
            concurrent.release()
        }
        #expect(
            bounded {
                qk_queue_precondition(serial.handle, QK_NOT_ON_QUEUE)
                serial.sync {
                    qk_queue_precondition(serial.handle, QK_ON_QUEUE)
                    qk_queue_precondition(serial.handle, QK_ON_QUEUE_AS_BARRIER)
                    qk_queue_precondition(concurrent.handle, QK_NOT_ON_QUEUE)
                    concurrent.sync {
                        qk_queue_precondition(concurrent.handle, QK_ON_QUEUE)
                        qk_queue_precondition(serial.handle, QK_ON_QUEUE) // held further out
                    }
                }
                concurrent.barrierSync { qk_queue_precondition(concurrent.handle, QK_ON_QUEUE_AS_BARRIER) }
            })
    }

    /// The failing precondition runs in a child process (this test binary again, see
    /// `preconditionViolationChild`), which must abort after one line on stderr.
    @Test func aFailingPreconditionAbortsWithOneLine() throws {
        let child = try ChildRun(test: "preconditionViolationChild", variable: preconditionChildVariable)
        #expect(child.finished, "the child process did not finish")
        guard child.finished else { return }
        #expect(child.reason == .uncaughtSignal)
        #expect(child.status == SIGABRT)
        let messages = child.lines.filter { $0.hasPrefix("QueueKit precondition failed") }
        #expect(
            messages == [
                "QueueKit precondition failed: expected to be on queue as barrier 'qk.test.expected', but the current queue is 'qk.test.other' (the thread runs 'qk.test.expected' shared, not as a barrier)"
            ])
    }

    /// Not a test on its own: the child of `aFailingPreconditionAbortsWithOneLine`. It does nothing
    /// unless the child variable is set.
    @Test(
        .enabled(
            if: isChildRun(preconditionChildVariable), "the child process of aFailingPreconditionAbortsWithOneLine"))
    func preconditionViolationChild() {
        let expected = CQueue.create("qk.test.expected", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.other")
        expected.sync {
            other.sync {
                qk_queue_precondition(expected.handle, QK_ON_QUEUE) // holds: further out
                qk_queue_precondition(expected.handle, QK_ON_QUEUE_AS_BARRIER) // a reader: aborts
            }
        }
        Issue.record("qk_queue_precondition returned although its predicate failed")
    }
}

let preconditionChildVariable = "QUEUEKIT_TEST_PRECONDITION_CHILD"
