// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import Testing

@testable import QueueKit

// Scenarios across threads: named threads, the statuses they saw, and the deadlock and lock-order
// reports they received, each test finding its own by a unique label.

/// The reports the deadlock handler received, by the refused threads.
package final class ReportLog: @unchecked Sendable {
    package init() {}
    package static let shared = ReportLog()
    package let lock = NSLock()
    package var reports: [String] = []

    package func append(_ report: String) { lock.withLock { reports.append(report) } }

    /// The reports that mention `marker` (each test uses labels of its own).
    package func reports(mentioning marker: String) -> [String] {
        lock.withLock { reports.filter { $0.contains(marker) } }
    }

    /// Installs the handler that appends here.
    package static func install() { Diagnostics.onDeadlock { ReportLog.shared.append($0) } }
}

/// A unique prefix for the labels of one test.
package func unique(_ name: String) -> String { "\(name)-\(UUID().uuidString.prefix(8))" }

/// Names the calling thread (pthread name, what reports show).
package func name(_ name: String) { _ = qkshim_thread_set_name(name) }

/// Statuses recorded by the threads of a scenario, by name.
package final class Outcomes: @unchecked Sendable {
    package init() {}
    package let lock = NSLock()
    package var statuses: [String: Int32] = [:]
    package var ran: [String] = []

    package func record(_ who: String, _ status: Int32) { lock.withLock { statuses[who] = status } }
    package func didRun(_ what: String) { lock.withLock { ran.append(what) } }
    package var all: [String: Int32] { lock.withLock { statuses } }
    package var runs: [String] { lock.withLock { ran } }
    package var refusedCount: Int { all.values.filter { $0 == EDEADLK }.count }
}

/// The lock-order reports received, by the threads whose calls closed a cycle.
package final class OrderLog: @unchecked Sendable {
    package init() {}
    package static let shared = OrderLog()
    private let lock = NSLock()
    private var reports: [String] = []

    package func append(_ report: String) { lock.withLock { reports.append(report) } }
    package func reports(mentioning marker: String) -> [String] {
        lock.withLock { reports.filter { $0.contains(marker) } }
    }
}

/// Runs `body` on a new thread named `name` and waits for it, at most `timeout` seconds.
package func onThread(
    _ name: String, within timeout: TimeInterval = testTimeout, _ body: @escaping @Sendable () -> Void
) {
    let finished = finishes(within: timeout) {
        _ = qkshim_thread_set_name(name)
        body()
    }
    #expect(finished, "thread \(name) did not finish")
}

/// Expects a call's status to be 0 (usable around closures that expect things themselves).
package func ok(_ status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(status == 0, sourceLocation: sourceLocation)
}
