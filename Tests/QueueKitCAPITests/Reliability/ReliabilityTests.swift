// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

// Concurrency through the C API with plain (unsynchronized) shared state guarded only by
// QueueKit: under `swift test --sanitize=thread` (a stage of scripts/test.sh) ThreadSanitizer
// reports any access that QueueKit fails to order. Plus the regression tests of bugs the
// reliability programs (Tests/Reliability) found.

/// Plain, unsynchronized state: only QueueKit orders the accesses to it.
private final class Unguarded: @unchecked Sendable {
    var value = 0
    var copy = 0
}

private let threads = 4
private let rounds = 300

@Suite("Reliability: shared state under QueueKit, races found by ThreadSanitizer")
struct ReliabilityTests {
    @Test func dbQueueOrdersWritesAndReads() {
        let sentDB = Unchecked(qk_dbqueue_create("tsan.db")!)
        let db = sentDB.value
        let state = Unguarded()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let db = sentDB.value
            for round in 0..<rounds {
                switch (round + thread) % 3 {
                case 0:
                    callC({
                        state.value += 1
                        state.copy = state.value
                    }) { qk_dbqueue_write(db, $0, $1) }
                case 1:
                    callCAsync({
                        state.value += 1
                        state.copy = state.value
                    }) { qk_dbqueue_write_async(db, $0, $1) }
                default:
                    callC({ #expect(state.value == state.copy) }) { qk_dbqueue_read(db, $0, $1) }
                }
            }
        }
        #expect(qk_dbqueue_flush(db) == 0)
        callC({ #expect(state.value == 2 * threads * rounds / 3) }) { qk_dbqueue_read(db, $0, $1) }
        #expect(qk_dbqueue_destroy(db) == 0)
    }

    @Test func conditionLockHandsOffStateInOrder() {
        let sentLock = Unchecked(qk_condlock_create(0)!)
        let lock = sentLock.value
        let state = Unguarded()
        // Two threads (each its own, so they really run at once) alternate through the
        // condition: 0 -> one side, 1 -> the other.
        let done = DispatchSemaphore(value: 0)
        for side in 0..<2 {
            let thread = Thread {
                let lock = sentLock.value
                for _ in 0..<rounds {
                    #expect(qk_condlock_lock_when(lock, side) == 0)
                    #expect(state.value % 2 == side)
                    state.value += 1
                    #expect(qk_condlock_unlock_with(lock, 1 - side) == 0)
                }
                done.signal()
            }
            thread.start()
        }
        #expect(waits(for: done) && waits(for: done))
        #expect(state.value == 2 * rounds)
        // Plain mutual exclusion from several threads, every acquiring call.
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let lock = sentLock.value
            for round in 0..<rounds {
                let status: Int32
                switch (round + thread) % 3 {
                case 0: status = qk_condlock_lock(lock)
                case 1: status = qk_condlock_lock_until(lock, QK_FOREVER)
                default: status = qk_condlock_set(lock, 0) == 0 ? qk_condlock_lock_when(lock, 0) : EINVAL
                }
                #expect(status == 0)
                state.copy += 1
                #expect(qk_condlock_unlock(lock) == 0)
            }
        }
        #expect(state.copy == threads * rounds)
        #expect(qk_condlock_destroy(lock) == 0)
    }

    @Test func queuesOrderTheirBlocks() {
        let queues = Unchecked(
            (
                qk_queue_create("tsan.serial", QK_QUEUE_SERIAL)!,
                qk_queue_create("tsan.concurrent", QK_QUEUE_CONCURRENT)!
            ))
        let (serial, concurrent) = queues.value
        let state = Unguarded()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let (serial, concurrent) = queues.value
            for round in 0..<rounds {
                callC({ state.value += 1 }) { qk_queue_sync(serial, $0, $1) }
                callCAsync({ state.value += 1 }) { qk_queue_async(serial, $0, $1) }
                if (round + thread) % 2 == 0 {
                    callC({ state.copy += 1 }) { qk_queue_barrier_sync(concurrent, $0, $1) }
                } else {
                    callC({ _ = state.copy }) { qk_queue_sync(concurrent, $0, $1) }
                    callCAsync({ state.copy += 1 }) { qk_queue_barrier_async(concurrent, $0, $1) }
                }
            }
        }
        callC({ #expect(state.value == 2 * threads * rounds) }) { qk_queue_sync(serial, $0, $1) }
        callC({ #expect(state.copy == threads * rounds) }) { qk_queue_barrier_sync(concurrent, $0, $1) }
        qk_queue_release(serial)
        qk_queue_release(concurrent)
    }

    // Regression: libqueuekit.so links libdispatch statically, whose own global `strlcpy`
    // (measuring the destination) was bound to the label copy: a NULL buffer crashed.
    @Test func copyingTheCurrentLabelHasStrlcpySemantics() {
        let queue = qk_queue_create("com.example.label", QK_QUEUE_SERIAL)!
        callC({
            #expect(qk_queue_copy_current_label(nil, 0) == 17)
            var buffer = [CChar](repeating: 0x55, count: 8)
            #expect(qk_queue_copy_current_label(&buffer, 0) == 17)
            #expect(buffer[0] == 0x55)
            #expect(qk_queue_copy_current_label(&buffer, 8) == 17)
            #expect(String(decoding: buffer.prefix(7).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "com.exa")
            #expect(buffer[7] == 0)
        }) { qk_queue_sync(queue, $0, $1) }
        qk_queue_release(queue)
    }

    // Regression: a size_t `size` above Int.max was read as negative, so SIZE_MAX was EINVAL.
    @Test func statsAcceptAnySizeThatHoldsTheCounters() {
        let lock = qk_condlock_create(0)!
        var stats = qk_condlock_stats_t()
        stats.size = Int(bitPattern: UInt.max)
        #expect(qk_condlock_get_stats(lock, &stats) == 0)
        stats.size = 0
        #expect(qk_condlock_get_stats(lock, &stats) == EINVAL)
        #expect(qk_condlock_destroy(lock) == 0)
    }
}
