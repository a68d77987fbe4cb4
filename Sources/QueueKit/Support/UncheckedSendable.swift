// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// Carries a value that is used only while its owner waits, across a `@Sendable` boundary.
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
    @usableFromInline let value: Value
    @inlinable init(_ value: Value) { self.value = value }
}
