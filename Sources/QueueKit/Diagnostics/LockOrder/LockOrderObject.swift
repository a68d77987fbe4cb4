// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// An object the lock-order witness orders: a condition lock, a queue, or a DB queue (its
/// identity queue stands for it), by address, not retained (the witness forgets an object before
/// it is freed: ``LockOrder/forget(_:)``).
@usableFromInline
struct LockOrderObject {
    @usableFromInline let address: UInt

    @inlinable @inline(__always)
    init(_ object: AnyObject) {
        address = UInt(bitPattern: Unmanaged.passUnretained(object).toOpaque())
    }

    @inlinable @inline(__always)
    init(address: UInt) { self.address = address }

    /// The object itself (alive: see the type's comment).
    var object: AnyObject {
        Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: address)!).takeUnretainedValue()
    }

    /// "condition lock \"cache\"", "serial queue \"ui\"", "DB queue \"app.db\"".
    var description: String {
        let object = self.object
        if let queue = object as? Queue { return DeadlockReport.describe(queue) }
        if let lock = object as? InspectableLock { return lock.diagnosticName }
        return "an object"
    }

    /// The description with the mode, for the objects that have two: "DB queue \"app.db\" (read)",
    /// "concurrent queue \"pool\" (barrier)".
    func description(_ mode: LockOrderMode) -> String {
        let object = self.object
        if let queue = object as? Queue {
            if queue.dispatchQueue == nil {
                return "\(DeadlockReport.describe(queue)) (\(mode == .shared ? "read" : "write"))"
            }
            if !queue.isSerial {
                return "\(DeadlockReport.describe(queue)) (\(mode == .shared ? "shared" : "barrier"))"
            }
            return DeadlockReport.describe(queue)
        }
        return description
    }
}
