// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// The idle path (Queue+Idle.swift): a synchronous call onto a queue nothing else runs or waits
// for holds it through the queue's idle word and runs the block on the calling thread. Each
// scenario reads the word to know which path a call took, and forces its interleaving with real
// synchronisation and bounded waits.

/// The fields of a queue's idle word.
private struct IdleWord {
    let raw: UInt64
    init(_ queue: Queue) { raw = qkshim_idle_load(queue.idleWord) }
    var isExclusive: Bool { raw & (1 << 24) != 0 }
    /// The holding thread's number while exclusive; the shared holders otherwise.
    var holders: UInt64 { raw & 0xFF_FFFF }
    var hasWaiters: Bool { raw & (1 << 25) != 0 }
    var isClosed: Bool { raw & (1 << 26) != 0 }
    var submitted: UInt64 { raw >> 32 }
}

@Suite("The idle path of synchronous calls", .serialized)
struct QueueIdlePathTests {
    init() { ReportLog.install() }

    @Test(
        "a dispatch queue handed out by DispatchQueue.current closes the idle path: a later sync waits behind a block given to it directly"
    )
    func handedOutDispatchQueueClosesTheIdlePath() throws {
        let queue = try Queue(label: "idle.handed-out")
        let handedOut = Shared<DispatchQueue?>(nil)
        try queue.sync { handedOut.value = DispatchQueue.current }
        #expect(IdleWord(queue).isClosed)
        let raw = try #require(handedOut.value)
        let inside = DispatchSemaphore(value: 0)
        let leave = DispatchSemaphore(value: 0)
        raw.async {
            inside.signal()
            _ = leave.wait(timeout: .now() + testTimeout)
        }
        #expect(waits(for: inside))
        let ran = Shared(false)
        let syncer = spawn { try? queue.sync { ran.value = true } }
        // Through dispatch, the sync publishes its wait and stays behind the running block.
        #expect(eventually { Diagnostics.waitReport().contains("idle.handed-out") })
        #expect(!ran.value)
        leave.signal()
        #expect(waits(for: syncer))
        #expect(ran.value)
    }

    @Test(
        "an idle serial queue: the block runs here, holding the queue alone under this thread's number, as the current queue"
    )
    func idleSerialSync() throws {
        let queue = try Queue(label: "idle.serial")
        let facts = Facts()
        #expect(
            bounded {
                let me = qkshim_thread_id()
                try? queue.sync {
                    let word = IdleWord(queue)
                    facts.flag("exclusive", word.isExclusive)
                    facts.flag("named", word.holders == me)
                    facts.flag("current", Queue.current === queue)
                    facts.flag("barrier", queue.check(.onQueueAsBarrier))
                    facts.flag("sync onto itself refused", (try? queue.sync {}) == nil)
                    facts.flag("perform inline", (try? queue.perform { true }) == true)
                }
                facts.flag("given back", IdleWord(queue).raw == 0)
                facts.flag("not current after", Queue.current == nil)
            })
        #expect(
            facts.all == [
                "exclusive": "true", "named": "true", "current": "true", "barrier": "true",
                "sync onto itself refused": "true", "perform inline": "true", "given back": "true",
                "not current after": "true",
            ])
    }

    @Test("an async block queued before a sync runs before it: the sync goes through dispatch, behind it")
    func asyncBeforeSyncRunsFirst() throws {
        let queue = try Queue(label: unique("idle.order"))
        let gate = DispatchSemaphore(value: 0)
        let asyncIn = DispatchSemaphore(value: 0)
        let order = Shared<[String]>([])
        try queue.async {
            asyncIn.signal()
            _ = gate.wait(timeout: .now() + testTimeout)
            order.update { $0.append("async") }
        }
        #expect(waits(for: asyncIn))
        #expect(IdleWord(queue).submitted == 1)
        let syncDone = spawn { try? queue.sync { order.update { $0.append("sync") } } }
        // The sync has published its wait: it waits behind the async block, not beside it.
        #expect(eventually { Diagnostics.waitReport().contains("Queue.sync") })
        #expect(order.value.isEmpty)
        gate.signal()
        #expect(waits(for: syncDone))
        #expect(order.value == ["async", "sync"])
        #expect(eventually { IdleWord(queue).raw == 0 })
    }

    @Test("a block dispatch starts while the queue is held on the idle path waits for the holder to leave")
    func dispatchBlockWaitsForIdleHolder() throws {
        let queue = try Queue(label: "idle.exclusive")
        let order = Shared<[String]>([])
        let ran = DispatchSemaphore(value: 0)
        #expect(
            bounded {
                try? queue.sync {
                    try? queue.async {
                        order.update { $0.append("async") }
                        ran.signal()
                    }
                    // The async block has started on a dispatch thread and announced its wait.
                    let announced = eventually { IdleWord(queue).hasWaiters }
                    order.update { $0.append("sync, waiter announced: \(announced)") }
                }
            })
        #expect(waits(for: ran))
        #expect(order.value == ["sync, waiter announced: true", "async"])
        #expect(eventually { IdleWord(queue).raw == 0 })
    }

    @Test("readers of an idle concurrent queue share it; a barrier submitted meanwhile waits for them all")
    func barrierWaitsForIdleReaders() throws {
        let queue = try Queue(label: "idle.concurrent", kind: .concurrent)
        let meet = Rendezvous(parties: 2)
        let leave = DispatchSemaphore(value: 0)
        let order = Shared<[String]>([])
        let barrierRan = DispatchSemaphore(value: 0)
        @Sendable func reader(_ name: String) -> DispatchSemaphore {
            spawn {
                try? queue.sync {
                    _ = meet.arrive()
                    _ = leave.wait(timeout: .now() + testTimeout)
                    order.update { $0.append(name) }
                }
            }
        }
        let one = reader("reader")
        let two = reader("reader")
        #expect(eventually { IdleWord(queue).holders == 2 && !IdleWord(queue).isExclusive })
        try queue.barrierAsync {
            order.update { $0.append("barrier") }
            barrierRan.signal()
        }
        #expect(eventually { IdleWord(queue).hasWaiters })
        leave.signal()
        leave.signal()
        #expect(waits(for: one) && waits(for: two) && waits(for: barrierRan))
        #expect(order.value == ["reader", "reader", "barrier"])
    }

    @Test("a queue that comes to target an idle-held queue closes its idle path; its blocks wait for the holder")
    func targetingClosesTheIdlePath() throws {
        let parent = try Queue(label: "idle.parent")
        let order = Shared<[String]>([])
        let ran = DispatchSemaphore(value: 0)
        let childBox = Shared<Queue?>(nil)
        #expect(
            bounded {
                try? parent.sync {
                    guard let child = try? Queue(label: "idle.child", target: parent) else { return }
                    childBox.update { $0 = child }
                    try? child.async {
                        order.update { $0.append("child") }
                        ran.signal()
                    }
                    let announced = eventually { IdleWord(parent).hasWaiters }
                    order.update { $0.append("parent, child waits: \(announced)") }
                }
            })
        #expect(waits(for: ran))
        #expect(order.value == ["parent, child waits: true", "child"])
        #expect(IdleWord(parent).isClosed)
        // From now on the parent goes through dispatch: its word counts what it was given.
        let seen = Shared<UInt64>(0)
        try parent.sync { seen.update { $0 = IdleWord(parent).submitted } }
        #expect(seen.value == 1)
    }

    @Test("an idle-path holder that waits in a ring is named by the detector; the ring is refused once")
    func idleHolderInARing() throws {
        let tag = unique("idle-ring")
        let a = try Queue(label: "\(tag).a")
        let b = try Queue(label: "\(tag).b")
        let meet = Rendezvous(parties: 2)
        let refusals = Shared(0)
        let idleHolds = Shared(0)
        @Sendable func closer(_ own: Queue, _ other: Queue, _ thread: String) -> DispatchSemaphore {
            spawn {
                name(thread)
                try? own.sync {
                    if IdleWord(own).isExclusive && IdleWord(own).holders == qkshim_thread_id() {
                        idleHolds.update { $0 += 1 }
                    }
                    _ = meet.arrive()
                    do {
                        try other.sync {}
                    } catch {
                        refusals.update { $0 += 1 }
                    }
                }
            }
        }
        let one = closer(a, b, "idle-ring-a")
        let two = closer(b, a, "idle-ring-b")
        #expect(waits(for: one) && waits(for: two))
        #expect(idleHolds.value == 2)
        #expect(refusals.value == 1)
        let reports = ReportLog.shared.reports(mentioning: tag)
        #expect(reports.count == 1)
        if let report = reports.first {
            #expect(
                report.contains("holds serial queue \"\(tag).a\"") && report.contains("holds serial queue \"\(tag).b\"")
            )
            #expect(report.contains("idle-ring-a") && report.contains("idle-ring-b"))
        }
    }

    @Test(
        "inside a registered plain dispatch queue, a queue taken on the idle path is DispatchQueue.current, and the plain one again after"
    )
    func dispatchCurrentInsideAPlainQueue() throws {
        let queue = try Queue(label: "idle.dq.queue")
        let plain = DispatchQueue(label: "idle.dq.plain", registerDetection: true)
        let inner = DispatchQueue(label: "idle.dq.inner", registerDetection: true)
        let facts = Facts()
        #expect(
            bounded {
                plain.sync {
                    try? queue.sync {
                        facts.flag("idle", IdleWord(queue).isExclusive)
                        facts["queue"] = DispatchQueue.currentLabel
                        inner.sync {
                            facts["inner"] = DispatchQueue.currentLabel
                            // Inline, as through dispatch: the plain queue entered later stays innermost.
                            try? queue.perform { facts["perform inside inner"] = DispatchQueue.currentLabel }
                        }
                        facts["queue again"] = DispatchQueue.currentLabel
                    }
                    facts["plain"] = DispatchQueue.currentLabel
                }
            })
        #expect(
            facts.all == [
                "idle": "true", "queue": "idle.dq.queue", "inner": "idle.dq.inner",
                "perform inside inner": "idle.dq.inner", "queue again": "idle.dq.queue", "plain": "idle.dq.plain",
            ])
    }

    @Test(
        "a sync whose block waits for an idle holder keeps its wait published: the ring it closes with the holder is refused"
    )
    func syncBehindAnIdleHolderStaysPublished() throws {
        let tag = unique("idle-behind")
        let queue = try Queue(label: "\(tag).queue")
        let lock = ConditionLock(condition: 0, name: "\(tag).lock")
        let lockerHolds = DispatchSemaphore(value: 0)
        let holderIn = DispatchSemaphore(value: 0)
        let refused = Shared<[String: Bool]>([:])
        let idle = Shared(false)
        // The holder takes the queue on the idle path; once the locker's sync waits behind it, it
        // asks for the lock the locker holds: a ring through a sync dispatch has already started.
        let holder = spawn {
            try? queue.sync {
                idle.update { $0 = IdleWord(queue).isExclusive }
                holderIn.signal()
                _ = lockerHolds.wait(timeout: .now() + testTimeout)
                _ = eventually { IdleWord(queue).hasWaiters }
                do throws(QueueKitError) {
                    try lock.lock()
                    try lock.unlock()
                    refused.update { $0["holder"] = false }
                } catch {
                    refused.update { $0["holder"] = error == .wouldDeadlock }
                }
            }
        }
        let locker = spawn {
            try? lock.lock()
            lockerHolds.signal()
            _ = holderIn.wait(timeout: .now() + testTimeout)
            do {
                try queue.sync {}
                refused.update { $0["locker"] = false }
            } catch {
                refused.update { $0["locker"] = true }
            }
            try? lock.unlock()
        }
        #expect(waits(for: holder) && waits(for: locker))
        #expect(idle.value)
        // The holder published last: its search finds the ring and refuses its own wait.
        #expect(refused.value == ["holder": true, "locker": false])
        #expect(ReportLog.shared.reports(mentioning: tag).count == 1)
    }

    @Test(
        "a block that throws on the idle path gives the queue back: the error reaches the caller, the next call takes the queue again"
    )
    func throwingBlockGivesTheQueueBack() throws {
        struct Failure: Error {}
        let queue = try Queue(label: "idle.throws")
        let concurrent = try Queue(label: "idle.throws.concurrent", kind: .concurrent)
        #expect(throws: Failure.self) { try queue.sync { throw Failure() } }
        #expect(IdleWord(queue).raw == 0)
        #expect(throws: Failure.self) { try concurrent.sync { throw Failure() } }
        #expect(throws: Failure.self) { try concurrent.barrierSync { throw Failure() } }
        #expect(IdleWord(concurrent).raw == 0)
        #expect(try queue.sync { IdleWord(queue).isExclusive })
        #expect(try concurrent.sync { IdleWord(concurrent).holders == 1 })
    }
}
