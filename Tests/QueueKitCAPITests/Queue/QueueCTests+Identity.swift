// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit
import Foundation
import Glibc
import QueueKitTestSupport
import Testing

extension QueueTests {
    // MARK: Identity: current, is_current, labels

    @Test func outsideAnyQueueThereIsNoCurrentQueue() {
        let facts = Facts()
        let queue = CQueue.create("qk.test.outside")
        defer { queue.release() }
        #expect(
            bounded {
                facts.flag("current is NULL", qk_queue_current() == nil)
                facts["label length"] = "\(qk_queue_copy_current_label(nil, 0))"
                var buffer: [CChar] = [65, 65, 0]
                facts["copied length"] = "\(qk_queue_copy_current_label(&buffer, buffer.count))"
                facts["copied"] = cString(buffer)
                facts.flag("main is current", CQueue.main.isCurrent)
                facts.checks("checks", queue)
                facts.checks("main checks", CQueue.main)
            })
        #expect(
            facts.all == [
                "current is NULL": "true", "label length": "0", "copied length": "0", "copied": "",
                "main is current": "false", "checks": joined(notHeld), "main checks": joined(notHeld),
            ])
    }

    @Test func theCurrentQueueInsideEveryKindOfBlock() {
        let serial = CQueue.create("qk.test.current.serial")
        let concurrent = CQueue.create("qk.test.current.concurrent", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.current.other")
        defer {
            serial.release()
            concurrent.release()
            other.release()
        }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        @Sendable func observe(_ name: String, _ queue: CQueue) {
            facts.flag("\(name): current", CQueue.current == queue)
            facts.flag("\(name): is_current", queue.isCurrent)
            facts.flag("\(name): other is_current", other.isCurrent)
            var buffer = [CChar](repeating: 0, count: 64)
            _ = qk_queue_copy_current_label(&buffer, buffer.count)
            facts["\(name): label"] = cString(buffer)
        }
        for queue in [serial, concurrent] {
            #expect(
                queue.async {
                    observe("async \(queue.label)", queue)
                    done.signal()
                } == 0)
            #expect(
                queue.barrierAsync {
                    observe("barrier_async \(queue.label)", queue)
                    done.signal()
                } == 0)
        }
        #expect(
            bounded {
                for queue in [serial, concurrent] {
                    queue.sync { observe("sync \(queue.label)", queue) }
                    queue.barrierSync { observe("barrier_sync \(queue.label)", queue) }
                    queue.perform { observe("perform \(queue.label)", queue) }
                }
            })
        for _ in 0..<4 { #expect(waits(for: done)) }

        var expected: [String: String] = [:]
        for queue in [serial, concurrent] {
            for call in ["async", "barrier_async", "sync", "barrier_sync", "perform"] {
                let name = "\(call) \(queue.label)"
                expected["\(name): current"] = "true"
                expected["\(name): is_current"] = "true"
                expected["\(name): other is_current"] = "false"
                expected["\(name): label"] = queue.label
            }
        }
        #expect(facts.all == expected)
    }

    @Test func theCurrentQueueOnGlobalAndMainQueues() {
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        let qoses = [QK_QOS_BACKGROUND, QK_QOS_UTILITY, QK_QOS_DEFAULT, QK_QOS_USER_INITIATED, QK_QOS_USER_INTERACTIVE]
        for qos in qoses {
            let global = CQueue.global(qos)
            #expect(
                global.async {
                    facts.flag("global \(qos.rawValue): current", CQueue.current == global)
                    facts.flag("global \(qos.rawValue): label", CQueue.current?.label == global.label)
                    done.signal()
                } == 0)
        }
        // In this process dispatch drains the main queue on worker threads (see the file comment).
        #expect(
            CQueue.main.async {
                facts.flag("main: current", CQueue.current == .main)
                facts.checks("main: checks", .main)
                facts.status("main: nested sync", CQueue.main.sync {})
                done.signal()
            } == 0)
        #expect(
            bounded {
                CQueue.global().sync { facts.flag("global sync: current", CQueue.current == .global()) }
                CQueue.main.sync { facts.flag("main sync: current", CQueue.current == .main) }
            })
        for _ in 0...qoses.count { #expect(waits(for: done)) }

        var expected = [
            "main: current": "true", "main: checks": joined(heldExclusively), "main: nested sync": "EDEADLK",
            "global sync: current": "true", "main sync: current": "true",
        ]
        for qos in qoses {
            expected["global \(qos.rawValue): current"] = "true"
            expected["global \(qos.rawValue): label"] = "true"
        }
        #expect(facts.all == expected)
    }

    @Test func copyCurrentLabelHasStrlcpySemantics() {
        let queue = CQueue.create("abcdef")
        defer { queue.release() }
        let facts = Facts()
        #expect(
            bounded {
                queue.sync {
                    facts["measure"] = "\(qk_queue_copy_current_label(nil, 0))"
                    // A NULL buffer only measures, whatever the size says.
                    facts["NULL buffer, size 10"] = "\(qk_queue_copy_current_label(nil, 10))"
                    for size in [1, 2, 4, 6, 7, 100] {
                        var buffer = [CChar](repeating: 0x58, count: size + 1) // 'X' guard bytes
                        let length = qk_queue_copy_current_label(&buffer, size)
                        let guardIntact = buffer[size] == 0x58
                        facts["size \(size)"] = "\(length) '\(cString(buffer))' guard \(guardIntact)"
                    }
                    var untouched: [CChar] = [0x58, 0]
                    _ = qk_queue_copy_current_label(&untouched, 0)
                    facts.flag("size 0 writes nothing", untouched[0] == 0x58)
                    // SIZE_MAX is a size_t, not -1: the label is copied and terminated.
                    var large = [CChar](repeating: 0x58, count: 16)
                    let length = qk_queue_copy_current_label(&large, Int(bitPattern: UInt.max))
                    facts["size SIZE_MAX"] = "\(length) '\(cString(large))'"
                }
            })
        #expect(
            facts.all == [
                "measure": "6", "NULL buffer, size 10": "6",
                "size 1": "6 '' guard true", "size 2": "6 'a' guard true", "size 4": "6 'abc' guard true",
                "size 6": "6 'abcde' guard true", "size 7": "6 'abcdef' guard true",
                "size 100": "6 'abcdef' guard true", "size 0 writes nothing": "true",
                "size SIZE_MAX": "6 'abcdef'",
            ])
    }

    // MARK: Predicates

    @Test func predicatesOnSerialConcurrentAndBarrierBlocks() {
        let serial = CQueue.create("qk.test.pred.serial")
        let concurrent = CQueue.create("qk.test.pred.concurrent", QK_QUEUE_CONCURRENT)
        let other = CQueue.create("qk.test.pred.other", QK_QUEUE_CONCURRENT)
        defer {
            serial.release()
            concurrent.release()
            other.release()
        }
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        #expect(
            serial.async {
                facts.checks("serial async", serial)
                facts.checks("serial async: other", other)
                done.signal()
            } == 0)
        #expect(
            concurrent.async {
                facts.checks("concurrent async", concurrent)
                done.signal()
            } == 0)
        #expect(
            concurrent.barrierAsync {
                facts.checks("concurrent barrier_async", concurrent)
                done.signal()
            } == 0)
        #expect(
            CQueue.global().barrierAsync {
                facts.checks("global barrier_async", .global())
                done.signal()
            } == 0)
        #expect(
            bounded {
                facts.checks("outside", serial)
                serial.sync { facts.checks("serial sync", serial) }
                serial.barrierSync { facts.checks("serial barrier_sync", serial) }
                concurrent.sync { facts.checks("concurrent sync", concurrent) }
                concurrent.barrierSync { facts.checks("concurrent barrier_sync", concurrent) }
                concurrent.perform { facts.checks("concurrent perform", concurrent) }
                // Global queues have no barriers: a barrier block there is an ordinary block.
                CQueue.global().barrierSync { facts.checks("global barrier_sync", .global()) }
            })
        for _ in 0..<4 { #expect(waits(for: done)) }

        #expect(
            facts.all == [
                "outside": joined(notHeld),
                "serial async": joined(heldExclusively), "serial async: other": joined(notHeld),
                "serial sync": joined(heldExclusively), "serial barrier_sync": joined(heldExclusively),
                "concurrent async": joined(heldShared), "concurrent sync": joined(heldShared),
                "concurrent perform": joined(heldShared),
                "concurrent barrier_async": joined(heldExclusively), "concurrent barrier_sync": joined(heldExclusively),
                "global barrier_async": joined(heldShared), "global barrier_sync": joined(heldShared),
            ])
    }

    // MARK: Target hierarchies

    @Test func targetHierarchies() {
        let root = CQueue.create("qk.test.target.root") // serial
        let middle = CQueue.create("qk.test.target.middle", QK_QUEUE_CONCURRENT, target: root)
        let leaf = CQueue.create("qk.test.target.leaf", target: middle)
        let pool = CQueue.create("qk.test.target.pool", QK_QUEUE_CONCURRENT)
        let onPool = CQueue.create("qk.test.target.onpool", target: pool)
        let bystander = CQueue.create("qk.test.target.bystander")
        // The target hierarchy keeps the targets alive: drop our references to them.
        root.release()
        middle.release()
        pool.release()
        defer {
            leaf.release()
            onPool.release()
            bystander.release()
        }

        let rootKey = SpecificKey()
        let leafKey = SpecificKey()
        let bothKey = SpecificKey()
        let value = { (n: Int) in UnsafeMutableRawPointer(bitPattern: n)! }
        #expect(qk_queue_set_specific(root.handle, rootKey.raw, value(0x10), nil) == 0)
        #expect(qk_queue_set_specific(root.handle, bothKey.raw, value(0x11), nil) == 0)
        #expect(qk_queue_set_specific(leaf.handle, leafKey.raw, value(0x20), nil) == 0)
        #expect(qk_queue_set_specific(leaf.handle, bothKey.raw, value(0x21), nil) == 0)

        let facts = Facts()
        #expect(
            bounded {
                leaf.sync {
                    facts.flag("leaf: current is the inner queue", CQueue.current == leaf)
                    facts["leaf: label"] = CQueue.current?.label
                    facts.flag(
                        "leaf: is_current(leaf, middle, root)", leaf.isCurrent && middle.isCurrent && root.isCurrent)
                    facts.flag("leaf: is_current(bystander)", bystander.isCurrent)
                    facts.checks("leaf: leaf", leaf)
                    // A block of a queue that targets a serial queue holds that queue exclusively
                    // (it runs in the serial queue's drain); a concurrent target is held shared.
                    facts.checks("leaf: middle", middle)
                    facts.checks("leaf: root", root)
                    facts["leaf: get_specific(root key)"] = "\(Int(bitPattern: qk_get_specific(rootKey.raw)))"
                    facts["leaf: get_specific(leaf key)"] = "\(Int(bitPattern: qk_get_specific(leafKey.raw)))"
                    facts["leaf: get_specific(both key)"] = "\(Int(bitPattern: qk_get_specific(bothKey.raw)))"
                    facts.flag(
                        "leaf: queue_get_specific does not walk", qk_queue_get_specific(leaf.handle, rootKey.raw) == nil
                    )
                }
                onPool.sync {
                    facts.checks("onPool: pool", pool)
                    facts.flag("onPool: is_current(pool)", pool.isCurrent)
                }
                middle.sync {
                    facts.flag("middle: current", CQueue.current == middle)
                    facts.flag("middle: is_current(leaf)", leaf.isCurrent)
                    facts.checks("middle: root", root)
                    facts.checks("middle: leaf", leaf)
                }
            })
        #expect(
            facts.all == [
                "leaf: current is the inner queue": "true", "leaf: label": "qk.test.target.leaf",
                "leaf: is_current(leaf, middle, root)": "true", "leaf: is_current(bystander)": "false",
                "leaf: leaf": joined(heldExclusively), "leaf: middle": joined(heldShared),
                "leaf: root": joined(heldExclusively),
                "leaf: get_specific(root key)": "\(0x10)", "leaf: get_specific(leaf key)": "\(0x20)",
                "leaf: get_specific(both key)": "\(0x21)", "leaf: queue_get_specific does not walk": "true",
                "onPool: pool": joined(heldShared), "onPool: is_current(pool)": "true",
                "middle: current": "true", "middle: is_current(leaf)": "false",
                "middle: root": joined(heldExclusively), "middle: leaf": joined(notHeld),
            ])
    }

    // MARK: Sync hops

    @Test func aSyncHopKeepsTheOuterQueueHeldButNotCurrent() {
        let a = CQueue.create("qk.test.hop.a")
        let b = CQueue.create("qk.test.hop.b")
        defer {
            a.release()
            b.release()
        }
        let keyA = SpecificKey()
        let keyB = SpecificKey()
        #expect(qk_queue_set_specific(a.handle, keyA.raw, UnsafeMutableRawPointer(bitPattern: 0xA)!, nil) == 0)
        #expect(qk_queue_set_specific(b.handle, keyB.raw, UnsafeMutableRawPointer(bitPattern: 0xB)!, nil) == 0)
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)

        @Sendable func insideB(_ via: String) {
            // dispatch_assert_queue's view: A is held by the block waiting in the sync...
            facts.checks("\(via): A", a)
            facts.checks("\(via): B", b)
            // ...while dispatch_get_specific's view sees only B and its targets.
            facts.flag("\(via): is_current(A)", a.isCurrent)
            facts.flag("\(via): current is B", CQueue.current == b)
            facts.flag("\(via): get_specific(A key) is NULL", qk_get_specific(keyA.raw) == nil)
            facts["\(via): get_specific(B key)"] = "\(Int(bitPattern: qk_get_specific(keyB.raw)))"
        }
        #expect(
            a.async {
                facts.status("async A: sync B", b.sync { insideB("async A") })
                facts.flag("async A: current is A again", CQueue.current == a)
                done.signal()
            } == 0)
        #expect(waits(for: done))
        // The same through the main queue, whose blocks dispatch may run on another thread.
        #expect(
            bounded {
                facts.status("sync A: sync main", a.sync { _ = CQueue.main.sync { facts.checks("main via A: A", a) } })
            })

        #expect(
            facts.all == [
                "async A: A": joined(heldExclusively), "async A: B": joined(heldExclusively),
                "async A: is_current(A)": "false", "async A: current is B": "true",
                "async A: get_specific(A key) is NULL": "true", "async A: get_specific(B key)": "\(0xB)",
                "async A: sync B": "0", "async A: current is A again": "true",
                "sync A: sync main": "0", "main via A: A": joined(heldExclusively),
            ])
    }
}
