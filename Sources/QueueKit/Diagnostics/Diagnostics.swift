// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// Deadlock reports, wait reports and the stall watch: what QueueKit tells about threads that
/// wait inside it.
///
/// A call that would close a wait-for cycle across threads (each thread waiting, untimed, for
/// something the next one holds) throws ``QueueKitError/wouldDeadlock`` instead of waiting, and
/// the deadlock handler gets a report naming every thread of the cycle, the call it waits in, the
/// object it waits for and what it holds. Timed waits, `lock(whenCondition:)` on a free lock and
/// rings closed by asynchronous submissions are never refused: they show in ``waitReport()`` and
/// in the stall watch.
///
/// Thread safety: every member may be called from any thread, also from inside a handler. The
/// handlers are called without any QueueKit lock held.
public enum Diagnostics {
    /// Sets what happens with the report of each refused cycle: `handler` is called on the refused
    /// thread, before the refused call throws. `nil` restores the default, which writes the report
    /// to stderr.
    public static func onDeadlock(_ handler: (@Sendable (String) -> Void)?) {
        setDeadlockHandler(handler.map { .swift($0) } ?? .standardError)
    }

    /// Every thread (and suspended task) waiting inside QueueKit right now, one line each: the
    /// call, the object, whom it waits for, for how long, timed or not, and what it holds. "" when
    /// nobody waits. A snapshot: each waiting thread is read at one instant (none of them can
    /// stop waiting while it is read).
    public static func waitReport() -> String {
        WaitRegistry.withWaitersPinned { nodes in
            DeadlockReport.waits(nodes: nodes, tasks: SuspendedWaits.all, now: qkshim_now_coarse_ns())
        }
    }

    /// Watches for waits inside QueueKit that last `threshold` or longer: `handler` is called once
    /// for each such wait (several that stall together share one call), from a QueueKit thread,
    /// with the wait report. A zero or negative `threshold` turns the watch off; `handler == nil`
    /// writes the report to stderr. Replaces any earlier watch (also `QUEUEKIT_STALL_MS`).
    public static func watchStalls(after threshold: Duration, _ handler: (@Sendable (String) -> Void)?) {
        // Positive but under a nanosecond: 1 ns (on); beyond 64 bits: the longest threshold.
        let ns = MonotonicClock.nanoseconds(threshold).map { $0 == 0 && threshold > .zero ? 1 : $0 } ?? .max
        _ = StallWatch.configure(threshold: ns, handler: handler.map { .swift($0) } ?? .standardError)
    }

    // MARK: Shared with the C layer

    static let deadlockHandler = Lock<ReportHandler>(.standardError)

    package static func setDeadlockHandler(_ handler: ReportHandler) {
        deadlockHandler.withLock { $0 = handler }
    }
}

/// Where a report goes: stderr, a C function, or a Swift closure.
package enum ReportHandler: @unchecked Sendable {
    case standardError
    case c(@convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void, UnsafeMutableRawPointer?)
    case swift(@Sendable (String) -> Void)

    func call(_ report: String) {
        switch self {
        case .standardError:
            // One write(2) per report, so lines of concurrent reports do not interleave.
            report.withCString { text in
                var offset = 0
                let length = strlen(text)
                while offset < length {
                    let written = write(STDERR_FILENO, text + offset, length - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
        case .c(let function, let context):
            report.withCString { function(context, $0) }
        case .swift(let body):
            body(report)
        }
    }
}

extension Lock where State == ReportHandler {
    /// Calls the current handler with `report`, outside the lock.
    func call(_ report: String) {
        withLock { $0 }.call(report)
    }
}
