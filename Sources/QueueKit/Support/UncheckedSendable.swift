// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// Carries a value that is used only while its owner waits, across a `@Sendable` boundary.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
