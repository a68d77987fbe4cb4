// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

extension DBQueue {
    /// The layout of `DBQueue.state`.
    @usableFromInline
    enum StateBit {
        /// A thread holds the queue exclusively: a writer, or a thread running asynchronous writes.
        @inlinable static var writer: UInt { 1 }
        /// A waiter has waited past the fairness bound: nobody enters without the lane.
        @inlinable static var due: UInt { 2 }
        /// Threads wait in the lane: whoever frees the queue looks at it.
        @inlinable static var parked: UInt { 4 }
        @inlinable static var flags: UInt { due | parked }
        /// Readers counted inside, in bits 3…29 (readers in slots are not counted: see
        /// `DBQueue+ReaderSlots.swift`).
        @inlinable static var oneReader: UInt { 8 }
        @inlinable static var readerMask: UInt { 0x3FFF_FFF8 }
        /// The queue is read-biased: a reader may enter through its slot. Set only by a counted
        /// reader (so never while a thread holds the exclusivity), cleared only by the holder of
        /// the exclusivity, which then waits for the readers in slots.
        @inlinable static var biased: UInt { 1 << 30 }
        /// The thread running asynchronous writes is publishing the ones that ran (`DBQueue.publish`).
        @inlinable static var publishing: UInt { 1 << 31 }
        /// Asynchronous writes submitted and not yet run, in bits 32…63: while any is pending,
        /// nobody enters without the lane (nothing overtakes a submitted write).
        @inlinable static var oneAsync: UInt { 1 << 32 }
        @inlinable static var asyncMask: UInt { 0xFFFF_FFFF_0000_0000 }

        @inlinable static var closedToReaders: UInt { writer | due | asyncMask }
        /// What makes the last reader leave through the lane.
        @inlinable static var needsLane: UInt { parked | due | asyncMask }

        @inlinable @inline(__always)
        static func asyncCount(_ state: UInt) -> UInt { state >> 32 }
    }
}
