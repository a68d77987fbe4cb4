// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// Tells ThreadSanitizer about the synchronisation QueueKit gives its users.
///
/// A C or Swift program built with `-fsanitize=thread` instruments its own code, not this
/// library: the futexes, atomics and dispatch internals that order one block after another are
/// invisible to it, so data guarded by QueueKit alone would be reported as racing. At every
/// hand-off QueueKit tells the sanitizer what it guarantees, through its public annotation
/// interface (weak symbols: without the sanitizer each call is one predictable branch):
///
/// - a DB queue, a condition lock and each queue are mutexes to the sanitizer: a write, a barrier
///   or serial block, a condition-lock section hold it exclusively; a read and a non-barrier
///   block of a concurrent queue hold it shared, so races between readers stay visible;
/// - submitting work (`async`, `write_async`) releases a token its block acquires before it runs;
/// - inside a C API call, the library's own memory accesses (allocations another thread frees,
///   the Swift runtime's caches) go unrecorded, the user code it runs is recorded as usual; the
///   first such call instantiates the metadata of QueueKit's generic types (``MetadataWarmUp``);
/// - `flush` acquires everything the writes before it released.
///
/// The annotations are made after the real acquisition and before the real release, outside
/// QueueKit's internal locks, so those never appear nested in them (no lock-order reports about
/// QueueKit's own locks). Queues with no barriers (the global ones) order nothing and are not
/// annotated. Thread-safe: every member only informs the sanitizer of the calling thread.
@usableFromInline
package enum ThreadSanitizer {
    /// Whether the sanitizer's runtime is in the process (decided once at load).
    @inlinable @inline(__always)
    static var isPresent: Bool { _slowPath(qkshim_tsan_mode & UInt8(QKSHIM_TSAN_ANNOTATE) != 0) }

    /// Whether QueueKit's own memory accesses are hidden from it (an uninstrumented library).
    @inlinable @inline(__always)
    package static var hidesInternals: Bool { _slowPath(qkshim_tsan_mode & UInt8(QKSHIM_TSAN_HIDE_INTERNALS) != 0) }

    /// The calling thread now holds `object`, shared or not; `couldFail` for try and timed
    /// acquisitions (they cannot take part in a deadlock). Called after the real acquisition,
    /// outside every internal lock, so those never nest in it.
    @inlinable @inline(__always)
    static func locked(_ object: AnyObject, shared: Bool = false, couldFail: Bool = false) {
        if isPresent { lockedSlow(object, flags(shared: shared, couldFail: couldFail)) }
    }

    /// The calling thread is about to release `object`, held as `locked` said. Called before the
    /// real release, so whoever gets `object` next is ordered after everything the thread did.
    @inlinable @inline(__always)
    static func unlocking(_ object: AnyObject, shared: Bool = false) {
        if isPresent { unlockingSlow(object, flags(shared: shared, couldFail: false)) }
    }

    /// ``locked(_:shared:couldFail:)`` for a condition lock's acquisition (try semantics: a
    /// condition lock's order is not the sanitizer's to judge), in one C call the Swift optimiser
    /// counts as one: the condition lock's fast paths stay inlined.
    @inline(__always)
    @inlinable
    static func conditionLockAcquired(_ lock: AnyObject) {
        qkshim_tsan_condlock_locked(address(lock))
    }

    /// ``unlocking(_:shared:)`` for a condition lock, as ``conditionLockAcquired(_:)``.
    @inline(__always)
    @inlinable
    static func conditionLockReleasing(_ lock: AnyObject) {
        qkshim_tsan_condlock_unlocking(address(lock))
    }

    // Out of line, so that the check is all the fast paths carry (small enough to stay inlined).
    @inline(never)
    @usableFromInline
    static func lockedSlow(_ object: AnyObject, _ flags: UInt32) {
        qkshim_tsan_locked(address(object), flags)
    }

    @inline(never)
    @usableFromInline
    static func unlockingSlow(_ object: AnyObject, _ flags: UInt32) {
        qkshim_tsan_unlocking(address(object), flags)
    }

    /// `object` is being freed: ordered after everyone who ever held it (as the exclusive
    /// holder it then is), so its memory going away races with none of their annotations.
    @inline(__always)
    static func destroying(_ object: AnyObject) {
        if isPresent {
            lockedSlow(object, 0)
            unlockingSlow(object, 0)
        }
    }

    /// Everything released through `object`'s exclusive holders happens before what follows
    /// (`flush`: the writes it waited for).
    @inline(__always)
    static func acquire(_ object: AnyObject) {
        if isPresent { qkshim_tsan_acquire(address(object)) }
    }

    /// A C condition test (`qk_condlock_lock_if`, `await`, ...) is handed to whichever thread
    /// evaluates it, usually the releasing one: what the waiting thread wrote before the call (the
    /// data `context` points to) happens before each evaluation, and each evaluation before the
    /// call returns (the caller may reuse that memory at once). `published` on the waiting thread
    /// before the wait is queued, `evaluating` and `evaluated` around each call of the test,
    /// `finished` on the waiting thread before the call returns.
    @inlinable @inline(__always)
    package static func conditionTestPublished(_ token: UnsafeRawPointer) {
        if isPresent { qkshim_tsan_release(token) }
    }

    /// See ``conditionTestPublished(_:)``.
    @inlinable @inline(__always)
    package static func conditionTestEvaluating(_ token: UnsafeRawPointer) {
        if isPresent { qkshim_tsan_acquire(token) }
    }

    /// See ``conditionTestPublished(_:)``.
    @inlinable @inline(__always)
    package static func conditionTestEvaluated(_ token: UnsafeRawPointer) {
        if isPresent { qkshim_tsan_release(token) }
    }

    /// See ``conditionTestPublished(_:)``.
    @inlinable @inline(__always)
    package static func conditionTestFinished(_ token: UnsafeRawPointer) {
        if isPresent { qkshim_tsan_acquire(token) }
    }

    /// Entering QueueKit's own code behind a C API call: until the matching
    /// ``leaveInternalCode(_:)``, its memory accesses are hidden from the sanitizer when this
    /// library is not instrumented; the user code it runs is seen (``userCode(_:)``). A pair of
    /// calls, not a closure, so the API call's body stays inlined. Returns what to pass to `leave`.
    @inlinable @inline(__always)
    package static func enterInternalCode() -> Bool {
        let hides = hidesInternals
        if hides { qkshim_tsan_internal_begin() }
        return hides
    }

    /// Leaving QueueKit's own code (see ``enterInternalCode()``).
    @inlinable @inline(__always)
    package static func leaveInternalCode(_ hides: Bool) {
        if hides { qkshim_tsan_internal_end() }
    }

    /// Runs `body`, QueueKit's own code on one of its worker threads (outside any C API call),
    /// as ``enterInternalCode()`` runs what follows it: its memory accesses hidden from the
    /// sanitizer when this library is not instrumented, the user code it runs seen.
    @inline(__always)
    static func internalCode<R>(_ body: () -> R) -> R {
        let hidden = enterInternalCode()
        defer { leaveInternalCode(hidden) }
        return body()
    }

    /// Runs `body`, user code, with its memory accesses seen even inside QueueKit's own code.
    @inlinable @inline(__always)
    static func userCode<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        guard hidesInternals else { return try body() }
        let depth = qkshim_tsan_user_code_begin()
        defer { qkshim_tsan_user_code_end(depth) }
        return try body()
    }

    /// Runs `body`, a block of a queue on the thread dispatch runs it on: when the sanitizer is
    /// present, QueueKit's own code around the block is hidden from it, as in a C API call.
    @inlinable @inline(__always)
    static func workerCode<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        guard isPresent else { return try body() }
        let hidden = enterInternalCode()
        defer { leaveInternalCode(hidden) }
        return try body()
    }

    /// `work` as submitted: when the sanitizer is present, wrapped to acquire what the submitting
    /// thread released at submission; unchanged otherwise.
    @inline(__always)
    static func handOff(_ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        guard isPresent else { return work }
        let token = Token()
        qkshim_tsan_release(address(token))
        return {
            qkshim_tsan_acquire(address(token))
            work()
        }
    }

    /// A DB queue's asynchronous write as submitted: when the sanitizer is present, wrapped to
    /// acquire the submission and hold `db` exclusively wherever the queue runs it.
    @inline(__always)
    static func handOff(_ work: CWork, exclusiveTo db: AnyObject & Sendable) -> CWork {
        guard isPresent else { return work }
        let wrapped = handOff { work() }
        return CWork(retaining: {
            locked(db)
            wrapped()
            unlocking(db)
        })
    }

    // MARK: Internals

    /// A distinct address per submission.
    private final class Token: Sendable {}

    @inlinable
    static func address(_ object: AnyObject) -> UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
    }

    @inlinable
    static func flags(shared: Bool, couldFail: Bool) -> UInt32 {
        (shared ? UInt32(QKSHIM_TSAN_READ_LOCK) : 0) | (couldFail ? UInt32(QKSHIM_TSAN_TRY_LOCK) : 0)
    }

    /// The queues a block of `queue` holds, outermost target first (one order everywhere), each
    /// exclusive or shared; queues without barriers hold nothing.
    @usableFromInline
    static func lockChain(_ queue: Queue, exclusive: Bool) {
        if let target = queue.target { lockChain(target, exclusive: target.isSerial) }
        if queue.honoursBarriers { locked(queue, shared: !exclusive) }
    }

    /// Releasing what ``lockChain(_:exclusive:)`` took, innermost first.
    @usableFromInline
    static func unlockChain(_ queue: Queue, exclusive: Bool) {
        if queue.honoursBarriers { unlocking(queue, shared: !exclusive) }
        if let target = queue.target { unlockChain(target, exclusive: target.isSerial) }
    }
}
