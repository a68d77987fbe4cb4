// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch

/// A C destructor for a queue-specific value.
public typealias SpecificDestructor = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// The key/value context of one queue, as `dispatch_queue_set_specific` keeps it.
final class Specifics: Sendable {
    private struct Entry: @unchecked Sendable {
        let value: UnsafeMutableRawPointer
        let destructor: SpecificDestructor?

        func destroy() { ThreadSanitizer.userCode { destructor?(value) } }
    }

    private let entries = Lock<[UInt: Entry]>([:])

    func value(for key: UnsafeRawPointer) -> UnsafeMutableRawPointer? {
        entries.withLock { $0[UInt(bitPattern: key)] }?.value
    }

    /// Stores `value` (nil removes). The replaced value's destructor runs asynchronously on a
    /// global queue, as dispatch does, so it never runs under this lock or inside the caller.
    func set(_ value: UnsafeMutableRawPointer?, for key: UnsafeRawPointer, destructor: SpecificDestructor?) {
        let old = entries.withLock { entries in
            let old = entries[UInt(bitPattern: key)]
            entries[UInt(bitPattern: key)] = value.map { Entry(value: $0, destructor: destructor) }
            return old
        }
        if let old, old.destructor != nil {
            let box = UncheckedSendable(old)
            DispatchQueue.global().async { box.value.destroy() }
        }
    }

    /// Runs every destructor: the queue is being freed.
    func destroyAll() {
        let all = entries.withLock { entries in
            defer { entries.removeAll() }
            return Array(entries.values)
        }
        for specific in all { specific.destroy() }
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
