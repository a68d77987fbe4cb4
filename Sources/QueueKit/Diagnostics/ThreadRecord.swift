// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim
import Synchronization

/// What QueueKit keeps about a thread beyond its frame chain: the thread's number and pthread (so
/// diagnostics can name it), and a place where the slow paths publish what the thread waits for.
///
/// A record is made the first time a thread needs one (``current``), lives in ``registry`` while the
/// thread runs, and is retired when the thread exits, from a pthread key destructor on that thread
/// (``threadDidExit(_:)``). Fast paths never touch it: only waits, diagnostics and the per-thread
/// bookkeeping that must survive the thread (abandoned locks) do.
///
/// Records are reference types so that a diagnostic walk can hold one while its thread exits; what
/// the thread publishes in it is read by other threads only under ``registry``'s lock.
@usableFromInline
final class ThreadRecord: @unchecked Sendable {
    /// The thread's QueueKit number (`qkshim_thread_id()`): small, non-zero, never reused.
    let number: UInt64
    /// The pthread, for its name.
    let thread: pthread_t
    /// Whether the thread is the process's main thread.
    let isMainThread: Bool
    /// Set (under the registry's lock) when the thread has exited: a holder that is gone.
    private(set) var hasExited = false

    /// Whether ``wait`` describes a wait in progress, and whether a diagnostic walk is reading it:
    /// ``WaitState``. The owner writes `wait` only while the state is `idle`; the state changes
    /// as `WaitRegistry` documents (publish, pin, unpin, unpublish).
    @usableFromInline let waitState = Atomic<UInt32>(WaitState.idle)
    /// What the thread waits for, while `waitState` is not `idle`. Written by the thread itself
    /// (before it publishes), read by other threads only while they have it pinned.
    @exclusivity(unchecked) @usableFromInline var wait = PublishedWait()
    /// A refused wait whose call has not given up yet (only the thread touches it): a DB queue's,
    /// whose refusal becomes final only once the waiter has left the lane without being granted.
    var pendingRefusal: Refusal?

    /// Keeps `refusal` until the call gives up (``deliverPendingRefusal()``) or the next wait
    /// (``dropPendingRefusal()``).
    func holdRefusal(_ refusal: consuming Refusal) {
        dropPendingRefusal()
        pendingRefusal = consume refusal
    }

    /// The call gave up: the refusal it holds, if any, is delivered.
    func deliverPendingRefusal() { pendingRefusal.take()?.deliver() }

    /// The wait the refusal was for was granted after all: it is dropped.
    func dropPendingRefusal() { pendingRefusal.take()?.drop() }

    private init() {
        number = qkshim_thread_id()
        thread = pthread_self()
        isMainThread = qkshim_is_main_thread()
    }

    /// The records of every live thread that has one, by number. Diagnostics walk it under its lock.
    static let registry: Lock<[UInt64: ThreadRecord]> = {
        Fork.installHooks()
        return Lock([:])
    }()

    /// The calling thread's record, made and registered on first use.
    @inline(__always)
    static var current: ThreadRecord {
        if let record = qkshim_record_get() {
            return Unmanaged<ThreadRecord>.fromOpaque(record).takeUnretainedValue()
        }
        return makeCurrent()
    }

    /// ``current`` without a reference count: the record lives as long as its thread.
    @inline(__always)
    static var currentUnmanaged: Unmanaged<ThreadRecord> {
        if let record = qkshim_record_get() { return Unmanaged<ThreadRecord>.fromOpaque(record) }
        return Unmanaged.passUnretained(makeCurrent())
    }

    /// The calling thread's record if it has one.
    static var currentIfAny: ThreadRecord? {
        qkshim_record_get().map { Unmanaged<ThreadRecord>.fromOpaque($0).takeUnretainedValue() }
    }

    @inline(never)
    private static func makeCurrent() -> ThreadRecord {
        let record = ThreadRecord()
        registry.withLock { $0[record.number] = record }
        // The thread-local and the pthread key own one reference, given back at thread exit.
        qkshim_record_install(Unmanaged.passRetained(record).toOpaque(), threadExitCallback)
        return record
    }

    /// The record of the live thread numbered `number`, if it has one.
    static func record(numbered number: UInt64) -> ThreadRecord? {
        registry.withLock { $0[number] }
    }

    /// The thread's pthread name ("" when it has none or cannot be read). Only for live threads.
    var name: String {
        guard !hasExited else { return "" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            guard qkshim_thread_get_name(thread, buffer.baseAddress!, buffer.count) == 0 else { return "" }
            return String(cString: buffer.baseAddress!)
        }
    }

    /// ``name`` as reports use it: read at most once per ``nameLifetime`` (reading another thread's
    /// name is a read of /proc, ~20 µs here, and a report may name dozens of threads).
    var reportName: String {
        let now = qkshim_now_coarse_ns()
        if let cached = cachedName.withLock({ $0 }), now &- cached.read < Self.nameLifetime { return cached.name }
        let fresh = name
        cachedName.withLock { $0 = (fresh, now) }
        return fresh
    }

    private let cachedName = Lock<(name: String, read: UInt64)?>(nil)
    private static let nameLifetime: UInt64 = 1_000_000_000

    /// "thread 7 \"worker-a\"": how reports name a thread.
    var displayName: String {
        let name = reportName
        return name.isEmpty ? "thread \(number)" : "thread \(number) \"\(name)\""
    }

    /// Runs on the exiting thread, once: the condition locks it still holds are abandoned (see
    /// `Lifecycle.swift`), the record leaves the registry and is marked gone.
    static func threadDidExit(_ record: ThreadRecord) {
        let hidden = ThreadSanitizer.enterInternalCode() // QueueKit's code outside any C API call
        defer { ThreadSanitizer.leaveInternalCode(hidden) }
        if qkshim_condlocks_held() > 0 { LiveConditionLocks.abandonAll(heldBy: record.number) }
        registry.withLock { records in
            record.hasExited = true
            records[record.number] = nil
        }
        recentlyExited.withLock { exited in
            if exited.count == recentlyExitedLimit { exited.removeFirst(recentlyExitedLimit / 2) }
            exited.append(record.number)
        }
    }

    /// The numbers of the threads that exited most recently (having had a record), oldest first:
    /// how a report names a lock holder that is gone.
    private static let recentlyExited = Lock<[UInt64]>([])

    // fork(): no thread is inside the list of exited threads at a fork (`Lifecycle.swift`).
    static func prepareExitedForFork() { recentlyExited.acquireForFork() }
    static func resumeExitedInParent() { recentlyExited.releaseInParent() }
    static func resumeExitedInChild() { recentlyExited.releaseInChild() }
    private static let recentlyExitedLimit = 1024

    /// Whether the thread numbered `number` is known to have exited (among the last
    /// ``recentlyExitedLimit`` threads with a record to exit).
    static func hasExited(_ number: UInt64) -> Bool {
        recentlyExited.withLock { $0.contains(number) }
    }
}

extension ThreadRecord {
    /// In a forked child, with the registry's lock held: every thread but `survivor` is gone.
    static func forgetThreadsLostInFork(_ records: inout [UInt64: ThreadRecord], survivor: UInt64) {
        // Another thread may have been reading the survivor's name at the fork.
        records[survivor]?.cachedName.releaseInChild()
        for (number, record) in records where number != survivor {
            record.hasExited = true
            records[number] = nil
            // The thread's own reference (its key's value) will never be given back: its key
            // destructor cannot run in a child that does not have the thread. Keep the record
            // reachable, as what it is, rather than leave it to look like a leak.
            lostInFork.append(record)
        }
    }

    /// The records of threads that a fork left behind (in a child only; never freed).
    nonisolated(unsafe) private static var lostInFork: [ThreadRecord] = []
}

/// What a condition-lock acquisition calls (through the shim) on a thread that has no record yet,
/// so that the thread's exit runs ``ThreadRecord/threadDidExit(_:)``.
let threadRecordMaker: @convention(c) () -> Void = { _ = ThreadRecord.current }

/// The pthread key destructor's entry: gives back the reference `makeCurrent` stored.
private let threadExitCallback: @convention(c) (UnsafeMutableRawPointer?) -> Void = { pointer in
    guard let pointer else { return }
    let record = Unmanaged<ThreadRecord>.fromOpaque(pointer).takeRetainedValue()
    ThreadRecord.threadDidExit(record)
}
