// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import Glibc
import QueueKit
import QueueKitShim

// Section 1 of the C API: the queue-identity registry. Argument checks and conversions only;
// the behaviour is `Queue`'s.

@inline(__always)
private func queueStatus(_ queue: OpaquePointer?, _ body: (Queue) throws(QueueKitError) -> Void) -> Int32 {
    Handle.status(queue, as: Queue.self, body)
}

@_cdecl("qk_queue_create") @implementation
public func qk_queue_create(_ label: UnsafePointer<CChar>?, _ kind: qk_queue_kind_t) -> OpaquePointer? {
    qk_queue_create_with_target(label, kind, nil)
}

@_cdecl("qk_queue_create_with_target") @implementation
public func qk_queue_create_with_target(
    _ label: UnsafePointer<CChar>?, _ kind: qk_queue_kind_t, _ target: OpaquePointer?
) -> OpaquePointer? {
    guard let kind = Queue.Kind(rawValue: Int32(bitPattern: kind.rawValue)) else { return Handle.failure(EINVAL) }
    var targetQueue: Queue?
    if let target {
        guard Handle.isTagged(target, as: Queue.self) else { return Handle.failure(EINVAL) }
        targetQueue = Unmanaged<Queue>.fromOpaque(UnsafeRawPointer(target)).takeUnretainedValue()
    }
    return Handle.created { () throws(QueueKitError) in
        try Queue(label: label.map { String(cString: $0) }, bytes: label, kind: kind, target: targetQueue)
    }
}

@_cdecl("qk_queue_main") @implementation
public func qk_queue_main() -> OpaquePointer? {
    Handle.withoutHandle {
        Handle.unretained(Queue.main)
    }
}

@_cdecl("qk_queue_global") @implementation
public func qk_queue_global(_ qos: qk_qos_t) -> OpaquePointer? {
    Handle.withoutHandle {
        guard let qos = Queue.QoS(rawValue: Int32(bitPattern: qos.rawValue)) else { return Handle.failure(EINVAL) }
        return Handle.unretained(Queue.global(qos: qos))
    }
}

@_cdecl("qk_queue_retain") @implementation
public func qk_queue_retain(_ queue: OpaquePointer?) -> OpaquePointer? {
    Handle.borrow(queue, as: Queue.self, otherwise: ()) { queue in
        if !queue.isImmortal { _ = Unmanaged.passUnretained(queue).retain() }
    }
    return queue
}

@_cdecl("qk_queue_release") @implementation
public func qk_queue_release(_ queue: OpaquePointer?) {
    guard let queue, Handle.isTagged(queue, as: Queue.self) else { return }
    // Inside a block that holds the queue on the idle path (or a queue it targets), the release
    // waits for the block's end: the queue outlives the block's bookkeeping.
    let kept = Handle.borrow(queue, as: Queue.self, otherwise: true) { $0.isImmortal || $0.deferRelease() }
    if !kept { Handle.release(queue, as: Queue.self) }
}

@_cdecl("qk_queue_label") @implementation
public func qk_queue_label(_ queue: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.borrow(queue, as: Queue.self, otherwise: CString.empty) { $0.cLabel.pointer }
}

@_cdecl("qk_queue_async") @implementation
public func qk_queue_async(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?)
    -> Int32
{
    guard let work else { return EINVAL }
    return queueStatus(queue) { queue throws(QueueKitError) in
        try queue.submit(barrier: false, call: "qk_queue_async", context, work)
    }
}

@_cdecl("qk_queue_barrier_async") @implementation
public func qk_queue_barrier_async(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?)
    -> Int32
{
    guard let work else { return EINVAL }
    return queueStatus(queue) { queue throws(QueueKitError) in
        try queue.submit(barrier: true, call: "qk_queue_barrier_async", context, work)
    }
}

@_cdecl("qk_queue_sync") @implementation
public func qk_queue_sync(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?) -> Int32
{
    guard let work else { return EINVAL }
    if idle(queue, barrier: false, context, work) { return 0 }
    return queueStatus(queue) { queue throws(QueueKitError) in
        try queue.sync(barrier: false, perform: false, call: "qk_queue_sync", context, work)
    }
}

@_cdecl("qk_queue_barrier_sync") @implementation
public func qk_queue_barrier_sync(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?)
    -> Int32
{
    guard let work else { return EINVAL }
    if idle(queue, barrier: true, context, work) { return 0 }
    return queueStatus(queue) { queue throws(QueueKitError) in
        try queue.sync(barrier: true, perform: false, call: "qk_queue_barrier_sync", context, work)
    }
}

@_cdecl("qk_queue_perform") @implementation
public func qk_queue_perform(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t?)
    -> Int32
{
    guard let work else { return EINVAL }
    if let queue, Queue.performInline(UnsafeRawPointer(queue), context, work) { return 0 }
    return performRoute(queue, context, work)
}

/// The common synchronous call, before the status machinery: a queue handle, no condition test
/// running, no sanitizer to hide the library from, and the queue idle (``Queue/syncIdle``).
@inline(__always)
private func idle(_ queue: OpaquePointer?, barrier: Bool, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t)
    -> Bool
{
    guard let queue, Handle.isTagged(queue, as: Queue.self), qkshim_testing_lock() == nil, qkshim_tsan_mode == 0
    else { return false }
    return Unmanaged<Queue>.fromOpaque(UnsafeRawPointer(queue))._withUnsafeGuaranteedRef {
        $0.syncIdle(barrier: barrier, context, work)
    }
}

/// Every `qk_queue_perform` but the common inline one (the idle path, then the route): out of
/// line, so that the common one stays a few instructions.
@inline(never)
private func performRoute(_ queue: OpaquePointer?, _ context: UnsafeMutableRawPointer?, _ work: qk_function_t) -> Int32
{
    if idle(queue, barrier: false, context, work) { return 0 }
    return queueStatus(queue) { queue throws(QueueKitError) in
        try queue.sync(barrier: false, perform: true, call: "qk_queue_perform", context, work)
    }
}

@_cdecl("qk_queue_current") @implementation
public func qk_queue_current() -> OpaquePointer? {
    // Inside a block: the frame's queue, a thread-local read. Outside: the main thread's frame,
    // which may make the main queue (a lazily made global) first.
    if let queue = ExecutionContext.currentBlockQueue { return Handle.unretained(queue) }
    return currentOutsideBlocks()
}

/// `qk_queue_current` outside any block, out of line so that the call inside a block stays a
/// thread-local read and a return.
@inline(never)
private func currentOutsideBlocks() -> OpaquePointer? {
    Handle.withoutHandle { ExecutionContext.currentQueue.map { Handle.unretained($0) } }
}

@_cdecl("qk_queue_is_current") @implementation
public func qk_queue_is_current(_ queue: OpaquePointer?) -> Bool {
    Handle.borrow(queue, as: Queue.self, otherwise: false) { $0.isCurrent }
}

@_cdecl("qk_queue_copy_current_label") @implementation
public func qk_queue_copy_current_label(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int) -> Int {
    Handle.withoutHandle {
        let label = ExecutionContext.currentQueue.map { $0.cLabel.pointer } ?? CString.empty
        // A NULL buffer only measures, whatever `size` says: misuse must not crash. `size` is a
        // size_t: read it unsigned (SIZE_MAX arrives as -1).
        guard let buffer, UInt(bitPattern: size) != 0 else { return strlen(label) }
        return qkshim_strlcpy(buffer, label, size)
    }
}

@_cdecl("qk_queue_check") @implementation
public func qk_queue_check(_ queue: OpaquePointer?, _ predicate: qk_predicate_t) -> Int32 {
    guard let predicate = Queue.Predicate(rawValue: Int32(bitPattern: predicate.rawValue)) else { return EINVAL }
    return queueStatus(queue) { queue throws(QueueKitError) in
        guard queue.check(predicate) else { throw .notPermitted }
    }
}

@_cdecl("qk_queue_precondition") @implementation
public func qk_queue_precondition(_ queue: OpaquePointer?, _ predicate: qk_predicate_t) {
    guard let predicate = Queue.Predicate(rawValue: Int32(bitPattern: predicate.rawValue)) else {
        Queue.preconditionFailure(expected: "given a valid qk_predicate_t (got \(predicate.rawValue))")
    }
    guard let queue, Handle.isTagged(queue, as: Queue.self) else {
        Queue.preconditionFailure(expected: "given a valid qk_queue_t (got \(queue.map { "\($0)" } ?? "NULL"))")
    }
    Handle.borrow(queue, as: Queue.self, otherwise: ()) { $0.precondition(predicate) }
}

@_cdecl("qk_queue_set_specific") @implementation
public func qk_queue_set_specific(
    _ queue: OpaquePointer?, _ key: UnsafeRawPointer?, _ value: UnsafeMutableRawPointer?, _ destructor: qk_function_t?
) -> Int32 {
    guard let key else { return EINVAL }
    return queueStatus(queue) { $0.setSpecific(key: key, value: value, destructor: destructor) }
}

@_cdecl("qk_queue_get_specific") @implementation
public func qk_queue_get_specific(_ queue: OpaquePointer?, _ key: UnsafeRawPointer?) -> UnsafeMutableRawPointer? {
    guard let key else { return nil }
    return Handle.borrow(queue, as: Queue.self, otherwise: nil) { $0.getSpecific(key: key) }
}

@_cdecl("qk_get_specific") @implementation
public func qk_get_specific(_ key: UnsafeRawPointer?) -> UnsafeMutableRawPointer? {
    Handle.withoutHandle {
        guard let key else { return nil }
        return Queue.getSpecific(key: key)
    }
}

@_cdecl("qk_main") @implementation
public func qk_main() -> Never {
    Queue.runMain(call: "qk_main()")
}
