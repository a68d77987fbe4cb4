// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// How a thread holds, or asks for, an object: the two modes the witness tells apart.
@usableFromInline
enum LockOrderMode: UInt8, Sendable {
    /// Alone: a condition lock, a serial queue's block, a barrier, a DB write.
    case exclusive = 0
    /// Alongside others: a concurrent queue's non-barrier block, a DB read.
    case shared = 1
}

/// One object the thread holds, as the witness sees it.
struct LockOrderHeld {
    /// The object's address (a condition lock, a queue, a DB queue's identity queue).
    var object: UInt
    var mode: LockOrderMode
    /// Whether the entry stands for a queue's block (popped by ``LockOrderThread/leaveBlock``) or
    /// a condition lock (removed by its release, in any order).
    var isBlock: Bool
}

/// One edge the thread knows the graph has: X held in one mode -> Y asked in another.
struct LockOrderCacheEntry {
    var from: UInt = 0
    var to: UInt = 0
    var bits: UInt32 = 0
    var epoch: UInt64 = .max
}

/// The calling thread's witness state: what it holds (at most ``capacity`` entries; deeper nesting
/// is not witnessed) and a direct-mapped cache of the edges it has already recorded, so that an
/// order seen before costs a few loads and compares and never the graph's lock.
///
/// Made on the thread's first witnessed acquisition, in memory the thread alone touches, found
/// through an initial-exec thread-local and freed at thread exit.
struct LockOrderThread {
    static let capacity = 64
    static let cacheSize = 256

    /// How many entries of `held` are in use.
    var count = 0
    /// Acquisitions beyond ``capacity`` that were not recorded (their releases find nothing).
    var overflow = 0
    /// The witness session the held set belongs to (``LockOrder/session``): a set from before the
    /// witness was last turned on is empty.
    var session: UInt64 = 0
    /// Whether the thread runs the lock-order handler: its calls are not witnessed.
    var inHandler = false
    /// The thread's pthread name as first sightings record it, and when it was read (reading it
    /// is a read of /proc): read again after a second.
    var name = ""
    var nameRead: UInt64 = 0
    /// Whether the current call has had its report (a call reports at most one cycle).
    var reportedInCall = false
    /// Whether the one line about nesting deeper than ``capacity`` has been printed.
    var warnedDepth = false
    let held: UnsafeMutablePointer<LockOrderHeld>
    let cache: UnsafeMutablePointer<LockOrderCacheEntry>

    init() {
        held = .allocate(capacity: Self.capacity)
        cache = .allocate(capacity: Self.cacheSize)
        cache.initialize(repeating: LockOrderCacheEntry(), count: Self.cacheSize)
    }

    /// The calling thread's state, made on first use.
    @inline(__always)
    static var current: UnsafeMutablePointer<LockOrderThread> {
        if let state = qkshim_lockorder_thread_get() {
            return state.assumingMemoryBound(to: LockOrderThread.self)
        }
        return make()
    }

    /// The calling thread's state, if it has one.
    @inline(__always)
    static var currentIfAny: UnsafeMutablePointer<LockOrderThread>? {
        qkshim_lockorder_thread_get().map { $0.assumingMemoryBound(to: LockOrderThread.self) }
    }

    @inline(never)
    private static func make() -> UnsafeMutablePointer<LockOrderThread> {
        let state = UnsafeMutablePointer<LockOrderThread>.allocate(capacity: 1)
        state.initialize(to: LockOrderThread())
        qkshim_lockorder_thread_install(UnsafeMutableRawPointer(state), lockOrderThreadExit)
        return state
    }

    /// Empties the held set when it belongs to an earlier session of the witness.
    @inline(__always)
    mutating func join(_ session: UInt64) {
        if _slowPath(self.session != session) {
            count = 0
            overflow = 0
            self.session = session
        }
    }

    /// Records that the thread now holds `object`.
    @inline(__always)
    mutating func push(_ object: UInt, _ mode: LockOrderMode, isBlock: Bool) {
        if _fastPath(count < Self.capacity) {
            held[count] = LockOrderHeld(object: object, mode: mode, isBlock: isBlock)
            count += 1
        } else {
            overflowed()
        }
    }

    @inline(never)
    private mutating func overflowed() {
        overflow += 1
        if !warnedDepth {
            warnedDepth = true
            LockOrder.line(
                "QueueKit: lock-order witness: more than \(Self.capacity) objects held by one thread; deeper nesting is not witnessed\n"
            )
        }
    }

    /// Records that the thread no longer holds `object` (a condition lock: the innermost entry).
    @inline(__always)
    mutating func remove(_ object: UInt) {
        var index = count - 1
        while index >= 0 {
            if held[index].object == object && !held[index].isBlock {
                count -= 1
                if index != count { (held + index).update(from: held + index + 1, count: count - index) }
                return
            }
            index -= 1
        }
        if overflow > 0 && count == Self.capacity { overflow -= 1 }
    }

    /// Ends a block that pushed `entries` entries (its queue and the serial queues it targets).
    @inline(__always)
    mutating func leaveBlock(_ entries: Int) {
        var remaining = entries
        while remaining > 0 && overflow > 0 {
            overflow -= 1
            remaining -= 1
        }
        // A condition lock taken inside the block and still held sits above the block's entries.
        var index = count - 1
        while remaining > 0 && index >= 0 {
            if held[index].isBlock {
                count -= 1
                if index != count { (held + index).update(from: held + index + 1, count: count - index) }
                remaining -= 1
            }
            index -= 1
        }
    }

    /// Whether the thread has recorded the edge `from -> to` (`bits`: modes and timing) in the
    /// current epoch; if not, notes it as recorded.
    @inline(__always)
    mutating func knows(_ from: UInt, _ to: UInt, _ bits: UInt32, epoch: UInt64) -> Bool {
        var hash = (from &>> 4) &* 0x9E37_79B9_7F4A_7C15
        hash ^= (to &>> 4) &+ UInt(bits) &* 0x85EB_CA6B
        hash ^= hash &>> 29
        let slot = cache + Int(hash & UInt(Self.cacheSize - 1))
        if slot.pointee.from == from && slot.pointee.to == to && slot.pointee.bits == bits
            && slot.pointee.epoch == epoch
        {
            return true
        }
        slot.pointee = LockOrderCacheEntry(from: from, to: to, bits: bits, epoch: epoch)
        return false
    }

    /// Forgets every cached edge (a forked child's forking thread).
    mutating func clearCache() {
        for index in 0..<Self.cacheSize { cache[index] = LockOrderCacheEntry() }
    }
}

/// The thread-exit destructor of a thread's witness state.
private let lockOrderThreadExit: @convention(c) (UnsafeMutableRawPointer?) -> Void = { pointer in
    guard let pointer else { return }
    let state = pointer.assumingMemoryBound(to: LockOrderThread.self)
    state.pointee.held.deallocate()
    state.pointee.cache.deallocate()
    state.deinitialize(count: 1)
    state.deallocate()
}
