// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Synchronization
import Testing

// MARK: - Destroy: nothing lost

@Suite("DB queue: destroy loses nothing", .serialized)
struct DBQueueDestroyTests {
    @Test("100,000 write_async from 4 threads, then destroy: each ran exactly once")
    func hundredThousandWritesThenDestroy() {
        let handle = Unchecked(qk_dbqueue_create("test.lossless")!)
        let total = 100_000
        let threads = 4
        let counts = UnsafeMutablePointer<Int32>.allocate(capacity: total)
        counts.initialize(repeating: 0, count: total)
        defer { counts.deallocate() }
        let bump: qk_function_t = { context in context!.assumingMemoryBound(to: Int32.self).pointee += 1 }
        let base = UncheckedPointer(counts)
        let submitters = (0..<threads).map { t in
            spawn {
                for i in stride(from: t, to: total, by: threads) {
                    #expect(qk_dbqueue_write_async(handle.value, base.pointer + i, bump) == 0)
                }
            }
        }
        for submitter in submitters { #expect(waits(for: submitter, within: 60)) }
        let destroyed = finishes(within: 60) { expectStatus(0, qk_dbqueue_destroy(handle.value)) }
        #expect(destroyed, "\(destroyed ? "" : DBQueueInternals.debugState(handle.value))")
        let buffer = UnsafeBufferPointer(start: counts, count: total)
        #expect(buffer.allSatisfy { $0 == 1 })
    }

    @Test("destroy waits for a read on another thread, then runs the pending writes")
    func destroyWaitsForReadersAndRunsPendingWrites() {
        let handle = Unchecked(qk_dbqueue_create("test.destroy")!)
        let db = handle.value
        let events = Recorder()
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let reader = spawn {
            dbRead(handle.value) {
                inside.signal()
                #expect(waits(for: go))
                events.record("read ends")
            }
        }
        #expect(waits(for: inside))
        for i in 0..<3 { dbWriteAsync(handle.value) { events.record("write \(i)") } }
        let destroyer = spawn {
            #expect(qk_dbqueue_destroy(handle.value) == 0)
            events.record("destroyed")
        }
        // The destroy is really waiting: its exclusive pass is queued behind the writes.
        #expect(eventually { DBQueueInternals.pendingWrites(db) == 4 })
        go.signal()
        #expect(waits(for: reader))
        #expect(waits(for: destroyer))
        #expect(events.events == ["read ends", "write 0", "write 1", "write 2", "destroyed"])
    }

    /// Regression: the last reader to leave while a write is due decrements the reader count and
    /// then takes the lane's lock to start that write. A `destroy` arriving in between must not
    /// take the missing reader for an idle queue and free it under the reader's feet: it waits for
    /// that reader to start the write.
    @Test("destroy waits for the last reader to finish leaving")
    func destroyWaitsForTheLastReaderToFinishLeaving() {
        let handle = Unchecked(qk_dbqueue_create("test.last-reader")!)
        let db = handle.value
        DBQueueInternals.retain(db) // observe a premature free without crashing
        defer { DBQueueInternals.release(db) }
        DBQueueInternals.disableReadBias(db) // the last counted reader's way out
        let inHook = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        DBQueueInternals.setHookBeforeLastReaderStarts(db) {
            inHook.signal()
            _ = waits(for: proceed)
        }
        let inside = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let reader = spawn {
            dbRead(handle.value) {
                inside.signal()
                _ = waits(for: go)
            }
        }
        #expect(waits(for: inside))
        let ran = Shared(false)
        expectStatus(0, dbWriteAsync(handle.value) { ran.value = true }) // due, waiting for the reader
        go.signal()
        #expect(waits(for: inHook)) // the reader has left and not yet started the write
        DBQueueInternals.setHookBeforeLastReaderStarts(db, nil)
        let destroyed = Shared(false)
        let destroyer = spawn {
            #expect(qk_dbqueue_destroy(handle.value) == 0)
            destroyed.value = true
        }
        #expect(eventually { destroyed.value || DBQueueInternals.pendingWrites(db) == 2 })
        #expect(!destroyed.value, "destroy finished while the last reader was still using the queue")
        proceed.signal()
        #expect(waits(for: reader))
        #expect(waits(for: destroyer))
        #expect(ran.value)
    }
}

/// A pointer handed to other threads by a test that outlives them.
struct UncheckedPointer: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Int32>
    init(_ pointer: UnsafeMutablePointer<Int32>) { self.pointer = pointer }
}
