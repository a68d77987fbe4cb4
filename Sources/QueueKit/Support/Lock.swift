// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc

/// State behind a `pthread_mutex_t`: the lock of QueueKit's slow paths (the DB queue's write lane,
/// a queue's specifics, a condition lock's name), never of a fast path.
///
/// Not `Synchronization.Mutex`: its lock operations live in the prebuilt standard library, out of
/// ThreadSanitizer's sight, so every critical section it protects shows up as a data race and
/// hides real ones. ThreadSanitizer intercepts pthreads, and glibc's mutex costs about the same
/// uncontended. The mutex and the state live at fixed heap addresses (a mutex must not move), and
/// the state is reached through a pointer, so no dynamic exclusivity check runs on each access.
///
/// Every `pthread_mutex_*` result is checked: a failure is a bug and traps, naming the call and
/// the error. Debug builds use an error-checking mutex, so relocking from the holder or unlocking
/// from another thread traps instead of deadlocking or corrupting the lock; release builds use the
/// default mutex (its fast path, plus one compare of the result).
///
/// Thread safety: `withLock` may be called from any thread; it is not reentrant.
struct Lock<State>: ~Copyable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let state: UnsafeMutablePointer<State>

    init(_ initial: State) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        Self.initialise(mutex)
        state = .allocate(capacity: 1)
        state.initialize(to: initial)
    }

    deinit {
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        mutex.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Runs `body` with the state, holding the lock. `body` must not take the same lock again.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&state.pointee)
    }

    /// Runs `body` with the state when the lock is free right now; `nil` without waiting when some
    /// thread holds it (in a forked child: held at the fork by a thread that no longer exists).
    func withLockIfAvailable<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R? {
        let result = pthread_mutex_trylock(mutex)
        if result == EBUSY { return nil }
        Self.check(result, "pthread_mutex_trylock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body(&state.pointee)
    }

    // MARK: fork()

    /// Takes the lock in a `pthread_atfork` prepare handler, so that no other thread is inside it
    /// at the fork. ``releaseInParent()`` or ``releaseInChild(_:)`` ends it.
    func acquireForFork() {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
    }

    /// The state, while ``acquireForFork()`` holds the lock.
    func withStateWhileHeld<R>(_ body: (inout State) -> R) -> R {
        body(&state.pointee)
    }

    /// Releases the lock that ``acquireForFork()`` took, in the parent.
    func releaseInParent() {
        Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
    }

    /// Ends ``acquireForFork()`` in the child, after `body` adjusted the state (forgetting the
    /// threads that did not survive the fork). The mutex is initialised afresh rather than
    /// unlocked: the child's thread has a new thread id, which an error-checking mutex would not
    /// accept as its owner.
    func releaseInChild(_ body: (inout State) -> Void = { _ in }) {
        body(&state.pointee)
        Self.initialise(mutex)
    }

    /// Initialises `mutex`: error-checking in debug builds, the default kind otherwise.
    private static func initialise(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
        var attributes = pthread_mutexattr_t()
        check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
        #if DEBUG
            check(pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK)), "pthread_mutexattr_settype")
        #endif
        check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
        check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
    }

    /// Traps when a `pthread_mutex_*` call failed (`result` is its error number).
    @inline(__always)
    private static func check(_ result: Int32, _ call: StaticString) {
        if _slowPath(result != 0) { failed(call, result) }
    }

    @inline(never)
    private static func failed(_ call: StaticString, _ result: Int32) -> Never {
        preconditionFailure("QueueKit: \(call) failed: error \(result) (\(String(cString: strerror(result))))")
    }
}

extension Lock: @unchecked Sendable {}
