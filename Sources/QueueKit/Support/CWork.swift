// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// A C work function, as dispatch's `_f` functions take it.
public typealias CFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// A unit of work as C passes it: a function and its context. The DB queue's write lane stores
/// every pending asynchronous write in this one shape: C work as it came (no allocation), Swift
/// closures boxed (``CWork/init(retaining:)``). `Queue`'s `async` hands its work to dispatch as a
/// closure instead.
package struct CWork: @unchecked Sendable {
    let context: UnsafeMutableRawPointer?
    let function: CFunction

    package init(context: UnsafeMutableRawPointer?, function: CFunction) {
        self.context = context
        self.function = function
    }

    /// Work that runs `closure` once; the closure is released after it ran.
    package init(retaining closure: @escaping @Sendable () -> Void) {
        self.context = Unmanaged.passRetained(ClosureBox(closure)).toOpaque()
        self.function = { context in
            Unmanaged<ClosureBox>.fromOpaque(context!).takeRetainedValue().closure()
        }
    }

    @inline(__always) package func callAsFunction() { function(context) }
}

private final class ClosureBox {
    let closure: @Sendable () -> Void
    init(_ closure: @escaping @Sendable () -> Void) { self.closure = closure }
}
