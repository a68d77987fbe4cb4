// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import Testing

// Calling the C API from Swift tests as a C program calls it: work goes in as (context, function)
// pairs built here from Swift closures; statuses come back as errno values.

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
package func callC(_ body: () -> Void, _ call: (UnsafeMutableRawPointer?, qk_function_t) -> Int32) -> Int32 {
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
package func callCAsync(
    _ body: @escaping @Sendable () -> Void, _ call: (UnsafeMutableRawPointer?, qk_function_t) -> Int32
)
    -> Int32
{
    let context = Unmanaged.passRetained(WorkBox(body)).toOpaque()
    let status = call(context, runBoxOnce)
    if status != 0 { Unmanaged<WorkBox>.fromOpaque(context).release() }
    return status
}

/// Expects a C status; unlike `#expect(call == 0)` it can wrap calls whose closures use `#expect`.
package func expectStatus(
    _ expected: Int32, _ status: Int32, _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(status == expected, comment, sourceLocation: sourceLocation)
}

/// Carries a value (a C handle) into `@Sendable` test closures; the test keeps it valid.
package struct Unchecked<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// A deadline `seconds` from now on the library's clock.
package func deadline(in seconds: Double) -> UInt64 { qk_now_ns() + UInt64(seconds * 1e9) }

/// A deadline for calls made on the test's own thread that would block forever on a bug.
package var bounded: UInt64 { deadline(in: testTimeout) }

/// A status as its errno name, so a failed expectation reads well.
package func statusName(_ status: Int32) -> String {
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
package func cString(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Work that does nothing.
package let noWork: qk_function_t = { _ in }
