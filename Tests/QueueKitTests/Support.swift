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
func callCAsync(_ body: @escaping @Sendable () -> Void, _ call: (UnsafeMutableRawPointer?, qk_function_t) -> Int32) -> Int32 {
    let context = Unmanaged.passRetained(WorkBox(body)).toOpaque()
    let status = call(context, runBoxOnce)
    if status != 0 { Unmanaged<WorkBox>.fromOpaque(context).release() }
    return status
}

/// Runs `body` on a new thread and waits for it at most `timeout` seconds. Returns false when it
/// did not finish in time (the thread is left behind, blocked: the test has failed anyway).
@discardableResult
func finishes(within timeout: TimeInterval = testTimeout, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = 1 << 20
    thread.start()
    return done.wait(timeout: .now() + timeout) == .success
}

/// Waits for `semaphore` at most `timeout` seconds.
func waits(for semaphore: DispatchSemaphore, within timeout: TimeInterval = testTimeout) -> Bool {
    semaphore.wait(timeout: .now() + timeout) == .success
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
