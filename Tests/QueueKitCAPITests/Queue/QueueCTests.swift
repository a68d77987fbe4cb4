// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

// Section 1 of the C API, the queue-identity registry, called through the C header as a C program
// calls it. Every call that could deadlock runs on a helper thread with a bounded wait, so a
// deadlock fails the test in seconds instead of hanging the run; facts observed on queue threads
// are recorded in a `Facts` and checked by the test afterwards.
//
// The main thread of a `swift test` process has handed itself to dispatch (`dispatch_main`), so
// main-queue blocks run on worker threads here and no test runs on the main thread (not even a
// `@MainActor` one). The main-thread rules (current == main outside blocks, sync(main) → EDEADLK,
// perform(main) inline) are checked by the C examples `queue_current.c` and
// `queue_sync_deadlock.c`, which run on a real main thread.

// MARK: - Tests

@Suite("Queue-identity registry (C API)", .serialized)
struct QueueTests {
    // MARK: Creation, labels, system queues

    @Test func createdQueuesHaveTheirLabelsAndKinds() {
        let serial = CQueue.create("qk.test.serial")
        let concurrent = CQueue.create("qk.test.concurrent", QK_QUEUE_CONCURRENT)
        let anonymous = CQueue.create(nil)
        defer {
            serial.release()
            concurrent.release()
            anonymous.release()
        }

        #expect(serial.label == "qk.test.serial")
        #expect(concurrent.label == "qk.test.concurrent")
        #expect(anonymous.label == "")
        // The label is owned by the queue: the same pointer every time.
        #expect(qk_queue_label(serial.handle) == qk_queue_label(serial.handle))

        let plain = qk_queue_create("qk.test.plain", QK_QUEUE_SERIAL)
        #expect(plain != nil)
        #expect(String(cString: qk_queue_label(plain)) == "qk.test.plain")
        qk_queue_release(plain)
    }

    @Test func badKindsAndTargetsAreEINVAL() {
        errno = 0
        #expect(qk_queue_create("x", qk_queue_kind_t(rawValue: 2)) == nil)
        #expect(errno == EINVAL)
        errno = 0
        #expect(qk_queue_create(nil, qk_queue_kind_t(rawValue: UInt32.max)) == nil)
        #expect(errno == EINVAL)
        errno = 0
        #expect(qk_queue_create_with_target("x", qk_queue_kind_t(rawValue: 7), nil) == nil)
        #expect(errno == EINVAL)

        let foreign = NotAQueue()
        errno = 0
        #expect(qk_queue_create_with_target("x", QK_QUEUE_SERIAL, foreign.handle) == nil)
        #expect(errno == EINVAL)

        // A NULL target is the same as qk_queue_create.
        let untargeted = qk_queue_create_with_target("qk.test.untargeted", QK_QUEUE_SERIAL, nil)
        #expect(untargeted != nil)
        qk_queue_release(untargeted)
    }

    @Test func mainAndGlobalQueuesAreStableAndLabelled() {
        #expect(qk_queue_main() != nil)
        #expect(qk_queue_main() == qk_queue_main())
        #expect(!CQueue.main.label.isEmpty)

        let qoses = [QK_QOS_BACKGROUND, QK_QOS_UTILITY, QK_QOS_DEFAULT, QK_QOS_USER_INITIATED, QK_QOS_USER_INTERACTIVE]
        var handles = Set<OpaquePointer>()
        for qos in qoses {
            let global = qk_queue_global(qos)
            #expect(global != nil)
            #expect(global == qk_queue_global(qos), "qk_queue_global is stable")
            #expect(!String(cString: qk_queue_label(global)).isEmpty, "global queue \(qos.rawValue) has a label")
            if let global { handles.insert(global) }
        }
        #expect(handles.count == qoses.count, "one queue per QoS class")
        #expect(!handles.contains(qk_queue_main()!))

        for bad in [UInt32(5), UInt32(99), UInt32.max] {
            errno = 0
            #expect(qk_queue_global(qk_qos_t(rawValue: bad)) == nil)
            #expect(errno == EINVAL)
        }
    }

    @Test func retainAndReleaseAreNoOpsOnSystemQueues() {
        let system = [CQueue.main, CQueue.global(QK_QOS_BACKGROUND), CQueue.global(QK_QOS_USER_INTERACTIVE)]
        for queue in system {
            #expect(qk_queue_retain(queue.handle) == queue.handle)
            for _ in 0..<5 { queue.release() }
            #expect(!queue.label.isEmpty, "\(queue) survives extra releases")
        }
        // Still working after the releases.
        #expect(
            bounded {
                let global = CQueue.global()
                global.sync {}
                CQueue.main.sync {}
            })
    }

    // MARK: Reference counting

    @Test func aQueueIsFreedWhenItsLastReferenceGoes() {
        let probe = DestructorProbe()
        let key = SpecificKey()
        let queue = CQueue.create("qk.test.freed")
        #expect(qk_queue_set_specific(queue.handle, key.raw, probe.value("freed"), DestructorProbe.destructor) == 0)

        #expect(qk_queue_retain(queue.handle) == queue.handle)
        queue.release()
        // One reference is left: the queue lives, its specific is intact.
        #expect(queue.label == "qk.test.freed")
        #expect(qk_queue_get_specific(queue.handle, key.raw) != nil)
        #expect(probe.log.events.isEmpty)

        queue.release()
        #expect(waits(for: probe.fired), "freeing the queue runs the specific's destructor")
        #expect(probe.log.events == ["freed"])
    }

    @Test func pendingBlocksKeepAReleasedQueueAlive() {
        let probe = DestructorProbe()
        let key = SpecificKey()
        let queue = CQueue.create("qk.test.pinned")
        #expect(qk_queue_set_specific(queue.handle, key.raw, probe.value("pinned"), DestructorProbe.destructor) == 0)

        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let facts = Facts()
        #expect(
            queue.async {
                started.signal()
                _ = waits(for: gate)
            } == 0)
        #expect(
            queue.async {
                // The caller's reference is long gone: this block still runs on a live queue.
                facts["label"] = String(cString: qk_queue_label(qk_queue_current()))
                facts.flag("specific intact", qk_get_specific(key.raw) != nil)
            } == 0)
        #expect(waits(for: started))
        queue.release()

        #expect(probe.log.events.isEmpty, "the queue must not be freed while blocks are pending")
        gate.signal()
        #expect(waits(for: probe.fired), "the queue is freed once its blocks have run")
        #expect(facts.all == ["label": "qk.test.pinned", "specific intact": "true"])
    }

    @Test(arguments: ["sync", "barrier_sync", "perform"])
    func releasingTheLastReferenceInsideARoundTripFreesTheQueueAfterIt(call: String) {
        let probe = DestructorProbe()
        let key = SpecificKey()
        let queue = CQueue.create("qk.test.released-inside", QK_QUEUE_CONCURRENT)
        #expect(qk_queue_set_specific(queue.handle, key.raw, probe.value("released"), DestructorProbe.destructor) == 0)
        let facts = Facts()
        let body = {
            queue.release()
            // The caller's last reference is gone, but the round trip still holds the queue.
            facts.flag("alive inside", probe.log.events.isEmpty && qk_get_specific(key.raw) != nil)
        }
        let status =
            switch call {
            case "sync": queue.sync(body)
            case "barrier_sync": queue.barrierSync(body)
            default: queue.perform(body)
            }
        #expect(status == 0)
        #expect(waits(for: probe.fired), "the queue is freed once the round trip is over")
        #expect(facts.all == ["alive inside": "true"])
        #expect(probe.log.events == ["released"])
    }

    /// Inside a sync that holds its queue on the idle path, the block makes a queue targeting it,
    /// then releases its own reference and the new queue's, the last that keeps the target: the
    /// target outlives the call, and is freed after it.
    @Test func releasingTheQueueAndAQueueTargetingItInsideItsIdleSyncFreesItAfterIt() {
        let probe = DestructorProbe()
        let key = SpecificKey()
        let target = CQueue.create("qk.test.kept-by-child")
        #expect(qk_queue_set_specific(target.handle, key.raw, probe.value("target"), DestructorProbe.destructor) == 0)
        let facts = Facts()
        let status = target.sync {
            let child = CQueue.create("qk.test.keeping-child", target: target)
            target.release()
            child.release()
            facts.flag("alive inside", probe.log.events.isEmpty && qk_get_specific(key.raw) != nil)
        }
        #expect(status == 0)
        #expect(waits(for: probe.fired), "the target is freed once the call is over")
        #expect(facts.all == ["alive inside": "true"])
    }

    // MARK: Submitting work

    @Test func asyncRunsInOrderOnASerialQueue() {
        let queue = CQueue.create("qk.test.fifo")
        defer { queue.release() }
        let log = Recorder()
        let done = DispatchSemaphore(value: 0)
        for i in 0..<50 { #expect(queue.async { log.record("\(i)") } == 0) }
        #expect(queue.async { done.signal() } == 0)
        #expect(waits(for: done))
        #expect(log.events == (0..<50).map { "\($0)" })
    }

    @Test func syncRunsTheWorkBeforeReturning() {
        let serial = CQueue.create("qk.test.sync")
        let concurrent = CQueue.create("qk.test.sync.concurrent", QK_QUEUE_CONCURRENT)
        defer {
            serial.release()
            concurrent.release()
        }
        let facts = Facts()
        #expect(
            bounded {
                for queue in [serial, concurrent] {
                    var ran = false
                    facts.status("sync \(queue.label)", queue.sync { ran = true })
                    facts.flag("ran \(queue.label)", ran)
                    ran = false
                    facts.status("barrier_sync \(queue.label)", queue.barrierSync { ran = true })
                    facts.flag("barrier ran \(queue.label)", ran)
                }
            })
        #expect(
            facts.all == [
                "sync qk.test.sync": "0", "ran qk.test.sync": "true",
                "barrier_sync qk.test.sync": "0", "barrier ran qk.test.sync": "true",
                "sync qk.test.sync.concurrent": "0", "ran qk.test.sync.concurrent": "true",
                "barrier_sync qk.test.sync.concurrent": "0", "barrier ran qk.test.sync.concurrent": "true",
            ])
    }

    @Test func aBarrierRunsAloneAfterTheBlocksBeforeIt() {
        let queue = CQueue.create("qk.test.barrier", QK_QUEUE_CONCURRENT)
        defer { queue.release() }
        let active = Shared(0)
        let log = Recorder()
        let gate = DispatchSemaphore(value: 0)
        let readersIn = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        for i in 0..<2 {
            #expect(
                queue.async {
                    active.update { $0 += 1 }
                    readersIn.signal()
                    _ = waits(for: gate)
                    log.record("reader \(i)")
                    active.update { $0 -= 1 }
                } == 0)
        }
        #expect(waits(for: readersIn) && waits(for: readersIn), "two readers run at once on a concurrent queue")
        #expect(
            queue.barrierAsync {
                log.record("barrier alone: \(active.value == 0)")
            } == 0)
        #expect(
            queue.async {
                log.record("after")
                done.signal()
            } == 0)
        gate.signal()
        gate.signal()
        #expect(waits(for: done))
        #expect(Array(log.events.suffix(2)) == ["barrier alone: true", "after"])
        #expect(Set(log.events.prefix(2)) == ["reader 0", "reader 1"])
    }

    @Test func nullAndWrongHandlesAndNullWorkAreEINVAL() {
        let queue = CQueue.create("qk.test.misuse")
        defer { queue.release() }
        let foreign = NotAQueue()
        let calls: [(String, (OpaquePointer?, UnsafeMutableRawPointer?, qk_function_t?) -> Int32)] = [
            ("async", qk_queue_async), ("sync", qk_queue_sync), ("barrier_async", qk_queue_barrier_async),
            ("barrier_sync", qk_queue_barrier_sync), ("perform", qk_queue_perform),
        ]
        for (name, call) in calls {
            #expect(call(nil, nil, noWork) == EINVAL, "\(name)(NULL queue)")
            #expect(call(foreign.handle, nil, noWork) == EINVAL, "\(name)(wrong-type queue)")
            #expect(call(queue.handle, nil, nil) == EINVAL, "\(name)(NULL work)")
            #expect(call(nil, nil, nil) == EINVAL, "\(name)(NULL, NULL)")
        }
        // The foreign object was left alone.
        #expect(foreign.words == (0, 0, 0, 0))
    }

    @Test func everyFunctionRefusesAWrongTypeHandle() {
        let foreign = NotAQueue()
        let handle = foreign.handle
        let key = SpecificKey()
        #expect(String(cString: qk_queue_label(handle)) == "")
        #expect(String(cString: qk_queue_label(nil)) == "")
        #expect(!qk_queue_is_current(handle))
        #expect(!qk_queue_is_current(nil))
        for predicate in [QK_ON_QUEUE, QK_ON_QUEUE_AS_BARRIER, QK_NOT_ON_QUEUE] {
            #expect(qk_queue_check(handle, predicate) == EINVAL)
            #expect(qk_queue_check(nil, predicate) == EINVAL)
        }
        #expect(qk_queue_set_specific(handle, key.raw, nil, nil) == EINVAL)
        #expect(qk_queue_set_specific(nil, key.raw, nil, nil) == EINVAL)
        #expect(qk_queue_get_specific(handle, key.raw) == nil)
        #expect(qk_queue_get_specific(nil, key.raw) == nil)
        // retain gives the pointer back untouched; release ignores it.
        #expect(qk_queue_retain(handle) == handle)
        #expect(qk_queue_retain(nil) == nil)
        qk_queue_release(handle)
        qk_queue_release(nil)
        #expect(foreign.words == (0, 0, 0, 0))
    }

    @Test func badPredicatesAreEINVAL() {
        let queue = CQueue.create("qk.test.predicate")
        defer { queue.release() }
        for bad in [UInt32(3), UInt32(100), UInt32.max] {
            #expect(queue.check(qk_predicate_t(rawValue: bad)) == EINVAL)
        }
    }
}
