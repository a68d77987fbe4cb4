// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Testing

// Threads, bounded waits and shared state for the tests of both targets: every wait a test makes
// is bounded, so a deadlock fails the test in seconds instead of hanging the run.

/// How long any single wait in a test may take before the test fails: a deadlock fails fast
/// instead of hanging CI.
package let testTimeout: TimeInterval = 10

/// Runs `body` on a new thread and waits for it at most `timeout` seconds. Returns false when it
/// did not finish in time (the thread is left behind, blocked: the test has failed anyway).
@discardableResult
package func finishes(within timeout: TimeInterval = testTimeout, _ body: @escaping @Sendable () -> Void) -> Bool {
    waits(for: spawn(body), within: timeout)
}

/// Waits for `semaphore` at most `timeout` seconds.
package func waits(for semaphore: DispatchSemaphore, within timeout: TimeInterval = testTimeout) -> Bool {
    semaphore.wait(timeout: .now() + timeout) == .success
}

/// Whether this process is a ``ChildRun`` started with `variable` set: a child test runs only
/// then, and is reported as skipped otherwise.
package func isChildRun(_ variable: String) -> Bool { ProcessInfo.processInfo.environment[variable] != nil }

/// One run of this test binary as a child process, running only the test `test` with `variable`
/// set (such child tests are skipped without it, `.enabled(if: isChildRun(variable))`): for calls that must abort. Bounded: a child that
/// does not finish within 30 s is terminated and reported as unfinished.
package struct ChildRun {
    package let finished: Bool
    package let reason: Process.TerminationReason
    package let status: Int32
    /// The child's stderr, line by line.
    package let lines: [Substring]

    package init(test: String, variable: String) throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = ["--testing-library", "swift-testing", "--filter", test]
        var environment = ProcessInfo.processInfo.environment
        environment[variable] = "1"
        // The Swift runtime's crash reporter would answer the abort with a report of its own
        // (and, under ThreadSanitizer, crash inside it): the child needs only QueueKit's line.
        environment["SWIFT_BACKTRACE"] = "enable=no"
        child.environment = environment
        let stderr = Pipe()
        child.standardError = stderr
        child.standardOutput = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        child.terminationHandler = { _ in exited.signal() }
        try child.run()
        // Drain stderr while the child runs, so a chatty child cannot block on a full pipe.
        let output = Shared(Data())
        let drained = DispatchSemaphore(value: 0)
        let reader = stderr.fileHandleForReading
        Thread.detachNewThread {
            output.value = reader.readDataToEndOfFile()
            drained.signal()
        }
        finished = waits(for: exited, within: 30)
        if !finished {
            child.terminate()
            reason = .exit
            status = -1
            lines = []
            return
        }
        _ = waits(for: drained)
        reason = child.terminationReason
        status = child.terminationStatus
        lines = String(decoding: output.value, as: UTF8.self).split(separator: "\n")
    }
}

/// A thread-safe counter and log for observing what ran, in which order.
package final class Recorder: @unchecked Sendable {
    package init() {}
    private let lock = NSLock()
    private var _events: [String] = []

    package func record(_ event: String) { lock.withLock { _events.append(event) } }
    package var events: [String] { lock.withLock { _events } }
}

/// A value shared between test threads under a lock.
package final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Value
    package init(_ value: Value) { _value = value }
    package var value: Value {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
    package func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&_value) } }
}

/// Starts `body` on a new thread; the returned semaphore is signalled once when it finishes.
package func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = 1 << 20
    thread.start()
    return done
}

/// Polls `condition` until it holds, for at most `timeout` seconds: a bounded wait for state that
/// another thread changes without signalling. Returns whether it held in time.
package func eventually(within timeout: TimeInterval = testTimeout, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while !condition() {
        if Date() > deadline { return false }
        sched_yield()
    }
    return true
}

/// A meeting point for a fixed number of threads: `arrive` returns true once all of them have
/// arrived, or false after `timeout` seconds. It proves that the threads were inside at once.
package final class Rendezvous: @unchecked Sendable {
    private let condition = NSCondition()
    private let parties: Int
    private var arrived = 0

    package init(parties: Int) { self.parties = parties }

    package func arrive(within timeout: TimeInterval = testTimeout) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        if arrived >= parties {
            condition.broadcast()
            return true
        }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while arrived < parties {
            if !condition.wait(until: deadline) { return arrived >= parties }
        }
        return true
    }
}

/// A value that only the primitive under test protects (no lock of its own): ThreadSanitizer
/// checks that the primitive orders every access.
package final class Unprotected<Value>: @unchecked Sendable {
    package var value: Value
    package init(_ value: Value) { self.value = value }
}

private final class Body: @unchecked Sendable {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// A pthread running `body`, to be joined: after `join()` it has exited and its exit hook has run.
package struct JoinableThread {
    private let thread: pthread_t

    package init(_ body: @escaping @Sendable () -> Void) {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed")
        self.thread = thread
    }

    package func join() { pthread_join(thread, nil) }
}

/// Runs `body` on a new thread that exits right after it; returns when it has exited.
package func onAThreadThatExits(_ body: @escaping @Sendable () -> Void) {
    JoinableThread(body).join()
}
