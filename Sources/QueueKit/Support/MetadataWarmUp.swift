// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch

/// Instantiates, once, the Swift runtime's metadata of every concrete generic type QueueKit's code
/// uses, before any of that code runs on two threads at once: when ThreadSanitizer watches an
/// uninstrumented QueueKit, `qkshim_tsan_internal_begin` runs this in the first C API call that
/// enters QueueKit's own code (a call that creates or uses an object), and holds the other
/// callers until it returns.
///
/// Why: the runtime instantiates a generic type's metadata on first use, and when a second thread
/// asks for the same type meanwhile, it waits on the first thread's wait queue, which the first
/// thread then replaces: it locks the new queue's mutex under the type's cache lock, and later
/// takes the cache lock while holding that mutex. Both orders on one thread: ThreadSanitizer's
/// lock-order detector reports a lock-order inversion among `swift::AtomicWaitQueue` mutexes
/// (a false one: nobody else can hold the new mutex yet). Its lock-order graph is built from every
/// intercepted `pthread_mutex_lock`, ignore annotations or not, so hiding QueueKit's internals does
/// not help; once every type is instantiated, later uses only look the metadata up.
///
/// The list: every concrete generic type named by QueueKit's compiled code (its "demangling cache
/// variables": `nm` on the objects of the QueueKit and QueueKitCAPI modules, symbols ending in
/// `MD`, through `swift demangle`), plus the ones the standard library instantiates on QueueKit's
/// paths (a freed string storage's breadcrumbs, `joined(separator:)`). Each line makes the
/// runtime instantiate one type the way QueueKit's code does (the storage class of an array,
/// dictionary or set, or a value type's metadata). A type added to QueueKit's code belongs here.
enum MetadataWarmUp {
    /// Instantiates the types. Unoptimised, so that every allocation and metadata access below
    /// happens as written (nothing uses their results).
    @_optimize(none)
    static func run() {
        // Condition locks (the C API's are ConditionLock<Int>) and their registries.
        metadata(ConditionLock<Int>.self)
        metadata(ConditionLock<Int>.Waiter.self)
        metadata(ConditionLock<Int>.Wanted.self)
        metadata(CString?.self)
        LiveConditionLocks.warmUpMetadata()
        // Thread records, made on a thread's first wait and dropped at its exit.
        dictionaryStorage(UInt64.self, ThreadRecord.self)
        arrayStorage(UInt64.self)
        metadata((name: String, read: UInt64)?.self)
        // DB queues.
        arrayStorage(UnsafeMutablePointer<DBQueue.Waiter>.self)
        arrayStorage(Parker.self)
        metadata([Parker].self)
        arrayStorage(UnsafeContinuation<Bool, any Error>.self)
        metadata([UnsafeContinuation<Bool, any Error>].self)
        dictionaryStorage(ObjectIdentifier.self, SuspendedWaiter.self)
        // Queues.
        arrayStorage(Queue.QoS.self)
        arrayStorage(Unmanaged<Queue>.self)
        metadata([Unmanaged<Queue>].self)
        metadata([Queue.QoS].self)
        Specifics.warmUpMetadata()
        dictionaryStorage(ObjectIdentifier.self, Unmanaged<Specifics>.self)
        DispatchQueue.warmUpMetadata()
        // The deadlock detector, wait and stall reports.
        arrayStorage(ObjectIdentifier.self)
        setStorage(ObjectIdentifier.self)
        arrayStorage(AnyObject.self)
        arrayStorage(UnsafePointer<ExecutionFrame>.self)
        arrayStorage((queue: ObjectIdentifier, exclusive: Bool).self)
        dictionaryStorage(UInt64.self, String.self)
        arrayStorage(String.self)
        metadata([String].self)
        StallWatch.warmUpMetadata()
        // The lock-order witness.
        arrayStorage((address: UInt, mode: LockOrderMode).self)
        arrayStorage(Diagnostics.LockOrderMode.self)
        metadata([Diagnostics.LockOrderMode].self)
        LockOrderGraph.warmUpMetadata()
        // Strings and other standard library types on these paths.
        strings()
        arrayStorage(Int.self)
        arrayStorage(UInt8.self)
        arrayStorage(Range<Int>.self)
        metadata(Void?.self)
        metadata((any Sendable)?.self)
        metadata(UnsafeMutablePointer<CChar>?.self)
    }

    /// `Element`'s array storage class (`_ContiguousArrayStorage<Element>`).
    @_optimize(none)
    static func arrayStorage<Element>(_: Element.Type) {
        var array = ContiguousArray<Element>()
        array.reserveCapacity(1)
    }

    /// The dictionary storage class for `Key` and `Value` (`_DictionaryStorage<Key, Value>`).
    @_optimize(none)
    static func dictionaryStorage<Key: Hashable, Value>(_: Key.Type, _: Value.Type) {
        _ = [Key: Value](minimumCapacity: 1)
    }

    /// `Element`'s set storage class (`_SetStorage<Element>`).
    @_optimize(none)
    static func setStorage<Element: Hashable>(_: Element.Type) {
        _ = Set<Element>(minimumCapacity: 1)
    }

    /// The metadata of `type` itself (a value type's, whose copies and destruction need it).
    @_optimize(none)
    static func metadata(_ type: Any.Type) {
        _ = type
    }

    /// Native strings grown by appending, their old storage freed (its deinit instantiates
    /// `_StringBreadcrumbs?`), and strings joined (as the reports build theirs).
    @_optimize(none)
    static func strings() {
        var text = ""
        for _ in 0..<64 { text.append("QueueKit warms up its metadata. ") }
        _ = [text, text].joined(separator: ", ")
    }
}

/// What the C shim calls (once, through `pthread_once`; `qkshim_tsan_internal_begin`).
@_cdecl("qkshim_warm_up_metadata")
func warmUpMetadataFromShim() {
    MetadataWarmUp.run()
}
