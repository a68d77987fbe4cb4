// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Synchronization

/// A C destructor for a queue-specific value.
public typealias SpecificDestructor = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// The key/value context of one queue, as `dispatch_queue_set_specific` keeps it.
///
/// fork(): a queue's specifics lock is taken by the fork's prepare hook once the queue has had a
/// value (``LiveSpecifics``), so no thread is inside it at the fork and the child's getters never
/// wait for a thread that is gone. Before the first value, the getters take no lock at all.
final class Specifics: Sendable {
    fileprivate struct Entry: @unchecked Sendable {
        let value: UnsafeMutableRawPointer
        let destructor: SpecificDestructor?

        func destroy() { ThreadSanitizer.userCode { destructor?(value) } }
    }

    fileprivate let entries = Lock<[UInt: Entry]>([:])
    /// Set (once, before the first value is stored) when the specifics join ``LiveSpecifics``.
    private let isRegistered = Atomic<Bool>(false)

    deinit {
        if isRegistered.load(ordering: .acquiring) { LiveSpecifics.unregister(self) }
    }

    func value(for key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        guard isRegistered.load(ordering: .acquiring) else { return nil }
        return entries.withLock { $0[UInt(bitPattern: key)] }?.value
    }

    /// Stores `value` (nil removes). The replaced value's destructor runs asynchronously on a
    /// global queue, as dispatch does, so it never runs under this lock or inside the caller; in a
    /// forked child, whose global queues have no threads, it runs on the calling thread, after
    /// the lock.
    func set(_ value: UnsafeMutableRawPointer?, for key: UnsafeRawPointer, destructor: SpecificDestructor?) {
        if !isRegistered.load(ordering: .acquiring) {
            LiveSpecifics.register(self)
            isRegistered.store(true, ordering: .releasing)
        }
        let old = entries.withLock { entries in
            let old = entries[UInt(bitPattern: key)]
            entries[UInt(bitPattern: key)] = value.map { Entry(value: $0, destructor: destructor) }
            return old
        }
        if let old, old.destructor != nil {
            if _slowPath(Fork.isChild) {
                old.destroy()
            } else {
                let box = UncheckedSendable(old)
                DispatchQueue.global().async { box.value.destroy() }
            }
        }
    }

    /// Runs every destructor: the queue is being freed.
    func destroyAll() {
        guard isRegistered.load(ordering: .acquiring) else { return }
        let all = entries.withLock { entries in
            defer { entries.removeAll() }
            return Array(entries.values)
        }
        for specific in all { specific.destroy() }
    }
}

extension Specifics {
    /// The generic types of the entries, for ``MetadataWarmUp``.
    static func warmUpMetadata() {
        MetadataWarmUp.dictionaryStorage(UInt.self, Entry.self)
        MetadataWarmUp.metadata([UInt: Entry].self)
        MetadataWarmUp.arrayStorage(Entry.self)
    }
}

/// The specifics that have had a value, whose locks the fork hooks take (after the registry of
/// condition locks; a specifics lock is a leaf: nothing runs under it).
enum LiveSpecifics {
    private static let registry: Lock<[ObjectIdentifier: Unmanaged<Specifics>]> = {
        Fork.installHooks()
        return Lock([:])
    }()

    static func register(_ specifics: Specifics) {
        registry.withLock { $0[ObjectIdentifier(specifics)] = Unmanaged.passUnretained(specifics) }
    }

    static func unregister(_ specifics: Specifics) {
        registry.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(specifics)) }
    }

    static func prepareForFork() {
        registry.acquireForFork()
        forEachHeld { $0.entries.acquireForFork() }
    }

    static func resumeInParent() {
        forEachHeld { $0.entries.releaseInParent() }
        registry.releaseInParent()
    }

    static func resumeInChild() {
        forEachHeld { $0.entries.releaseInChild() }
        registry.releaseInChild()
    }

    private static func forEachHeld(_ body: (Specifics) -> Void) {
        registry.withStateWhileHeld { all in
            for specifics in all.values { specifics._withUnsafeGuaranteedRef(body) }
        }
    }
}

extension Queue {
    /// Associates `value` with `key` on this queue (nil removes it); the old value's `destructor`
    /// runs asynchronously when it is replaced or removed, or when the queue is freed.
    public func setSpecific(
        key: UnsafeRawPointer, value: UnsafeMutableRawPointer?, destructor: SpecificDestructor? = nil
    ) {
        specifics.set(value, for: key, destructor: destructor)
    }

    /// The value for `key` on this queue itself.
    public func getSpecific(key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        specifics.value(for: key)
    }

    /// The value for `key` on the current queue, else on its targets in order, as
    /// `dispatch_get_specific` finds it (queues of sync callers further out are not consulted).
    public static func getSpecific(key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        var candidate = current
        while let queue = candidate {
            if let value = queue.specifics.value(for: key) { return value }
            candidate = queue.target
        }
        return nil
    }
}
