/// A C work function, as dispatch's `_f` functions take it.
public typealias CFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// A unit of work as C passes it: a function and its context. Swift closures that must be
/// stored are boxed into this shape too (``CWork/init(retaining:)``), so the queues keep one
/// representation of pending work and C callers pay for no closure allocation.
struct CWork: @unchecked Sendable {
    let context: UnsafeMutableRawPointer?
    let function: CFunction

    init(context: UnsafeMutableRawPointer?, function: CFunction) {
        self.context = context
        self.function = function
    }

    /// Work that runs `closure` once; the closure is released after it ran.
    init(retaining closure: @escaping @Sendable () -> Void) {
        self.context = Unmanaged.passRetained(ClosureBox(closure)).toOpaque()
        self.function = { context in
            Unmanaged<ClosureBox>.fromOpaque(context!).takeRetainedValue().closure()
        }
    }

    @inline(__always) func callAsFunction() { function(context) }
}

private final class ClosureBox {
    let closure: @Sendable () -> Void
    init(_ closure: @escaping @Sendable () -> Void) { self.closure = closure }
}
