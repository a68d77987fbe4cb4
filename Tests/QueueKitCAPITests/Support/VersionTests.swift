// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Glibc
import QueueKitTestSupport
import Testing

@Suite("Version, status texts and the clock")
struct VersionTests {
    @Test func versionMacrosMatchTheLibrary() {
        #expect(qk_version_number() == QK_VERSION_MAJOR * 10000 + QK_VERSION_MINOR * 100 + QK_VERSION_PATCH)
        #expect(String(cString: qk_version()) == "\(QK_VERSION_MAJOR).\(QK_VERSION_MINOR).\(QK_VERSION_PATCH)")
    }

    @Test func everyStatusHasAText() {
        for status in [0, EINVAL, EBUSY, ETIMEDOUT, EPERM, EDEADLK, ENOMEM, 12345, -1] {
            let text = String(cString: qk_strerror(status))
            #expect(!text.isEmpty)
        }
        #expect(String(cString: qk_strerror(0)) == "success")
        #expect(String(cString: qk_strerror(EDEADLK)).contains("deadlock"))
    }

    @Test func theClockIsMonotonicNanoseconds() {
        let a = qk_now_ns()
        let b = qk_now_ns()
        #expect(b >= a)
        #expect(QK_FOREVER == UInt64.max)
    }
}
