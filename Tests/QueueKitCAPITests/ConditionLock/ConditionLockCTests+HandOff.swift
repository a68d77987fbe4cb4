// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Dispatch
import Foundation
import Glibc
import QueueKit
import QueueKitTestSupport
import Testing

extension ConditionLockCTests {
    // MARK: Hand-off

    @Test func mutualExclusionUnderEightThreads() {
        let lock = CLock(0)
        let inside = Shared(0)
        let counter = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        counter.initialize(to: 0)
        defer { counter.deallocate() }
        let box = SendablePointer(counter)
        let threads = 8
        let iterations = 2_000
        let done = (0..<threads).map { index in
            spawn {
                for i in 0..<iterations {
                    let status: Int32
                    switch (index + i) % 4 {
                    case 0: status = lock.lock()
                    case 1: status = lock.lock(until: bounded)
                    case 2: status = lock.lock(when: 0, until: bounded)
                    default:
                        var s = lock.trylock()
                        while s == EBUSY { s = lock.lock(until: bounded) }
                        status = s
                    }
                    #expect(status == 0)
                    #expect(
                        inside.update { v in
                            v += 1
                            return v
                        } == 1)
                    box.pointer.pointee += 1 // a plain, unsynchronised increment: the lock protects it
                    inside.update { $0 -= 1 }
                    #expect(lock.unlock() == 0)
                }
            }
        }
        for semaphore in done { #expect(waits(for: semaphore)) }
        #expect(counter.pointee == threads * iterations)
        #expect(lock.stats.acquisitions == UInt64(threads * iterations))
        // Newcomers may overtake a sleeping waiter (for at most the fairness bound), which then
        // had a futile wake-up; the waits for one value with nobody else running are exact
        // (`handOffs0To1To2To3` and the tests after it).
        #expect(lock.stats.futile_wakeups <= lock.stats.wakeups)
        #expect(lock.destroy() == 0)
    }

    @Test func handOffs0To1To2To3() {
        let lock = CLock(0)
        let log = Recorder()
        let workers = (1...2).map { step in
            spawn {
                #expect(lock.lock(when: step, until: bounded) == 0)
                log.record("\(step)")
                #expect(lock.unlock(with: step + 1) == 0)
            }
        }
        #expect(eventually { lock.waiters == 2 })
        #expect(lock.lock(when: 0, until: bounded) == 0)
        log.record("0")
        #expect(lock.unlock(with: 1) == 0)
        #expect(lock.lock(when: 3, until: bounded) == 0)
        log.record("3")
        #expect(lock.unlock() == 0)
        for worker in workers { #expect(waits(for: worker)) }
        #expect(log.events == ["0", "1", "2", "3"])
        #expect(lock.condition == 3)
        #expect(lock.destroy() == 0)
    }

    @Test func onlyTheWaiterForTheNewValueWakes() {
        let lock = CLock(0)
        let woke = Recorder()
        let one = spawn {
            #expect(lock.lock(when: 1, until: bounded) == 0)
            woke.record("1")
            #expect(lock.unlock() == 0)
        }
        #expect(eventually { lock.waiters == 1 })
        let two = spawn {
            #expect(lock.lock(when: 2, until: bounded) == 0)
            woke.record("2")
            #expect(lock.unlock(with: 3) == 0)
        }
        #expect(eventually { lock.waiters == 2 })
        #expect(lock.set(2) == 0)
        #expect(waits(for: two))
        // The waiter for 1 was never woken: still queued, and no wake-up was wasted on it.
        #expect(woke.events == ["2"])
        #expect(lock.waiters == 1)
        var stats = lock.stats
        #expect(stats.wakeups == 1)
        #expect(stats.futile_wakeups == 0)
        #expect(lock.condition == 3)
        #expect(lock.set(1) == 0)
        #expect(waits(for: one))
        stats = lock.stats
        #expect(woke.events == ["2", "1"])
        #expect(stats.wakeups == 2)
        #expect(stats.futile_wakeups == 0)
        #expect(stats.contended == 2)
        #expect(lock.destroy() == 0)
    }

    @Test(arguments: [false, true])
    func sameValueWaitersAreServedInArrivalOrder(plain: Bool) {
        let lock = CLock(0)
        #expect(lock.lock() == 0)
        let order = Recorder()
        var done: [DispatchSemaphore] = []
        for index in 0..<6 {
            done.append(
                spawn {
                    #expect((plain ? lock.lock(until: bounded) : lock.lock(when: 7, until: bounded)) == 0)
                    order.record("\(index)")
                    #expect(lock.unlock(with: 7) == 0)
                })
            #expect(eventually { lock.waiters == index + 1 })
        }
        #expect(lock.unlock(with: 7) == 0)
        for semaphore in done { #expect(waits(for: semaphore)) }
        #expect(order.events == (0..<6).map { "\($0)" })
        #expect(lock.destroy() == 0)
    }

    @Test func aNewcomerTakesOnlyAFreeLockAndTheQueuedWaiterStillGetsIt() {
        // A release either hands the lock to the waiter (polling, or asleep past the fairness
        // bound) or wakes it and leaves the lock free (asleep: eventual fairness), so a running
        // newcomer may get it first. Either way the newcomer gets only a free lock, and the waiter,
        // still in line, gets the lock after it.
        let lock = CLock(0)
        #expect(lock.lock() == 0)
        let order = Recorder()
        let waiter = spawn {
            #expect(lock.lock(when: 5, until: bounded) == 0)
            order.record("waiter")
            #expect(lock.unlock() == 0)
        }
        #expect(eventually { lock.waiters == 1 })
        #expect(lock.unlock(with: 5) == 0)
        let status = lock.trylock(when: 5)
        #expect(status == 0 || status == EBUSY)
        if status == 0 {
            // Either the waiter was done already, or it has not run its critical section and
            // is still in line: overtaken.
            let overtaken = order.events.isEmpty
            order.record("newcomer")
            if overtaken { #expect(lock.waiters == 1) }
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: waiter))
        #expect(order.events.sorted() == (status == 0 ? ["newcomer", "waiter"] : ["waiter"]))
        #expect(lock.stats.acquisitions == (status == 0 ? 3 : 2))
        #expect(lock.stats.contended == 1)
        #expect(lock.destroy() == 0)
    }

    @Test func aWaiterTimingOutAsItIsHandedTheLockEitherHoldsItOrNot() {
        // Race deadlines against hand-offs; whatever wins, the books must balance: a 0 means the
        // waiter holds the lock, an ETIMEDOUT that it holds nothing and left the queue.
        let lock = CLock(0)
        let timeouts = Shared(0)
        for round in 0..<300 {
            #expect(lock.lock() == 0)
            let delay = UInt64(round % 30) * 2_000
            let waiter = spawn {
                let status = lock.lock(when: 1, until: qk_now_ns() + 30_000 + delay)
                if status == 0 {
                    #expect(lock.condition == 1)
                    #expect(lock.unlock(with: 0) == 0)
                } else {
                    #expect(status == ETIMEDOUT)
                    #expect(lock.unlock() == EPERM)
                    timeouts.update { $0 += 1 }
                }
            }
            // Release at about the deadline.
            let spinUntil = qk_now_ns() + 30_000
            while qk_now_ns() < spinUntil {}
            #expect(lock.unlock(with: 1) == 0)
            #expect(waits(for: waiter))
            #expect(lock.waiters == 0)
            // Whoever won, the lock ends up free; reset the value if the waiter timed out.
            #expect(lock.lock(until: bounded) == 0)
            #expect(lock.unlock(with: 0) == 0)
        }
        #expect(lock.stats.timeouts == UInt64(timeouts.value))
        #expect(!lock.isLocked)
        #expect(lock.destroy() == 0)
    }

    // MARK: Names and stats

    @Test func namesAreCopiedAndStayValidUntilReplaced() {
        let lock = CLock(0)
        #expect(String(cString: qk_condlock_name(lock.raw)) == "")
        var name = Array("loader".utf8CString)
        #expect(qk_condlock_set_name(lock.raw, &name) == 0)
        name[0] = 0x58 // the lock kept its own copy
        let pointer = qk_condlock_name(lock.raw)!
        #expect(String(cString: pointer) == "loader")
        #expect(qk_condlock_name(lock.raw) == pointer, "stable until the next set_name")
        #expect(lock.swift.name == "loader")
        #expect(qk_condlock_set_name(lock.raw, "second") == 0)
        #expect(String(cString: qk_condlock_name(lock.raw)) == "second")
        #expect(qk_condlock_set_name(lock.raw, nil) == 0)
        #expect(String(cString: qk_condlock_name(lock.raw)) == "")
        #expect(lock.destroy() == 0)
    }

    @Test func statsCountWhatTheContractSays() {
        let lock = CLock(0)
        #expect(lock.lock() == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.trylock() == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.lock(when: 0) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.trylock(when: 0) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.lock(until: bounded) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.lock(when: 0, until: bounded) == 0)
        #expect(lock.unlock() == 0)
        #expect(lock.set(1) == 0)
        #expect(lock.trylock(when: 0) == EBUSY)
        #expect(lock.lock(when: 0, until: 0) == ETIMEDOUT)
        #expect(lock.lock(when: 0, until: qk_now_ns() + 1_000_000) == ETIMEDOUT)
        var stats = lock.stats
        #expect(stats.size == MemoryLayout<qk_condlock_stats_t>.size)
        #expect(stats.acquisitions == 7)
        #expect(stats.contended == 0)
        #expect(stats.timeouts == 2)
        #expect(stats.futile_wakeups == 0)

        // A caller that knows fewer fields gets only those; one too small for `acquisitions` is EINVAL.
        let sentinel: UInt64 = 0xDEAD_BEEF
        stats = qk_condlock_stats_t(
            size: 0, acquisitions: sentinel, contended: sentinel, wakeups: sentinel,
            futile_wakeups: sentinel, timeouts: sentinel, abandonments: sentinel)
        stats.size = MemoryLayout<qk_condlock_stats_t>.offset(of: \.contended)!
        #expect(qk_condlock_get_stats(lock.raw, &stats) == 0)
        #expect(stats.acquisitions == 7)
        #expect(stats.contended == sentinel && stats.timeouts == sentinel)
        stats.size = MemoryLayout<qk_condlock_stats_t>.offset(of: \.acquisitions)! + 7
        stats.acquisitions = sentinel
        #expect(qk_condlock_get_stats(lock.raw, &stats) == EINVAL)
        #expect(stats.acquisitions == sentinel)
        stats.size = 0
        #expect(qk_condlock_get_stats(lock.raw, &stats) == EINVAL)
        #expect(qk_condlock_get_stats(lock.raw, nil) == EINVAL)
        #expect(lock.destroy() == 0)
    }

    // MARK: Misuse

    @Test func nullAndWrongTypeHandlesAreEINVALEverywhere() throws {
        let queue = try #require(qk_queue_create("not a lock", QK_QUEUE_SERIAL))
        defer { qk_queue_release(queue) }
        for handle in [nil, queue] as [OpaquePointer?] {
            #expect(qk_condlock_destroy(handle) == EINVAL)
            #expect(qk_condlock_lock(handle) == EINVAL)
            #expect(qk_condlock_trylock(handle) == EINVAL)
            #expect(qk_condlock_lock_until(handle, 0) == EINVAL)
            #expect(qk_condlock_lock_when(handle, 0) == EINVAL)
            #expect(qk_condlock_trylock_when(handle, 0) == EINVAL)
            #expect(qk_condlock_lock_when_until(handle, 0, QK_FOREVER) == EINVAL)
            #expect(qk_condlock_unlock(handle) == EINVAL)
            #expect(qk_condlock_unlock_with(handle, 1) == EINVAL)
            #expect(qk_condlock_set(handle, 1) == EINVAL)
            #expect(qk_condlock_condition(handle) == 0)
            #expect(qk_condlock_set_name(handle, "x") == EINVAL)
            #expect(String(cString: qk_condlock_name(handle)) == "")
            var stats = qk_condlock_stats_t()
            stats.size = MemoryLayout<qk_condlock_stats_t>.size
            #expect(qk_condlock_get_stats(handle, &stats) == EINVAL)
        }
        // The queue was not touched.
        #expect(String(cString: qk_queue_label(queue)) == "not a lock")
    }

    // MARK: Classic scenarios

    @Test func boundedProducerConsumerConsumesEveryItemExactlyOnce() {
        // A two-state buffer: EMPTY (0) and FULL (1), one slot. Four producers wait for
        // EMPTY, four consumers for FULL; each release wakes at most one thread, of the other kind.
        let empty = 0
        let full = 1
        let lock = CLock(empty)
        let slot = Shared(-1)
        let consumed = Shared([Int](repeating: 0, count: 4 * 500))
        let producers = (0..<4).map { p in
            spawn {
                for i in 0..<500 {
                    #expect(lock.lock(when: empty, until: bounded) == 0)
                    slot.value = p * 500 + i
                    #expect(lock.unlock(with: full) == 0)
                }
            }
        }
        let consumers = (0..<4).map { _ in
            spawn {
                for _ in 0..<500 {
                    #expect(lock.lock(when: full, until: bounded) == 0)
                    let item = slot.value
                    slot.value = -1
                    consumed.update { $0[item] += 1 }
                    #expect(lock.unlock(with: empty) == 0)
                }
            }
        }
        for semaphore in producers + consumers { #expect(waits(for: semaphore)) }
        #expect(consumed.value.allSatisfy { $0 == 1 })
        #expect(lock.condition == empty)
        // A running thread of the same kind may take the slot ahead of one woken for it (eventual
        // fairness), which then waits again: the only futile wake-ups there are.
        #expect(lock.stats.futile_wakeups <= lock.stats.wakeups)
        #expect(lock.destroy() == 0)
    }

    @Test func taskChainRunsInOrderStartedBySet() {
        // Tasks B and C start first and wait; "task A" finishes on a thread that never held the
        // lock and starts the chain with set, not with an unheld unlock_with.
        let idle = 0
        let aFinished = 1
        let bFinished = 2
        let cFinished = 3
        let lock = CLock(idle)
        let log = Recorder()
        let c = spawn {
            #expect(lock.lock(when: bFinished, until: bounded) == 0)
            log.record("C")
            #expect(lock.unlock(with: cFinished) == 0)
        }
        let b = spawn {
            #expect(lock.lock(when: aFinished, until: bounded) == 0)
            log.record("B")
            #expect(lock.unlock(with: bFinished) == 0)
        }
        #expect(eventually { lock.waiters == 2 })
        #expect(lock.unlock(with: aFinished) == EPERM, "the NSConditionLock shortcut is refused")
        log.record("A")
        #expect(lock.set(aFinished) == 0)
        #expect(waits(for: b))
        #expect(waits(for: c))
        #expect(log.events == ["A", "B", "C"])
        #expect(lock.condition == cFinished)
        #expect(lock.destroy() == 0)
    }

    @Test func startUpOrchestrationHonoursDependencies() {
        // Modules in stages: config; then network and storage in parallel; then sync (needs both);
        // then ui. The condition is the current stage; the lock guards the stage's bookkeeping.
        // A module waits for its stage, lets the others of the stage in at once (unlock keeps the
        // stage), works outside the lock, and the last of a stage to finish opens the next one.
        let stages = [["config"], ["network", "storage"], ["sync"], ["ui"]]
        let lock = CLock(0)
        let finished = Shared([String: Int]())
        let started = Shared([String: Int]())
        let clock = Shared(0)
        let remaining = Shared(stages.map(\.count))
        var threads: [DispatchSemaphore] = []
        for (stage, modules) in stages.enumerated().reversed() {
            for module in modules {
                threads.append(
                    spawn {
                        #expect(lock.lock(when: stage, until: bounded) == 0)
                        #expect(lock.unlock() == 0)
                        started.update {
                            $0[module] = clock.update {
                                $0 += 1
                                return $0
                            }
                        }
                        finished.update {
                            $0[module] = clock.update {
                                $0 += 1
                                return $0
                            }
                        }
                        #expect(lock.lock(until: bounded) == 0)
                        let left = remaining.update {
                            $0[stage] -= 1
                            return $0[stage]
                        }
                        #expect(left == 0 ? lock.unlock(with: stage + 1) == 0 : lock.unlock() == 0)
                    })
            }
        }
        for semaphore in threads { #expect(waits(for: semaphore)) }
        #expect(lock.condition == stages.count)
        let dependencies = [
            "network": ["config"], "storage": ["config"], "sync": ["network", "storage"], "ui": ["sync"],
        ]
        for (module, needs) in dependencies {
            for need in needs {
                #expect(finished.value[need]! < started.value[module]!, "\(module) started after \(need) finished")
            }
        }
        #expect(lock.destroy() == 0)
    }
}

/// A thread that holds a lock until told to release it (the "other holder" of the timeout matrix).
final class Holder: @unchecked Sendable {
    let lock: CLock
    let go = DispatchSemaphore(value: 0)
    let acquired = DispatchSemaphore(value: 0)
    var done: DispatchSemaphore?
    var holds = false

    init(lock: CLock) { self.lock = lock }

    func acquire() {
        done = spawn { [self] in
            #expect(lock.lock(until: bounded) == 0)
            acquired.signal()
            _ = waits(for: go)
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: acquired))
        holds = true
    }

    func release() {
        guard holds else { return }
        holds = false
        go.signal()
        if let done { #expect(waits(for: done)) }
    }

    func finish() { release() }
}

struct SendablePointer: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Int>
    init(_ pointer: UnsafeMutablePointer<Int>) { self.pointer = pointer }
}
