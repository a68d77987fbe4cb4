import QueueKitShim
import Synchronization

extension Mutex {
    /// `withLock`, with the critical section made visible to ThreadSanitizer.
    ///
    /// On Linux a contended `Mutex` is handed over by the kernel (`FUTEX_LOCK_PI`), so the
    /// precompiled Synchronization library shows ThreadSanitizer no release/acquire pair between
    /// two holders, and `swift test --sanitize=thread` reports every contended section as a race.
    /// The shim's annotations (empty unless it is compiled with ThreadSanitizer) state the pair
    /// on the mutex's address (a `Mutex` is never moved: it is not copyable and lives in its
    /// owner). Use this instead of `withLock` throughout QueueKit.
    @inline(__always)
    borrowing func locked<Result>(_ body: (inout sending Value) -> sending Result) -> sending Result {
        let address = withUnsafePointer(to: self) { UnsafeRawPointer($0) }
        return withLock { (value: inout sending Value) -> sending Result in
            qkshim_tsan_acquire(address)
            defer { qkshim_tsan_release(address) }
            return body(&value)
        }
    }
}
