// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// Who a test of the condition is, beyond its closure: the C function and its context. A release
/// calls a test with the same identity at most once (see ``ConditionLock/RefusedTests``), and
/// reports name the function by its symbol.
package struct ConditionTestIdentity: Equatable, Sendable {
    package let function: UInt
    package let context: UInt

    package init(function: UnsafeRawPointer, context: UnsafeRawPointer?) {
        self.function = UInt(bitPattern: function)
        self.context = UInt(bitPattern: context)
    }

    /// "is_ready+0x0 (context 0x5580...)", or the address where `dladdr` finds no symbol.
    var description: String {
        let address = UnsafeRawPointer(bitPattern: function)
        var offset = 0
        var buffer = [CChar](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBufferPointer {
            qkshim_symbol_name(address, $0.baseAddress, $0.count, &offset)
        }
        let hex = { (value: UInt) in "0x" + String(value, radix: 16) }
        let name =
            length == 0
            ? hex(function)
            : String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                + (offset == 0 ? "" : "+" + hex(UInt(offset)))
        return "\(name) (context \(hex(context)))"
    }
}

/// The marker a suspended task's wait report entry carries for a test wait.
struct ConditionTestMarker: Sendable {}

extension ConditionLock {
    // MARK: What a waiter needs of the condition

    /// A test of the condition: a closure that lives as long as the wait (on the waiting thread's
    /// stack, or escaping for a suspended task), and the C identity when it wraps a C function.
    @usableFromInline
    struct Test {
        let evaluate: (Condition) -> Bool
        let identity: ConditionTestIdentity?
    }

    /// What a queued waiter (or an acquisition) needs of the condition.
    @usableFromInline
    enum Wanted {
        /// A plain `lock`: any condition.
        case any
        /// `lock_when`: the condition equal to this value.
        case value(Condition)
        /// `lock_if` / `await`: the test true of the condition.
        case test(Test)

        var isAny: Bool {
            if case .any = self { return true }
            return false
        }

        /// What a suspended task's record carries, for its line in the wait report.
        var reportValue: (any Sendable)? {
            switch self {
            case .any: return nil
            case .value(let value): return value
            case .test: return ConditionTestMarker()
            }
        }
    }

    /// The tests that said no during one release, by identity: a later waiter with the same test
    /// and context is skipped without calling it (the condition and what the context points to
    /// cannot change while the releaser holds the guard). Sixteen identities are remembered, in
    /// uninitialized stack memory (a release that refuses nothing writes nothing); waiters whose
    /// test is not among them are tested each (Swift closures have no identity).
    struct RefusedTests {
        static var capacity: Int { 16 }
        let storage: UnsafeMutablePointer<ConditionTestIdentity>
        var count = 0

        /// Runs `body` with an empty set that lives on the stack for the call.
        static func with<R>(_ body: (inout RefusedTests) -> R) -> R {
            withUnsafeTemporaryAllocation(of: ConditionTestIdentity.self, capacity: capacity) { buffer in
                var refused = RefusedTests(storage: buffer.baseAddress!)
                return body(&refused)
            }
        }

        func contains(_ identity: ConditionTestIdentity) -> Bool {
            for index in 0..<count where storage[index] == identity { return true }
            return false
        }

        mutating func insert(_ identity: ConditionTestIdentity) {
            guard count < Self.capacity else { return }
            (storage + count).initialize(to: identity)
            count += 1
        }
    }

    /// Whether the current condition satisfies `wanted` (the caller holds the guard). Tests that
    /// already said no in `refused` are not called again.
    func satisfies(_ wanted: Wanted, refused: inout RefusedTests) -> Bool {
        switch wanted {
        case .any:
            return true
        case .value(let condition):
            return condition == value
        case .test(let test):
            guard let identity = test.identity else { return run(test) }
            if refused.contains(identity) { return false }
            let result = run(test)
            if !result { refused.insert(identity) }
            return result
        }
    }

    /// ``satisfies(_:refused:)`` for one waiter alone.
    func satisfies(_ wanted: Wanted) -> Bool {
        switch wanted {
        case .any: return true
        case .value(let condition): return condition == value
        case .test(let test): return run(test)
        }
    }

    /// Calls a test of the current condition (the caller holds the guard) with the calling thread
    /// marked as testing this lock: QueueKit calls made from the test refuse at once, and
    /// ``condition`` answers the value under test. A user call: ThreadSanitizer records it.
    func run(_ test: Test) -> Bool {
        let outer = qkshim_testing_lock()
        qkshim_testing_set(Unmanaged.passUnretained(self).toOpaque())
        let result = ThreadSanitizer.userCode { test.evaluate(value) }
        qkshim_testing_set(outer)
        return result
    }

    /// Whether the calling thread is running a test of this lock's condition.
    var isTestedByCallingThread: Bool {
        qkshim_testing_lock() == UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }
}

/// Whether the calling thread is running a test of a condition lock's condition, and of which.
package enum ConditionTesting {
    /// One thread-local load: every C call checks it.
    @inlinable @inline(__always)
    package static var isRunning: Bool { qkshim_testing_lock() != nil }

    /// The lock under test, as its handle's address; `nil` outside a test.
    @inlinable @inline(__always)
    package static var lockUnderTest: UnsafeRawPointer? { qkshim_testing_lock() }
}
