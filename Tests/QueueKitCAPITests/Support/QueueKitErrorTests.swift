// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Glibc
import QueueKit
import QueueKitShim
import QueueKitTestSupport
import Testing

/// The one status list (`QK_STATUS_MAP` in queuekit.h) against everything made from it:
/// `qk_strerror`, `qk_status_name` and the Swift constants.
@Suite("The status list")
struct QueueKitErrorTests {
    /// The statuses as the shim compiled them from the header's list, in order.
    static let listed: [Int32] = (0..<qkshim_status_count()).map { qkshim_status_at($0) }

    @Test func theListHoldsEveryStatusOfTheConventions() {
        #expect(Self.listed == [EINVAL, EBUSY, ETIMEDOUT, EPERM, EDEADLK, EOWNERDEAD, ENOTRECOVERABLE, ENOMEM])
    }

    @Test func everySwiftConstantIsListedAndEveryListedStatusHasOne() {
        let constants: [QueueKitError] = [
            .invalidArgument, .busy, .timedOut, .notPermitted, .wouldDeadlock, .ownerDied,
            .notRecoverable, .outOfMemory,
        ]
        #expect(Set(constants.map(\.rawValue)) == Set(Self.listed))
        #expect(constants.count == Self.listed.count)
    }

    @Test func namesAreTheErrnoConstantsSpelling() {
        let names = Self.listed.map { String(cString: qk_status_name($0)) }
        #expect(
            names == ["EINVAL", "EBUSY", "ETIMEDOUT", "EPERM", "EDEADLK", "EOWNERDEAD", "ENOTRECOVERABLE", "ENOMEM"])
        #expect(QueueKitError.wouldDeadlock.name == "EDEADLK")
        for unlisted: Int32 in [0, -1, 12345, EAGAIN, Int32.max, Int32.min] {
            #expect(String(cString: qk_status_name(unlisted)) == "", "status \(unlisted)")
            #expect(QueueKitError(rawValue: unlisted).name == "")
        }
    }

    @Test func descriptionsAreDistinctAndTheSameInCAndSwift() {
        let generic = String(cString: qk_strerror(12345))
        var seen: Set<String> = []
        for status in [0] + Self.listed {
            let text = String(cString: qk_strerror(status))
            #expect(text == QueueKitError.describe(status))
            #expect(text != generic, "status \(status) has only the generic text")
            #expect(seen.insert(text).inserted, "status \(status) repeats a text")
        }
        #expect(String(cString: qk_strerror(0)) == "success")
        #expect(String(cString: qk_strerror(EOWNERDEAD)).contains("owner died"))
        #expect(String(cString: qk_strerror(-1)) == generic)
        #expect(QueueKitError.ownerDied.description.hasPrefix("QueueKitError(\(EOWNERDEAD)): owner died"))
    }
}
