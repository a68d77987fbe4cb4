// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

// MARK: What the deadlock detector sees

extension ConditionLock: InspectableLock {
    var holderNumber: UInt64 { line.pointee.owner.load(ordering: .relaxed) }

    var diagnosticName: String {
        let name = self.name
        return name.isEmpty ? "condition lock (unnamed)" : "condition lock \"\(name)\""
    }

    func conditionDescription(waiter: UnsafeRawPointer) -> String {
        let wanted: String
        switch waiter.assumingMemoryBound(to: Waiter.self).pointee.wanted {
        case .any: wanted = "condition any"
        case .value(let value): wanted = "condition \(value)"
        case .test(let test): wanted = "a test " + (test.identity?.description ?? "(a Swift closure)")
        }
        return "\(wanted), now \(condition)"
    }
}
