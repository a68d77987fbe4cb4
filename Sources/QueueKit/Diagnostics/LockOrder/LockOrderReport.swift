// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The text of a lock-order report:
///
/// ```
/// QueueKit: lock-order inversion (potential deadlock): qk_dbqueue_read(DB queue "app.db") closes a cycle of 2
///   DB queue "app.db" (write) -> condition lock "cache": qk_condlock_lock, first by thread 4 "saver" at save+0x3c (/usr/bin/app)
///   condition lock "cache" -> DB queue "app.db" (read): qk_dbqueue_read, first by thread 6 "ui" at refresh+0x51 (/usr/bin/app)  <- new
/// ```
///
/// Made under the graph's lock (every object of the cycle is alive: a destroyed one is forgotten
/// first, under the same lock).
enum LockOrderReport {
    /// The report of `cycle`, closed by `call` on `object`; `newEdge` is marked as the new one.
    static func text(
        call: StaticString, object: LockOrderObject, cycle: LockOrderGraph.Cycle, newEdge: LockOrderGraph.EdgeKey?
    ) -> String {
        var text =
            "QueueKit: lock-order inversion (potential deadlock): \(call)(\(object.description)) closes a cycle of \(cycle.edges.count)\n"
        for (key, record) in cycle.edges {
            let from = LockOrderObject(address: key.from).description(key.fromMode)
            let to = LockOrderObject(address: key.to).description(key.toMode)
            text += "  \(from) -> \(to): \(record.call)\(record.timed ? " (timed)" : ""), first by \(thread(record))"
            if record.site != 0 { text += " at \(site(record.site))" }
            if let newEdge, key == newEdge { text += "  <- new" }
            text += "\n"
        }
        return text
    }

    /// "thread 4 \"saver\"", or "thread 4" for a thread without a name.
    static func thread(_ record: LockOrderGraph.Record) -> String {
        record.threadName.isEmpty ? "thread \(record.thread)" : "thread \(record.thread) \"\(record.threadName)\""
    }

    /// "save+0x3c (/usr/bin/app)", else the address.
    static func site(_ address: UInt) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer in
            _ = qkshim_lockorder_describe_address(address, buffer.baseAddress!, buffer.count)
            return String(cString: buffer.baseAddress!)
        }
    }
}
