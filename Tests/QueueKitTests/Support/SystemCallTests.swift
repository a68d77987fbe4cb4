// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import Glibc
import QueueKitShim
import QueueKitTestSupport
import Testing

@testable import QueueKit

// Failed system calls that can only be bugs trap with one line naming the call and the error,
// instead of being retried forever or ignored. Each failure is provoked in a child process (this
// test binary again, see `ChildRun`); the child tests do nothing unless their variable is set.

private let futexChildVariable = "QUEUEKIT_TEST_FUTEX_CHILD"
private let mutexChildVariable = "QUEUEKIT_TEST_MUTEX_CHILD"

@Suite("System calls are checked")
struct SystemCallTests {
    @Test func aFutexWaitOnAMisalignedWordTraps() throws {
        let child = try ChildRun(test: "futexMisuseChild", variable: futexChildVariable)
        #expect(child.finished, "the child process did not finish")
        guard child.finished else { return }
        #expect(child.reason == .uncaughtSignal)
        #expect(child.status == SIGABRT)
        #expect(
            child.lines.filter { $0.hasPrefix("QueueKit:") } == [
                "QueueKit: futex(FUTEX_WAIT_BITSET) failed: errno \(EINVAL) (\(String(cString: strerror(EINVAL))))"
            ])
    }

    @Test(.enabled(if: isChildRun(futexChildVariable), "the child process of aFutexWaitOnAMisalignedWordTraps"))
    func futexMisuseChild() {
        let words = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 4)
        // One byte past an aligned word: the kernel refuses with EINVAL before reading it.
        let misaligned = (words + 1).assumingMemoryBound(to: UInt32.self)
        _ = qkshim_futex_wait(misaligned, 0, MonotonicClock.forever)
        Issue.record("qkshim_futex_wait returned after EINVAL")
    }

    #if DEBUG
        /// Debug builds use an error-checking mutex: relocking from the holder traps (EDEADLK) instead
        /// of hanging.
        @Test func relockingALockTrapsInDebugBuilds() throws {
            let child = try ChildRun(test: "mutexMisuseChild", variable: mutexChildVariable)
            #expect(child.finished, "the child process did not finish")
            guard child.finished else { return }
            #expect(child.reason == .uncaughtSignal)
            let expected =
                "QueueKit: pthread_mutex_lock failed: error \(EDEADLK) (\(String(cString: strerror(EDEADLK))))"
            #expect(child.lines.contains { $0.contains(expected) }, "stderr: \(child.lines)")
        }

        @Test(.enabled(if: isChildRun(mutexChildVariable), "the child process of relockingALockTrapsInDebugBuilds"))
        func mutexMisuseChild() {
            let lock = Lock(0)
            lock.withLock { _ in lock.withLock { _ in } }
            Issue.record("relocking a Lock returned")
        }
    #endif
}
