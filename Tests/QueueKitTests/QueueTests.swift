import CQueueKit
import Foundation
import Glibc
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

// MARK: - Helpers

/// A queue handle that test closures may capture. Every member calls the C API.
struct CQueue: @unchecked Sendable, Equatable, CustomStringConvertible {
    let handle: OpaquePointer?

    static func create(_ label: String?, _ kind: qk_queue_kind_t = QK_QUEUE_SERIAL, target: CQueue? = nil) -> CQueue {
        let handle: OpaquePointer? = if let label {
            label.withCString { qk_queue_create_with_target($0, kind, target?.handle) }
        } else {
            qk_queue_create_with_target(nil, kind, target?.handle)
        }
        precondition(handle != nil, "qk_queue_create_with_target failed: errno \(errno)")
        return CQueue(handle: handle)
    }

    static var main: CQueue { CQueue(handle: qk_queue_main()) }
    static func global(_ qos: qk_qos_t = QK_QOS_DEFAULT) -> CQueue { CQueue(handle: qk_queue_global(qos)) }
    static var current: CQueue? { qk_queue_current().map { CQueue(handle: $0) } }

    func release() { qk_queue_release(handle) }
    var label: String { String(cString: qk_queue_label(handle)) }
    var isCurrent: Bool { qk_queue_is_current(handle) }
    var description: String { "queue '\(label)'" }

    @discardableResult func sync(_ body: () -> Void) -> Int32 { callC(body) { qk_queue_sync(handle, $0, $1) } }
    @discardableResult func barrierSync(_ body: () -> Void) -> Int32 { callC(body) { qk_queue_barrier_sync(handle, $0, $1) } }
    @discardableResult func perform(_ body: () -> Void) -> Int32 { callC(body) { qk_queue_perform(handle, $0, $1) } }
    @discardableResult func async(_ body: @escaping @Sendable () -> Void) -> Int32 {
        callCAsync(body) { qk_queue_async(handle, $0, $1) }
    }
    @discardableResult func barrierAsync(_ body: @escaping @Sendable () -> Void) -> Int32 {
        callCAsync(body) { qk_queue_barrier_async(handle, $0, $1) }
    }

    func check(_ predicate: qk_predicate_t) -> Int32 { qk_queue_check(handle, predicate) }

    /// The three predicates at once, as names: [ON_QUEUE, ON_QUEUE_AS_BARRIER, NOT_ON_QUEUE].
    var checks: [String] {
        [QK_ON_QUEUE, QK_ON_QUEUE_AS_BARRIER, QK_NOT_ON_QUEUE].map { statusName(check($0)) }
    }
}

/// What `checks` says about a queue the thread runs exclusively, runs shared, or does not run.
let heldExclusively = ["0", "0", "EPERM"]
let heldShared = ["0", "EPERM", "EPERM"]
let notHeld = ["EPERM", "EPERM", "0"]

/// A status as its errno name, so a failed expectation reads well.
func statusName(_ status: Int32) -> String {
    switch status {
    case 0: "0"
    case EINVAL: "EINVAL"
    case EPERM: "EPERM"
    case EDEADLK: "EDEADLK"
    case EBUSY: "EBUSY"
    case ETIMEDOUT: "ETIMEDOUT"
    case ENOMEM: "ENOMEM"
    default: "status \(status)"
    }
}

/// The NUL-terminated string in `buffer`.
func cString(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Named observations made on queue threads, checked on the test's thread afterwards.
final class Facts: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: String] = [:]

    subscript(key: String) -> String? {
        get { lock.withLock { values[key] } }
        set { lock.withLock { values[key] = newValue } }
    }
    func status(_ key: String, _ status: Int32) { self[key] = statusName(status) }
    func flag(_ key: String, _ value: Bool) { self[key] = value ? "true" : "false" }
    func checks(_ key: String, _ queue: CQueue) { self[key] = queue.checks.joined(separator: " ") }
    var all: [String: String] { lock.withLock { values } }
}

/// `checks` joined, as `Facts.checks` records it.
func joined(_ checks: [String]) -> String { checks.joined(separator: " ") }

/// Runs `body` on a fresh thread, bounded by the test timeout; false when it did not finish.
func bounded(_ body: @escaping @Sendable () -> Void) -> Bool { finishes(within: testTimeout, body) }

/// A key for specifics: a distinct address.
struct SpecificKey: @unchecked Sendable {
    let raw = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
}

/// A specific value whose destructor reports that it ran, and with which value.
final class DestructorProbe: @unchecked Sendable {
    let fired = DispatchSemaphore(value: 0)
    let log = Recorder()

    /// A value for `qk_queue_set_specific` that reports `name` when destroyed; pair it with
    /// `DestructorProbe.destructor`.
    func value(_ name: String) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(Token(probe: self, name: name)).toOpaque()
    }

    final class Token {
        let probe: DestructorProbe
        let name: String
        init(probe: DestructorProbe, name: String) { self.probe = probe; self.name = name }
    }

    static let destructor: qk_function_t = { value in
        let token = Unmanaged<Token>.fromOpaque(value!).takeRetainedValue()
        token.probe.log.record(token.name)
        token.probe.fired.signal()
    }
}

/// A handle of another Swift type than a queue: what a C caller passes by mistake.
final class NotAQueue: @unchecked Sendable {
    var words = (0, 0, 0, 0)
    var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }
}

private let noWork: qk_function_t = { _ in }

// MARK: - Tests

@Suite("Queue-identity registry (C API)", .serialized)
struct QueueTests {
    // MARK: Creation, labels, system queues

    @Test func createdQueuesHaveTheirLabelsAndKinds() {
        let serial = CQueue.create("qk.test.serial")
        let concurrent = CQueue.create("qk.test.concurrent", QK_QUEUE_CONCURRENT)
        let anonymous = CQueue.create(nil)
        defer { serial.release(); concurrent.release(); anonymous.release() }

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
        #expect(bounded {
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
        #expect(queue.async {
            started.signal()
            _ = waits(for: gate)
        } == 0)
        #expect(queue.async {
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
        defer { serial.release(); concurrent.release() }
        let facts = Facts()
        #expect(bounded {
            for queue in [serial, concurrent] {
                var ran = false
                facts.status("sync \(queue.label)", queue.sync { ran = true })
                facts.flag("ran \(queue.label)", ran)
                ran = false
                facts.status("barrier_sync \(queue.label)", queue.barrierSync { ran = true })
                facts.flag("barrier ran \(queue.label)", ran)
            }
        })
        #expect(facts.all == [
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
            #expect(queue.async {
                active.update { $0 += 1 }
                readersIn.signal()
                _ = waits(for: gate)
                log.record("reader \(i)")
                active.update { $0 -= 1 }
            } == 0)
        }
        #expect(waits(for: readersIn) && waits(for: readersIn), "two readers run at once on a concurrent queue")
        #expect(queue.barrierAsync {
            log.record("barrier alone: \(active.value == 0)")
        } == 0)
        #expect(queue.async { log.record("after"); done.signal() } == 0)
        gate.signal(); gate.signal()
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

    // MARK: Identity: current, is_current, labels

    @Test func outsideAnyQueueThereIsNoCurrentQueue() {
        let facts = Facts()
        let queue = CQueue.create("qk.test.outside")
        defer { queue.release() }
        #expect(bounded {
            facts.flag("current is NULL", qk_queue_current() == nil)
            facts["label length"] = "\(qk_queue_copy_current_label(nil, 0))"
            var buffer: [CChar] = [65, 65, 0]
            facts["copied length"] = "\(qk_queue_copy_current_label(&buffer, buffer.count))"
            facts["copied"] = cString(buffer)
            facts.flag("main is current", CQueue.main.isCurrent)
            facts.checks("checks", queue)
            facts.checks("main checks", CQueue.main)
        })
        #expect(facts.all == [
            "current is NULL": "true", "label length": "0", "copied length": "0", "copied": "",
            "main is current": "false", "checks": joined(notHeld), "main checks": joined(notHeld),
        ])
    }

    @Test func theCurrentQueueInsideEveryKindOfBlock() {
        let serial = CQueue.create("qk.test.current.serial")
        let concurrent = CQueue.create("qk.test.current.concurrent", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.current.other")
        defer { serial.release(); concurrent.release(); other.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        @Sendable func observe(_ name: String, _ queue: CQueue) {
            facts.flag("\(name): current", CQueue.current == queue)
            facts.flag("\(name): is_current", queue.isCurrent)
            facts.flag("\(name): other is_current", other.isCurrent)
            var buffer = [CChar](repeating: 0, count: 64)
            _ = qk_queue_copy_current_label(&buffer, buffer.count)
            facts["\(name): label"] = cString(buffer)
        }
        for queue in [serial, concurrent] {
            #expect(queue.async { observe("async \(queue.label)", queue); done.signal() } == 0)
            #expect(queue.barrierAsync { observe("barrier_async \(queue.label)", queue); done.signal() } == 0)
        }
        #expect(bounded {
            for queue in [serial, concurrent] {
                queue.sync { observe("sync \(queue.label)", queue) }
                queue.barrierSync { observe("barrier_sync \(queue.label)", queue) }
                queue.perform { observe("perform \(queue.label)", queue) }
            }
        })
        for _ in 0..<4 { #expect(waits(for: done)) }

        var expected: [String: String] = [:]
        for queue in [serial, concurrent] {
            for call in ["async", "barrier_async", "sync", "barrier_sync", "perform"] {
                let name = "\(call) \(queue.label)"
                expected["\(name): current"] = "true"
                expected["\(name): is_current"] = "true"
                expected["\(name): other is_current"] = "false"
                expected["\(name): label"] = queue.label
            }
        }
        #expect(facts.all == expected)
    }

    @Test func theCurrentQueueOnGlobalAndMainQueues() {
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        let qoses = [QK_QOS_BACKGROUND, QK_QOS_UTILITY, QK_QOS_DEFAULT, QK_QOS_USER_INITIATED, QK_QOS_USER_INTERACTIVE]
        for qos in qoses {
            let global = CQueue.global(qos)
            #expect(global.async {
                facts.flag("global \(qos.rawValue): current", CQueue.current == global)
                facts.flag("global \(qos.rawValue): label", CQueue.current?.label == global.label)
                done.signal()
            } == 0)
        }
        // In this process dispatch drains the main queue on worker threads (see the file comment).
        #expect(CQueue.main.async {
            facts.flag("main: current", CQueue.current == .main)
            facts.checks("main: checks", .main)
            facts.status("main: nested sync", CQueue.main.sync {})
            done.signal()
        } == 0)
        #expect(bounded {
            CQueue.global().sync { facts.flag("global sync: current", CQueue.current == .global()) }
            CQueue.main.sync { facts.flag("main sync: current", CQueue.current == .main) }
        })
        for _ in 0...qoses.count { #expect(waits(for: done)) }

        var expected = [
            "main: current": "true", "main: checks": joined(heldExclusively), "main: nested sync": "EDEADLK",
            "global sync: current": "true", "main sync: current": "true",
        ]
        for qos in qoses {
            expected["global \(qos.rawValue): current"] = "true"
            expected["global \(qos.rawValue): label"] = "true"
        }
        #expect(facts.all == expected)
    }

    @Test func copyCurrentLabelHasStrlcpySemantics() {
        let queue = CQueue.create("abcdef")
        defer { queue.release() }
        let facts = Facts()
        #expect(bounded {
            queue.sync {
                facts["measure"] = "\(qk_queue_copy_current_label(nil, 0))"
                // A NULL buffer only measures, whatever the size says.
                facts["NULL buffer, size 10"] = "\(qk_queue_copy_current_label(nil, 10))"
                for size in [1, 2, 4, 6, 7, 100] {
                    var buffer = [CChar](repeating: 0x58, count: size + 1)  // 'X' guard bytes
                    let length = qk_queue_copy_current_label(&buffer, size)
                    let guardIntact = buffer[size] == 0x58
                    facts["size \(size)"] = "\(length) '\(cString(buffer))' guard \(guardIntact)"
                }
                var untouched: [CChar] = [0x58, 0]
                _ = qk_queue_copy_current_label(&untouched, 0)
                facts.flag("size 0 writes nothing", untouched[0] == 0x58)
                // SIZE_MAX is a size_t, not -1: the label is copied and terminated.
                var large = [CChar](repeating: 0x58, count: 16)
                let length = qk_queue_copy_current_label(&large, Int(bitPattern: UInt.max))
                facts["size SIZE_MAX"] = "\(length) '\(cString(large))'"
            }
        })
        #expect(facts.all == [
            "measure": "6", "NULL buffer, size 10": "6",
            "size 1": "6 '' guard true", "size 2": "6 'a' guard true", "size 4": "6 'abc' guard true",
            "size 6": "6 'abcde' guard true", "size 7": "6 'abcdef' guard true",
            "size 100": "6 'abcdef' guard true", "size 0 writes nothing": "true",
            "size SIZE_MAX": "6 'abcdef'",
        ])
    }

    // MARK: Predicates

    @Test func predicatesOnSerialConcurrentAndBarrierBlocks() {
        let serial = CQueue.create("qk.test.pred.serial")
        let concurrent = CQueue.create("qk.test.pred.concurrent", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.pred.other", QK_QUEUE_CONCURRENT)
        defer { serial.release(); concurrent.release(); other.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        #expect(serial.async { facts.checks("serial async", serial); facts.checks("serial async: other", other); done.signal() } == 0)
        #expect(concurrent.async { facts.checks("concurrent async", concurrent); done.signal() } == 0)
        #expect(concurrent.barrierAsync { facts.checks("concurrent barrier_async", concurrent); done.signal() } == 0)
        #expect(CQueue.global().barrierAsync { facts.checks("global barrier_async", .global()); done.signal() } == 0)
        #expect(bounded {
            facts.checks("outside", serial)
            serial.sync { facts.checks("serial sync", serial) }
            serial.barrierSync { facts.checks("serial barrier_sync", serial) }
            concurrent.sync { facts.checks("concurrent sync", concurrent) }
            concurrent.barrierSync { facts.checks("concurrent barrier_sync", concurrent) }
            concurrent.perform { facts.checks("concurrent perform", concurrent) }
            // Global queues have no barriers: a barrier block there is an ordinary block.
            CQueue.global().barrierSync { facts.checks("global barrier_sync", .global()) }
        })
        for _ in 0..<4 { #expect(waits(for: done)) }

        #expect(facts.all == [
            "outside": joined(notHeld),
            "serial async": joined(heldExclusively), "serial async: other": joined(notHeld),
            "serial sync": joined(heldExclusively), "serial barrier_sync": joined(heldExclusively),
            "concurrent async": joined(heldShared), "concurrent sync": joined(heldShared),
            "concurrent perform": joined(heldShared),
            "concurrent barrier_async": joined(heldExclusively), "concurrent barrier_sync": joined(heldExclusively),
            "global barrier_async": joined(heldShared), "global barrier_sync": joined(heldShared),
        ])
    }

    // MARK: Target hierarchies

    @Test func targetHierarchies() {
        let root = CQueue.create("qk.test.target.root")  // serial
        let middle = CQueue.create("qk.test.target.middle", QK_QUEUE_CONCURRENT, target: root)
        let leaf = CQueue.create("qk.test.target.leaf", target: middle)
        let pool = CQueue.create("qk.test.target.pool", QK_QUEUE_CONCURRENT)
        let onPool = CQueue.create("qk.test.target.onpool", target: pool)
        let bystander = CQueue.create("qk.test.target.bystander")
        // The target hierarchy keeps the targets alive: drop our references to them.
        root.release(); middle.release(); pool.release()
        defer { leaf.release(); onPool.release(); bystander.release() }

        let rootKey = SpecificKey(), leafKey = SpecificKey(), bothKey = SpecificKey()
        let value = { (n: Int) in UnsafeMutableRawPointer(bitPattern: n)! }
        #expect(qk_queue_set_specific(root.handle, rootKey.raw, value(0x10), nil) == 0)
        #expect(qk_queue_set_specific(root.handle, bothKey.raw, value(0x11), nil) == 0)
        #expect(qk_queue_set_specific(leaf.handle, leafKey.raw, value(0x20), nil) == 0)
        #expect(qk_queue_set_specific(leaf.handle, bothKey.raw, value(0x21), nil) == 0)

        let facts = Facts()
        #expect(bounded {
            leaf.sync {
                facts.flag("leaf: current is the inner queue", CQueue.current == leaf)
                facts["leaf: label"] = CQueue.current?.label
                facts.flag("leaf: is_current(leaf, middle, root)", leaf.isCurrent && middle.isCurrent && root.isCurrent)
                facts.flag("leaf: is_current(bystander)", bystander.isCurrent)
                facts.checks("leaf: leaf", leaf)
                // A block of a queue that targets a serial queue holds that queue exclusively
                // (it runs in the serial queue's drain); a concurrent target is held shared.
                facts.checks("leaf: middle", middle)
                facts.checks("leaf: root", root)
                facts["leaf: get_specific(root key)"] = "\(Int(bitPattern: qk_get_specific(rootKey.raw)))"
                facts["leaf: get_specific(leaf key)"] = "\(Int(bitPattern: qk_get_specific(leafKey.raw)))"
                facts["leaf: get_specific(both key)"] = "\(Int(bitPattern: qk_get_specific(bothKey.raw)))"
                facts.flag("leaf: queue_get_specific does not walk", qk_queue_get_specific(leaf.handle, rootKey.raw) == nil)
            }
            onPool.sync {
                facts.checks("onPool: pool", pool)
                facts.flag("onPool: is_current(pool)", pool.isCurrent)
            }
            middle.sync {
                facts.flag("middle: current", CQueue.current == middle)
                facts.flag("middle: is_current(leaf)", leaf.isCurrent)
                facts.checks("middle: root", root)
                facts.checks("middle: leaf", leaf)
            }
        })
        #expect(facts.all == [
            "leaf: current is the inner queue": "true", "leaf: label": "qk.test.target.leaf",
            "leaf: is_current(leaf, middle, root)": "true", "leaf: is_current(bystander)": "false",
            "leaf: leaf": joined(heldExclusively), "leaf: middle": joined(heldShared),
            "leaf: root": joined(heldExclusively),
            "leaf: get_specific(root key)": "\(0x10)", "leaf: get_specific(leaf key)": "\(0x20)",
            "leaf: get_specific(both key)": "\(0x21)", "leaf: queue_get_specific does not walk": "true",
            "onPool: pool": joined(heldShared), "onPool: is_current(pool)": "true",
            "middle: current": "true", "middle: is_current(leaf)": "false",
            "middle: root": joined(heldExclusively), "middle: leaf": joined(notHeld),
        ])
    }

    // MARK: Sync hops

    @Test func aSyncHopKeepsTheOuterQueueHeldButNotCurrent() {
        let a = CQueue.create("qk.test.hop.a")
        let b = CQueue.create("qk.test.hop.b")
        defer { a.release(); b.release() }
        let keyA = SpecificKey(), keyB = SpecificKey()
        #expect(qk_queue_set_specific(a.handle, keyA.raw, UnsafeMutableRawPointer(bitPattern: 0xA)!, nil) == 0)
        #expect(qk_queue_set_specific(b.handle, keyB.raw, UnsafeMutableRawPointer(bitPattern: 0xB)!, nil) == 0)
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        @Sendable func insideB(_ via: String) {
            // dispatch_assert_queue's view: A is held by the block waiting in the sync...
            facts.checks("\(via): A", a)
            facts.checks("\(via): B", b)
            // ...while dispatch_get_specific's view sees only B and its targets.
            facts.flag("\(via): is_current(A)", a.isCurrent)
            facts.flag("\(via): current is B", CQueue.current == b)
            facts.flag("\(via): get_specific(A key) is NULL", qk_get_specific(keyA.raw) == nil)
            facts["\(via): get_specific(B key)"] = "\(Int(bitPattern: qk_get_specific(keyB.raw)))"
        }
        #expect(a.async {
            facts.status("async A: sync B", b.sync { insideB("async A") })
            facts.flag("async A: current is A again", CQueue.current == a)
            done.signal()
        } == 0)
        #expect(waits(for: done))
        // The same through the main queue, whose blocks dispatch may run on another thread.
        #expect(bounded {
            facts.status("sync A: sync main", a.sync { _ = CQueue.main.sync { facts.checks("main via A: A", a) } })
        })

        #expect(facts.all == [
            "async A: A": joined(heldExclusively), "async A: B": joined(heldExclusively),
            "async A: is_current(A)": "false", "async A: current is B": "true",
            "async A: get_specific(A key) is NULL": "true", "async A: get_specific(B key)": "\(0xB)",
            "async A: sync B": "0", "async A: current is A again": "true",
            "sync A: sync main": "0", "main via A: A": joined(heldExclusively),
        ])
    }

    // MARK: EDEADLK

    @Test func syncOntoTheSerialQueueYouAreOnIsEDEADLK() {
        let queue = CQueue.create("qk.test.deadlk.serial")
        defer { queue.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(queue.async {
            var ran = false
            facts.status("sync", queue.sync { ran = true })
            facts.status("barrier_sync", queue.barrierSync { ran = true })
            facts.flag("work ran", ran)
            done.signal()
        } == 0)
        #expect(waits(for: done))
        #expect(bounded {
            var ran = false
            _ = queue.sync { facts.status("nested in sync", queue.sync { ran = true }) }
            facts.flag("nested work ran", ran)
        })
        #expect(facts.all == [
            "sync": "EDEADLK", "barrier_sync": "EDEADLK", "work ran": "false",
            "nested in sync": "EDEADLK", "nested work ran": "false",
        ])
    }

    @Test func syncBackThroughAHopIsEDEADLK() {
        let a = CQueue.create("qk.test.deadlk.hop.a")
        let b = CQueue.create("qk.test.deadlk.hop.b")
        let c = CQueue.create("qk.test.deadlk.hop.c", QK_QUEUE_CONCURRENT)
        defer { a.release(); b.release(); c.release() }
        let facts = Facts()
        #expect(bounded {
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
        #expect(facts.all == [
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
        defer { serial.release(); inner.release(); deeper.release(); pool.release(); onPool.release() }
        let facts = Facts()
        let hop = CQueue.create("qk.test.deadlk.target.hop")
        defer { hop.release() }
        #expect(bounded {
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
        #expect(facts.all == [
            "serial→sync(inner)": "EDEADLK", "serial→sync(deeper)": "EDEADLK",
            "serial→barrier_sync(inner)": "EDEADLK", "serial→perform(deeper)": "EDEADLK",
            "serial→hop→sync(deeper)": "EDEADLK", "pool barrier→sync(onPool)": "EDEADLK", "work ran": "false",
        ])
    }

    @Test func barrierSyncFromInsideAReaderIsEDEADLK() {
        let queue = CQueue.create("qk.test.deadlk.reader", QK_QUEUE_CONCURRENT)
        let hop = CQueue.create("qk.test.deadlk.reader.hop")
        let onQueue = CQueue.create("qk.test.deadlk.reader.child", target: queue)
        defer { queue.release(); hop.release(); onQueue.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(queue.async {
            var ran = false
            facts.status("async reader→barrier_sync", queue.barrierSync { ran = true })
            facts.flag("async reader: work ran", ran)
            done.signal()
        } == 0)
        #expect(waits(for: done))
        #expect(bounded {
            var ran = false
            _ = queue.sync {
                facts.status("reader→barrier_sync", queue.barrierSync { ran = true })
                _ = hop.sync { facts.status("reader→hop→barrier_sync", queue.barrierSync { ran = true }) }
            }
            // A block of a queue that targets the concurrent queue is a reader of it too.
            _ = onQueue.sync { facts.status("child→barrier_sync", queue.barrierSync { ran = true }) }
            facts.flag("work ran", ran)
        })
        #expect(facts.all == [
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
        #expect(queue.barrierAsync {
            var ran = false
            facts.status("barrier_async→sync", queue.sync { ran = true })
            facts.status("barrier_async→barrier_sync", queue.barrierSync { ran = true })
            facts.flag("barrier_async: work ran", ran)
            done.signal()
        } == 0)
        #expect(waits(for: done))
        #expect(bounded {
            var ran = false
            _ = queue.barrierSync {
                facts.status("barrier_sync→sync", queue.sync { ran = true })
                facts.status("barrier_sync→barrier_sync", queue.barrierSync { ran = true })
            }
            facts.flag("barrier_sync: work ran", ran)
        })
        #expect(facts.all == [
            "barrier_async→sync": "EDEADLK", "barrier_async→barrier_sync": "EDEADLK", "barrier_async: work ran": "false",
            "barrier_sync→sync": "EDEADLK", "barrier_sync→barrier_sync": "EDEADLK", "barrier_sync: work ran": "false",
        ])
    }

    // MARK: Readers never wait behind a pending barrier

    @Test(arguments: [false, true])
    func aNestedReaderSyncRunsInlineWhileABarrierIsPending(throughAHop: Bool) {
        let queue = CQueue.create("qk.test.pending", QK_QUEUE_CONCURRENT)
        let hop = CQueue.create("qk.test.pending.hop")
        defer { queue.release(); hop.release() }
        let facts = Facts()
        let inside = DispatchSemaphore(value: 0)
        let pending = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let barrierDone = DispatchSemaphore(value: 0)
        let barrierRan = Shared(false)

        #expect(queue.async {
            inside.signal()
            // Wait until the barrier is queued behind this reader.
            facts.flag("saw the barrier pending", waits(for: pending))
            let nested = {
                var ran = false
                facts.status("nested sync", queue.sync {
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
        #expect(bounded {
            _ = queue.barrierAsync { barrierRan.value = true; barrierDone.signal() }
        })
        pending.signal()
        #expect(waits(for: readerDone), "the nested sync must not wait behind the pending barrier")
        #expect(waits(for: barrierDone))
        #expect(facts.all == [
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
        defer { pool.release(); serialChild.release(); concurrentChild.release(); sibling.release(); onGlobal.release() }
        let facts = Facts()
        let inside = DispatchSemaphore(value: 0)
        let pending = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let barrierDone = DispatchSemaphore(value: 0)

        #expect(pool.async {
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

        #expect(bounded {
            // A block of one child is a reader of the pool too: a sibling is out of reach as well.
            _ = serialChild.sync { facts.status("child→sync(sibling)", sibling.sync {}) }
            // Global queues have no barriers: nothing can be pending there.
            _ = CQueue.global().sync { facts.status("global→sync(child of global)", onGlobal.sync {}) }
        })
        #expect(facts.all == [
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
        defer { serial.release(); pool.release(); onSerial.release(); onPool.release() }
        let facts = Facts()
        #expect(bounded {
            for queue in [onSerial, onPool] {
                _ = queue.sync {
                    var ran = false
                    facts.status("\(queue.label): nested sync", queue.sync {
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
        defer { a.release(); b.release(); c.release() }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        #expect(a.async {
            var ran = false
            facts.status("A→perform(A)", a.perform {
                ran = true
                facts.flag("A→perform(A): current", CQueue.current == a)
            })
            facts.flag("A→perform(A): ran before returning", ran)
            done.signal()
        } == 0)
        #expect(waits(for: done))
        #expect(bounded {
            facts.status("outside→perform(A)", a.perform {
                facts.flag("outside→perform(A): current", CQueue.current == a)
                facts.checks("outside→perform(A): checks", a)
            })
            _ = a.sync {
                _ = b.sync {
                    // A is held further out by the block waiting in sync(B): perform runs inline.
                    facts.status("A→B→perform(A)", a.perform {
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
        #expect(facts.all == [
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
        let key = SpecificKey(), otherKey = SpecificKey()
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
        #expect(bounded {
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
        #expect(global.async { facts["global block"] = "\(Int(bitPattern: qk_get_specific(key.raw)))"; done.signal() } == 0)
        #expect(waits(for: done))
        #expect(facts.all == ["global block": "\(0x99)"])
    }

    // MARK: Preconditions

    @Test func passingPreconditionsReturn() {
        let serial = CQueue.create("qk.test.precondition.serial")
        let concurrent = CQueue.create("qk.test.precondition.concurrent", QK_QUEUE_CONCURRENT)
        defer { serial.release(); concurrent.release() }
        #expect(bounded {
            qk_queue_precondition(serial.handle, QK_NOT_ON_QUEUE)
            serial.sync {
                qk_queue_precondition(serial.handle, QK_ON_QUEUE)
                qk_queue_precondition(serial.handle, QK_ON_QUEUE_AS_BARRIER)
                qk_queue_precondition(concurrent.handle, QK_NOT_ON_QUEUE)
                concurrent.sync {
                    qk_queue_precondition(concurrent.handle, QK_ON_QUEUE)
                    qk_queue_precondition(serial.handle, QK_ON_QUEUE)  // held further out
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
        #expect(messages == [
            "QueueKit precondition failed: expected to be on queue as barrier 'qk.test.expected', but the current queue is 'qk.test.other' (the thread runs 'qk.test.expected' shared, not as a barrier)"
        ])
    }

    /// Not a test on its own: the child of `aFailingPreconditionAbortsWithOneLine`. It does nothing
    /// unless the child variable is set.
    @Test func preconditionViolationChild() {
        guard ProcessInfo.processInfo.environment[preconditionChildVariable] != nil else { return }
        let expected = CQueue.create("qk.test.expected", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.other")
        expected.sync {
            other.sync {
                qk_queue_precondition(expected.handle, QK_ON_QUEUE)  // holds: further out
                qk_queue_precondition(expected.handle, QK_ON_QUEUE_AS_BARRIER)  // a reader: aborts
            }
        }
        Issue.record("qk_queue_precondition returned although its predicate failed")
    }
}

let preconditionChildVariable = "QUEUEKIT_TEST_PRECONDITION_CHILD"
