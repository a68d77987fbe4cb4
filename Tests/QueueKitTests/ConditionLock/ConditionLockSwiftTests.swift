// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Testing

// MARK: - The Swift API

enum Stage: Hashable, Sendable {
    case idle
    case loaded(Int)
    case done
}

@Suite("Condition lock: the Swift API")
struct ConditionLockSwiftTests {
    /// A condition of every plain shape round-trips through the hand-off line's bits (where a
    /// plain value of at most 8 bytes lives), and a wait for one value is let in by exactly that
    /// value; a larger or non-plain condition lives in the object and behaves the same.
    @Test func everyKindOfConditionRoundTripsWhereverItLives() throws {
        func check<C: Equatable & Sendable>(_ values: [C], inTheLine: Bool) throws {
            let lock = ConditionLock(condition: values[0])
            #expect(ConditionLock<C>.conditionIsInTheLine == inTheLine, "\(C.self)")
            #expect(lock.handOffLineAddress % 64 == 0, "the hand-off line starts a cache line")
            for (index, value) in values.enumerated() {
                try lock.set(value)
                #expect(lock.condition == value, "\(C.self) \(value)")
                let other = values[(index + 1) % values.count]
                #expect(throws: QueueKitError.busy) { try lock.tryLock(whenCondition: other) }
                try lock.tryLock(whenCondition: value)
                try lock.unlock(withCondition: other)
                #expect(lock.condition == other)
            }
        }
        enum Phase: Equatable, Sendable { case idle, busy, done }
        try check([Int.min, -1, 0, Int.max], inTheLine: true)
        try check([Int8.min, -1, 0, 1, Int8.max], inTheLine: true)
        try check([UInt16.max, 0, 0x8000], inTheLine: true)
        try check([Int32.min, -7, Int32.max], inTheLine: true)
        try check([false, true], inTheLine: true)
        try check([Double.infinity, -1.5, 0.25, -Double.greatestFiniteMagnitude], inTheLine: true)
        try check([Phase.idle, .busy, .done], inTheLine: true)
        try check(["", "a", String(repeating: "long ", count: 20)], inTheLine: false)
        try check([Stage.idle, .loaded(-1), .loaded(Int.max), .done], inTheLine: false)
    }

    @Test func enumConditionsAndTheClosureForm() throws {
        let lock = ConditionLock(condition: Stage.idle, name: "stages")
        #expect(lock.name == "stages")
        let worker = spawn {
            #expect(throws: Never.self) {
                try lock.withLock(whenCondition: .loaded(2), before: MonotonicClock.deadline(after: .seconds(10))) {
                    .done
                }
            }
        }
        #expect(eventually { lock.queuedWaiters == 1 })
        try lock.withLock(whenCondition: .idle) { .loaded(1) }
        #expect(lock.condition == .loaded(1))
        #expect(lock.queuedWaiters == 1, "loaded(1) does not wake the waiter for loaded(2)")
        try lock.set(.loaded(2))
        #expect(waits(for: worker))
        #expect(lock.condition == .done)
        #expect(lock.stats.futileWakeups == 0)
    }

    @Test func aThrowingBodyReleasesWithTheConditionUnchanged() throws {
        struct Failure: Error {}
        let lock = ConditionLock(condition: Stage.idle)
        #expect(throws: Failure.self) {
            try lock.withLock(whenCondition: .idle) { throw Failure() }
        }
        #expect(lock.condition == .idle)
        #expect(!lock.isLocked)
        #expect(try lock.withLock { 41 + 1 } == 42)
    }

    @Test func misuseThrowsQueueKitErrors() throws {
        let lock = ConditionLock(condition: Stage.idle)
        #expect(throws: QueueKitError.notPermitted) { try lock.unlock() }
        try lock.lock()
        #expect(throws: QueueKitError.wouldDeadlock) { try lock.lock(whenCondition: .idle) }
        #expect(throws: QueueKitError.busy) { try lock.tryLock() }
        #expect(throws: QueueKitError.wouldDeadlock) { try lock.set(.done) }
        try lock.unlock(withCondition: .done)
        #expect(throws: QueueKitError.busy) { try lock.tryLock(whenCondition: .idle) }
        try lock.tryLock(whenCondition: .done)
        try lock.unlock()
    }

    @Test func deadlinesOnEveryClock() throws {
        let lock = ConditionLock(condition: Stage.idle)
        #expect(throws: QueueKitError.timedOut) {
            try lock.lock(whenCondition: .done, before: ContinuousClock.now.advanced(by: .milliseconds(20)))
        }
        let start = DispatchTime.now()
        #expect(throws: QueueKitError.timedOut) {
            try lock.lock(whenCondition: .done, before: DispatchTime.now() + .milliseconds(30))
        }
        let waited = DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds
        #expect(waited >= 30_000_000 && waited < 5_000_000_000)
        #expect(throws: QueueKitError.timedOut) { try lock.lock(whenCondition: .done, before: 0) }
        try lock.lock(before: DispatchTime.distantFuture)
        try lock.unlock()
        try lock.lock(before: ContinuousClock.now)
        try lock.unlock()
        #expect(lock.stats.timeouts == 3)
        #expect(lock.stats.acquisitions == 2)
    }

    /// The Swift snippet of docs/design.md's "Condition lock" section, kept compiling and running here.
    @Test func theDocumentationSnippetWorks() throws {
        let startup = ConditionLock(condition: Boot.idle, name: "startup")
        let network = Shared(false)

        try startup.set(.configLoaded)
        try startup.withLock(whenCondition: .configLoaded) {
            network.value = true // bringUpNetwork()
            return .networkUp
        }
        let timedOut = startupTimesOut(startup)
        #expect(network.value && timedOut)
        #expect(startup.condition == .networkUp)
        #expect(startup.stats.futileWakeups == 0)
    }

    func startupTimesOut(_ startup: ConditionLock<Boot>) -> Bool {
        do {
            try startup.lock(whenCondition: .ready, before: ContinuousClock.now.advanced(by: .milliseconds(20)))
            try? startup.unlock()
            return false
        } catch {
            return error == .timedOut
        }
    }
}

enum Boot: Hashable, Sendable { case idle, configLoaded, networkUp, ready }
