// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import Testing

// Queue handles for the tests: every member calls the C API (section 1 of the header).

/// A queue handle that test closures may capture. Every member calls the C API.
package struct CQueue: @unchecked Sendable, Equatable, CustomStringConvertible {
    package let handle: OpaquePointer?

    package static func create(_ label: String?, _ kind: qk_queue_kind_t = QK_QUEUE_SERIAL, target: CQueue? = nil)
        -> CQueue
    {
        let handle: OpaquePointer? =
            if let label {
                label.withCString { qk_queue_create_with_target($0, kind, target?.handle) }
            } else {
                qk_queue_create_with_target(nil, kind, target?.handle)
            }
        precondition(handle != nil, "qk_queue_create_with_target failed: errno \(errno)")
        return CQueue(handle: handle)
    }

    package static var main: CQueue { CQueue(handle: qk_queue_main()) }
    package static func global(_ qos: qk_qos_t = QK_QOS_DEFAULT) -> CQueue { CQueue(handle: qk_queue_global(qos)) }
    package static var current: CQueue? { qk_queue_current().map { CQueue(handle: $0) } }

    /// The Swift object behind the handle.
    package var swift: Queue { Unmanaged<Queue>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue() }
    package func release() { qk_queue_release(handle) }
    package var label: String { String(cString: qk_queue_label(handle)) }
    package var isCurrent: Bool { qk_queue_is_current(handle) }
    package var description: String { "queue '\(label)'" }

    @discardableResult package func sync(_ body: () -> Void) -> Int32 { callC(body) { qk_queue_sync(handle, $0, $1) } }
    @discardableResult package func barrierSync(_ body: () -> Void) -> Int32 {
        callC(body) { qk_queue_barrier_sync(handle, $0, $1) }
    }
    @discardableResult package func perform(_ body: () -> Void) -> Int32 {
        callC(body) { qk_queue_perform(handle, $0, $1) }
    }
    @discardableResult package func async(_ body: @escaping @Sendable () -> Void) -> Int32 {
        callCAsync(body) { qk_queue_async(handle, $0, $1) }
    }
    @discardableResult package func barrierAsync(_ body: @escaping @Sendable () -> Void) -> Int32 {
        callCAsync(body) { qk_queue_barrier_async(handle, $0, $1) }
    }

    package func check(_ predicate: qk_predicate_t) -> Int32 { qk_queue_check(handle, predicate) }

    /// The three predicates at once, as names: [ON_QUEUE, ON_QUEUE_AS_BARRIER, NOT_ON_QUEUE].
    package var checks: [String] {
        [QK_ON_QUEUE, QK_ON_QUEUE_AS_BARRIER, QK_NOT_ON_QUEUE].map { statusName(check($0)) }
    }
}

/// What `checks` says about a queue the thread runs exclusively, runs shared, or does not run.
package let heldExclusively = ["0", "0", "EPERM"]
package let heldShared = ["0", "EPERM", "EPERM"]
package let notHeld = ["EPERM", "EPERM", "0"]

/// Named observations made on queue threads, checked on the test's thread afterwards.
package final class Facts: @unchecked Sendable {
    package init() {}
    package let lock = NSLock()
    package var values: [String: String] = [:]

    package subscript(key: String) -> String? {
        get { lock.withLock { values[key] } }
        set { lock.withLock { values[key] = newValue } }
    }
    package func status(_ key: String, _ status: Int32) { self[key] = statusName(status) }
    package func flag(_ key: String, _ value: Bool) { self[key] = value ? "true" : "false" }
    package func checks(_ key: String, _ queue: CQueue) { self[key] = queue.checks.joined(separator: " ") }
    package var all: [String: String] { lock.withLock { values } }
}

/// `checks` joined, as `Facts.checks` records it.
package func joined(_ checks: [String]) -> String { checks.joined(separator: " ") }

/// A key for specifics: a distinct address.
package struct SpecificKey: @unchecked Sendable {
    package init() {}
    package let raw = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
}

/// A specific value whose destructor reports that it ran, and with which value.
package final class DestructorProbe: @unchecked Sendable {
    package init() {}
    package let fired = DispatchSemaphore(value: 0)
    package let log = Recorder()

    /// A value for `qk_queue_set_specific` that reports `name` when destroyed; pair it with
    /// `DestructorProbe.destructor`.
    package func value(_ name: String) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(Token(probe: self, name: name)).toOpaque()
    }

    package final class Token {
        let probe: DestructorProbe
        let name: String
        init(probe: DestructorProbe, name: String) {
            self.probe = probe
            self.name = name
        }
    }

    package static let destructor: qk_function_t = { value in
        let token = Unmanaged<Token>.fromOpaque(value!).takeRetainedValue()
        token.probe.log.record(token.name)
        token.probe.fired.signal()
    }
}

/// A handle of another Swift type than a queue: what a C caller passes by mistake.
package final class NotAQueue: @unchecked Sendable {
    package init() {}
    package var words = (0, 0, 0, 0)
    package var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }
}

/// Runs `body` on a fresh thread, bounded by the test timeout; false when it did not finish.
package func bounded(_ body: @escaping @Sendable () -> Void) -> Bool { finishes(within: testTimeout, body) }
