import Foundation
import QueueKitShim
import Testing

@testable import QueueKit

@Suite("Thread records")
struct ThreadRecordTests {
    @Test("a thread's record is registered while it runs and retired when it exits")
    func aRecordLivesAsLongAsItsThread() throws {
        let made = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var number: UInt64 = 0
        let thread = Thread {
            // pthread_setname_np directly: Foundation's Thread.name does not always reach the
            // pthread on Linux (the thread then keeps the name it inherited from its creator).
            _ = qkshim_thread_set_name("record-test")
            number = ThreadRecord.current.number
            #expect(ThreadRecord.current === ThreadRecord.record(numbered: number))
            made.signal()
            release.wait()
        }
        thread.start()
        #expect(made.wait(timeout: .now() + testTimeout) == .success)
        let record = try #require(ThreadRecord.record(numbered: number))
        #expect(record.name == "record-test")
        #expect(record.displayName == "thread \(number) \"record-test\"")
        #expect(!record.hasExited)
        release.signal()
        // Thread exit runs the pthread key destructor on that thread; wait for it with a bound.
        let deadline = Date().addingTimeInterval(testTimeout)
        while ThreadRecord.record(numbered: number) != nil && Date() < deadline { sched_yield() }
        #expect(ThreadRecord.record(numbered: number) == nil)
        #expect(record.hasExited)
    }
}
