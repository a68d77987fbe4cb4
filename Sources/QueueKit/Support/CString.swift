// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc

/// An immutable NUL-terminated copy of a string, freed with the object that holds it: what the C
/// API lends out (`qk_queue_label`, `qk_condlock_name`), valid for as long as its holder keeps it.
///
/// Thread safety: immutable; may be shared between threads.
package final class CString: @unchecked Sendable {
    /// The copy; owned by this object.
    package let pointer: UnsafePointer<CChar>

    /// A copy of `string`, or `nil` when out of memory.
    package init?(copying string: UnsafePointer<CChar>) {
        guard let copy = strdup(string) else { return nil }
        pointer = UnsafePointer(copy)
    }

    /// A copy of `string`, or `nil` when out of memory.
    package init?(_ string: String) {
        guard let copy = string.withCString({ strdup($0) }) else { return nil }
        pointer = UnsafePointer(copy)
    }

    deinit { free(UnsafeMutablePointer(mutating: pointer)) }

    /// The copy as a Swift string.
    package var string: String { String(cString: pointer) }

    /// A static string as a C string (static strings are NUL-terminated and live forever).
    package static func literal(_ string: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// The empty C string, for handles that have no name or label.
    package static var empty: UnsafePointer<CChar> { literal("") }
}
