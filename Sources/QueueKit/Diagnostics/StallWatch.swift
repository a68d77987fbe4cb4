// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// The stall watch: one QueueKit thread that wakes up a few times per threshold, looks at every
/// published wait (and suspended task's wait), and calls the handler with the wait report when
/// some wait has lasted the threshold — once per wait.
///
/// It reads waits the way every diagnostic does (detector lock, pinned records), so it never
/// sees a wait change under it. It starts on the first configuration with a threshold (from
/// ``Diagnostics/watchStalls(after:_:)``, `qk_set_stall_handler` or `QUEUEKIT_STALL_MS`) and then
/// lives as long as the process, asleep on a futex while the watch is off. A forked child has no
/// watcher thread (only the forking thread survives a fork): the child hook starts one again when
/// the watch is on, so a configured watch keeps watching in the child.
package enum StallWatch {
    private struct Configuration {
        var threshold: UInt64 = 0
        var handler = ReportHandler.standardError
        var started = false
    }

    private static let configuration = Lock(Configuration())

    /// Bumped and woken on every configuration change, so the watcher re-reads it at once.
    nonisolated(unsafe) private static let changed: UnsafeMutablePointer<UInt32> = {
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        word.initialize(to: 0)
        return word
    }()

    /// Sets the threshold (0: off) and the handler. Returns 0, or the error of starting the thread.
    package static func configure(threshold: UInt64, handler: ReportHandler) -> Int32 {
        Fork.installHooks()
        let mustStart = configuration.withLock { configuration in
            configuration.threshold = threshold
            configuration.handler = handler
            guard threshold != 0, !configuration.started else { return false }
            configuration.started = true
            return true
        }
        _ = qkshim_atomic_exchange32(changed, qkshim_atomic_load32(changed) &+ 1)
        qkshim_futex_wake(changed, 1)
        return mustStart ? startWatcher() : 0
    }

    private static func startWatcher() -> Int32 {
        let status = qkshim_thread_start(watchEntry, nil, "queuekit-stalls")
        if status != 0 { configuration.withLock { $0.started = false } }
        return status
    }

    // MARK: fork()

    /// The fork's prepare hook: no thread is inside the configuration at the fork.
    static func prepareForFork() { configuration.acquireForFork() }

    static func resumeInParent() { configuration.releaseInParent() }

    /// In the child: the watcher thread did not survive the fork; start a new one when the watch
    /// is on (the waits it reported in the parent were the parent's threads', gone here).
    static func resumeInChild() {
        var restart = false
        configuration.releaseInChild { configuration in
            configuration.started = configuration.threshold != 0
            restart = configuration.started
        }
        if restart { _ = startWatcher() }
    }

    /// The watcher's loop; never returns.
    fileprivate static func watch() -> Never {
        // Waits already reported, by (thread number, wait serial) or task number.
        var reported = Set<ReportedWait>()
        while true {
            let observed = qkshim_atomic_load32(changed)
            let (threshold, handler) = configuration.withLock { ($0.threshold, $0.handler) }
            if threshold == 0 {
                _ = qkshim_futex_wait(changed, observed, MonotonicClock.forever)
                continue
            }
            // A few looks per threshold, so a stall is reported at most a quarter late.
            let period = min(max(threshold / 4, 1_000_000), 250_000_000)
            _ = qkshim_futex_wait(changed, observed, MonotonicClock.now() &+ period)
            if qkshim_atomic_load32(changed) != observed { continue }
            if let report = stalls(threshold: threshold, reported: &reported) { handler.call(report) }
        }
    }

    private enum ReportedWait: Hashable {
        case thread(UInt64, UInt64)
        case task(ObjectIdentifier)
    }

    /// The watcher's generic types, for ``MetadataWarmUp``.
    static func warmUpMetadata() {
        MetadataWarmUp.setStorage(ReportedWait.self)
    }

    /// The wait report when some wait has lasted `threshold` and was not reported yet.
    private static func stalls(threshold: UInt64, reported: inout Set<ReportedWait>) -> String? {
        WaitRegistry.withWaitersPinned { nodes in
            let now = qkshim_now_coarse_ns()
            let tasks = SuspendedWaits.all
            let taskNow = MonotonicClock.now()
            var current = Set<ReportedWait>()
            var fresh = false
            for node in nodes where now &- node.wait.start >= threshold {
                let key = ReportedWait.thread(node.number, node.wait.serial)
                current.insert(key)
                if !reported.contains(key) { fresh = true }
            }
            for task in tasks where taskNow &- task.since >= threshold {
                let key = ReportedWait.task(ObjectIdentifier(task))
                current.insert(key)
                if !reported.contains(key) { fresh = true }
            }
            // Forget the waits that ended: their keys never come back (serials only grow).
            reported = current
            return fresh ? DeadlockReport.waits(nodes: nodes, tasks: tasks, now: now) : nil
        }
    }
}

private let watchEntry: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in
    StallWatch.watch()
}

/// Called once from the library's load-time constructor when `QUEUEKIT_STALL_MS` holds a valid
/// threshold: turns the watch on with the stderr writer.
@_cdecl("qkshim_stall_watch_from_environment")
func stallWatchFromEnvironment() {
    let threshold = qkshim_stall_env_ns()
    if threshold != 0 { _ = StallWatch.configure(threshold: threshold, handler: .standardError) }
}
