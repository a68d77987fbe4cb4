// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Testing

@testable import QueueKit

@Suite("Metadata warm-up")
struct MetadataWarmUpTests {
    /// The library runs the warm-up only under ThreadSanitizer (uninstrumented, from C): here it
    /// runs directly, twice, and must simply complete.
    @Test func runsToCompletion() {
        MetadataWarmUp.run()
        MetadataWarmUp.run()
    }
}
