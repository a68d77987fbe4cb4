// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

/// A reentrant reader/writer queue: many concurrent readers, one writer at a time, writes in
/// FIFO order, and nested calls in any order never deadlock.
///
/// It is the familiar database-queue pattern (reads with `dispatch_sync`, writes with
/// `dispatch_barrier_async`, a queue-specific check for nesting) made true to its promise:
///
/// - A nested call is recognised through the thread's chain of frames, which `sync` hops through
///   other queues and other DB queues keep linked, so a read nested through another queue runs
///   inline instead of waiting behind a pending write that waits for the outer read.
/// - `read` inside a read or a write runs inline; `write` inside a write runs inline (also with
///   reads nested in between); `write` inside a read but no write is an upgrade that could never
///   proceed, so it throws ``QueueKitError/wouldDeadlock`` and runs nothing.
///
/// Ordering is what a program can observe:
///
/// - A call that begins after another call returned, or after a `writeAsync` returned, is
///   ordered after it: a read sees it, a write runs after it. Asynchronous writes run one at a
///   time in submission order, and nothing overtakes a submitted one.
/// - Synchronous calls in flight at the same moment have no order, so the queue lets a running
///   thread in at once when the queue is free for it (a reader next to other readers, a writer
///   into an idle queue), ahead of threads parked in the lane, instead of handing the queue to a
///   parked thread that first has to be scheduled (the convoy that makes a strict FIFO lock slow
///   under contention). A released queue wakes the longest-waiting thread, which competes again.
/// - Eventual fairness bounds the overtaking: a thread parked for ``fairnessBound`` (1 ms) becomes
///   due; from then on nobody enters ahead of it and the queue is handed to it directly as soon as
///   it is free (a due writer waits only for the readers inside; due readers are let in as one
///   batch). Writers do not starve under a storm of readers, nor readers under a storm of writers.
/// - A thread spins briefly (`Parker.spin(until:pureSpin:_:)`) before it parks: the holder is
///   usually running and about to leave.
///
/// Where `writeAsync`'s work runs: on a worker thread of the queue, or on a thread that must wait
/// for it anyway. A `read`, `write` or `flush` (and `quiesce`) that has to wait for pending
/// asynchronous writes runs the ones submitted before its call began itself, as `dispatch_sync`
/// runs blocks on its caller's thread, when its thread holds nothing else of QueueKit's: no block
/// of any queue or DB queue in its chain of frames and no condition lock (the main thread before
/// `qk_main` is inside the main queue, so it never helps). Inside such work, as on the worker,
/// ``Queue/current`` is ``queue`` and nothing further out. Otherwise the thread waits for the
/// worker. A worker that ran out of writes lingers for a few milliseconds, polling, so that a
/// steady trickle of writes costs no thread wake-ups.
///
/// Inside `read` and `write`, ``Queue/current`` is ``queue`` and `queue.check(.onQueue)` holds;
/// inside `write`, `queue.check(.onQueueAsBarrier)` holds too.
///
/// In a forked child, `writeAsync` cannot run (the thread that runs asynchronous writes is gone),
/// and a queue that was being written or had writes pending at the fork is unusable: its calls
/// throw ``QueueKitError/notRecoverable`` (`read`, which only rethrows, stops the process with one
/// line), and the writes pending at the fork never run. Other queues keep working.
///
/// Thread safety: every member may be called from any thread.
public final class DBQueue: @unchecked Sendable {
    /// The queue that stands for this DB queue in identity checks. It is for identity only:
    /// submitting work to it throws ``QueueKitError/invalidArgument``.
    public let queue: Queue

    /// How long a parked thread may be overtaken before the queue is handed to it: 1 ms, in
    /// nanoseconds (Rust's parking_lot uses 0.5 ms). Long enough that the hand-offs it forces
    /// cost nothing measurable; short enough that a writer's worst wait under a storm of readers
    /// stays near it.
    public static let fairnessBound: UInt64 = Fairness.bound

    /// Everything the fast paths need, in one word (see `StateBit`). A new queue is read-biased.
    @usableFromInline let state = Atomic<UInt>(StateBit.biased)

    /// The visible readers (`DBQueue+ReaderSlots.swift`): `slotMask + 1` slots of
    /// `slotStride` words, each empty or holding a reader's thread number (and marks).
    @usableFromInline let slots: UnsafeMutablePointer<UInt64>
    @usableFromInline let slotMask: UInt64
    /// The groups of eight slots of which a reader ever took one, bit `index / 8` for slot
    /// `index` (set by a slot's first reader, cleared only in a forked child): the slots the
    /// revoker looks at.
    @usableFromInline let occupiedSlots = Atomic<UInt64>(0)
    /// The revoker parks on this word while it waits for a reader in a slot.
    @usableFromInline let revokeWord: UnsafeMutablePointer<UInt32>
    /// Whether the revoker is parked waiting for a reader (for the deadlock detector).
    let revoking = Atomic<Bool>(false)
    /// Revocations since creation (for tests and statistics).
    let revocations = Atomic<UInt64>(0)
    /// A synchronous writer (or destroy) waits for a reader in a slot: a write is pending (for
    /// tests).
    let revokingForWrite = Atomic<Bool>(false)

    /// Asynchronous writes that have run, since creation. Written only by the thread that runs
    /// them (the holder of the exclusivity), read by anyone (`asyncTarget`).
    let completed = Atomic<UInt64>(0)

    /// The asynchronous writes not yet run, in submission order.
    let writes = WriteQueue()

    /// The threads waiting for the queue, under one lock; touched only off the fast paths.
    let lane = Lock(Lane())

    /// The smallest `target` of any waiter (`UInt64.max`: none): a thread that runs asynchronous
    /// writes looks at the lane only once `completed` reaches it.
    let nextTarget = Atomic<UInt64>(.max)

    /// The worker that runs asynchronous writes nobody runs while waiting: `workerIdle` when no
    /// worker block exists, `workerActive` while one runs, waits for the queue or lingers.
    let workerState = Atomic<Int>(DBQueue.workerIdle)
    static let workerIdle = 0
    static let workerActive = 1
    /// The lingering worker parks on this word; anyone who needs it sooner sets it.
    let workerWord: UnsafeMutablePointer<UInt32>
    /// Set by `quiesce`: the worker does not linger.
    let closing = Atomic<Bool>(false)
    static let workerPoll: UInt64 = 1_000_000
    static let workerLingerPolls = 8

    /// Where the worker runs.
    let workerQueue: DispatchQueue

    /// The fork generation (``Fork/generation``) whose state the queue has adopted, or
    /// `adoptingFork` while a thread adopts it; and whether a fork left it unusable.
    let forkGeneration = Atomic<UInt64>(Fork.generation)
    let brokenByFork = Atomic<Bool>(false)
    /// A synchronous write's block is running (stored by its writer alone, around the block): a
    /// forked child tells a write that was half done at the fork from a thread that merely held
    /// the exclusivity for bookkeeping (a worker finishing, a writer not started yet).
    @usableFromInline let writeRunning = Atomic<Bool>(false)
    static let adoptingFork = UInt64.max

    #if QUEUEKIT_TESTING
        /// Test seam (debug builds only): called by the last reader leaving while a write waits,
        /// before it takes the lane's lock to hand the queue on. Set it before the queue is shared.
        var testHookBeforeLastReaderStarts: (() -> Void)?

        /// Test seam (debug builds only): writes queued and not yet started (asynchronous writes
        /// submitted and not run, plus threads waiting in the lane to write).
        var pendingWriteCount: Int {
            let queued = Int(StateBit.asyncCount(state.load(ordering: .acquiring)))
            let revoking = revokingForWrite.load(ordering: .acquiring) ? 1 : 0
            return queued + revoking + lane.withLock { lane in lane.waiters.count { $0.pointee.want == .write } }
        }

        /// Test seam (debug builds only): the state, for a test's failure message.
        var debugState: String {
            let current = state.load(ordering: .acquiring)
            let waiters = lane.withLock { lane in
                lane.waiters.map { w in
                    "\(w.pointee.want)(target \(w.pointee.target), due \(w.pointee.isDue), \(w.pointee.outcome))"
                }.joined(separator: ", ") + " dueCount \(lane.dueCount)"
            }
            return
                "writer \(current & StateBit.writer) due \(current & StateBit.due != 0) parked \(current & StateBit.parked != 0) "
                + "readers \((current & StateBit.readerMask) / StateBit.oneReader) async \(StateBit.asyncCount(current)) "
                + "completed \(completed.load(ordering: .acquiring)) worker \(workerState.load(ordering: .acquiring)) "
                + "lane [\(waiters)]"
        }

        /// Test seam (debug builds only): counted readers never set the bias again.
        @usableFromInline let biasDisabled = Atomic<Bool>(false)

        /// Test seam (debug builds only): readers and writers waiting in the lane.
        var waitingCallCount: Int { lane.withLock { lane in lane.waiters.count { $0.pointee.wantsAccess } } }
    #endif

    /// Creates a DB queue.
    public convenience init(label: String? = nil) throws(QueueKitError) {
        try self.init(label: label, bytes: nil)
    }

    /// As ``init(label:)``, keeping `bytes` (a C caller's label, not necessarily UTF-8) as the
    /// label of its queue.
    package init(label: String?, bytes: UnsafePointer<CChar>?) throws(QueueKitError) {
        let label = label ?? ""
        queue = try Queue.identity(label: label, bytes: bytes, kind: .concurrent)
        workerQueue = DispatchQueue(label: label.isEmpty ? "queuekit.dbqueue.worker" : "\(label).worker")
        workerWord = .allocate(capacity: 1)
        workerWord.initialize(to: Parker.idle)
        revokeWord = .allocate(capacity: 1)
        revokeWord.initialize(to: Parker.idle)
        slotMask = UInt64(Self.slotCount - 1)
        slots = Self.makeSlots(count: Self.slotCount)
        queue.identityOwner = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        LockOrder.forget(queue)
        ThreadSanitizer.destroying(self)
        if brokenByFork.load(ordering: .relaxed) { return }
        let idle =
            state.load(ordering: .acquiring) & ~(StateBit.flags | StateBit.biased) == 0 && visibleReaders().isEmpty
        Swift.precondition(idle, "QueueKit: a DBQueue was freed in use or with writes pending")
        workerWord.deallocate()
        revokeWord.deallocate()
        UnsafeMutableRawPointer(slots).deallocate()
    }

    // MARK: Swift API

    /// Runs `body` now, concurrently with other reads and never with a write, and returns its value.
    /// Nested inside a read or write of this queue (also through `sync` hops), it runs inline.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` when the read would have to
    ///   wait (behind a write) and that wait would close a cycle of waiting threads (see
    ///   ``Diagnostics``); ``QueueKitError/notRecoverable`` in a forked child, on a DB queue that
    ///   was being written at the fork; whatever `body` throws.
    public func read<R>(_ body: () throws -> R) throws -> R {
        try withAccess(enterRead(call: "DBQueue.read"), body)
    }

    /// Runs `body` now, exclusively, after every write submitted before it, and returns its value.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` when called inside a read
    ///   of this queue but no write (an upgrade); whatever `body` throws.
    public func write<R>(_ body: () throws -> R) throws -> R {
        try withAccess(enterWrite(call: "DBQueue.write"), body)
    }

    /// Queues `body` to run exclusively, FIFO with all writes; returns at once. Allowed anywhere:
    /// inside a block of this queue it runs after that block.
    ///
    /// In a forked child, where no thread could run it, it stops the process with one line (the C
    /// call returns `ENOTRECOVERABLE`): work submitted is never silently lost.
    public func writeAsync(_ body: @escaping @Sendable () -> Void) {
        do { try writeAsync(CWork(retaining: body), call: "DBQueue.writeAsync") } catch {
            qkshim_fatal("QueueKit: DBQueue.writeAsync in a forked child: no thread can run asynchronous writes there")
        }
    }

    /// Waits until every write submitted before the call has run (running them itself when its
    /// thread holds nothing else of QueueKit's).
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` inside a block of this queue;
    ///   ``QueueKitError/notRecoverable`` in a forked child, when the queue was being written at the fork.
    public func flush() throws(QueueKitError) { try flush(call: "DBQueue.flush") }

    /// ``flush()``, named `call` in reports.
    package func flush(call: StaticString) throws(QueueKitError) {
        if _slowPath(Fork.isChild) { try checkFork() }
        if ExecutionContext.hold(of: queue) != .none { throw .wouldDeadlock }
        guard LockOrder.willWait(for: queue, .exclusive, call: call) else { throw .wouldDeadlock }
        defer { ThreadSanitizer.acquire(self) }
        let target = asyncTarget()
        if writesHaveRun(upTo: target, state: state.load(ordering: .acquiring)) { return }
        if Self.threadMayHelp() {
            guard acquireSlow(.write, call: call, target: target) else { throw .wouldDeadlock }
            releaseWrite()
        } else {
            guard waitForCompletion(of: target, call: call) else { throw .wouldDeadlock }
        }
    }

    /// Waits for blocks running on other threads and runs every write already submitted, leaving
    /// the queue idle: what `qk_dbqueue_destroy` does before it frees.
    ///
    /// - Throws: ``QueueKitError/busy`` inside a block of this queue.
    public func quiesce() throws(QueueKitError) { try quiesce(call: "DBQueue.quiesce") }

    /// ``quiesce()``, named `call` in reports.
    package func quiesce(call: StaticString) throws(QueueKitError) {
        if ExecutionContext.hold(of: queue) != .none { throw .busy }
        // A queue that a fork left unusable has nothing left to run, and no thread inside.
        if _slowPath(Fork.isChild) { do { try checkFork() } catch { return } }
        guard acquire(.write, call: call) else { throw .wouldDeadlock }
        guard revokeBias(call: call, refusable: true) else {
            giveUpRefusedRevocation()
            throw .wouldDeadlock
        }
        releaseWrite()
        ThreadSanitizer.acquire(self)
        // The worker need not linger for a queue that is going away.
        closing.store(true, ordering: .releasing)
        wakeWorker(start: false)
    }

    // MARK: Core (the C API calls these)

    /// Read or write access, decided and acquired before anything runs.
    @usableFromInline
    package struct Access {
        /// The calling thread's innermost frame: the caller of the block.
        @usableFromInline let caller: UnsafePointer<ExecutionFrame>?
        /// The thread already has this access: the block runs inline.
        @usableFromInline let isInline: Bool
        /// Write access (the block runs the queue alone); read access otherwise.
        @usableFromInline let isExclusive: Bool
        /// A visible reader's slot; nil for a counted read, a write, an inline block.
        @usableFromInline let slot: UnsafeMutablePointer<UInt64>?

        @inlinable
        init(
            caller: UnsafePointer<ExecutionFrame>?, isInline: Bool, isExclusive: Bool,
            slot: UnsafeMutablePointer<UInt64>? = nil
        ) {
            self.caller = caller
            self.isInline = isInline
            self.isExclusive = isExclusive
            self.slot = slot
        }
    }

    /// Inline when the thread already has access; otherwise acquired, waiting if needed;
    /// `wouldDeadlock` when that wait would close a cycle across threads. Pass the result to
    /// `withAccess` at once, with the same `plain` (a call begun with ``SlowPaths/areOff``: the
    /// fork's and the witness's checks are skipped).
    @inlinable @inline(__always)
    package func enterRead(call: StaticString, plain: Bool = false) throws(QueueKitError) -> Access {
        if !plain, _slowPath(Fork.isChild) { try checkFork() }
        // Outside any block, the main thread's permanent frame (the main queue's) holds no DB
        // queue: only the thread's own frames need the walk.
        let frame = ExecutionContext.innermostBlock
        if let frame, frame.pointee.runs(queue) || ExecutionContext.hold(of: queue, from: frame) != .none {
            return Access(caller: frame, isInline: true, isExclusive: false)
        }
        let caller = frame ?? ExecutionContext.mainThreadFrame()
        guard plain || LockOrder.willWait(for: queue, .shared, call: call) else { throw .wouldDeadlock }
        if let slot = tryVisibleRead() {
            return Access(caller: caller, isInline: false, isExclusive: false, slot: slot)
        }
        guard acquire(.read, call: call) else { throw .wouldDeadlock }
        return Access(caller: caller, isInline: false, isExclusive: false)
    }

    /// Inline when the thread already has write access; `wouldDeadlock` when it has only read
    /// access (an upgrade could never proceed) or when the lane refuses the wait; otherwise
    /// acquired through the lane. Pass the result to `withAccess` at once, with the same `plain`
    /// (see ``enterRead(call:plain:)``).
    @inlinable @inline(__always)
    package func enterWrite(call: StaticString, plain: Bool = false) throws(QueueKitError) -> Access {
        if !plain, _slowPath(Fork.isChild) { try checkFork() }
        // As in `enterRead`, the main thread's permanent frame holds no DB queue: no walk for it.
        let frame = ExecutionContext.innermostBlock
        let caller = frame ?? ExecutionContext.mainThreadFrame()
        switch frame == nil ? .none : ExecutionContext.hold(of: queue, from: frame) {
        case .exclusive: return Access(caller: caller, isInline: true, isExclusive: true)
        case .shared: throw .wouldDeadlock
        case .none:
            if !plain {
                LockOrder.writing(queue, call: call, thenWaits: true)
                guard LockOrder.willWait(for: queue, .exclusive, call: call) else { throw .wouldDeadlock }
            }
            guard acquire(.write, call: call) else { throw .wouldDeadlock }
            guard revokeBias(call: call, refusable: true) else {
                giveUpRefusedRevocation()
                throw .wouldDeadlock
            }
            return Access(caller: caller, isInline: false, isExclusive: true)
        }
    }

    /// Runs `body` with the access `enterRead` or `enterWrite` gave, then releases it (`plain` as
    /// it was given to them).
    @inlinable @inline(__always)
    package func withAccess<R, E: Error>(_ access: Access, plain: Bool = false, _ body: () throws(E) -> R) throws(E)
        -> R
    {
        let exclusive = access.isExclusive
        if access.isInline {
            return try ExecutionContext.run(on: queue, exclusive: exclusive, outer: access.caller, plain: plain, body)
        }
        defer { release(access) }
        Acquisitions.acquired(self, .dbQueue, exclusive: exclusive, plain: plain)
        defer { Acquisitions.releasing(self, .dbQueue, exclusive: exclusive, plain: plain) }
        guard exclusive else {
            return try ExecutionContext.run(on: queue, exclusive: false, outer: access.caller, plain: plain, body)
        }
        writeRunning.store(true, ordering: .relaxed)
        defer { writeRunning.store(false, ordering: .relaxed) }
        return try ExecutionContext.run(on: queue, exclusive: true, outer: access.caller, plain: plain, body)
    }

    /// Gives back the access `enterRead` or `enterWrite` acquired (not an inline one's).
    @inlinable @inline(__always)
    func release(_ access: Access) {
        if access.isExclusive {
            releaseWrite()
        } else if let slot = access.slot {
            leaveSlot(slot)
        } else {
            releaseRead()
        }
    }

    /// Queues a write; returns at once. Lock-free: one atomic add that closes the queue to later
    /// arrivals until the write has run, then one exchange to queue it.
    ///
    /// The count comes first: every write ahead of this one in the queue was counted before it
    /// was queued, so a call that counts the pending writes (`asyncTarget`) after this returned
    /// covers this write and every write ahead of it. (Queued first, a write counted later could
    /// be run in place of a write counted earlier, and a read could slip in between.)
    ///
    /// `call` names the write in lock-order reports.
    ///
    /// - Throws: ``QueueKitError/notRecoverable`` in a forked child (nothing queued).
    package func writeAsync(_ work: CWork, call: StaticString) throws(QueueKitError) {
        if _slowPath(Fork.isChild) { throw .notRecoverable }
        LockOrder.writing(queue, call: call)
        let work = ThreadSanitizer.handOff(work, exclusiveTo: self)
        let before = state.add(StateBit.oneAsync, ordering: .sequentiallyConsistent).oldValue
        writes.push(work)
        // The first pending write makes sure a worker exists; a lingering one finds it by polling.
        if StateBit.asyncCount(before) == 0 && workerState.load(ordering: .sequentiallyConsistent) == Self.workerIdle {
            startWorker()
        }
    }
}
