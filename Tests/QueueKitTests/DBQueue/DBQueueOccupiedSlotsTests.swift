// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitShim
import QueueKitTestSupport
import Synchronization
import Testing

@testable import QueueKit

// The slots the revoker looks at (`DBQueue.occupiedSlots`): a slot's first reader registers its
// group of eight, the slot stays registered when its readers leave, a reader claiming a
// registered slot is waited for like any, and a forked child starts the slots afresh.

private func myNumber() -> UInt64 { qkshim_thread_id() }
private func slotIndex(_ db: DBQueue, _ number: UInt64) -> Int { Int(number & db.slotMask) }
private func slotValue(_ db: DBQueue, _ number: UInt64) -> UInt64 {
    qkshim_atomic_load64(db.slots + slotIndex(db, number) &* DBQueue.slotStride)
}
private func occupied(_ db: DBQueue) -> UInt64 { db.occupiedSlots.load(ordering: .sequentiallyConsistent) }

@Suite("DB queue: occupied slots")
struct DBQueueOccupiedSlotsTests {
    @Test("a slot's first reader registers its group; the slot stays registered when it leaves")
    func firstReaderRegisters() throws {
        let db = try DBQueue(label: "occupied.first")
        #expect(occupied(db) == 0)
        let me = myNumber()
        let group = DBQueue.groupBit(slotIndex(db, me))
        try db.read {
            #expect(db.visibleReaders() == [me])
            #expect(slotValue(db, me) == me | DBQueue.registeredMark)
        }
        #expect(occupied(db) == group)
        #expect(slotValue(db, me) == DBQueue.registeredMark)
        #expect(db.visibleReaders().isEmpty)
        // The next read claims the registered slot: nothing more is registered.
        try db.read { #expect(db.visibleReaders() == [me]) }
        #expect(occupied(db) == group)
        // A write finds no reader in it and leaves it registered.
        try db.write {}
        #expect(db.revocations.load(ordering: .relaxed) == 1)
        #expect(slotValue(db, me) == DBQueue.registeredMark)
    }

    @Test("a writer waits for a reader that claimed its slot registered")
    func writerWaitsForAReaderInARegisteredSlot() throws {
        let db = try DBQueue(label: "occupied.wait")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let inside = Atomic<Bool>(false)
        let number = Shared<UInt64>(0)
        let reader = spawn {
            do {
                number.value = myNumber()
                try db.read {} // registers the slot
                try db.read {
                    inside.store(true, ordering: .sequentiallyConsistent)
                    entered.signal()
                    _ = waits(for: release)
                    inside.store(false, ordering: .sequentiallyConsistent)
                }
            } catch { Issue.record("read: \(error)") }
        }
        #expect(waits(for: entered))
        #expect(db.visibleReaders() == [number.value])
        #expect(slotValue(db, number.value) == number.value | DBQueue.registeredMark)
        let sawReader = Shared<Bool?>(nil)
        let writer = spawn {
            do { try db.write { sawReader.value = inside.load(ordering: .sequentiallyConsistent) } } catch {
                Issue.record("write: \(error)")
            }
        }
        #expect(eventually { db.revoking.load(ordering: .sequentiallyConsistent) }, "the writer never waited")
        #expect(sawReader.value == nil, "the write ran while the reader sat in its slot")
        release.signal()
        #expect(waits(for: reader) && waits(for: writer))
        #expect(sawReader.value == false)
    }

    @Test("a forked child keeps only its own slot and its group")
    func forkedChildStartsTheSlotsAfresh() throws {
        let child = try ChildRun(test: "forkedChildSlots", variable: forkSlotsChildVariable)
        #expect(child.finished, "the child process did not finish")
        guard child.finished else { return }
        #expect(child.reason == .exit)
        #expect(child.status == 0, "stderr: \(child.lines)")
    }

    /// The child of `forkedChildStartsTheSlotsAfresh`: forks inside a read in its slot while
    /// another thread, in another group of slots, reads in its own. The forked process exits 0
    /// when only its own slot and group are left and a write there does not wait for the gone
    /// reader.
    @Test(.enabled(if: isChildRun(forkSlotsChildVariable), "the child process of forkedChildStartsTheSlotsAfresh"))
    func forkedChildSlots() throws {
        let db = try DBQueue(label: "occupied.fork")
        let me = myNumber()
        let mine = DBQueue.groupBit(slotIndex(db, me))
        // A reader whose slot lies in another group: new threads take new numbers.
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        var reader: DispatchSemaphore?
        for _ in 0..<64 where reader == nil {
            let decided = DispatchSemaphore(value: 0)
            let taken = Shared<Bool>(false)
            let candidate = spawn {
                taken.value = DBQueue.groupBit(slotIndex(db, myNumber())) != mine
                decided.signal()
                guard taken.value else { return }
                do {
                    try db.read {
                        entered.signal()
                        _ = waits(for: release)
                    }
                } catch { Issue.record("read: \(error)") }
            }
            #expect(waits(for: decided))
            if taken.value { reader = candidate } else { #expect(waits(for: candidate)) }
        }
        #expect(reader != nil && waits(for: entered))
        #expect(occupied(db) & ~mine != 0)
        var pid: pid_t = -1
        var failed: Int32 = 0
        try db.read {
            #expect(db.visibleReaders().count == 2)
            pid = fork()
            guard pid == 0 else { return }
            // In the child: nothing may start a thread here; every call below is synchronous. The
            // first call after the fork adopts the queue's state: only this thread's read is left.
            do { try db.read { if db.visibleReaders() != [me] { failed |= 2 } } } catch { failed |= 4 }
            if occupied(db) != mine { failed |= 8 }
        }
        if pid == 0 {
            // The write revokes the bias without waiting for the gone reader; the own slot stays
            // registered.
            do { try db.write {} } catch { failed |= 16 }
            if occupied(db) != mine || slotValue(db, me) != DBQueue.registeredMark { failed |= 32 }
            if !db.visibleReaders().isEmpty { failed |= 64 }
            _exit(failed)
        }
        var status: Int32 = 0
        #expect(pid > 0 && waitpid(pid, &status, 0) == pid)
        release.signal()
        if let reader { #expect(waits(for: reader)) }
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 0, "forked child: status \((status >> 8) & 0xFF)")
    }
}

let forkSlotsChildVariable = "QUEUEKIT_TEST_FORK_SLOTS_CHILD"
