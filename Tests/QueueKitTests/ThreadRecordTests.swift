import Foundation
import Testing

@testable import QueueKit

@Suite("Thread records")
struct ThreadRecordTests {
    @Test("a thread's record is registered while it runs and retired when it exits")
    func aRecordLivesAsLongAsItsThread() throws {
        let made = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var number: UInt64 = 0
        nonisolated(unsafe) var ownName = ""
        let thread = Thread {
            number = ThreadRecord.current.number
            ownName = ThreadRecord.current.name
            #expect(ThreadRecord.current === ThreadRecord.record(numbered: number))
            made.signal()
            release.wait()
        }
        thread.start()
        #expect(made.wait(timeout: .now() + testTimeout) == .success)
        let record = try #require(ThreadRecord.record(numbered: number))
        // The name is read from outside the thread, as reports do: it is the thread's own name
        // (whatever Foundation gave it), and the display name puts it after the number.
        let name = record.name
        #expect(!name.isEmpty)
        #expect(name == ownName)
        #expect(record.displayName == "thread \(number) \"\(name)\"")
        #expect(!record.hasExited)
        release.signal()
        // Thread exit runs the pthread key destructor on that thread; wait for it with a bound.
        let deadline = Date().addingTimeInterval(testTimeout)
        while ThreadRecord.record(numbered: number) != nil && Date() < deadline { sched_yield() }
        #expect(ThreadRecord.record(numbered: number) == nil)
        #expect(record.hasExited)
    }
}
