// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// A lock whose waits the deadlock detector can follow: who holds it, and how to name it.
protocol InspectableLock: AnyObject {
    /// The holder's thread number (`qkshim_thread_id()`), 0 when free.
    var holderNumber: UInt64 { get }
    /// "condition lock \"cache\"".
    var diagnosticName: String { get }
    /// For a `lock_when` waiter (`detail` of its published wait): "condition 3, now 2".
    func conditionDescription(waiter: UnsafeRawPointer) -> String
    /// The thread that exited holding the lock, while its next acquirer has not been told.
    var abandonedBy: UInt64? { get }
}
