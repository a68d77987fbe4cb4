// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The text of the deadlock report (a refused cycle) and of the wait report (every wait right
/// now): one line per thread, naming threads by number and pthread name, calls by their C name,
/// objects by kind and label or name.
///
/// Every function here reads pinned waits (the caller holds the detector lock and has pinned
/// `nodes`), so the frame chains and objects it names stay alive and unchanged while it reads.
enum DeadlockReport {
    /// The report of a refused call: the ring from the holder of what the refused thread waits for
    /// around to the refused thread, last, marked.
    ///
    /// ```
    /// QueueKit: deadlock refused (EDEADLK): qk_queue_sync would wait in a cycle
    ///   thread 7 "worker-a": in qk_queue_sync(serial queue "ui"), holds serial queue "db"
    ///   thread 9 "worker-b": holds serial queue "ui"; waits in qk_queue_sync(serial queue "db")  <- refused
    /// ```
    static func refusal(ring: [ThreadRecord], nodes: [ThreadRecord]) -> String {
        let refused = ring[0]
        // (Each name costs a read of /proc for another thread: only the ring's are read.)
        var lines = ["QueueKit: deadlock refused (EDEADLK): \(refused.wait.call) would wait in a cycle"]
        for member in ring.dropFirst() {
            lines.append(
                "  \(member.displayName): in \(call(member.wait)), holds \(holdings(of: member, nodes: nodes))")
        }
        lines.append(
            "  \(refused.displayName): holds \(holdings(of: refused, nodes: nodes)); waits in \(call(refused.wait))  <- refused"
        )
        return lines.joined(separator: "\n") + "\n"
    }

    /// The wait report: one line per waiting thread (and suspended task), "" when nobody waits.
    static func waits(nodes: [ThreadRecord], tasks: [SuspendedWaiter], now: UInt64) -> String {
        if nodes.isEmpty && tasks.isEmpty { return "" }
        let graph = WaitGraph(nodes: nodes)
        let count = nodes.count + tasks.count
        // A thread's name costs a read of /proc: read each once per report.
        var names: [UInt64: String] = [:]
        for node in nodes { names[node.number] = node.displayName }
        var lines = ["QueueKit: \(count) wait\(count == 1 ? "" : "s") in progress"]
        for node in nodes.sorted(by: { $0.number < $1.number }) {
            let wait = node.wait
            lines.append(
                "  \(names[node.number]!): in \(call(wait)) \(since(wait, now: now)), "
                    + "\(wait.isTimed ? "timed" : "untimed"); waits for \(waitsFor(node, graph: graph, names: names)); "
                    + "holds \(holdings(of: node, nodes: nodes))")
        }
        // Suspended tasks (their own clock: `SuspendedWaiter.since` is on the precise one).
        let taskNow = MonotonicClock.now()
        for task in tasks { lines.append("  " + task.describe(now: taskNow)) }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: Pieces

    /// "qk_queue_sync(serial queue \"ui\")".
    static func call(_ wait: PublishedWait) -> String { "\(wait.call)(\(object(wait)))" }

    static func object(_ wait: PublishedWait) -> String {
        switch wait.kind {
        case .none: return "nothing"
        case .queueSync, .queueBarrierSync: return wait.queue.map { describe($0.takeUnretainedValue()) } ?? "a queue"
        case .lock, .lockWhen: return wait.lock?.diagnosticName ?? "a condition lock"
        case .dbQueue: return wait.queue.map { describe($0.takeUnretainedValue()) } ?? "a DB queue"
        }
    }

    /// "serial queue \"ui\"", "concurrent queue \"pool\"", "main queue", "DB queue \"store\"".
    static func describe(_ queue: Queue) -> String {
        if queue === Queue.main { return "main queue" }
        if queue.dispatchQueue == nil { return "DB queue \"\(queue.label)\"" }
        return "\(queue.isSerial ? "serial" : "concurrent") queue \"\(queue.label)\""
    }

    /// What a waiting thread holds: the queues of its frame chain, outermost first, and the
    /// condition locks it owns that some waiting thread waits for.
    static func holdings(of record: ThreadRecord, nodes: [ThreadRecord]) -> String {
        var held: [String] = []
        var seen: [(queue: ObjectIdentifier, exclusive: Bool)] = []
        var frames: [UnsafePointer<ExecutionFrame>] = []
        var next = record.wait.frame
        while let frame = next {
            frames.append(frame)
            next = frame.pointee.outer
        }
        for frame in frames.reversed() {
            let queue = frame.pointee.queue
            let id = ObjectIdentifier(queue)
            if seen.contains(where: { $0.queue == id && ($0.exclusive || !frame.pointee.isExclusive) }) { continue }
            seen.append((id, frame.pointee.isExclusive))
            var text = describe(queue)
            if queue.dispatchQueue == nil {
                text += frame.pointee.isExclusive ? " (writing)" : " (reading)"
            } else if !queue.isSerial && frame.pointee.isExclusive {
                text += " (barrier)"
            }
            held.append(text)
        }
        var locks: [ObjectIdentifier] = []
        for node in nodes {
            guard let lock = node.wait.lock, node.wait.kind == .lock || node.wait.kind == .lockWhen else { continue }
            guard lock.holderNumber == record.number, node !== record else { continue }
            let id = ObjectIdentifier(lock)
            if locks.contains(id) { continue }
            locks.append(id)
            held.append(lock.diagnosticName)
        }
        return held.isEmpty ? "nothing" : held.joined(separator: ", ")
    }

    /// Whom or what a waiting thread waits for, for the wait report.
    static func waitsFor(_ record: ThreadRecord, graph: WaitGraph, names: [UInt64: String]) -> String {
        let wait = record.wait
        switch wait.kind {
        case .none:
            return "nothing"
        case .queueSync, .queueBarrierSync, .dbQueue:
            let holders = graph.holders(of: record, evenIfTimed: true)
            var named = holders.map { names[$0.number] ?? $0.displayName }
            // Readers in a DB queue's slots are named by their thread numbers, waiting or not.
            if wait.kind == .dbQueue, let db = wait.db {
                for reader in db.visibleReaders()
                where reader != record.number && !holders.contains(where: { $0.number == reader }) {
                    named.append("\(names[reader] ?? describeThread(reader)) (reading)")
                }
            }
            if !named.isEmpty { return named.joined(separator: ", ") }
            return "the blocks running on it (no waiting thread holds it)"
        case .lock, .lockWhen:
            guard let lock = wait.lock else { return "the lock" }
            let owner = lock.holderNumber
            let holder = owner == 0 || owner == record.number ? nil : names[owner] ?? describeThread(owner)
            // A lock whose holder exited is released at its exit, with the news kept for the next
            // acquirer: name the dead holder while that news is pending.
            let free = lock.abandonedBy.map { "lock free, abandoned by thread \($0) (exited)" } ?? "lock free"
            if wait.kind == .lockWhen, let waiter = wait.detail {
                let state = owner == 0 ? free : owner == record.number ? "being handed the lock" : "held by \(holder!)"
                return "\(lock.conditionDescription(waiter: waiter)), \(state)"
            }
            if let holder { return holder }
            return owner == 0 ? "the lock (\(free), being handed over)" : "nothing (being handed the lock)"
        }
    }

    /// "thread 5 \"name\"", "thread 5 (exited)", or "thread 5" for a thread QueueKit has no
    /// record of.
    static func describeThread(_ number: UInt64) -> String {
        if let record = ThreadRecord.record(numbered: number) { return record.displayName }
        if ThreadRecord.hasExited(number) { return "thread \(number) (exited)" }
        return "thread \(number)"
    }

    /// "for 2.5 s"; for a wait timed from its first sighting "for at least 2.5 s", or "first
    /// seen just now".
    static func since(_ wait: PublishedWait, now: UInt64) -> String {
        let elapsed = now &- wait.start
        guard wait.startIsFirstSight else { return "for \(duration(elapsed))" }
        return elapsed < 1_000_000 ? "first seen just now" : "for at least \(duration(elapsed))"
    }

    /// "< 1 ms", "340 ms", "2.5 s".
    static func duration(_ nanoseconds: UInt64) -> String {
        let ms = nanoseconds / 1_000_000
        if ms == 0 { return "< 1 ms" }
        if ms < 1_000 { return "\(ms) ms" }
        let tenths = nanoseconds / 100_000_000
        return "\(tenths / 10).\(tenths % 10) s"
    }
}
