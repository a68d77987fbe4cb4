// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// The queue's Swift round trips, each next to its Dispatch twin doing the same work.
import Dispatch
import QueueKit

/// The work of every round trip: one increment of a counter the closure captures.
nonisolated(unsafe) private var queueSink = 0

/// `Queue.sync {}` onto an idle serial queue, `n` times; nanoseconds per call.
@_cdecl("qkbench_swift_queue_sync")
public func queueSync(_ n: UInt64) -> Double {
    let queue = try! Queue(label: "bench.swift.queue.sync")
    var count = 0
    let begin = nowNs()
    for _ in 0..<n { try! queue.sync { count &+= 1 } }
    let elapsed = nowNs() - begin
    precondition(count == Int(n))
    queueSink &+= count
    return Double(elapsed) / Double(n)
}

/// `DispatchQueue.sync {}` onto an idle serial queue, `n` times.
@_cdecl("qkbench_swift_dispatch_sync")
public func dispatchSync(_ n: UInt64) -> Double {
    let queue = DispatchQueue(label: "bench.swift.dispatch.sync")
    var count = 0
    let begin = nowNs()
    for _ in 0..<n { queue.sync { count &+= 1 } }
    let elapsed = nowNs() - begin
    precondition(count == Int(n))
    queueSink &+= count
    return Double(elapsed) / Double(n)
}

/// A counter the asynchronous blocks share (they run one at a time on a serial queue).
private final class Counter: @unchecked Sendable {
    var value = 0
}

/// `Queue.async {}` `n` times onto a serial queue, then one `sync`; per submission.
@_cdecl("qkbench_swift_queue_async")
public func queueAsync(_ n: UInt64) -> Double {
    let queue = try! Queue(label: "bench.swift.queue.async")
    let counter = Counter()
    let begin = nowNs()
    for _ in 0..<n { try! queue.async { counter.value &+= 1 } }
    try! queue.sync {}
    let elapsed = nowNs() - begin
    precondition(counter.value == Int(n))
    return Double(elapsed) / Double(n)
}

/// `DispatchQueue.async {}` `n` times onto a serial queue, then one `sync`.
@_cdecl("qkbench_swift_dispatch_async")
public func dispatchAsync(_ n: UInt64) -> Double {
    let queue = DispatchQueue(label: "bench.swift.dispatch.async")
    let counter = Counter()
    let begin = nowNs()
    for _ in 0..<n { queue.async { counter.value &+= 1 } }
    queue.sync {}
    let elapsed = nowNs() - begin
    precondition(counter.value == Int(n))
    return Double(elapsed) / Double(n)
}
