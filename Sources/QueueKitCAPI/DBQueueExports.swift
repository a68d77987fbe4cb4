// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import Glibc
import QueueKit
import QueueKitShim

// Section 2 of the C API: the reentrant DB queue. Argument checks and conversions only; the
// behaviour is `DBQueue`'s.

@_cdecl("qk_dbqueue_create") @implementation
public func qk_dbqueue_create(_ label: UnsafePointer<CChar>?) -> OpaquePointer? {
    Handle.created { () throws(QueueKitError) in try DBQueue(label: label.map { String(cString: $0) }, bytes: label) }
}

@_cdecl("qk_dbqueue_destroy") @implementation
public func qk_dbqueue_destroy(_ db: OpaquePointer?) -> Int32 {
    let result = Handle.status(db, as: DBQueue.self) { db throws(QueueKitError) in
        try db.quiesce(call: "qk_dbqueue_destroy")
    }
    if result == 0, let db { Handle.release(db, as: DBQueue.self) }
    return result
}

@_cdecl("qk_dbqueue_read") @implementation
public func qk_dbqueue_read(_ db: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?) -> Int32
{
    // EINVAL out of line: inline, its constant would be loaded ahead of the nested read's checks.
    guard let work, let db else { return invalidArgument() }
    if DBQueue.readInline(UnsafeRawPointer(db), context, work) { return 0 }
    return readRoute(db, context, work)
}

@inline(never)
private func invalidArgument() -> Int32 { EINVAL }

/// Every `qk_dbqueue_read` but a nested one: out of line, so that the nested one stays a few
/// instructions.
@inline(never)
private func readRoute(_ db: OpaquePointer, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t) -> Int32 {
    access(db, exclusive: false, context, work, call: "qk_dbqueue_read")
}

@_cdecl("qk_dbqueue_write") @implementation
public func qk_dbqueue_write(_ db: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?) -> Int32
{
    guard let work, let db else { return EINVAL }
    return access(db, exclusive: true, context, work, call: "qk_dbqueue_write")
}

/// Whether `handle` is a DB queue: `Handle.isTagged` with the tag a constant (`qkshim_dbqueue_tag`)
/// instead of a call of the class's metadata accessor.
@inline(__always)
private func isDBQueue(_ handle: OpaquePointer) -> Bool {
    UnsafeRawPointer(handle).loadUnaligned(as: UInt.self) == qkshim_dbqueue_tag()
}

/// A read or a write: plain when it may be (``Handle/runsPlain``), the whole call one inlined
/// sequence (`DBQueue.runPlain`); otherwise through `Handle.status`, which answers every other case.
@inline(__always)
private func access(
    _ db: OpaquePointer, exclusive: Bool, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t,
    call: StaticString
) -> Int32 {
    guard isDBQueue(db) else { return EINVAL }
    if _fastPath(Handle.runsPlain) {
        return Unmanaged<DBQueue>.fromOpaque(UnsafeRawPointer(db))._withUnsafeGuaranteedRef {
            $0.runPlain(exclusive: exclusive, context, work, call: call)
        }
    }
    return accessStatus(db, exclusive: exclusive, context, work, call: call)
}

/// Out of line, so that the plain path stays a few instructions.
@inline(never)
private func accessStatus(
    _ db: OpaquePointer, exclusive: Bool, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t,
    call: StaticString
) -> Int32 {
    Handle.status(db, as: DBQueue.self) { db throws(QueueKitError) in
        let access = try exclusive ? db.enterWrite(call: call) : db.enterRead(call: call)
        db.withAccess(access) { work(context) }
    }
}

@_cdecl("qk_dbqueue_write_async") @implementation
public func qk_dbqueue_write_async(_ db: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?)
    -> Int32
{
    guard let work else { return EINVAL }
    // Once the write is pushed, a flushing thread may run it and destroy the queue while this
    // call is still starting a worker: the call keeps the queue alive until it returns.
    return Handle.retainingStatus(db, as: DBQueue.self) { db throws(QueueKitError) in
        try db.writeAsync(CWork(context: context, function: work), call: "qk_dbqueue_write_async")
    }
}

@_cdecl("qk_dbqueue_flush") @implementation
public func qk_dbqueue_flush(_ db: OpaquePointer?) -> Int32 {
    Handle.status(db, as: DBQueue.self) { db throws(QueueKitError) in try db.flush(call: "qk_dbqueue_flush") }
}

@_cdecl("qk_dbqueue_queue") @implementation
public func qk_dbqueue_queue(_ db: OpaquePointer?) -> OpaquePointer? {
    guard let db, Handle.isTagged(db, as: DBQueue.self) else { return Handle.failure(EINVAL) }
    return Handle.borrow(db, as: DBQueue.self, otherwise: nil) { Handle.unretained($0.queue) }
}
