// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

/// Reads that share no cache line: the visible readers.
///
/// While the queue is read-biased (`StateBit.biased`), a reader enters by claiming its slot, one cache
/// line of the queue's slot array chosen by its thread number, and writing that number into it;
/// it touches the shared state word only to read it. A reader whose slot is taken (another thread
/// hashed to it), or that finds the bias gone or the queue closed to readers, empties its slot
/// and enters through the state word as a counted reader.
///
/// The holder of the exclusivity (a writer, or a thread running asynchronous writes) revokes the
/// bias before it runs anything: it clears the bit, then waits for exactly the readers it finds
/// in slots. The pairing is Dekker's: a reader claims its slot, then reads the state; the revoker
/// changes the state, then reads the slots (all sequentially consistent), so either the reader
/// sees the change and leaves, or the revoker sees the reader and waits for it. A reader the
/// revoker waits for finds a mark in its slot when it leaves and wakes the revoker.
///
/// The revoker reads only the groups of eight slots of which a reader ever took one:
/// `occupiedSlots` has a bit for each (slot `index` sets bit `index / 8`), and a slot once taken
/// keeps `registeredMark` when its reader leaves it. A reader claims its slot with one compare-and-swap from `registeredMark`, as
/// it would from empty: the first reader of a slot finds 0 instead, and sets the slot's bit
/// (`registerSlot`, off the fast path) before it claims the slot from 0. So a read adds no shared
/// write, and no load, to the fast path. The bit is never missed, by the same sequentially
/// consistent order S: the registering reader's OR of the bit comes before its claim of the
/// slot, which comes before every later claim of that slot from `registeredMark` (they read its
/// result, directly or through other claims, and S agrees with each location's modification
/// order). A reader that enters while the queue is biased read the state before the revoker's
/// change of it, so its claim, and the OR before it, come before the revoker's load of
/// `occupiedSlots`, which follows the change: it sees the bit (bits are only ever added), then
/// the slot.
///
/// Readers in slots are holders like counted readers: they run inside the queue's frame (so the
/// deadlock detector follows their chains like any holder's), and their thread numbers in the slots name
/// them in the wait report and in the wait-for search.
///
/// The bias comes back with the first counted reader after the revocation, at no cost of its own:
/// a counted reader that enters a queue only readers hold, or leaves it idle (it was the only
/// reader), while nobody waits and no write is pending, sets the bit in the compare-and-swap it
/// does anyway. A revocation costs a load per slot ever taken and a wait only for a reader
/// inside, so a write revokes whenever a read came before it: in mixed work the
/// readers between two writes stay off the shared line but for the first one and those that
/// arrived while the write ran, without a clock and without an inhibit window to tune. A run of
/// writes with no read in between revokes nothing; alternating single reads and writes pay a
/// revocation per write (`scripts/dbqueue-counts.sh` counts it).
extension DBQueue {
    /// Words per slot: one cache line each, so that readers on different CPUs share none.
    @usableFromInline static var slotStride: Int { 8 }
    /// In a slot: the revoker waits for this reader (set by the revoker, seen by the reader as it
    /// leaves).
    @usableFromInline static var revokingMark: UInt64 { 1 << 63 }
    /// In a slot: a reader took it once, and its bit in `occupiedSlots` is set. An empty slot
    /// holds it alone (or 0, before its first reader).
    @usableFromInline static var registeredMark: UInt64 { 1 << 62 }
    /// In a slot: the reader's thread number (0: no reader).
    @usableFromInline static var readerBits: UInt64 { registeredMark &- 1 }
    /// Slots per queue: a power of two, four per CPU, 32 to 256 (groups of eight: at most 32, one
    /// bit each in `occupiedSlots`).
    static let slotCount: Int = {
        let cpus = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        var count = 32
        while count < 4 * cpus && count < 256 { count *= 2 }
        return count
    }()

    /// The bit of slot `index`'s group of eight in `occupiedSlots`.
    @usableFromInline static func groupBit(_ index: Int) -> UInt64 { 1 << UInt64(truncatingIfNeeded: index >> 3) }

    static func makeSlots(count: Int) -> UnsafeMutablePointer<UInt64> {
        let words = count * slotStride
        let raw = UnsafeMutableRawPointer.allocate(byteCount: words * 8, alignment: 64)
        let slots = raw.bindMemory(to: UInt64.self, capacity: words)
        slots.initialize(repeating: 0, count: words)
        return slots
    }

    // MARK: Readers

    /// Enters as a visible reader if the queue is read-biased and open to readers: the claimed
    /// slot, or nil (nothing taken) when the reader must take the counted path.
    @inlinable @inline(__always)
    func tryVisibleRead() -> UnsafeMutablePointer<UInt64>? {
        guard state.load(ordering: .relaxed) & StateBit.biased != 0 else { return nil }
        let me = qkshim_thread_id()
        let index = Int(truncatingIfNeeded: me & slotMask)
        let slot = slots + index &* Self.slotStride
        guard qkshim_slot_claim(slot, Self.registeredMark, me | Self.registeredMark) || registerSlot(index, me) else {
            return nil
        }
        if _fastPath(
            state.load(ordering: .sequentiallyConsistent) & (StateBit.biased | StateBit.closedToReaders)
                == StateBit.biased)
        {
            return slot
        }
        leaveSlot(slot)
        return nil
    }

    /// A slot's first reader (the slot holds 0, not `registeredMark`): sets the bit of the slot's
    /// group in `occupiedSlots`, then claims the slot from 0. False when another reader holds the slot.
    @usableFromInline @inline(never)
    func registerSlot(_ index: Int, _ me: UInt64) -> Bool {
        let slot = slots + index &* Self.slotStride
        guard qkshim_atomic_load64(slot) == 0 else { return false }
        let bit = Self.groupBit(index)
        // Sequentially consistent, both: the order of the argument above.
        if occupiedSlots.load(ordering: .sequentiallyConsistent) & bit == 0 {
            occupiedSlots.bitwiseOr(bit, ordering: .sequentiallyConsistent)
        }
        return qkshim_slot_claim(slot, 0, me | Self.registeredMark)
    }

    /// Leaves a slot (registered); wakes the revoker if it waits for this reader.
    @inlinable @inline(__always)
    func leaveSlot(_ slot: UnsafeMutablePointer<UInt64>) {
        if _slowPath(qkshim_slot_release(slot, Self.registeredMark) & Self.revokingMark != 0) { wakeRevoker() }
    }

    /// The revoker waits for exactly one reader at a time and for this wake-up, after which the
    /// reader touches nothing of the queue (the revoker may free it).
    @usableFromInline @inline(never)
    func wakeRevoker() { Parker(word: revokeWord).unpark() }

    // MARK: The revoker

    /// Called by the holder of the exclusivity before it runs anything exclusive (or lets the
    /// queue be freed): if the queue is read-biased, clears the bias and waits for the readers in
    /// slots. False when that wait was refused (it would close a cycle of waiting threads; the
    /// refusal's report is pending, the exclusivity still held): only when `refusable`.
    /// `isPendingCall`: the revoker is a call that waits (not the worker): tests count it as a
    /// pending write.
    @inlinable @inline(__always)
    func revokeBias(call: StaticString, refusable: Bool, isPendingCall: Bool = true) -> Bool {
        // Nobody sets the bias while the exclusivity is held, and only its holder clears it.
        if _fastPath(state.load(ordering: .relaxed) & StateBit.biased == 0) { return true }
        return revokeBiasSlow(call: call, refusable: refusable, isPendingCall: isPendingCall)
    }

    /// A refused revocation: the exclusivity goes back, the refusal is reported. Readers are
    /// still in slots (the one waited for, and those not looked at yet), so the bias is set again
    /// before the exclusivity goes (no reader enters through a slot while it is held): "no bias"
    /// must keep meaning "no reader in a slot", and the next holder revokes again.
    @usableFromInline @inline(never)
    func giveUpRefusedRevocation() {
        state.bitwiseOr(StateBit.biased, ordering: .sequentiallyConsistent)
        releaseWrite()
        ThreadRecord.current.deliverPendingRefusal()
    }

    @usableFromInline @inline(never)
    func revokeBiasSlow(call: StaticString, refusable: Bool, isPendingCall: Bool) -> Bool {
        state.bitwiseAnd(~StateBit.biased, ordering: .sequentiallyConsistent)
        // Only the holder of the exclusivity counts (tests read it).
        revocations.store(revocations.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
        // The groups of eight slots a reader ever took one of; eight loads and one branch a
        // group: most slots are empty.
        var occupied = occupiedSlots.load(ordering: .sequentiallyConsistent)
        while occupied != 0 {
            let first = slots + occupied.trailingZeroBitCount &* (8 &* Self.slotStride)
            occupied &= occupied &- 1
            var any: UInt64 = 0
            for index in 0..<8 { any |= qkshim_atomic_load64(first + index &* Self.slotStride) }
            if _slowPath(any & Self.readerBits != 0) {
                for index in 0..<8 {
                    let slot = first + index &* Self.slotStride
                    if qkshim_atomic_load64(slot) & Self.readerBits != 0
                        && !awaitReader(in: slot, call: call, refusable: refusable, isPendingCall: isPendingCall)
                    {
                        return false
                    }
                }
            }
        }
        return true
    }

    /// Waits until the reader in `slot` has left: spinning first (reads are usually short), then
    /// marking the slot and parking on the revoke word, a published wait the deadlock detector
    /// follows to the reader.
    /// `isPendingCall`: tests count the waiting revoker as a pending write.
    func awaitReader(
        in slot: UnsafeMutablePointer<UInt64>, call: StaticString, refusable: Bool, isPendingCall: Bool
    ) -> Bool {
        if isPendingCall { revokingForWrite.store(true, ordering: .releasing) }
        defer { if isPendingCall { revokingForWrite.store(false, ordering: .releasing) } }
        if Parker.spin(pureSpin: true, { qkshim_atomic_load64(slot) & Self.readerBits == 0 }) { return true }
        var reader = qkshim_atomic_load64(slot)
        qkshim_atomic_store32(revokeWord, Parker.idle)
        while true {
            if reader & Self.readerBits == 0 { return true }
            if qkshim_slot_replace(slot, &reader, reader | Self.revokingMark) { break }
        }
        let parker = Parker(word: revokeWord)
        revoking.store(true, ordering: .sequentiallyConsistent)
        defer { revoking.store(false, ordering: .sequentiallyConsistent) }
        while true {
            switch wait(parker, for: call, isWorker: !refusable, until: MonotonicClock.forever) {
            case .woken:
                return true
            case .timedOut:
                continue
            case .refused:
                // Take the mark back, unless the reader is leaving (its wake-up is on its way).
                var marked = reader | Self.revokingMark
                if qkshim_slot_replace(slot, &marked, reader) { return false }
                ThreadRecord.current.dropPendingRefusal()
                _ = parker.park()
                return true
            }
        }
    }

    /// For the deadlock detector: whether `word` is the revoke word of a revoker that waits.
    func isRevoking(parkerWord word: UnsafeRawPointer) -> Bool {
        UnsafeRawPointer(revokeWord) == word && revoking.load(ordering: .sequentiallyConsistent)
    }

    /// The thread numbers of the readers in slots now.
    func visibleReaders() -> [UInt64] {
        var readers: [UInt64] = []
        for index in 0..<Int(slotMask &+ 1) {
            let reader = qkshim_atomic_load64(slots + index &* Self.slotStride) & Self.readerBits
            if reader != 0 { readers.append(reader) }
        }
        return readers
    }

    /// In a forked child (from `adoptFork`): the readers in slots are gone but for the calling
    /// thread's own read, if it was in its slot. True when it was. The slots start afresh, none
    /// taken but that one.
    func forgetVisibleReaders() -> Bool {
        let me = qkshim_thread_id()
        var mine = false
        var occupied: UInt64 = 0
        for index in 0..<Int(slotMask &+ 1) {
            let slot = slots + index &* Self.slotStride
            if qkshim_atomic_load64(slot) & Self.readerBits == me && ExecutionContext.hold(of: queue) == .shared {
                qkshim_atomic_store64(slot, me | Self.registeredMark)
                occupied |= Self.groupBit(index)
                mine = true
            } else {
                qkshim_atomic_store64(slot, 0)
            }
        }
        occupiedSlots.store(occupied, ordering: .relaxed)
        qkshim_atomic_store32(revokeWord, Parker.idle)
        revoking.store(false, ordering: .relaxed)
        return mine
    }
}
