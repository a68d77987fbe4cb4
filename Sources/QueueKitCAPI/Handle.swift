// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKit
import QueueKitShim

/// The C handles: each `qk_*_t *` is the address of the Swift object itself.
///
/// The object's first word is its class's metadata, which serves as the handle's type tag: a
/// handle of another QueueKit type (or of a destroyed object whose memory was reused by another
/// type) is refused with `EINVAL` before anything is dereferenced further. Calls borrow the object
/// without touching its reference count, so the hot paths stay free of atomic traffic; the few
/// whose effect another thread can complete before they return retain it (`retainingStatus`).
enum Handle {
    /// Runs `body`, a call that takes no handle (a process-wide setting, a system queue, the
    /// calling thread's queue or report), as every call on a handle runs: QueueKit's own code in
    /// it hidden from ThreadSanitizer when the library is not instrumented (its lazily made
    /// globals, first touched on any thread, would otherwise show as races in a user's program).
    @inline(__always)
    static func withoutHandle<R>(_ body: () -> R) -> R {
        let hidden = ThreadSanitizer.enterInternalCode()
        defer { ThreadSanitizer.leaveInternalCode(hidden) }
        return body()
    }

    /// The object behind `handle` when it is of type `T`.
    @inline(__always)
    static func borrow<T: AnyObject, R>(_ handle: OpaquePointer?, as type: T.Type, otherwise: R, _ body: (T) -> R) -> R
    {
        borrow(handle, as: type, tagged: { isTagged($0, as: type) }, otherwise: otherwise, body)
    }

    /// As `borrow`, with the type check `tagged` (a faster one than the metadata lookup).
    @inline(__always)
    static func borrow<T: AnyObject, R>(
        _ handle: OpaquePointer?, as type: T.Type, tagged: (OpaquePointer) -> Bool, otherwise: R, _ body: (T) -> R
    ) -> R {
        guard let handle, tagged(handle) else { return otherwise }
        let object = Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle))
        // Apart, so that `body` is inlined once, on the path without the sanitizer.
        if _slowPath(ThreadSanitizer.hidesInternals) { return borrowHidingInternals(object, body) }
        return object._withUnsafeGuaranteedRef(body)
    }

    /// `body` on `object` with QueueKit's own memory accesses hidden from ThreadSanitizer.
    @inline(never)
    static func borrowHidingInternals<T: AnyObject, R>(_ object: Unmanaged<T>, _ body: (T) -> R) -> R {
        let hidden = ThreadSanitizer.enterInternalCode()
        defer { ThreadSanitizer.leaveInternalCode(hidden) }
        return object._withUnsafeGuaranteedRef(body)
    }

    /// As `borrow`, for calls that return a status: `EINVAL` for a wrong handle, 0 when `body`
    /// returns, the ``QueueKitError``'s code when it throws. The one place where an error becomes
    /// a C status.
    @inline(__always)
    static func status<T: AnyObject>(
        _ handle: OpaquePointer?, as type: T.Type, _ body: (T) throws(QueueKitError) -> Void
    ) -> Int32 {
        status(handle, as: type, tagged: { isTagged($0, as: type) }, body)
    }

    /// As `status`, with the type check `tagged`.
    @inline(__always)
    static func status<T: AnyObject>(
        _ handle: OpaquePointer?, as type: T.Type, tagged: (OpaquePointer) -> Bool,
        _ body: (T) throws(QueueKitError) -> Void
    ) -> Int32 {
        // A call from inside a test of a condition lock's condition, which runs under that
        // lock's guard: it must neither wait nor change anything.
        if _slowPath(qkshim_testing_lock() != nil) { return EDEADLK }
        return borrow(handle, as: type, tagged: tagged, otherwise: EINVAL) { object in
            do throws(QueueKitError) {
                try body(object)
                return 0
            } catch {
                return error.rawValue
            }
        }
    }

    /// As `status`, holding a reference of the call's own until `body` returns: for calls whose
    /// effect other threads can complete while the call is still returning (an asynchronous write
    /// that a flushing thread runs at once), so that a destroy those threads go on to make frees
    /// the object only after this call has left it.
    @inline(__always)
    static func retainingStatus<T: AnyObject>(
        _ handle: OpaquePointer?, as type: T.Type, _ body: (T) throws(QueueKitError) -> Void
    ) -> Int32 {
        status(handle, as: type) { object throws(QueueKitError) in
            let kept = Unmanaged.passRetained(object)
            defer { kept.release() }
            try body(object)
        }
    }

    /// Whether a call may run plain (``SlowPaths``): no process-wide slow path is on, and no test
    /// of a condition runs on the calling thread (a call from one must refuse, as `status` does).
    @inline(__always)
    static var runsPlain: Bool { SlowPaths.areOff && qkshim_testing_lock() == nil }

    @inline(__always)
    static func isTagged<T: AnyObject>(_ handle: OpaquePointer, as type: T.Type) -> Bool {
        UnsafeRawPointer(handle).loadUnaligned(as: UInt.self)
            == UInt(bitPattern: unsafeBitCast(type, to: UnsafeRawPointer.self))
    }

    /// A handle that owns one reference to the object `make` creates (a constructor's result), or
    /// `NULL` with `errno` set to the error it throws.
    @inline(__always)
    static func created<T: AnyObject>(_ make: () throws(QueueKitError) -> T) -> OpaquePointer? {
        if _slowPath(qkshim_testing_lock() != nil) { return failure(EDEADLK) }
        let hidden = ThreadSanitizer.enterInternalCode()
        defer { ThreadSanitizer.leaveInternalCode(hidden) }
        do throws(QueueKitError) {
            return retained(try make())
        } catch {
            return failure(error.rawValue)
        }
    }

    /// A handle that owns one reference to `object`.
    static func retained<T: AnyObject>(_ object: T) -> OpaquePointer {
        OpaquePointer(Unmanaged.passRetained(object).toOpaque())
    }

    /// A borrowed handle to `object`.
    static func unretained<T: AnyObject>(_ object: T) -> OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(object).toOpaque())
    }

    /// Gives up the reference a `retained` handle owns.
    static func release<T: AnyObject>(_ handle: OpaquePointer, as type: T.Type) {
        let hidden = ThreadSanitizer.enterInternalCode()
        defer { ThreadSanitizer.leaveInternalCode(hidden) }
        Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).release()
    }

    /// A constructor's failure: `NULL` with `errno` set.
    static func failure(_ code: Int32) -> OpaquePointer? {
        errno = code
        return nil
    }
}
