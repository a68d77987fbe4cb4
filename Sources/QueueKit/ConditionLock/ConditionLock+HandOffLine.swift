// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Synchronization

/// The words of a condition lock that a hand-off moves between CPUs, on one cache line of their
/// own: a 64-byte block aligned to 64, allocated with the lock.
///
/// Every acquisition and release reads or writes these words, and the thread that takes the lock
/// next reads them on another CPU: each line they span moves between the CPUs once per hand-off,
/// and a two-thread ping-pong costs about one such move each way. In the object itself they could
/// not be kept together: Swift places an object on 16 bytes (its words then span one line or two,
/// as the allocation falls, which measured as 120–210 ns a ping-pong round on one placement out of
/// four and 330 ns–1 µs on the others), and no stored property can ask for a line's alignment.
/// Here the placement is the same for every lock, the lines of other objects never share the
/// block, and the object's own line (its header, which every C call reads to check the handle,
/// and the pointer to this block) is only read once the lock exists.
@usableFromInline
struct HandOffLine: ~Copyable {
    /// The state word (``StateBit``).
    @usableFromInline let state = Atomic<UInt>(0)
    /// Releases that may have left a new condition (every release but the plain fast one), counted
    /// by the releasing holder: what a spinning acquirer watches.
    @usableFromInline let releases = Atomic<UInt32>(0)
    /// How many polls spinning acquirers needed lately (see `ConditionLock+Spinning.swift`).
    let spinEstimate: Atomic<UInt32>
    /// `qkshim_thread_id()` of the holder, 0 when free. Written by the acquiring thread, or by the
    /// releasing thread on a hand-off (before the new owner resumes).
    @usableFromInline let owner = Atomic<UInt64>(0)
    /// The condition when it is mirrored (a plain value of at most 8 bytes, as `intptr_t` is for
    /// the C API): then these bits are the condition, written under the guard, and a wait for one
    /// value can compare them without the guard (``ConditionLock/mayHold(_:)``).
    @usableFromInline let conditionBits = Atomic<UInt64>(0)
    // Written only by the thread that holds the lock (a plain load and store, no read-modify-write
    // on the fast path); readable by anyone. Here because every holder writes them.
    @usableFromInline let acquisitionCount = Atomic<UInt64>(0)
    @usableFromInline let contendedCount = Atomic<UInt64>(0)
    @usableFromInline let handOffCount = Atomic<UInt64>(0)

    init(spinEstimate: UInt32) { self.spinEstimate = Atomic(spinEstimate) }

    /// A new line, initialized.
    static func allocate(spinEstimate: UInt32) -> UnsafeMutablePointer<HandOffLine> {
        let size = max(64, MemoryLayout<HandOffLine>.stride)
        let line = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
            .bindMemory(to: HandOffLine.self, capacity: 1)
        line.initialize(to: HandOffLine(spinEstimate: spinEstimate))
        return line
    }

    static func deallocate(_ line: UnsafeMutablePointer<HandOffLine>) {
        line.deinitialize(count: 1)
        UnsafeMutableRawPointer(line).deallocate()
    }
}

extension ConditionLock {
    // MARK: The condition and its bits

    /// Whether the condition is mirrored in ``HandOffLine/conditionBits``: a plain value (no
    /// references) of at most 8 bytes, as `intptr_t` is for the C API.
    @inlinable
    static var mirrorsCondition: Bool { _isPOD(Condition.self) && MemoryLayout<Condition>.size <= 8 }

    /// The condition (the caller holds the guard, or is the holder and nobody can change it). A
    /// mirrored condition lives in the hand-off line's bits, so that a release writes no other
    /// line; any other one in the object.
    @inlinable @inline(__always)
    var value: Condition {
        get {
            guard Self.mirrorsCondition else { return storedValue }
            let bits = line.pointee.conditionBits.load(ordering: .relaxed)
            // A cast where the sizes match (no copy through memory, which would cost the caller
            // a stack protector).
            if MemoryLayout<Condition>.size == 8 { return unsafeBitCast(bits, to: Condition.self) }
            return withUnsafeBytes(of: bits) { $0.loadUnaligned(as: Condition.self) }
        }
        set {
            if Self.mirrorsCondition {
                line.pointee.conditionBits.store(Self.bits(of: newValue), ordering: .relaxed)
            } else {
                storedValue = newValue
            }
        }
    }

    /// The bits of `condition`, zero-extended (0 when the condition is not mirrored).
    @inlinable @inline(__always)
    static func bits(of condition: Condition) -> UInt64 {
        guard mirrorsCondition else { return 0 }
        if MemoryLayout<Condition>.size == 8 { return unsafeBitCast(condition, to: UInt64.self) }
        var bits: UInt64 = 0
        withUnsafeMutableBytes(of: &bits) { target in
            withUnsafeBytes(of: condition) { target.copyMemory(from: $0) }
        }
        return bits
    }
}
