// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import QueueKitTestSupport
import Testing

@testable import QueueKit

@Suite("Thread records")
struct ThreadRecordTests {
    /// What the thread saw of itself.
    private final class Seen: @unchecked Sendable {
        var number: UInt64 = 0
        var ownName = ""
        var registeredWhileRunning = false
    }

    @Test("a thread's record is registered while it runs and retired when it exits")
    func aRecordLivesAsLongAsItsThread() throws {
        let seen = Seen()
        let made = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let context = Unmanaged.passRetained(
            Box { [seen] in
                let record = ThreadRecord.current
                seen.number = record.number
                seen.ownName = record.name
                seen.registeredWhileRunning = ThreadRecord.record(numbered: record.number) === record
                made.signal()
                _ = release.wait(timeout: .now() + testTimeout)
            }
        ).toOpaque()
        var thread = pthread_t()
        #expect(
            pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
                    return nil
                }, context) == 0)
        #expect(made.wait(timeout: .now() + testTimeout) == .success)
        #expect(seen.registeredWhileRunning)
        let record = try #require(ThreadRecord.record(numbered: seen.number))
        // Read from outside the thread, as reports do: the thread's own name, after its number.
        let name = record.name
        #expect(!name.isEmpty)
        #expect(name == seen.ownName)
        #expect(record.displayName == "thread \(seen.number) \"\(name)\"")
        #expect(!record.hasExited)
        release.signal()
        // Key destructors run before the thread terminates, so after the join it is retired.
        #expect(pthread_join(thread, nil) == 0)
        #expect(ThreadRecord.record(numbered: seen.number) == nil)
        #expect(record.hasExited)
    }

    private final class Box: @unchecked Sendable {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }
}
