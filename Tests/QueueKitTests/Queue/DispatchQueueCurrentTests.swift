// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Foundation
import QueueKit
import QueueKitTestSupport
import Testing

// The Swift side of the registry: the `DispatchQueue` extension, and `Queue` as Swift code
// uses it. Blocking calls run on helper threads with bounded waits, as in QueueTests.

@Suite("DispatchQueue.current (the DispatchQueue extension)", .serialized)
struct DispatchQueueCurrentTests {
    @Test func registeredQueuesAreFoundInsideTheirBlocks() {
        let registered = DispatchQueue(label: "qk.test.dq.registered", registerDetection: true)
        let later = DispatchQueue(label: "qk.test.dq.later")
        DispatchQueue.registerDetection(of: later)
        let unregistered = DispatchQueue(label: "qk.test.dq.unregistered", registerDetection: false)
        let facts = Facts()
        #expect(
            bounded {
                facts.flag("outside: current is nil", DispatchQueue.current == nil)
                facts.flag("outside: label is nil", DispatchQueue.currentLabel == nil)
                registered.sync {
                    facts.flag("registered: current", DispatchQueue.current === registered)
                    facts["registered: label"] = DispatchQueue.currentLabel
                    facts.flag("registered: isCurrent", registered.isCurrent)
                    facts.flag("registered: later.isCurrent", later.isCurrent)
                }
                later.sync { facts.flag("later: current", DispatchQueue.current === later) }
                unregistered.sync {
                    facts.flag("unregistered: current is nil", DispatchQueue.current == nil)
                    facts.flag("unregistered: isCurrent", unregistered.isCurrent)
                }
            })
        #expect(
            facts.all == [
                "outside: current is nil": "true", "outside: label is nil": "true",
                "registered: current": "true", "registered: label": "qk.test.dq.registered",
                "registered: isCurrent": "true", "registered: later.isCurrent": "false",
                "later: current": "true", "unregistered: current is nil": "true", "unregistered: isCurrent": "false",
            ])
    }

    @Test func systemQueuesAreRegisteredLazily() {
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        let qoses: [DispatchQoS.QoSClass] = [.background, .utility, .default, .userInitiated, .userInteractive]
        for qos in qoses {
            DispatchQueue.global(qos: qos).async {
                // On Linux every `.global(qos:)` access is a new wrapper object: compare by
                // registration (`isCurrent`) and by label, not with `===`.
                facts.flag("global \(qos): found", DispatchQueue.current != nil)
                facts.flag("global \(qos): label", DispatchQueue.currentLabel == DispatchQueue.global(qos: qos).label)
                facts.flag("global \(qos): isCurrent", DispatchQueue.global(qos: qos).isCurrent)
                facts.flag("global \(qos): main.isCurrent", DispatchQueue.main.isCurrent)
                done.signal()
            }
        }
        DispatchQueue.main.async {
            facts.flag("main: found", DispatchQueue.current != nil)
            facts.flag("main: label", DispatchQueue.currentLabel == DispatchQueue.main.label)
            facts.flag("main: isCurrent", DispatchQueue.main.isCurrent)
            done.signal()
        }
        for _ in 0...qoses.count { #expect(waits(for: done)) }

        var expected = ["main: found": "true", "main: label": "true", "main: isCurrent": "true"]
        for qos in qoses {
            expected["global \(qos): found"] = "true"
            expected["global \(qos): label"] = "true"
            expected["global \(qos): isCurrent"] = "true"
            expected["global \(qos): main.isCurrent"] = "false"
        }
        #expect(facts.all == expected)
    }

    @Test func targetsAndSyncHopsFollowGetSpecific() {
        let target = DispatchQueue(label: "qk.test.dq.target", registerDetection: true)
        let inner = DispatchQueue(label: "qk.test.dq.inner", target: target, registerDetection: true)
        let unregisteredInner = DispatchQueue(label: "qk.test.dq.anon", target: target)
        let other = DispatchQueue(label: "qk.test.dq.other", registerDetection: true)
        let facts = Facts()
        #expect(
            bounded {
                inner.sync { facts["inner"] = DispatchQueue.currentLabel }
                // An unregistered queue is seen through its registered target, as getSpecific walks.
                unregisteredInner.sync { facts["unregistered inner"] = DispatchQueue.currentLabel }
                // A sync hop: the queue further out is not current inside the inner block.
                other.sync { target.sync { facts["hop"] = DispatchQueue.currentLabel } }
            })
        #expect(
            facts.all == [
                "inner": "qk.test.dq.inner", "unregistered inner": "qk.test.dq.target", "hop": "qk.test.dq.target",
            ])
    }

    @Test func theRegistryKeepsNoQueueAlive() {
        weak var weakQueue: DispatchQueue?
        do {
            let queue = DispatchQueue(label: "qk.test.dq.weak", registerDetection: true)
            weakQueue = queue
            // Run a block on it (a fresh queue: this cannot block), on this thread so that no
            // helper thread's closure still holds the queue afterwards.
            queue.sync { _ = DispatchQueue.current }
        }
        #expect(weakQueue == nil, "a registered queue must not be retained by its own registration")
    }

    @Test func registeringTwiceChangesNothing() {
        let queue = DispatchQueue(label: "qk.test.dq.twice", registerDetection: true)
        DispatchQueue.registerDetection(of: queue)
        DispatchQueue.registerDetection(of: .main)
        DispatchQueue.registerDetection(of: .global())
        let facts = Facts()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.main.async {
            facts.flag("main still found", DispatchQueue.current != nil)
            done.signal()
        }
        #expect(waits(for: done))
        #expect(bounded { queue.sync { facts.flag("queue found", DispatchQueue.current === queue) } })
        #expect(facts.all == ["main still found": "true", "queue found": "true"])
    }

    /// Inside a QueueKit block the answer comes from the execution frames (a `Queue` is never
    /// registered); a registered plain queue synced from inside such a block is innermost and wins;
    /// a DB queue's block has no dispatch queue, so the answer is what is further out.
    @Test func queueKitBlocksAnswerFromTheirFrames() throws {
        let queue = try Queue(label: "qk.test.dq.frames")
        let leaf = try Queue(label: "qk.test.dq.frames.leaf", target: Queue.global(qos: .utility))
        let plain = DispatchQueue(label: "qk.test.dq.frames.plain", registerDetection: true)
        let db = try DBQueue(label: "qk.test.dq.frames.db")
        let facts = Facts()
        #expect(
            bounded {
                _ = try? queue.sync {
                    facts["queue"] = DispatchQueue.currentLabel
                    facts.flag("queue: current.isCurrent", DispatchQueue.current?.isCurrent == true)
                    facts.flag("queue: main.isCurrent", DispatchQueue.main.isCurrent)
                    plain.sync {
                        facts["plain inside queue"] = DispatchQueue.currentLabel
                        facts.flag("plain inside queue: isCurrent", plain.isCurrent)
                        _ = try? leaf.sync { facts["leaf inside plain"] = DispatchQueue.currentLabel }
                    }
                    _ = try? db.read { facts["db read inside queue"] = DispatchQueue.currentLabel }
                }
                // The leaf targets a registered system queue: the frame is the more precise answer.
                _ = try? leaf.sync {
                    facts["leaf"] = DispatchQueue.currentLabel
                    facts.flag("leaf: utility.isCurrent", DispatchQueue.global(qos: .utility).isCurrent)
                }
                _ = try? db.read { facts.flag("db read alone: nil", DispatchQueue.current == nil) }
            })
        #expect(
            facts.all == [
                "queue": "qk.test.dq.frames", "queue: current.isCurrent": "true", "queue: main.isCurrent": "false",
                "plain inside queue": "qk.test.dq.frames.plain", "plain inside queue: isCurrent": "true",
                "leaf inside plain": "qk.test.dq.frames.leaf", "db read inside queue": "qk.test.dq.frames",
                "leaf": "qk.test.dq.frames.leaf", "leaf: utility.isCurrent": "false", "db read alone: nil": "true",
            ])
    }
}

@Suite("Queue (the Swift API)", .serialized)
struct QueueSwiftAPITests {
    @Test func syncBarrierSyncAndPerformReturnValues() throws {
        let queue = try Queue(label: "qk.test.swift", kind: .concurrent)
        let result = Shared<[Int]>([])
        #expect(
            bounded {
                let a = try? queue.sync { 1 }
                let b = try? queue.barrierSync { 2 }
                let c = try? queue.perform { 3 }
                result.value = [a ?? -1, b ?? -1, c ?? -1]
            })
        #expect(result.value == [1, 2, 3])
    }

    @Test func deadlocksAreThrownAndWorkIsNotRun() throws {
        let serial = try Queue(label: "qk.test.swift.serial")
        let concurrent = try Queue(label: "qk.test.swift.concurrent", kind: .concurrent)
        let facts = Facts()
        #expect(
            bounded {
                _ = try? serial.sync {
                    var ran = false
                    do { try serial.sync { ran = true } } catch {
                        facts["serial sync"] = "\(error as? QueueKitError == .wouldDeadlock)"
                    }
                    facts.flag("serial work ran", ran)
                    let inline = try? serial.perform { Queue.current === serial }
                    facts.flag("perform inline", inline == true)
                }
                _ = try? concurrent.sync {
                    do { try concurrent.barrierSync {} } catch {
                        facts["reader barrierSync"] = "\(error as? QueueKitError == .wouldDeadlock)"
                    }
                    facts.flag("reader check", concurrent.check(.onQueue) && !concurrent.check(.onQueueAsBarrier))
                }
            })
        #expect(
            facts.all == [
                "serial sync": "true", "serial work ran": "false", "perform inline": "true",
                "reader barrierSync": "true", "reader check": "true",
            ])
    }

    @Test func queueKitErrorsMatchInCatchPatterns() throws {
        let queue = try Queue(label: "qk.test.swift.pattern")
        let facts = Facts()
        #expect(
            bounded {
                _ = try? queue.sync {
                    do {
                        try queue.sync {}
                    } catch QueueKitError.busy {
                        facts["caught"] = "busy"
                    } catch QueueKitError.wouldDeadlock {
                        facts["caught"] = "wouldDeadlock"
                    } catch {
                        facts["caught"] = "other"
                    }
                }
            })
        #expect(facts.all == ["caught": "wouldDeadlock"])
        struct Other: Error {}
        #expect(!(QueueKitError.wouldDeadlock ~= Other()))
        #expect(QueueKitError.timedOut ~= QueueKitError.timedOut as any Error)
    }

    @Test func errorsThrownByTheWorkAreRethrown() throws {
        struct Boom: Error {}
        let queue = try Queue(label: "qk.test.swift.rethrow")
        let facts = Facts()
        #expect(
            bounded {
                do { try queue.sync { throw Boom() } } catch { facts.flag("sync rethrew", error is Boom) }
                do { try queue.perform { throw Boom() } } catch { facts.flag("perform rethrew", error is Boom) }
            })
        #expect(facts.all == ["sync rethrew": "true", "perform rethrew": "true"])
    }

    @Test func currentAndChecksInTheSwiftAPI() throws {
        let root = try Queue(label: "qk.test.swift.root")
        let leaf = try Queue(label: "qk.test.swift.leaf", target: root)
        let facts = Facts()
        #expect(
            bounded {
                facts.flag("outside", Queue.current == nil && Queue.currentLabel == nil && !root.check(.onQueue))
                _ = try? leaf.sync {
                    facts["current"] = Queue.currentLabel
                    facts.flag("root is current", root.isCurrent)
                    facts.flag("root as barrier", root.check(.onQueueAsBarrier))
                }
            })
        #expect(
            facts.all == [
                "outside": "true", "current": "qk.test.swift.leaf", "root is current": "true",
                "root as barrier": "true",
            ])
        #expect(Queue.global(qos: .utility) === Queue.global(qos: .utility))
        #expect(Queue.main.label == "com.apple.main-thread")
    }
}
