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
            DeadlockReport.waits(nodes: nodes, tasks: WaitRegistry.taskWaits(), now: qkshim_now_coarse_ns())
        }
    }

    /// Watches for waits inside QueueKit that last `threshold` or longer: `handler` is called once
    /// for each such wait (several that stall together share one call), from a QueueKit thread,
    /// with the wait report. A zero or negative `threshold` turns the watch off; `handler == nil`
    /// writes the report to stderr. Replaces any earlier watch (also `QUEUEKIT_STALL_MS`).
    public static func watchStalls(after threshold: Duration, _ handler: (@Sendable (String) -> Void)?) {
        let (seconds, attoseconds) = threshold.components
        let ns: UInt64 = seconds < 0 || (seconds == 0 && attoseconds <= 0)
            ? 0 : max(1, UInt64(clamping: seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000))
        _ = StallWatch.configure(threshold: ns, handler: handler.map { .swift($0) } ?? .standardError)
    }

    // MARK: Shared with the C layer

    static let deadlockHandler = Lock<ReportHandler>(.standardError)

    static func setDeadlockHandler(_ handler: ReportHandler) {
        deadlockHandler.withLock { $0 = handler }
    }
}

/// Where a report goes: stderr, a C function, or a Swift closure.
enum ReportHandler: @unchecked Sendable {
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

// MARK: Suspended tasks

/// A suspended task's wait, as the wait report shows it. Tasks hold nothing a thread could wait
/// for, so they are never part of a cycle: they are reported, never refused.
struct TaskWait: Sendable {
    /// A number naming the wait in reports ("task 3").
    let number: UInt64
    /// The call's C name (or Swift name when it has no C twin).
    let call: StaticString
    /// The object, as the report names it ("DB queue \"store\"").
    let object: String
    let deadline: UInt64
    let start: UInt64

    var isTimed: Bool { deadline != MonotonicClock.forever }
}

extension WaitRegistry {
    private static let tasks = Lock<(next: UInt64, waits: [UInt64: TaskWait])>((1, [:]))

    /// Registers the wait of a task about to suspend in `call` on `object` (for example
    /// `DeadlockReport.describe(queue)`), until `deadline` (`MonotonicClock.forever`: untimed).
    /// Returns the token to pass to ``withdrawTaskWait(_:)`` when the task resumes. Thread-safe;
    /// costs a lock and an insertion, so call it on the suspending path only.
    static func publishTaskWait(call: StaticString, object: String, deadline: UInt64 = MonotonicClock.forever) -> UInt64 {
        let start = qkshim_now_coarse_ns()
        return tasks.withLock { tasks in
            let number = tasks.next
            tasks.next += 1
            tasks.waits[number] = TaskWait(number: number, call: call, object: object, deadline: deadline, start: start)
            return number
        }
    }

    /// Removes a task's wait registered by ``publishTaskWait(call:object:deadline:)``. Thread-safe.
    static func withdrawTaskWait(_ token: UInt64) {
        _ = tasks.withLock { $0.waits.removeValue(forKey: token) }
    }

    /// The suspended tasks' waits right now, oldest first.
    static func taskWaits() -> [TaskWait] {
        tasks.withLock { $0.waits.values.sorted { $0.number < $1.number } }
    }
}
