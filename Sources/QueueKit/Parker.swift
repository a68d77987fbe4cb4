import Glibc
import QueueKitShim

/// A one-shot wake-up word that one thread parks on and another sets: the way every QueueKit
/// waiter sleeps. Each waiter owns its own word, so a wake-up goes to exactly the thread meant,
/// never to a herd.
///
/// The word lives in the waiter's stack frame (`Parker.withWord`), so parking allocates nothing.
/// The waker sets the word and then wakes the futex; the waiter may already have returned and
/// reused the memory, which only risks a spurious futex wake-up that every wait loop tolerates.
struct Parker {
    /// How many times a waiter polls its word before it sleeps in the kernel. A hand-off between
    /// two running threads completes in well under a microsecond, so a short spin saves the two
    /// system calls and the scheduler round trip of a sleep (as WebKit's and parking_lot's locks do).
    static let spinLimit = 400

    let word: UnsafeMutablePointer<UInt32>

    /// Gives `body` a fresh, unset parker whose word lives on the stack for the call.
    @inline(__always)
    static func withParker<R>(_ body: (Parker) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 1) { buffer in
            let word = buffer.baseAddress!
            word.initialize(to: 0)
            return try body(Parker(word: word))
        }
    }

    var isSet: Bool { qkshim_atomic_load32(word) != 0 }

    /// Sets the word and wakes its waiter. Call it at most once per parker, outside any lock when
    /// possible (waking is a system call).
    func unpark() {
        qkshim_atomic_store32(word, 1)
        qkshim_futex_wake(word, 1)
    }

    /// Waits until `unpark` or the deadline. Returns true when unparked, false at the deadline.
    func park(until deadline: UInt64 = MonotonicClock.forever, spin: Bool = true) -> Bool {
        if spin {
            for _ in 0..<Self.spinLimit {
                if isSet { return true }
                qkshim_cpu_relax()
            }
        }
        while !isSet {
            if qkshim_futex_wait(word, 0, deadline) == ETIMEDOUT {
                return isSet
            }
        }
        return true
    }
}
