// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// The rows of queuekit-bench that use QueueKit's Swift API. A library of their own, which the
// driver loads with dlopen: linked into the driver, the QueueKit module's own @_cdecl qk_*
// functions would be what the C kernels' calls bind to, instead of the installed libqueuekit.so.0.
import Glibc
import QueueKit

nonisolated(unsafe) private var sink = 0

/// Monotonic nanoseconds, for the kernels of this library.
func nowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// `DBQueue.read {}` `n` times from one thread; returns the nanoseconds per read. Not reentrant
/// with itself (a process-wide sink keeps the work from being optimised away).
@_cdecl("qkbench_swift_dbqueue_read")
public func dbQueueRead(_ n: UInt64) -> Double {
    let db = try! DBQueue(label: "bench.swift.read")
    var count = 0
    let begin = nowNs()
    for _ in 0..<n { try! db.read { count &+= 1 } }
    let elapsed = nowNs() - begin
    sink &+= count
    return Double(elapsed) / Double(n)
}
