import Glibc

/// State behind a `pthread_mutex_t`: the lock of QueueKit's slow paths (the DB queue's write lane).
///
/// Not `Synchronization.Mutex`: its lock operations live in the prebuilt standard library, out of
/// ThreadSanitizer's sight, so every critical section it protects shows up as a data race and
/// hides real ones. ThreadSanitizer intercepts pthreads, and glibc's mutex costs about the same
/// uncontended. The mutex and the state live at fixed heap addresses (a mutex must not move), and
/// the state is reached through a pointer, so no dynamic exclusivity check runs on each access.
struct Lock<State>: ~Copyable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let state: UnsafeMutablePointer<State>

    init(_ initial: State) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        state = .allocate(capacity: 1)
        state.initialize(to: initial)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Runs `body` with the state, holding the lock. `body` must not take the same lock again.
    @inline(__always)
    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state.pointee)
    }

    /// Runs `body` with the state when the lock is free right now; `nil` without waiting when some
    /// thread holds it (in a forked child: held at the fork by a thread that no longer exists).
    func withLockIfAvailable<R>(_ body: (inout State) throws -> R) rethrows -> R? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state.pointee)
    }

    // MARK: fork()

    /// Takes the lock in a `pthread_atfork` prepare handler, so that no other thread is inside it
    /// at the fork; ``releaseAfterFork(_:)`` gives it back in the parent and the child (the
    /// child's one thread is the forking thread, which holds it).
    func acquireForFork() {
        pthread_mutex_lock(mutex)
    }

    /// The state, while ``acquireForFork()`` holds the lock.
    func withStateWhileHeld<R>(_ body: (inout State) -> R) -> R {
        body(&state.pointee)
    }

    /// Releases the lock that ``acquireForFork()`` took, after `body` adjusted the state (in the
    /// child: forgetting the threads that did not survive the fork).
    func releaseAfterFork(_ body: (inout State) -> Void = { _ in }) {
        body(&state.pointee)
        pthread_mutex_unlock(mutex)
    }
}

extension Lock: @unchecked Sendable {}
