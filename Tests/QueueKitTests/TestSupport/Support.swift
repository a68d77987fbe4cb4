// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Testing

// Helpers shared by every test file. The tests call QueueKit through the C header, as C programs
// do: work goes in as (context, function) pairs built here from Swift closures.

/// How long any single wait in a test may take before the test fails: a deadlock fails fast
/// instead of hanging CI.
let testTimeout: TimeInterval = 10

/// The C trampoline for `CWorkBox`.
private let runBox: qk_function_t = { context in
    Unmanaged<WorkBox>.fromOpaque(context!).takeUnretainedValue().body()
}

/// The C trampoline for a box whose reference the call consumes (async work).
private let runBoxOnce: qk_function_t = { context in
    Unmanaged<WorkBox>.fromOpaque(context!).takeRetainedValue().body()
}

private final class WorkBox: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// Calls a C function of the (context, work) shape with `body` as the work, synchronously:
/// `body` must not be called after `call` returns.
@discardableResult
func callC(_ body: () -> Void, _ call: (UnsafeMutableRawPointer?, qk_function_t) -> Int32) -> Int32 {
    withoutActuallyEscaping(body) { body in
        let box = WorkBox(body)
        return withExtendedLifetime(box) {
            call(Unmanaged.passUnretained(box).toOpaque(), runBox)
        }
    }
}

/// Calls an asynchronous C function of the (context, work) shape with `body` as the work: the
/// work runs exactly once, later. When the call fails (returns non-zero), `body` is released.
@discardableResult
func callCAsync(_ body: @escaping @Sendable () -> Void, _ call: (UnsafeMutableRawPointer?, qk_function_t) -> Int32)
    -> Int32
{
    let context = Unmanaged.passRetained(WorkBox(body)).toOpaque()
    let status = call(context, runBoxOnce)
    if status != 0 { Unmanaged<WorkBox>.fromOpaque(context).release() }
    return status
}

/// Runs `body` on a new thread and waits for it at most `timeout` seconds. Returns false when it
/// did not finish in time (the thread is left behind, blocked: the test has failed anyway).
@discardableResult
func finishes(within timeout: TimeInterval = testTimeout, _ body: @escaping @Sendable () -> Void) -> Bool {
    waits(for: spawn(body), within: timeout)
}

/// Waits for `semaphore` at most `timeout` seconds.
func waits(for semaphore: DispatchSemaphore, within timeout: TimeInterval = testTimeout) -> Bool {
    semaphore.wait(timeout: .now() + timeout) == .success
}

/// Whether this process is a ``ChildRun`` started with `variable` set: a child test runs only
/// then, and is reported as skipped otherwise.
func isChildRun(_ variable: String) -> Bool { ProcessInfo.processInfo.environment[variable] != nil }

/// One run of this test binary as a child process, running only the test `test` with `variable`
/// set (such child tests are skipped without it, `.enabled(if: isChildRun(variable))`): for calls that must abort. Bounded: a child that
/// does not finish within 30 s is terminated and reported as unfinished.
struct ChildRun {
    let finished: Bool
    let reason: Process.TerminationReason
    let status: Int32
    /// The child's stderr, line by line.
    let lines: [Substring]

    init(test: String, variable: String) throws {
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
final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [String] = []

    func record(_ event: String) { lock.withLock { _events.append(event) } }
    var events: [String] { lock.withLock { _events } }
}

/// A value shared between test threads under a lock.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Value
    init(_ value: Value) { _value = value }
    var value: Value {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
    func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&_value) } }
}

/// Starts `body` on a new thread; the returned semaphore is signalled once when it finishes.
func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
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
func eventually(within timeout: TimeInterval = testTimeout, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while !condition() {
        if Date() > deadline { return false }
        sched_yield()
    }
    return true
}

/// A meeting point for a fixed number of threads: `arrive` returns true once all of them have
/// arrived, or false after `timeout` seconds. It proves that the threads were inside at once.
final class Rendezvous: @unchecked Sendable {
    private let condition = NSCondition()
    private let parties: Int
    private var arrived = 0

    init(parties: Int) { self.parties = parties }

    func arrive(within timeout: TimeInterval = testTimeout) -> Bool {
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

/// Expects a C status; unlike `#expect(call == 0)` it can wrap calls whose closures use `#expect`.
func expectStatus(
    _ expected: Int32, _ status: Int32, _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(status == expected, comment, sourceLocation: sourceLocation)
}

/// Carries a value (a C handle) into `@Sendable` test closures; the test keeps it valid.
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A deadline `seconds` from now on the library's clock.
func deadline(in seconds: Double) -> UInt64 { qk_now_ns() + UInt64(seconds * 1e9) }

/// A deadline for calls made on the test's own thread that would block forever on a bug.
var bounded: UInt64 { deadline(in: testTimeout) }
