// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Testing

// DB-queue calls for the tests, through the C API (section 2 of the header).

@discardableResult
package func dbRead(_ db: OpaquePointer?, _ body: () -> Void) -> Int32 {
    callC(body) { qk_dbqueue_read(db, $0, $1) }
}

@discardableResult
package func dbWrite(_ db: OpaquePointer?, _ body: () -> Void) -> Int32 {
    callC(body) { qk_dbqueue_write(db, $0, $1) }
}

@discardableResult
package func dbWriteAsync(_ db: OpaquePointer?, _ body: @escaping @Sendable () -> Void) -> Int32 {
    callCAsync(body) { qk_dbqueue_write_async(db, $0, $1) }
}

/// A DB queue handle the test closures may capture; every member calls the C API.
package struct CDBQueue: @unchecked Sendable {
    package let raw: OpaquePointer
    package init(_ label: String) { raw = qk_dbqueue_create(label)! }
    @discardableResult package func read(_ body: () -> Void) -> Int32 { dbRead(raw, body) }
    @discardableResult package func write(_ body: () -> Void) -> Int32 { dbWrite(raw, body) }
    @discardableResult package func writeAsync(_ body: @escaping @Sendable () -> Void) -> Int32 {
        dbWriteAsync(raw, body)
    }
    package func flush() -> Int32 { qk_dbqueue_flush(raw) }
    package func destroy() -> Int32 { qk_dbqueue_destroy(raw) }
}
