// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKitTestSupport
import Synchronization
import Testing

@testable import QueueKit

// The DB queue's queue of asynchronous writes, alone: first in, first out, each write exactly
// once, from many submitting threads at once, with its nodes recycled.

@Suite("WriteQueue: the asynchronous writes' lock-free queue")
struct WriteQueueTests {
    @Test("one thread: writes come out in the order they went in, across recycling")
    func fifoOnOneThread() {
        let queue = WriteQueue()
        let seen = Shared<[Int]>([])
        for round in 0..<3 {
            for i in 0..<1_000 { queue.push(CWork(retaining: { seen.update { $0.append(round * 1_000 + i) } })) }
            for _ in 0..<1_000 { queue.pop()() }
            queue.recycle()
        }
        #expect(seen.value == Array(0..<3_000))
    }

    @Test("four submitting threads, one consumer: every write once, each thread's in its order")
    func manyProducersOneConsumer() {
        let queue = WriteQueue()
        let producers = 4
        let perProducer = 20_000
        // Counted after each push returns: the consumer pops only writes already counted, as the
        // DB queue does with its state word.
        let submitted = Atomic<Int>(0)
        let seen = UnsafeMutablePointer<[Int]>.allocate(capacity: producers)
        seen.initialize(repeating: [], count: producers)
        defer {
            seen.deinitialize(count: producers)
            seen.deallocate()
        }
        let address = UncheckedSendable(seen)
        let done = (0..<producers).map { producer in
            spawn {
                for i in 0..<perProducer {
                    // Only the consumer runs the writes: no lock around `seen`.
                    queue.push(CWork(retaining: { address.value[producer].append(i) }))
                    submitted.add(1, ordering: .releasing)
                }
            }
        }
        var popped = 0
        let deadline = Date(timeIntervalSinceNow: testTimeout)
        while popped < producers * perProducer && Date() < deadline {
            if popped < submitted.load(ordering: .acquiring) {
                queue.pop()()
                popped += 1
                if popped % 512 == 0 { queue.recycle() }
            } else {
                sched_yield()
            }
        }
        for semaphore in done { #expect(waits(for: semaphore)) }
        #expect(popped == producers * perProducer)
        for producer in 0..<producers {
            #expect(seen[producer] == Array(0..<perProducer), "producer \(producer)")
        }
    }
}
