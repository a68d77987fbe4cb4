// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

@testable import QueueKit

/// Test-only access to the Swift object behind a `qk_dbqueue_t *`, for observing what the C API
/// does not show (kept out of the test files that import the C header, so that names resolve to
/// the header's declarations there).
package enum DBQueueInternals {
    package static func object(_ db: OpaquePointer) -> DBQueue {
        Unmanaged<DBQueue>.fromOpaque(UnsafeRawPointer(db)).takeUnretainedValue()
    }

    /// Writes queued and not started yet: a writer that is really waiting shows here.
    package static func pendingWrites(_ db: OpaquePointer) -> Int { object(db).pendingWriteCount }

    /// The queue's state, for failure messages.
    package static func debugState(_ db: OpaquePointer) -> String { object(db).debugState }

    /// Whether a thread waits in `call` for the DB queue labelled `label` (the wait report shows
    /// it): a call that is really blocked, whatever part of the lane it waits in.
    package static func isWaiting(in call: String, label: String) -> Bool {
        Diagnostics.waitReport().contains("in \(call)(DB queue \"\(label)\")")
    }

    /// Readers and writers waiting in the lane.
    package static func waitingCalls(_ db: OpaquePointer) -> Int { object(db).waitingCallCount }

    /// Installs the hook the last reader calls after it left and before it starts a due write.
    package static func setHookBeforeLastReaderStarts(_ db: OpaquePointer, _ hook: (() -> Void)?) {
        object(db).testHookBeforeLastReaderStarts = hook
    }

    /// Turns the read bias off for good: every read is counted in the state word (for tests of
    /// the counted readers' paths).
    package static func disableReadBias(_ db: OpaquePointer) {
        let object = object(db)
        object.biasDisabled.store(true, ordering: .relaxed)
        object.state.bitwiseAnd(~DBQueue.StateBit.biased, ordering: .sequentiallyConsistent)
    }

    /// Keeps the object alive past `qk_dbqueue_destroy` (so a test can observe a premature free
    /// without crashing); balance with `release`.
    package static func retain(_ db: OpaquePointer) { _ = Unmanaged<DBQueue>.fromOpaque(UnsafeRawPointer(db)).retain() }
    package static func release(_ db: OpaquePointer) { Unmanaged<DBQueue>.fromOpaque(UnsafeRawPointer(db)).release() }
}
