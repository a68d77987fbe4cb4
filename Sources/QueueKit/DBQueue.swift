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
    public static let fairnessBound: UInt64 = 1_000_000

    /// Everything the fast paths need, in one word (see `Bits`).
    private let state = Atomic<UInt>(0)

    /// Asynchronous writes that have run, since creation. Written only by the thread that runs
    /// them (the holder of the exclusivity), read by anyone (`asyncTarget`).
    private let completed = Atomic<UInt64>(0)

    /// The asynchronous writes not yet run, in submission order.
    private let writes = WriteQueue()

    /// The threads waiting for the queue, under one lock; touched only off the fast paths.
    private let lane = Lock(Lane())

    /// The smallest `target` of any waiter (`UInt64.max`: none): a thread that runs asynchronous
    /// writes looks at the lane only once `completed` reaches it.
    private let nextTarget = Atomic<UInt64>(.max)

    /// The worker that runs asynchronous writes nobody runs while waiting: `drainerIdle` when no
    /// worker block exists, `drainerActive` while one runs, waits for the queue or lingers.
    private let drainer = Atomic<Int>(DBQueue.drainerIdle)
    private static let drainerIdle = 0
    private static let drainerActive = 1
    /// The lingering worker parks on this word; anyone who needs it sooner sets it.
    private let drainerWord: UnsafeMutablePointer<UInt32>
    /// Set by `quiesce`: the worker does not linger.
    private let closing = Atomic<Bool>(false)
    private static let drainerPoll: UInt64 = 1_000_000
    private static let drainerLingerPolls = 8

    /// Where the worker runs.
    private let writer: DispatchQueue

    /// The fork generation (``Fork/generation``) whose state the queue has adopted, or
    /// `adoptingFork` while a thread adopts it; and whether a fork left it unusable.
    private let forkGeneration = Atomic<UInt64>(Fork.generation)
    private let brokenByFork = Atomic<Bool>(false)
    private static let adoptingFork = UInt64.max

    #if QUEUEKIT_TESTING
    /// Test seam (debug builds only): called by the last reader leaving while a write waits,
    /// before it takes the lane's lock to hand the queue on. Set it before the queue is shared.
    var testHookBeforeLastReaderStarts: (() -> Void)?

    /// Test seam (debug builds only): writes queued and not yet started (asynchronous writes
    /// submitted and not run, plus threads waiting in the lane to write).
    var pendingWriteCount: Int {
        let queued = Int(Bits.asyncCount(state.load(ordering: .acquiring)))
        return queued + lane.withLock { lane in lane.waiters.count { $0.pointee.want == .write } }
    }

    /// Test seam (debug builds only): the state, for a test's failure message.
    var debugState: String {
        let current = state.load(ordering: .acquiring)
        let waiters = lane.withLock { lane in
            lane.waiters.map { w in
                "\(w.pointee.want)(target \(w.pointee.target), due \(w.pointee.isDue), \(w.pointee.outcome))"
            }.joined(separator: ", ") + " dueCount \(lane.dueCount)"
        }
        return "writer \(current & Bits.writer) due \(current & Bits.due != 0) parked \(current & Bits.parked != 0) "
            + "readers \((current & Bits.readerMask) / Bits.oneReader) async \(Bits.asyncCount(current)) "
            + "completed \(completed.load(ordering: .acquiring)) drainer \(drainer.load(ordering: .acquiring)) "
            + "lane [\(waiters)]"
    }

    /// Test seam (debug builds only): readers and writers waiting in the lane.
    var waitingCallCount: Int { lane.withLock { lane in lane.waiters.count { $0.pointee.wantsAccess } } }
    #endif

    /// Creates a DB queue.
    public init(label: String? = nil) throws(QueueKitError) {
        let label = label ?? ""
        queue = try Queue.identity(label: label, kind: .concurrent)
        writer = DispatchQueue(label: label.isEmpty ? "queuekit.dbqueue.writer" : "\(label).writer")
        drainerWord = .allocate(capacity: 1)
        drainerWord.initialize(to: Parker.idle)
    }

    deinit {
        LockOrder.forget(queue)
        ThreadSanitizer.destroying(self)
        if brokenByFork.load(ordering: .relaxed) { return }
        let idle = state.load(ordering: .acquiring) & ~Bits.flags == 0
        Swift.precondition(idle, "QueueKit: a DBQueue was freed in use or with writes pending")
        drainerWord.deallocate()
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
        if _slowPath(Fork.isChild) { try checkFork() }
        return try withAccess(enterRead(), body)
    }

    /// Runs `body` now, exclusively, after every write submitted before it, and returns its value.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` when called inside a read
    ///   of this queue but no write (an upgrade); whatever `body` throws.
    public func write<R>(_ body: () throws -> R) throws -> R {
        try withAccess(enterWrite(), body)
    }

    /// Queues `body` to run exclusively, FIFO with all writes; returns at once. Allowed anywhere:
    /// inside a block of this queue it runs after that block.
    ///
    /// In a forked child, where no thread could run it, it stops the process with one line (the C
    /// call returns `ENOTRECOVERABLE`): work submitted is never silently lost.
    public func writeAsync(_ body: @escaping @Sendable () -> Void) {
        do { try writeAsync(CWork(retaining: body)) } catch {
            qkshim_fatal("QueueKit: DBQueue.writeAsync in a forked child: no thread can run asynchronous writes there")
        }
    }

    /// Waits until every write submitted before the call has run (running them itself when its
    /// thread holds nothing else of QueueKit's).
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` inside a block of this queue;
    ///   ``QueueKitError/notRecoverable`` in a forked child, when the queue was being written at the fork.
    public func flush() throws(QueueKitError) {
        if _slowPath(Fork.isChild) { try checkFork() }
        if ExecutionContext.hold(of: queue) != .none { throw .wouldDeadlock }
        guard LockOrder.willWait(for: queue, .exclusive, call: "qk_dbqueue_flush") else { throw .wouldDeadlock }
        defer { ThreadSanitizer.acquire(self) }
        let target = asyncTarget()
        if writesHaveRun(upTo: target, state: state.load(ordering: .acquiring)) { return }
        if Self.threadMayHelp() {
            guard acquireSlow(.write, call: .flush, target: target) else { throw .wouldDeadlock }
            releaseWrite()
        } else {
            guard waitForCompletion(of: target) else { throw .wouldDeadlock }
        }
    }

    /// Waits for blocks running on other threads and runs every write already submitted, leaving
    /// the queue idle: what `qk_dbqueue_destroy` does before it frees.
    ///
    /// - Throws: ``QueueKitError/busy`` inside a block of this queue.
    public func quiesce() throws(QueueKitError) {
        if ExecutionContext.hold(of: queue) != .none { throw .busy }
        // A queue that a fork left unusable has nothing left to run, and no thread inside.
        if _slowPath(Fork.isChild) { do { try checkFork() } catch { return } }
        guard acquire(.write, call: .destroy) else { throw .wouldDeadlock }
        releaseWrite()
        ThreadSanitizer.acquire(self)
        // The worker need not linger for a queue that is going away.
        closing.store(true, ordering: .releasing)
        wakeDrainer(start: false)
    }

    // MARK: Core (the C API calls these)

    /// Read or write access, decided and acquired before anything runs.
    struct Access {
        /// The calling thread's innermost frame: the caller of the block.
        let caller: UnsafePointer<ExecutionFrame>?
        /// The thread already has this access: the block runs inline.
        let isInline: Bool
        /// Write access (the block runs the queue alone); read access otherwise.
        let isExclusive: Bool
    }

    /// Inline when the thread already has access; otherwise acquired, waiting if needed;
    /// `wouldDeadlock` when that wait would close a cycle across threads. Pass the result to
    /// `withAccess` at once.
    @inline(__always)
    func enterRead() throws(QueueKitError) -> Access {
        let caller = ExecutionContext.innermost
        if caller != nil && ExecutionContext.hold(of: queue, from: caller) != .none {
            return Access(caller: caller, isInline: true, isExclusive: false)
        }
        guard LockOrder.willWait(for: queue, .shared, call: "qk_dbqueue_read") else { throw .wouldDeadlock }
        guard acquire(.read, call: .read) else { throw .wouldDeadlock }
        return Access(caller: caller, isInline: false, isExclusive: false)
    }

    /// Inline when the thread already has write access; `wouldDeadlock` when it has only read
    /// access (an upgrade could never proceed) or when the lane refuses the wait; otherwise
    /// acquired through the lane. Pass the result to `withAccess` at once.
    @inline(__always)
    func enterWrite() throws(QueueKitError) -> Access {
        if _slowPath(Fork.isChild) { try checkFork() }
        let caller = ExecutionContext.innermost
        switch caller == nil ? .none : ExecutionContext.hold(of: queue, from: caller) {
        case .exclusive: return Access(caller: caller, isInline: true, isExclusive: true)
        case .shared: throw .wouldDeadlock
        case .none:
            LockOrder.writing(queue, call: "qk_dbqueue_write", thenWaits: true)
            guard LockOrder.willWait(for: queue, .exclusive, call: "qk_dbqueue_write") else { throw .wouldDeadlock }
            guard acquire(.write, call: .write) else { throw .wouldDeadlock }
            return Access(caller: caller, isInline: false, isExclusive: true)
        }
    }

    /// Runs `body` with the access `enterRead` or `enterWrite` gave, then releases it.
    @inline(__always)
    func withAccess<R, E: Error>(_ access: Access, _ body: () throws(E) -> R) throws(E) -> R {
        let exclusive = access.isExclusive
        if access.isInline {
            return try ExecutionContext.run(on: queue, exclusive: exclusive, outer: access.caller, body)
        }
        defer { if exclusive { releaseWrite() } else { releaseRead() } }
        ThreadSanitizer.locked(self, shared: !exclusive)
        defer { ThreadSanitizer.unlocking(self, shared: !exclusive) }
        return try ExecutionContext.run(on: queue, exclusive: exclusive, outer: access.caller, body)
    }

    /// Queues a write; returns at once. Lock-free: one atomic add that closes the queue to later
    /// arrivals until the write has run, then one exchange to queue it.
    ///
    /// The count comes first: every write ahead of this one in the queue was counted before it
    /// was queued, so a call that counts the pending writes (`asyncTarget`) after this returned
    /// covers this write and every write ahead of it. (Queued first, a write counted later could
    /// be run in place of a write counted earlier, and a read could slip in between.)
    ///
    /// - Throws: ``QueueKitError/notRecoverable`` in a forked child (nothing queued).
    func writeAsync(_ work: CWork) throws(QueueKitError) {
        if _slowPath(Fork.isChild) { throw .notRecoverable }
        LockOrder.writing(queue, call: "qk_dbqueue_write_async")
        let work = ThreadSanitizer.handOff(work, exclusiveTo: self)
        let before = state.add(Bits.oneAsync, ordering: .sequentiallyConsistent).oldValue
        writes.push(work)
        // The first pending write makes sure a worker exists; a lingering one finds it by polling.
        if Bits.asyncCount(before) == 0 && drainer.load(ordering: .sequentiallyConsistent) == Self.drainerIdle {
            startDrainer()
        }
    }

    // MARK: Fast paths

    /// Applies `change` to the state with one compare-and-swap, retried while `allowed` holds
    /// for the state it finds. True when it did. Every lock-free transition of the state but
    /// the releases goes through here.
    @inline(__always)
    private func updateState(while allowed: (UInt) -> Bool, _ change: (UInt) -> UInt) -> Bool {
        var current = state.load(ordering: .relaxed)
        while allowed(current) {
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: change(current),
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    @inline(__always)
    private func tryRead() -> Bool {
        updateState(while: { $0 & Bits.closedToReaders == 0 }) { $0 &+ Bits.oneReader }
    }

    /// Takes a free queue: barging past parked threads, unless one is due or a write is pending.
    @inline(__always)
    private func tryWrite() -> Bool {
        updateState(while: { $0 & ~Bits.parked == 0 }) { $0 | Bits.writer }
    }

    /// Takes the exclusivity to run pending asynchronous writes: the queue is free and nobody
    /// waits in the lane (then the lane hands the runner's part out, to a waiting thread that may
    /// help before the worker, without a window for a third thread between release and grant).
    @inline(__always)
    private func tryRunner() -> Bool {
        updateState(while: { $0 & (Bits.writer | Bits.readerMask | Bits.flags) == 0 && Bits.asyncCount($0) != 0 }) {
            $0 | Bits.writer
        }
    }

    @inline(__always)
    private func tryFast(_ want: Want) -> Bool { want == .read ? tryRead() : tryWrite() }

    @inline(__always)
    private func acquire(_ want: Want, call: DBQueueCall) -> Bool {
        if tryFast(want) { return true }
        return acquireSlow(want, call: call, target: asyncTarget())
    }

    @inline(__always)
    private func releaseRead() {
        var current = state.load(ordering: .relaxed)
        while true {
            if current & Bits.readerMask == Bits.oneReader && current & Bits.needsLane != 0 {
                lastReaderLeaves()
                return
            }
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: current &- Bits.oneReader,
                successOrdering: .releasing, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    @inline(__always)
    private func releaseWrite() {
        if state.compareExchange(expected: Bits.writer, desired: 0, ordering: .releasing).exchanged { return }
        releaseWriteSlow()
    }

    // MARK: Waiting

    /// Whether the calling thread may run other threads' asynchronous writes while it waits: it
    /// holds nothing of QueueKit's (no frame, so not the main thread before `qk_main`, and no
    /// condition lock).
    @inline(__always)
    static func threadMayHelp() -> Bool {
        ExecutionContext.innermost == nil && qkshim_condlocks_held() == 0
    }

    /// The asynchronous writes a call beginning now must come after: `completed` plus the ones
    /// pending, read as a consistent pair. The runner publishes writes that ran by flagging the
    /// state, storing `completed`, then taking them off the state and the flag in one step; a
    /// pair read while the flag was clear and with the state's count unchanged around it is
    /// exact (otherwise it could count a finished batch twice, or miss it).
    func asyncTarget() -> UInt64 {
        while true {
            let before = state.load(ordering: .sequentiallyConsistent)
            if before & Bits.publishing != 0 { continue }
            let done = completed.load(ordering: .sequentiallyConsistent)
            let after = state.load(ordering: .sequentiallyConsistent)
            if (before ^ after) & (Bits.asyncMask | Bits.publishing) == 0 {
                return done &+ UInt64(Bits.asyncCount(before))
            }
        }
    }

    /// Whether the writes a waiter with `target` must come after have run: `completed` reached it,
    /// or none is pending at all.
    @inline(__always)
    private func writesHaveRun(upTo target: UInt64, state current: UInt) -> Bool {
        Bits.asyncCount(current) == 0 || completed.load(ordering: .acquiring) >= target
    }

    /// A read or write (or a flush or destroy, which acquire as writers) that could not enter at
    /// once: spin, then wait in the lane. When it needs asynchronous writes to run first and may
    /// help, it runs them itself. False when the wait was refused (nothing taken).
    @inline(never)
    private func acquireSlow(_ want: Want, call: DBQueueCall, target: UInt64) -> Bool {
        let mayHelp = want == .runner || Self.threadMayHelp()
        var grant = Grant.access
        // The common case of a write_async followed by a read on the same thread: the queue is
        // free but for the pending writes, which this thread may run at once.
        var entered = mayHelp && tryRunner()
        if entered {
            grant = .runner
        }
        // The worker does not spin: it is in no hurry, and its spinning would take a CPU from
        // the threads it waits for.
        if !entered && want != .runner {
            entered = Parker.spin {
                // The fast paths succeed only while no asynchronous write is pending.
                if tryFast(want) { return true }
                if mayHelp && tryRunner() {
                    grant = .runner
                    return true
                }
                return false
            }
        }
        if !entered {
            let since = MonotonicClock.now()
            let granted = Parker.withParker { parker in
                withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer -> Grant? in
                    let me = buffer.baseAddress!
                    me.initialize(to: Waiter(want: want, call: call, mayHelp: mayHelp, target: target,
                                             since: since, parker: parker))
                    defer { me.deinitialize(count: 1) }
                    return waitInLane(me)
                }
            }
            guard let granted else {
                WaitRegistry.deliverPendingRefusal()
                return false
            }
            grant = granted
        }
        if grant == .runner && want != .runner {
            runAsyncWrites(upTo: target, isDrainer: false)
            if want == .read { downgrade() }
        }
        return true
    }

    /// Queues `me` and waits until it is granted the queue (or the runner's part), or is woken
    /// to compete for it again (then it tries the fast paths and queues again, keeping its
    /// arrival time). Nil when the wait was refused: `me` has left the lane, taking nothing.
    private func waitInLane(_ me: UnsafeMutablePointer<Waiter>) -> Grant? {
        let want = me.pointee.want
        while true {
            // Enter (or re-enter after a wake-up that granted nothing).
            var wake = Wakeups()
            let taken: Grant? = lane.withLock { lane in
                me.pointee.outcome = .waiting
                if let grant = takeUnderLock(me, &lane) { return grant }
                lane.insert(me)
                if me.pointee.wantsAccess && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound {
                    makeDue(me, &lane)
                }
                refreshBits(&lane)
                // A holder may have left before it could see the waiter: look again.
                handOn(&lane, &wake)
                if case .granted(let grant) = me.pointee.outcome { return grant }
                return nil
            }
            wake.perform(on: self)
            if let taken {
                // Granted by `handOn` (its wake-up was just sent), or taken directly.
                if case .granted = me.pointee.outcome { settle(me) }
                return taken
            }
            // Park until granted, woken, due or refused.
            while true {
                let deadline = me.pointee.isDue || !me.pointee.wantsAccess
                    ? MonotonicClock.forever : me.pointee.since &+ Self.fairnessBound
                let result = wait(me.pointee.parker, for: me.pointee.call, until: deadline)
                var wake = Wakeups()
                let step: Step = lane.withLock { lane in
                    switch me.pointee.outcome {
                    case .granted(let grant): return .granted(grant)
                    case .woken: return .compete
                    case .waiting: break
                    }
                    if result == .refused {
                        if me.pointee.isDue { lane.dueCount -= 1 }
                        lane.remove(me)
                        refreshBits(&lane)
                        handOn(&lane, &wake)
                        return .refused
                    }
                    if !me.pointee.isDue && me.pointee.wantsAccess
                        && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound {
                        makeDue(me, &lane)
                        refreshBits(&lane)
                        handOn(&lane, &wake)
                        if case .granted(let grant) = me.pointee.outcome { return .granted(grant) }
                    }
                    return .wait
                }
                wake.perform(on: self)
                switch step {
                case .granted(let grant):
                    settle(me)
                    return grant
                case .compete:
                    settle(me)
                    qkshim_atomic_store32(me.pointee.parker.word, Parker.idle)
                    switch want {
                    case .completion: return .access // its writes have run
                    case .runner: return nil // nothing left to run: the worker goes back to lingering
                    case .read, .write:
                        if tryFast(want) { return .access }
                        if me.pointee.mayHelp && tryRunner() { return .runner }
                    }
                case .refused:
                    return nil
                case .wait:
                    continue
                }
                break
            }
        }
    }

    /// A waiter that left the lane granted or woken leaves only once its word is set: the
    /// waker sets it after releasing the lock, and the word lives on the waiter's stack.
    @inline(__always)
    private func settle(_ me: UnsafeMutablePointer<Waiter>) {
        if !me.pointee.parker.isSet { _ = me.pointee.parker.park() }
    }

    /// The one place where a thread waits in this DB queue (a read behind a write, a write, a
    /// flush, a destroy, the worker waiting for the queue).
    ///
    /// The cross-thread deadlock check hooks in here: the wait may be refused, and the caller
    /// then leaves the lane under its lock having taken nothing (or, if it was granted the queue
    /// concurrently, proceeds), and the call reports `EDEADLK`. Who holds the queue is derivable
    /// from the frame chains: readers and writers run inside `ExecutionContext.run(on: queue, …)`
    /// frames; a thread running asynchronous writes runs them in such a frame too. Two other
    /// parks wait for nobody and stay outside: `settle`, which only waits out a wake-up already
    /// decided, and the worker's idle poll.
    ///
    /// Each park publishes the wait (`WaitRegistry`): the DB queue is held by the threads whose
    /// frame chains hold its identity queue, and a waiter counts as waiting only while it is in
    /// the lane unwoken (`isWaitingInLane`). A refusal's report is kept in the thread's record
    /// until the call gives up (`deliverPendingRefusal`): if the queue was granted meanwhile, it
    /// is dropped.
    private func wait(_ parker: Parker, for call: DBQueueCall, until deadline: UInt64) -> WaitResult {
        let record = ThreadRecord.current
        record.pendingRefusal = nil
        // The worker holds nothing while it waits for the queue: it closes no ring.
        let refusal = WaitRegistry.enter(
            record, untimed: call != .worker, holderMayWait: { WaitRegistry.queueHolderMayWait(record) }
        ) { wait in
            wait.call = call.cName
            wait.kind = .dbQueue
            wait.queue = Unmanaged.passUnretained(queue)
            wait.lock = nil
            wait.db = self
            wait.detail = UnsafeRawPointer(parker.word)
            wait.deadline = MonotonicClock.forever
            wait.frame = ExecutionContext.innermost
        }
        if let refusal {
            record.pendingRefusal = refusal
            return .refused
        }
        defer { WaitRegistry.withdraw(record) }
        return parker.park(until: deadline, spin: false) ? .woken : .timedOut
    }

    /// For the deadlock detector (which holds its lock, and takes the lane's inside it): whether
    /// the waiter parked on `word` is still waiting in the lane, neither granted nor woken.
    func isWaitingInLane(parkerWord word: UnsafeRawPointer) -> Bool {
        lane.withLock { lane in
            lane.waiters.contains { waiter in
                guard UnsafeRawPointer(waiter.pointee.parker.word) == word else { return false }
                if case .waiting = waiter.pointee.outcome { return true }
                return false
            }
        }
    }

    /// Under the lane's lock: take the queue now if `me` may (its writes have run, the queue is
    /// free for it, and nobody due is ahead), or the runner's part if it needs writes run first.
    private func takeUnderLock(_ me: UnsafeMutablePointer<Waiter>, _ lane: inout Lane) -> Grant? {
        let current = state.load(ordering: .acquiring)
        if current & Bits.due != 0 && !me.pointee.isDue { return nil }
        if me.pointee.want != .runner && writesHaveRun(upTo: me.pointee.target, state: current) {
            switch me.pointee.want {
            case .read: return addReaders(1) ? .access : nil
            case .write: return takeExclusive() ? .access : nil
            case .runner: break
            case .completion: return .access
            }
        }
        if me.pointee.mayHelp || me.pointee.want == .runner, Bits.asyncCount(current) != 0, takeExclusive() {
            return .runner
        }
        return nil
    }

    /// Marks `me` (a reader or writer) due: from now on nobody overtakes it.
    private func makeDue(_ me: UnsafeMutablePointer<Waiter>, _ lane: inout Lane) {
        me.pointee.isDue = true
        lane.dueCount += 1
    }

    // MARK: Suspended tasks

    /// Waits, suspending, until the calling task may have `want` (a read or write: the access is
    /// taken and held by the thread that runs the task now; a completion: the writes up to
    /// `target` have run). Throws `CancellationError` (nothing taken) when the task is cancelled
    /// first.
    ///
    /// The task is woken, never granted: each time it runs it tries to take the queue itself under
    /// the lane's lock, and otherwise re-enters the lane with its first arrival time, so it keeps
    /// its place and becomes due after ``fairnessBound`` like a thread. A task does not run other
    /// threads' asynchronous writes (the worker does): its thread belongs to its executor.
    func acquireSuspending(_ want: SuspendedWant, call: DBQueueCall, target: UInt64,
                           isolation: isolated (any Actor)?) async throws {
        let record = SuspendedWaiter(call: call.name, object: self, wanted: want == .completion ? target : nil)
        let since = MonotonicClock.now()
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        word.initialize(to: Parker.idle)
        let me = UnsafeMutablePointer<Waiter>.allocate(capacity: 1)
        me.initialize(to: Waiter(want: want.lane, call: call, mayHelp: false, target: target,
                                 since: since, parker: Parker(word: word)))
        me.pointee.task = .passUnretained(record)
        SuspendedWaits.register(record)
        defer {
            SuspendedWaits.unregister(record)
            me.deinitialize(count: 1)
            me.deallocate()
            word.deallocate()
        }
        let address = UncheckedSendable(me)
        try await withTaskCancellationHandler {
            var scheduledPoke = false
            while true {
                let took = try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                    step(me, continuation)
                }
                if took { return }
                if !scheduledPoke && want != .completion {
                    // Nobody polls a suspended task: make sure it becomes due in time.
                    scheduledPoke = true
                    pokeFairness(after: since)
                }
            }
        } onCancel: {
            cancelWait(address.value)
        }
    }

    /// The uncontended entries of the `async` forms (the fast paths of the blocking ones).
    @inline(__always)
    func tryEnterRead() -> Bool { tryRead() }

    @inline(__always)
    func tryEnterWrite() -> Bool { tryWrite() }

    /// Whether the asynchronous writes up to `target` have all run.
    func isCompleted(_ target: UInt64) -> Bool { completed.load(ordering: .acquiring) >= target }

    /// Runs `body` as a read whose access the calling thread has just taken, then releases it.
    @inline(__always)
    func withEnteredRead<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { releaseRead() }
        return try ExecutionContext.run(on: queue, exclusive: false, outer: ExecutionContext.innermost, body)
    }

    /// Runs `body` as a write whose access the calling thread has just taken, then releases it.
    @inline(__always)
    func withEnteredWrite<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { releaseWrite() }
        return try ExecutionContext.run(on: queue, exclusive: true, outer: ExecutionContext.innermost, body)
    }

    /// One attempt of a suspended task, on the thread that runs it, under the lane's lock: leave
    /// if cancelled, take the queue if it may, or (re-)enter the lane and store the continuation.
    private func step(_ me: UnsafeMutablePointer<Waiter>, _ continuation: UnsafeContinuation<Bool, any Error>) {
        enum Result { case acquired, cancelled, waiting }
        var wake = Wakeups()
        let record = me.pointee.task!
        let result: Result = lane.withLock { lane in
            if record._withUnsafeGuaranteedRef({ $0.isCancelled }) {
                // It may have been woken as the next in line: let the lane hand on.
                handOn(&lane, &wake)
                return .cancelled
            }
            me.pointee.outcome = .waiting
            if takeUnderLock(me, &lane) != nil { return .acquired }
            lane.insert(me)
            if me.pointee.wantsAccess && !me.pointee.isDue
                && MonotonicClock.now() &- me.pointee.since >= Self.fairnessBound {
                makeDue(me, &lane)
            }
            record._withUnsafeGuaranteedRef { $0.suspend(with: continuation) }
            refreshBits(&lane)
            // A holder may have left before it could see the task: look again (this may wake
            // the task at once; it then tries again).
            handOn(&lane, &wake)
            return .waiting
        }
        wake.perform(on: self)
        switch result {
        case .acquired: continuation.resume(returning: true)
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .waiting: break
        }
    }

    /// The cancellation handler of a suspended task: a task still in the lane leaves it and is
    /// resumed with `CancellationError`; one already woken finds out when it runs.
    private func cancelWait(_ me: UnsafeMutablePointer<Waiter>) {
        var wake = Wakeups()
        let continuation: UnsafeContinuation<Bool, any Error>? = lane.withLock { lane in
            let record = me.pointee.task!
            guard let continuation = record._withUnsafeGuaranteedRef({ $0.cancel() }) else { return nil }
            if me.pointee.isDue { lane.dueCount -= 1 }
            lane.remove(me)
            refreshBits(&lane)
            handOn(&lane, &wake)
            return continuation
        }
        wake.perform(on: self)
        continuation?.resume(throwing: CancellationError())
    }

    /// After ``fairnessBound`` from `since`, makes the suspended tasks that have waited that long
    /// due and lets the lane hand on (threads do this themselves, waking from a timed park).
    private func pokeFairness(after since: UInt64) {
        let remaining = Self.fairnessBound &- min(Self.fairnessBound, MonotonicClock.now() &- since)
        writer.asyncAfter(deadline: .now() + .nanoseconds(Int(remaining))) { [self] in
            var wake = Wakeups()
            lane.withLock { lane in
                let now = MonotonicClock.now()
                var changed = false
                for waiter in lane.waiters where waiter.pointee.task != nil && waiter.pointee.wantsAccess
                    && !waiter.pointee.isDue && now &- waiter.pointee.since >= Self.fairnessBound {
                    makeDue(waiter, &lane)
                    changed = true
                }
                guard changed else { return }
                refreshBits(&lane)
                handOn(&lane, &wake)
            }
            wake.perform(on: self)
        }
    }

    // MARK: Handing the queue on (all called with the lane locked)

    /// Looks at the queue and the lane after anything changed and does what is due: wakes the
    /// flushers whose writes have run; grants or wakes the next waiters; finds a thread to run
    /// pending asynchronous writes.
    ///
    /// Waiters are granted the queue directly (it is theirs when they wake) when one is due or
    /// the queue is closed to newcomers by a pending asynchronous write; otherwise they are only
    /// woken and compete, so that the queue is never reserved for a thread that is not running.
    private func handOn(_ lane: inout Lane, _ wake: inout Wakeups) {
        guard !lane.waiters.isEmpty else { return }
        let current = state.load(ordering: .acquiring)
        let done = completed.load(ordering: .acquiring)
        let noneQueued = Bits.asyncCount(current) == 0
        func ready(_ waiter: UnsafeMutablePointer<Waiter>) -> Bool { noneQueued || waiter.pointee.target <= done }
        // Flushers want no access: wake the satisfied ones.
        for waiter in lane.waiters where waiter.pointee.want == .completion && ready(waiter) {
            settleOutcome(waiter, .woken, &lane, &wake)
        }
        defer { refreshBits(&lane) }
        if current & Bits.writer != 0 { return }
        let closed = current & (Bits.due | Bits.asyncMask) != 0
        let readersInside = current & Bits.readerMask != 0

        // The waiter whose turn it is: the first due one, or else the first whose writes have run.
        let head: UnsafeMutablePointer<Waiter>? = lane.dueCount > 0
            ? lane.waiters.first { $0.pointee.isDue && $0.pointee.wantsAccess }
            : lane.waiters.first { $0.pointee.wantsAccess && ready($0) }
        if let head, ready(head) {
            if head.pointee.want == .read {
                func isReadyReader(_ waiter: UnsafeMutablePointer<Waiter>) -> Bool {
                    waiter.pointee.want == .read && ready(waiter)
                }
                if closed {
                    // Threads are let in as one batch; suspended tasks are only woken (they
                    // take their read when they run again).
                    guard addReaders(lane.waiters.count { isReadyReader($0) && $0.pointee.task == nil }) else { return }
                }
                while let reader = lane.waiters.first(where: isReadyReader) {
                    settleOutcome(reader, closed && reader.pointee.task == nil ? .granted(.access) : .woken, &lane, &wake)
                }
            } else if !readersInside {
                if closed && head.pointee.task == nil {
                    guard takeExclusive() else { return }
                    settleOutcome(head, .granted(.access), &lane, &wake)
                } else {
                    settleOutcome(head, .woken, &lane, &wake)
                }
            }
            return
        }
        guard !noneQueued else {
            // Nothing to run: a worker waiting for the queue goes back to lingering.
            if let worker = lane.waiters.first(where: { $0.pointee.want == .runner }) {
                settleOutcome(worker, .woken, &lane, &wake)
            }
            return
        }
        // Asynchronous writes come first: a waiter that may run them does, else the worker.
        guard !readersInside else { return }
        let runner = lane.waiters.first { $0.pointee.mayHelp && $0.pointee.wantsAccess && !ready($0) }
            ?? lane.waiters.first { $0.pointee.want == .runner }
        if let runner {
            guard takeExclusive() else { return }
            settleOutcome(runner, .granted(.runner), &lane, &wake)
        } else {
            wake.drainer = true
        }
    }

    /// Takes `waiter` out of the lane with `outcome`; its wake-up happens after the unlock.
    private func settleOutcome(_ waiter: UnsafeMutablePointer<Waiter>, _ outcome: Outcome,
                               _ lane: inout Lane, _ wake: inout Wakeups) {
        waiter.pointee.outcome = outcome
        if waiter.pointee.isDue { lane.dueCount -= 1 }
        lane.remove(waiter)
        if let task = waiter.pointee.task {
            if let continuation = task._withUnsafeGuaranteedRef({ $0.takeContinuationForWakeUp() }) {
                wake.tasks.append(continuation)
            }
        } else {
            wake.append(waiter.pointee.parker)
        }
    }

    /// Keeps the `parked` and `due` bits and `nextTarget` true to the lane.
    private func refreshBits(_ lane: inout Lane) {
        var wanted: UInt = 0
        if !lane.waiters.isEmpty { wanted |= Bits.parked }
        if lane.dueCount > 0 { wanted |= Bits.due }
        var current = state.load(ordering: .relaxed)
        while current & Bits.flags != wanted {
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: current & ~Bits.flags | wanted, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        nextTarget.store(lane.waiters.lazy.map { $0.pointee.target }.min() ?? .max, ordering: .releasing)
    }

    /// Counts `count` readers in, if no writer holds the queue.
    private func addReaders(_ count: Int) -> Bool {
        updateState(while: { $0 & Bits.writer == 0 }) { $0 &+ UInt(count) &* Bits.oneReader }
    }

    /// Takes the exclusivity if the queue is free, whatever the flags.
    private func takeExclusive() -> Bool {
        updateState(while: { $0 & (Bits.writer | Bits.readerMask) == 0 }) { $0 | Bits.writer }
    }

    // MARK: Leaving

    /// The last reader leaves while the lane needs attention: it decrements under the lane's
    /// lock, so that no thread can take the queue and free it (`destroy`) while it is still on
    /// its way out.
    @inline(never)
    private func lastReaderLeaves() {
        #if QUEUEKIT_TESTING
        testHookBeforeLastReaderStarts?()
        #endif
        var wake = Wakeups()
        lane.withLock { lane in
            state.subtract(Bits.oneReader, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }

    @inline(never)
    private func releaseWriteSlow() {
        var wake = Wakeups()
        lane.withLock { lane in
            state.bitwiseAnd(~Bits.writer, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }

    /// A reader that ran the asynchronous writes it needed turns its exclusivity into a read,
    /// letting in the waiting readers whose writes have run with it.
    private func downgrade() {
        let current = state.load(ordering: .relaxed)
        if current & (Bits.parked | Bits.due) == 0,
           state.compareExchange(expected: current, desired: current &- Bits.writer &+ Bits.oneReader,
                                 ordering: .acquiringAndReleasing).exchanged {
            return
        }
        var wake = Wakeups()
        lane.withLock { lane in
            state.add(Bits.oneReader &- Bits.writer, ordering: .acquiringAndReleasing)
            handOn(&lane, &wake)
        }
        wake.perform(on: self)
    }

    // MARK: Running asynchronous writes

    /// Holding the exclusivity, runs pending asynchronous writes in order: a helper up to its
    /// `target` (only writes submitted before its call began), the worker until none is left or
    /// a waiter's writes have all run (it then lets that waiter go first). Flushers whose writes
    /// have run are woken on the way.
    ///
    /// The writes that ran are published (counted in `completed`, taken off the state, their
    /// nodes recycled) in batches of up to `publishBatch`, and whenever a waiter's target is
    /// reached: submitters and the runner then touch the shared lines once per batch instead of
    /// once per write. Until a batch is published the queue stays closed to newcomers, which only
    /// makes them wait for a write that already ran.
    private func runAsyncWrites(upTo target: UInt64, isDrainer: Bool) {
        var done = completed.load(ordering: .relaxed)
        var unpublished: UInt = 0
        var available: UInt = 0
        defer { publish(&unpublished, done: done) }
        while done < target {
            if available == 0 {
                publish(&unpublished, done: done)
                available = Bits.asyncCount(state.load(ordering: .acquiring))
                if available == 0 { return }
            }
            let work = writes.pop()
            ExecutionContext.run(on: queue, exclusive: true, outer: nil) { work() }
            done &+= 1
            available -= 1
            unpublished += 1
            if done >= nextTarget.load(ordering: .relaxed) {
                publish(&unpublished, done: done)
                if serveWaiters(isDrainer: isDrainer) { return }
            } else if unpublished >= Self.publishBatch {
                publish(&unpublished, done: done)
            }
        }
    }

    private static let publishBatch: UInt = 64

    /// Counts `count` writes that ran in `completed` (now `done`) and takes them off the state,
    /// flagged so that `asyncTarget` never reads the pair half-updated.
    @inline(__always)
    private func publish(_ count: inout UInt, done: UInt64) {
        guard count != 0 else { return }
        state.add(Bits.publishing, ordering: .sequentiallyConsistent)
        completed.store(done, ordering: .sequentiallyConsistent)
        state.subtract(count &* Bits.oneAsync &+ Bits.publishing, ordering: .sequentiallyConsistent)
        count = 0
        writes.recycle()
    }

    /// Wakes the flushers whose writes have run; true when the worker should stop because a
    /// reader or writer waiting in the lane may now go.
    private func serveWaiters(isDrainer: Bool) -> Bool {
        var wake = Wakeups()
        let stop = lane.withLock { lane -> Bool in
            let current = state.load(ordering: .acquiring)
            for waiter in lane.waiters where waiter.pointee.want == .completion
                && writesHaveRun(upTo: waiter.pointee.target, state: current) {
                settleOutcome(waiter, .woken, &lane, &wake)
            }
            refreshBits(&lane)
            return isDrainer && lane.waiters.contains {
                $0.pointee.wantsAccess && writesHaveRun(upTo: $0.pointee.target, state: current)
            }
        }
        wake.perform(on: self)
        return stop
    }

    /// A flush on a thread that may not help: waits until `completed` reaches `target`.
    private func waitForCompletion(of target: UInt64) -> Bool {
        Parker.withParker { parker in
            withUnsafeTemporaryAllocation(of: Waiter.self, capacity: 1) { buffer -> Bool in
                let me = buffer.baseAddress!
                me.initialize(to: Waiter(want: .completion, call: .flush, mayHelp: false, target: target,
                                         since: MonotonicClock.now(), parker: parker))
                defer { me.deinitialize(count: 1) }
                guard waitInLane(me) != nil else {
                    WaitRegistry.deliverPendingRefusal()
                    return false
                }
                return true
            }
        }
    }

    private func startDrainer() {
        if drainer.compareExchange(expected: Self.drainerIdle, desired: Self.drainerActive,
                                   ordering: .sequentiallyConsistent).exchanged {
            writer.async { ThreadSanitizer.internalCode { self.drain() } }
        }
    }

    /// Makes sure a worker runs soon: starts one, or (`start: false` only) wakes the lingering one.
    fileprivate func wakeDrainer(start: Bool = true) {
        if drainer.load(ordering: .sequentiallyConsistent) == Self.drainerIdle {
            if start { startDrainer() }
        } else {
            Parker(word: drainerWord).unpark()
        }
    }

    /// The worker: runs the pending asynchronous writes, then waits a poll (1 ms) for more to
    /// gather, so that a stream of writes nobody waits for is run in batches; after a few empty
    /// polls it ends. Threads that need it sooner wake it.
    private func drain() {
        let parker = Parker(word: drainerWord)
        var idlePolls = 0
        while true {
            qkshim_atomic_store32(drainerWord, Parker.idle)
            if Bits.asyncCount(state.load(ordering: .sequentiallyConsistent)) != 0 {
                idlePolls = 0
                if tryRunner() || acquireSlow(.runner, call: .worker, target: .max) {
                    runAsyncWrites(upTo: .max, isDrainer: true)
                    releaseWrite()
                }
                // Caught up (or a waiter went first): let the next writes gather for a poll
                // instead of taking them one by one as they come, unless a thread that may not
                // run them itself needs them sooner (it sets the word).
                _ = parker.park(until: MonotonicClock.now() &+ Self.drainerPoll, spin: false)
                continue
            }
            if closing.load(ordering: .acquiring) || idlePolls >= Self.drainerLingerPolls {
                drainer.store(Self.drainerIdle, ordering: .sequentiallyConsistent)
                // A write submitted meanwhile saw the worker active and started none.
                if Bits.asyncCount(state.load(ordering: .sequentiallyConsistent)) != 0,
                   drainer.compareExchange(expected: Self.drainerIdle, desired: Self.drainerActive,
                                           ordering: .sequentiallyConsistent).exchanged {
                    continue
                }
                return
            }
            idlePolls += 1
            _ = parker.park(until: MonotonicClock.now() &+ Self.drainerPoll, spin: false)
        }
    }
}

// MARK: fork()

extension DBQueue {
    /// In a forked child: the first call after the fork adopts the queue's state as the fork left
    /// it (one thread does, the others wait for it); then `notRecoverable` when the fork left it
    /// unusable.
    @inline(never)
    func checkFork() throws(QueueKitError) {
        let generation = Fork.generation
        var seen = forkGeneration.load(ordering: .acquiring)
        while seen != generation {
            if seen != Self.adoptingFork,
               forkGeneration.compareExchange(
                   expected: seen, desired: Self.adoptingFork, ordering: .acquiringAndReleasing).exchanged
            {
                adoptFork()
                forkGeneration.store(generation, ordering: .releasing)
                break
            }
            sched_yield()
            seen = forkGeneration.load(ordering: .acquiring)
        }
        if brokenByFork.load(ordering: .relaxed) { throw .notRecoverable }
    }

    /// The threads that were inside the queue, waiting for it or running its writes at the fork
    /// are gone: forget them. The queue stays usable when no write was running, pending or
    /// waiting; otherwise the pending writes are dropped (they never run here) and the queue is
    /// marked unusable. A lane lock still held at the fork (by a thread in the middle of handing
    /// the queue on) means the same.
    private func adoptFork() {
        let hold = ExecutionContext.hold(of: queue)
        let usable = lane.withLockIfAvailable { lane -> Bool in
            let current = state.load(ordering: .acquiring)
            let writing = current & Bits.writer != 0 && hold != .exclusive
            let quiet = !writing && Bits.asyncCount(current) == 0 && !lane.waiters.contains { $0.pointee.want == .write }
            lane.waiters.removeAll()
            lane.dueCount = 0
            nextTarget.store(.max, ordering: .relaxed)
            drainer.store(Self.drainerIdle, ordering: .relaxed)
            // Only this thread's own read or write survives, and it will end as usual.
            state.store(
                hold == .exclusive ? Bits.writer : hold == .shared ? Bits.oneReader : 0, ordering: .releasing)
            return quiet
        }
        if usable != true { brokenByFork.store(true, ordering: .relaxed) }
        // A lane lock held by a thread that is gone can never be destroyed (that would trap):
        // such a queue is never freed in this process.
        if usable == nil { _ = Unmanaged.passRetained(self) }
    }
}

/// The calls that wait in a DB queue, as a deadlock report names them.
enum DBQueueCall {
    case read, write, flush, destroy
    /// The queue's worker, waiting to run asynchronous writes.
    case worker

    /// The C name of the call ("qk_dbqueue_read").
    var cName: StaticString {
        switch self {
        case .read: "qk_dbqueue_read"
        case .write: "qk_dbqueue_write"
        case .flush: "qk_dbqueue_flush"
        case .destroy: "qk_dbqueue_destroy"
        case .worker: "qk_dbqueue_write_async (the queue's worker)"
        }
    }

    /// The call's name in a report.
    var name: StaticString {
        switch self {
        case .read: "read"
        case .write: "write"
        case .flush: "flush"
        case .destroy: "destroy"
        case .worker: "worker"
        }
    }
}

/// What a suspended task waits for in a DB queue.
enum SuspendedWant {
    case read, write
    /// The writes up to its target have run (a flush).
    case completion

    fileprivate var lane: Want {
        switch self {
        case .read: .read
        case .write: .write
        case .completion: .completion
        }
    }
}

/// The layout of `DBQueue.state`.
private enum Bits {
    /// A thread holds the queue exclusively: a writer, or a thread running asynchronous writes.
    static let writer: UInt = 1
    /// A waiter has waited past the fairness bound: nobody enters without the lane.
    static let due: UInt = 2
    /// Threads wait in the lane: whoever frees the queue looks at it.
    static let parked: UInt = 4
    static let flags: UInt = due | parked
    /// Readers inside, in bits 3…30.
    static let oneReader: UInt = 8
    static let readerMask: UInt = 0x7FFF_FFF8
    /// The runner is publishing writes that ran (`DBQueue.publish`).
    static let publishing: UInt = 1 << 31
    /// Asynchronous writes submitted and not yet run, in bits 32…63: while any is pending,
    /// nobody enters without the lane (nothing overtakes a submitted write).
    static let oneAsync: UInt = 1 << 32
    static let asyncMask: UInt = 0xFFFF_FFFF_0000_0000

    static let closedToReaders = writer | due | asyncMask
    /// What makes the last reader leave through the lane.
    static let needsLane = parked | due | asyncMask

    @inline(__always)
    static func asyncCount(_ state: UInt) -> UInt { state >> 32 }
}

/// What a waiter waits for.
private enum Want {
    case read, write
    /// The worker: the exclusivity, to run asynchronous writes.
    case runner
    /// A flush that may not help: no access, only its writes run.
    case completion
}

/// What a waiter was handed.
private enum Grant: Equatable {
    /// What it wanted.
    case access
    /// The exclusivity, to run the asynchronous writes it needs first.
    case runner
}

private enum Outcome {
    case waiting
    /// Woken to compete for the queue again (a flusher: its writes have run).
    case woken
    case granted(Grant)
}

private enum WaitResult { case woken, timedOut, refused }

private enum Step {
    case granted(Grant), compete, refused, wait
}

/// A waiting thread's record, on its stack while it waits; the lane points at it.
///
/// The wake-up is a `Parker` word, or for a suspended task (on the heap for its wait) the
/// continuation in its ``SuspendedWaiter`` record. A task is only woken, never granted
/// (`.woken`): it acquires when it resumes, and since it re-enters with its first arrival time
/// (`since`), it keeps its place in line and becomes due like a thread.
private struct Waiter {
    let want: Want
    let call: DBQueueCall
    /// The thread holds nothing else of QueueKit's: it may run asynchronous writes.
    let mayHelp: Bool
    /// `completed` must reach this before it may have access.
    let target: UInt64
    /// When the call arrived: the lane is ordered by it and the fairness bound counts from it.
    let since: UInt64
    var isDue = false
    var outcome = Outcome.waiting
    /// A thread's wake-up word (a task's record carries an unused one).
    let parker: Parker
    /// A suspended task's record; `nil` for a thread. A task is never granted the queue, only
    /// woken.
    var task: Unmanaged<SuspendedWaiter>? = nil

    init(want: Want, call: DBQueueCall, mayHelp: Bool, target: UInt64, since: UInt64, parker: Parker) {
        self.want = want
        self.call = call
        self.mayHelp = mayHelp
        self.target = target
        self.since = since
        self.parker = parker
    }

    var wantsAccess: Bool { want == .read || want == .write }
}

/// The state behind `DBQueue.lane`: the waiters in arrival order.
private struct Lane {
    var waiters: [UnsafeMutablePointer<Waiter>] = []
    /// Waiters that are due.
    var dueCount = 0

    init() { waiters.reserveCapacity(16) }

    mutating func insert(_ waiter: UnsafeMutablePointer<Waiter>) {
        let since = waiter.pointee.since
        var index = waiters.count
        while index > 0 && waiters[index - 1].pointee.since > since { index -= 1 }
        waiters.insert(waiter, at: index)
    }

    mutating func remove(_ waiter: UnsafeMutablePointer<Waiter>) {
        if let index = waiters.firstIndex(of: waiter) { waiters.remove(at: index) }
    }
}

/// Wake-ups to do once the lane's lock is released. The first two are kept inline: most
/// hand-offs wake one thread, and the contended paths should not allocate.
private struct Wakeups {
    private var first: Parker?
    private var second: Parker?
    private var more: [Parker] = []
    /// Suspended tasks to wake (`false`: woken, not granted; they compete when they run).
    var tasks: [UnsafeContinuation<Bool, any Error>] = []
    var drainer = false

    mutating func append(_ parker: Parker) {
        if first == nil {
            first = parker
        } else if second == nil {
            second = parker
        } else {
            more.append(parker)
        }
    }

    func perform(on db: DBQueue) {
        first?.unpark()
        second?.unpark()
        for parker in more { parker.unpark() }
        for task in tasks { task.resume(returning: false) }
        if drainer { db.wakeDrainer() }
    }
}
