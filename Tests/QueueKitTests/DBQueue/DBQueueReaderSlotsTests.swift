// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitShim
import QueueKitTestSupport
import Synchronization
import Testing

@testable import QueueKit

// Readers in slots (the read-biased fast path): a writer waits for exactly the readers it finds
// in slots, a reader arriving meanwhile never reads during the write, the first counted read
// after a write sets the bias again, and readers in slots are holders for the deadlock detector
// and the wait report.

private func isBiased(_ db: DBQueue) -> Bool { db.state.load(ordering: .acquiring) & DBQueue.StateBit.biased != 0 }
private func countedReaders(_ db: DBQueue) -> UInt {
    (db.state.load(ordering: .acquiring) & DBQueue.StateBit.readerMask) / DBQueue.StateBit.oneReader
}
private func myNumber() -> UInt64 { qkshim_thread_id() }

@Suite("DB queue: readers in slots")
struct DBQueueReaderSlotsTests {
    @Test("a writer arriving while readers sit in slots waits for exactly those readers")
    func writerWaitsForTheReadersInSlots() throws {
        let db = try DBQueue(label: "slots.writer")
        #expect(isBiased(db))
        let readers = 3
        let entered = DispatchSemaphore(value: 0)
        let release = (0..<readers).map { _ in DispatchSemaphore(value: 0) }
        let numbers = Shared<[UInt64]>([])
        let inside = Atomic<Int>(0)
        let done = (0..<readers).map { i in
            spawn {
                do {
                    try db.read {
                        numbers.update { $0.append(myNumber()) }
                        inside.add(1, ordering: .sequentiallyConsistent)
                        entered.signal()
                        _ = waits(for: release[i])
                        inside.subtract(1, ordering: .sequentiallyConsistent)
                    }
                } catch { Issue.record("read: \(error)") }
            }
        }
        for _ in 0..<readers { #expect(waits(for: entered)) }
        // All three entered through their slots: none is counted in the state word.
        #expect(Set(db.visibleReaders()) == Set(numbers.value), "\(db.debugState)")
        #expect(countedReaders(db) == 0)

        let readersSeenByWriter = Shared<Int>(-1)
        let wrote = spawn {
            do {
                try db.write { readersSeenByWriter.value = inside.load(ordering: .sequentiallyConsistent) }
            } catch { Issue.record("write: \(error)") }
        }
        #expect(eventually { db.revoking.load(ordering: .sequentiallyConsistent) }, "the writer never waited")
        #expect(!isBiased(db))
        // Let two readers go: the writer still waits for the third.
        release[0].signal()
        release[1].signal()
        #expect(waits(for: done[0]) && waits(for: done[1]))
        #expect(db.visibleReaders().count == 1)
        #expect(readersSeenByWriter.value == -1, "the write ran while a reader sat in its slot")
        release[2].signal()
        #expect(waits(for: wrote), "the writer did not proceed after the last reader left")
        #expect(waits(for: done[2]))
        #expect(readersSeenByWriter.value == 0)
        #expect(db.visibleReaders().isEmpty)
        #expect(db.revocations.load(ordering: .relaxed) == 1)
    }

    @Test("a reader arriving during a revocation waits for the write and does not take a slot")
    func readerArrivingDuringRevocation() throws {
        let db = try DBQueue(label: "slots.arrival")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let writing = Atomic<Bool>(false)
        let written = Atomic<Bool>(false)
        let first = spawn {
            do {
                try db.read {
                    entered.signal()
                    _ = waits(for: release)
                }
            } catch { Issue.record("read: \(error)") }
        }
        #expect(waits(for: entered))
        let writer = spawn {
            do {
                try db.write {
                    writing.store(true, ordering: .sequentiallyConsistent)
                    // Give a reader that wrongly got in the chance to be seen.
                    for _ in 0..<1_000 { sched_yield() }
                    writing.store(false, ordering: .sequentiallyConsistent)
                    written.store(true, ordering: .sequentiallyConsistent)
                }
            } catch { Issue.record("write: \(error)") }
        }
        #expect(eventually { db.revoking.load(ordering: .sequentiallyConsistent) })
        let sawWrite = Shared<Bool?>(nil)
        let inSlot = Shared<Bool?>(nil)
        let late = spawn {
            do {
                try db.read {
                    sawWrite.value =
                        written.load(ordering: .sequentiallyConsistent)
                        && !writing.load(ordering: .sequentiallyConsistent)
                    inSlot.value = db.visibleReaders().contains(myNumber())
                }
            } catch { Issue.record("late read: \(error)") }
        }
        // The late reader parks in the lane behind the writer.
        #expect(eventually { db.waitingCallCount == 1 }, "\(db.debugState)")
        #expect(sawWrite.value == nil)
        release.signal()
        #expect(waits(for: first) && waits(for: writer) && waits(for: late))
        #expect(sawWrite.value == true, "the late read ran before or during the write")
        #expect(inSlot.value == false)
    }

    @Test("a write revokes the bias; the first counted read after it sets it again")
    func biasReturnsWithTheNextRead() throws {
        let db = try DBQueue(label: "slots.rebias")
        try db.read { #expect(db.visibleReaders() == [myNumber()]) }
        try db.write {}
        #expect(!isBiased(db))
        #expect(db.revocations.load(ordering: .relaxed) == 1)
        // Without the bias the read is counted; entering the idle queue it sets the bias again.
        try db.read {
            #expect(db.visibleReaders().isEmpty)
            #expect(countedReaders(db) == 1)
            #expect(isBiased(db))
        }
        try db.read { #expect(db.visibleReaders() == [myNumber()]) }
        #expect(countedReaders(db) == 0)
    }

    @Test("a counted reader entering next to other counted readers sets the bias")
    func countedReaderAmongCountedReadersSetsTheBias() throws {
        let db = try DBQueue(label: "slots.rebias.overlap")
        db.biasDisabled.store(true, ordering: .relaxed)
        try db.write {}
        #expect(!isBiased(db))
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let first = spawn {
            do {
                try db.read {
                    entered.signal()
                    _ = waits(for: release)
                }
            } catch { Issue.record("read: \(error)") }
        }
        #expect(waits(for: entered))
        #expect(countedReaders(db) == 1 && !isBiased(db), "\(db.debugState)")
        db.biasDisabled.store(false, ordering: .relaxed)
        try db.read {
            #expect(countedReaders(db) == 2)
            #expect(isBiased(db), "\(db.debugState)")
        }
        release.signal()
        #expect(waits(for: first))
        try db.read { #expect(db.visibleReaders() == [myNumber()]) }
        #expect(countedReaders(db) == 0)
    }

    @Test("readers that waited behind a write leave the bias set once the queue is idle")
    func readersAfterAWaitSetTheBias() throws {
        let db = try DBQueue(label: "slots.rebias.lane")
        let writing = DispatchSemaphore(value: 0)
        let finish = DispatchSemaphore(value: 0)
        let writer = spawn {
            do {
                try db.write {
                    writing.signal()
                    _ = waits(for: finish)
                }
            } catch { Issue.record("write: \(error)") }
        }
        #expect(waits(for: writing))
        #expect(!isBiased(db))
        let readers = (0..<2).map { _ in
            spawn {
                do { try db.read {} } catch { Issue.record("read: \(error)") }
            }
        }
        #expect(eventually { db.waitingCallCount == 2 }, "\(db.debugState)")
        finish.signal()
        #expect(waits(for: writer))
        for reader in readers { #expect(waits(for: reader)) }
        #expect(isBiased(db), "\(db.debugState)")
        #expect(countedReaders(db) == 0)
        try db.read { #expect(db.visibleReaders() == [myNumber()]) }
    }

    @Test("a write revokes only when a read came before it; writes in a row revoke nothing")
    func revocationsFollowReads() throws {
        let db = try DBQueue(label: "slots.frequent")
        try db.write {}
        #expect(db.revocations.load(ordering: .relaxed) == 1)
        for _ in 0..<100 { try db.write {} }
        #expect(db.revocations.load(ordering: .relaxed) == 1)
        for _ in 0..<100 {
            try db.read {}
            try db.write {}
        }
        #expect(db.revocations.load(ordering: .relaxed) == 101)
        #expect(!isBiased(db))
    }

    @Test("with the bias turned off, counted readers never set it again")
    func biasStaysOffWhenDisabled() throws {
        let db = try DBQueue(label: "slots.disabled")
        db.biasDisabled.store(true, ordering: .relaxed)
        try db.write {}
        for _ in 0..<10 { try db.read { #expect(countedReaders(db) == 1) } }
        #expect(!isBiased(db))
        #expect(db.revocations.load(ordering: .relaxed) == 1)
    }

    @Test("nested reads inside a read in a slot run inline, through another queue too")
    func nestedReadsInline() throws {
        let db = try DBQueue(label: "slots.nested")
        let other = try Queue(label: "slots.nested.other")
        try db.read {
            #expect(db.visibleReaders() == [myNumber()])
            try db.read { try other.sync { try db.read { #expect(Queue.current === db.queue) } } }
            #expect(throws: QueueKitError.wouldDeadlock) { try db.write {} }
        }
        #expect(db.visibleReaders().isEmpty)
    }

    @Test("a writer's wait for a reader in a slot closes a ring: refused, named in the report")
    func revocationRefusedWhenItClosesARing() throws {
        let tag = "slots.ring.\(UInt32.random(in: 0...UInt32.max))"
        let db = try DBQueue(label: "\(tag).db")
        let serial = try Queue(label: "\(tag).serial")
        let inRead = DispatchSemaphore(value: 0)
        let inSerial = DispatchSemaphore(value: 0)
        let readerNumber = Shared<UInt64>(0)
        let reader = spawn {
            do {
                try db.read {
                    readerNumber.value = myNumber()
                    inRead.signal()
                    _ = waits(for: inSerial)
                    // Waits for the serial queue, which the writer's thread holds.
                    try serial.sync {}
                }
            } catch { Issue.record("reader: \(error)") }
        }
        #expect(waits(for: inRead))
        // A second reader stays in its slot throughout: the refused writer gives up before it
        // reaches it (or while waiting for it), and the next writer must still wait for it.
        let otherIn = DispatchSemaphore(value: 0)
        let otherGo = DispatchSemaphore(value: 0)
        let otherLeft = Atomic<Bool>(false)
        let other = spawn {
            do {
                try db.read {
                    otherIn.signal()
                    _ = waits(for: otherGo)
                    otherLeft.store(true, ordering: .sequentiallyConsistent)
                }
            } catch { Issue.record("other reader: \(error)") }
        }
        #expect(waits(for: otherIn))
        let refused = Shared<Bool>(false)
        let writer = spawn {
            do {
                try serial.sync {
                    inSerial.signal()
                    // Let the reader park in serial.sync first.
                    _ = eventually { Diagnostics.waitReport().contains("\(tag).serial") }
                    do {
                        _ = try db.write { Issue.record("the write ran while a reader sat in its slot") }
                    } catch QueueKitError.wouldDeadlock {
                        refused.value = true
                    }
                }
            } catch { Issue.record("writer: \(error)") }
        }
        #expect(waits(for: writer) && waits(for: reader), "the ring was not refused")
        #expect(refused.value)
        #expect(db.visibleReaders().count == 1, "\(db.debugState)")
        let sawOtherLeave = Shared<Bool?>(nil)
        let nextWriter = spawn {
            do {
                try db.write { sawOtherLeave.value = otherLeft.load(ordering: .sequentiallyConsistent) }
            } catch { Issue.record("next writer: \(error)") }
        }
        #expect(eventually { db.revoking.load(ordering: .sequentiallyConsistent) }, "the next writer did not wait")
        otherGo.signal()
        #expect(waits(for: nextWriter) && waits(for: other))
        #expect(sawOtherLeave.value == true, "the next write ran while a reader sat in its slot")
        // The queue works afterwards; the slot readers have left.
        #expect(db.visibleReaders().isEmpty)
        try db.write {}
        try db.read {}
        #expect(readerNumber.value != 0)
    }

    @Test("the wait report names the readers in slots a writer waits for")
    func waitReportNamesVisibleReaders() throws {
        let db = try DBQueue(label: "slots.report.\(UInt32.random(in: 0...UInt32.max))")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let number = Shared<UInt64>(0)
        let reader = spawn {
            do {
                try db.read {
                    number.value = myNumber()
                    entered.signal()
                    _ = waits(for: release)
                }
            } catch { Issue.record("read: \(error)") }
        }
        #expect(waits(for: entered))
        let writer = spawn {
            do { try db.write {} } catch { Issue.record("write: \(error)") }
        }
        #expect(eventually { db.revoking.load(ordering: .sequentiallyConsistent) })
        // The writer publishes its wait (with the readers it waits for) once it stops spinning.
        var report = ""
        let named = eventually {
            report = Diagnostics.waitReport()
            let line = report.split(separator: "\n").first {
                $0.contains(db.queue.label) && $0.contains("DBQueue.write")
            }
            return line?.contains("thread \(number.value)") == true && line?.contains("(reading)") == true
        }
        #expect(named, "\(report)")
        release.signal()
        #expect(waits(for: reader) && waits(for: writer))
    }
}
