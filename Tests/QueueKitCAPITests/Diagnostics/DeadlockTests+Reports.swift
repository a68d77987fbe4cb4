// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

extension DeadlockTests {
    // MARK: Not cycles: never refused

    @Test("a chain of waits on busy queues is never refused")
    func chainOfWaits() {
        let tag = unique("chain")
        let a = CQueue.create("\(tag).a")
        let b = CQueue.create("\(tag).b")
        defer {
            a.release()
            b.release()
        }
        let busy = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let outcomes = Outcomes()
        // T1 holds a (blocked outside QueueKit); T2, inside b, syncs onto a; T3 syncs onto b.
        let t1 = spawn {
            outcomes.record(
                "t1",
                a.sync {
                    busy.signal()
                    _ = release.wait(timeout: .now() + testTimeout)
                })
        }
        #expect(waits(for: busy))
        let bHeld = DispatchSemaphore(value: 0)
        let t2 = spawn {
            outcomes.record(
                "t2",
                b.sync {
                    bHeld.signal()
                    outcomes.record("t2→a", a.sync {})
                })
        }
        #expect(waits(for: bHeld))
        let t3 = spawn { outcomes.record("t3", b.sync {}) }
        #expect(eventually { Diagnostics.waitReport().components(separatedBy: "\(tag).").count >= 3 })
        release.signal()
        #expect(waits(for: t1) && waits(for: t2) && waits(for: t3))
        #expect(outcomes.all.values.allSatisfy { $0 == 0 }, "\(outcomes.all)")
    }

    @Test("lock_when for a value set later is reported, never refused")
    func lockWhenForALaterValue() {
        let tag = unique("later")
        let queue = CQueue.create("\(tag).q")
        let lock = CLock("\(tag).stage", condition: 2)
        defer {
            queue.release()
            _ = lock.destroy()
        }
        let outcomes = Outcomes()
        let inBlock = DispatchSemaphore(value: 0)
        let waiter = spawn {
            name("stage-waiter")
            outcomes.record(
                "block",
                queue.sync {
                    inBlock.signal()
                    let status = lock.lock(when: 3)
                    outcomes.record("lock_when", status)
                    if status == 0 { _ = lock.unlock() }
                })
        }
        #expect(waits(for: inBlock))
        let syncer = spawn { outcomes.record("sync", queue.sync {}) }
        var report = ""
        #expect(
            eventually {
                report = Diagnostics.waitReport()
                return report.contains("qk_condlock_lock_when(condition lock \"\(tag).stage\")")
                    && report.contains("qk_queue_sync(serial queue \"\(tag).q\")")
            })
        #expect(report.contains("waits for condition 3, now 2, lock free"), "\(report)")
        #expect(report.contains("\"stage-waiter\": in qk_condlock_lock_when"), "\(report)")
        #expect(lock.set(3) == 0)
        #expect(waits(for: waiter) && waits(for: syncer))
        #expect(outcomes.all.values.allSatisfy { $0 == 0 }, "\(outcomes.all)")
    }

    @Test("a ring through a timed wait: the timed call times out, the other succeeds")
    func ringThroughATimedWait() {
        let tag = unique("timed")
        let queue = CQueue.create("\(tag).q")
        let lock = CLock("\(tag).lock")
        defer {
            queue.release()
            _ = lock.destroy()
        }
        let meet = Rendezvous(parties: 2)
        let outcomes = Outcomes()
        let timed = spawn {
            outcomes.record(
                "block",
                queue.sync {
                    _ = meet.arrive()
                    // Waits for the lock, held by the thread that waits for this block.
                    outcomes.record("timed", lock.lock(until: qk_now_ns() + 300_000_000))
                })
        }
        let holder = spawn {
            #expect(lock.lock() == 0)
            _ = meet.arrive()
            outcomes.record("sync", queue.sync { outcomes.didRun("sync") })
            #expect(lock.unlock() == 0)
        }
        #expect(waits(for: timed) && waits(for: holder))
        #expect(outcomes.all["timed"] == ETIMEDOUT)
        #expect(outcomes.all["sync"] == 0)
        #expect(outcomes.runs == ["sync"])
        #expect(ReportLog.shared.reports(mentioning: tag).isEmpty)
    }

    @Test("many threads nesting queues and locks in one global order: nothing refused")
    func oneGlobalOrder() {
        let tag = unique("ordered")
        let outer = CQueue.create("\(tag).outer", QK_QUEUE_CONCURRENT)
        let middle = CQueue.create("\(tag).middle")
        let lock = CLock("\(tag).lock")
        defer {
            outer.release()
            middle.release()
            _ = lock.destroy()
        }
        let counter = Shared(0)
        let refused = Shared(0)
        let threads = (0..<6).map { _ in
            spawn {
                for _ in 0..<150 {
                    let status = outer.sync {
                        let inner = middle.sync {
                            guard lock.lock() == 0 else {
                                refused.update { $0 += 1 }
                                return
                            }
                            counter.update { $0 += 1 }
                            _ = lock.unlock()
                        }
                        if inner != 0 { refused.update { $0 += 1 } }
                    }
                    if status != 0 { refused.update { $0 += 1 } }
                }
            }
        }
        #expect(threads.allSatisfy { waits(for: $0) })
        #expect(refused.value == 0)
        #expect(counter.value == 900)
    }

    // MARK: Reports and handlers

    @Test("qk_copy_wait_report: empty with nobody waiting, strlcpy semantics")
    func waitReportCopy() throws {
        let tag = unique("copy")
        let lock = CLock("\(tag).lock")
        defer { _ = lock.destroy() }
        #expect(lock.lock() == 0)
        let waiter = spawn {
            name("copy-waiter")
            if lock.lock() == 0 { _ = lock.unlock() }
        }
        #expect(eventually { Diagnostics.waitReport().contains("\(tag).lock") })
        let length = qk_copy_wait_report(nil, 0)
        #expect(length > 0)
        var small = [CChar](repeating: 1, count: 8)
        // The whole report's length, not the copy's: more than fits. (Not `length` itself: the
        // report is read anew, its durations grow and other tests' waits come and go.)
        #expect(qk_copy_wait_report(&small, 8) > 8)
        #expect(small[7] == 0)
        var buffer = [CChar](repeating: 0, count: 4096)
        _ = qk_copy_wait_report(&buffer, buffer.count)
        let text = cString(buffer)
        #expect(text.contains("\"copy-waiter\": in qk_condlock_lock(condition lock \"\(tag).lock\") for "))
        #expect(text.contains("untimed; waits for thread \(qkshim_thread_id())"), "\(text)")
        #expect(lock.unlock() == 0)
        #expect(waits(for: waiter))
        #expect(eventually { !Diagnostics.waitReport().contains(tag) })
    }

    @Test("qk_set_deadlock_handler: a C function gets the report on the refused thread; NULL restores stderr")
    func cDeadlockHandler() {
        let tag = unique("c-handler")
        final class Box: @unchecked Sendable {
            var report = ""
            var thread: UInt64 = 0
        }
        let box = Box()
        let handler: qk_report_function_t = { context, report in
            let box = Unmanaged<Box>.fromOpaque(context!).takeUnretainedValue()
            box.report = String(cString: report!)
            box.thread = qkshim_thread_id()
        }
        #expect(qk_set_deadlock_handler(handler, Unmanaged.passUnretained(box).toOpaque()) == 0)
        defer { ReportLog.install() }
        let first = CLock("\(tag).1")
        let second = CLock("\(tag).2")
        defer {
            _ = first.destroy()
            _ = second.destroy()
        }
        let meet = Rendezvous(parties: 2)
        let refusedOn = Shared<UInt64>(0)
        func taker(_ outer: CLock, _ inner: CLock) -> DispatchSemaphore {
            spawn {
                _ = outer.lock()
                _ = meet.arrive()
                let status = inner.lock()
                if status == EDEADLK { refusedOn.value = qkshim_thread_id() } else { _ = inner.unlock() }
                _ = outer.unlock()
            }
        }
        let one = taker(first, second)
        let two = taker(second, first)
        #expect(waits(for: one) && waits(for: two))
        #expect(box.report.contains("\(tag)."))
        #expect(box.thread != 0 && box.thread == refusedOn.value)
        #expect(qk_set_deadlock_handler(nil, nil) == 0)
    }

    @Test("the stall handler is called once per stalled wait, from a QueueKit thread")
    func stallWatch() {
        let tag = unique("stall")
        let lock = CLock("\(tag).lock")
        defer { _ = lock.destroy() }
        let calls = Shared<[String]>([])
        let called = DispatchSemaphore(value: 0)
        Diagnostics.watchStalls(after: .milliseconds(30)) { report in
            guard report.contains(tag) else { return }
            calls.update { $0.append(report) }
            called.signal()
        }
        defer { Diagnostics.watchStalls(after: .zero, nil) }
        #expect(lock.lock() == 0)
        let first = spawn {
            name("stalled-1")
            if lock.lock(until: qk_now_ns() + 20_000_000_000) == 0 { _ = lock.unlock() }
        }
        #expect(waits(for: called))
        #expect(calls.value.count == 1)
        #expect(
            calls.value.first?.contains("\"stalled-1\": in qk_condlock_lock_until(condition lock \"\(tag).lock\")")
                == true)
        #expect(calls.value.first?.contains(", timed; waits for thread ") == true)
        // A second stalled wait gets its own call; the first, still stalled, is not reported again.
        let second = spawn {
            name("stalled-2")
            if lock.lock() == 0 { _ = lock.unlock() }
        }
        #expect(waits(for: called))
        #expect(calls.value.count == 2)
        #expect(calls.value.last?.contains("\"stalled-2\"") == true)
        #expect(lock.unlock() == 0)
        #expect(waits(for: first) && waits(for: second))
    }

    @Test("a suspended task's wait shows in the wait report until it is withdrawn")
    func taskWaitsInTheReport() {
        let tag = unique("task")
        let waiter = SuspendedWaiter(call: "read", object: ReportedObject(name: "DB queue \"\(tag)\""), wanted: nil)
        SuspendedWaits.register(waiter)
        let report = Diagnostics.waitReport()
        #expect(report.contains("  task: suspended in read(DB queue \"\(tag)\"), for "), "\(report)")
        #expect(report.contains("ms, untimed, holds nothing"), "\(report)")
        SuspendedWaits.unregister(waiter)
        #expect(!Diagnostics.waitReport().contains(tag))
    }

    /// An object as a suspended task's wait names it.
    final class ReportedObject: SuspendedWaitObject {
        let waitReportName: String
        init(name: String) { waitReportName = name }
        func describeWanted(_ wanted: (any Sendable)?) -> String? { nil }
    }

    @Test("QUEUEKIT_STALL_MS is parsed with strtonum: 1 to 3,600,000 ms")
    func stallEnvironmentParsing() {
        func parse(_ text: String) -> (UInt64, String?) {
            var error: UnsafePointer<CChar>?
            let ns = qkshim_parse_stall_ms(text, &error)
            return (ns, error.map { String(cString: $0) })
        }
        #expect(parse("250") == (250_000_000, nil))
        #expect(parse("3600000") == (3_600_000_000_000, nil))
        #expect(parse("0").1 == "too small")
        #expect(parse("3600001").1 == "too large")
        #expect(parse("soon").1 == "invalid")
        #expect(parse("").1 == "invalid")
    }
}
