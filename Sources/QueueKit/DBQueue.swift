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
/// - A read that is not nested sees every write submitted before it began, by any thread, sync
///   or async; a write that is not nested runs after every write submitted before it.
/// - Readers do not go through dispatch: an uncontended read is one atomic increment and one
///   decrement. Writers queue in a FIFO lane; a write that becomes due while readers are inside
///   waits for them, and readers that arrive after it wait for it (no writer starvation), while
///   readers that arrived before a write are let in ahead of it (no reader starvation).
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

    /// `readers << 1 | gate`. The gate bit is set exactly while a write is running or pending
    /// (changed only under `lane`'s lock); readers enter lock-free while it is clear.
    private let state = Atomic<Int>(0)
    private static let gate = 1
    private static let oneReader = 2

    /// Everything about writes and waiting threads, under one lock; touched only off the fast path.
    private let lane = Lock(Lane())

    /// Where asynchronous writes run, one at a time.
    private let writer: DispatchQueue

    /// The fork generation (``Fork/generation``) whose state the queue has adopted, or
    /// `adoptingFork` while a thread adopts it; and whether a fork left it unusable.
    private let forkGeneration = Atomic<UInt64>(Fork.generation)
    private let brokenByFork = Atomic<Bool>(false)
    private static let adoptingFork = UInt64.max

    #if QUEUEKIT_TESTING
    /// Test seam (debug builds only): called by the reader that left last while a write is due,
    /// after its decrement and before it starts the write. Set it before the queue is shared.
    var testHookBeforeLastReaderStarts: (() -> Void)?

    /// Test seam (debug builds only): writes queued and not yet started.
    var pendingWriteCount: Int { lane.withLock { $0.pending.count } }
    #endif

    /// Creates a DB queue.
    public init(label: String? = nil) throws(QueueKitError) {
        let label = label ?? ""
        queue = try Queue.identity(label: label, kind: .concurrent)
        writer = DispatchQueue(label: label.isEmpty ? "queuekit.dbqueue.writer" : "\(label).writer")
    }

    // MARK: Swift API

    /// Runs `body` now, concurrently with other reads and never with a write, and returns its value.
    /// Nested inside a read or write of this queue (also through `sync` hops), it runs inline.
    public func read<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if _slowPath(Fork.isChild) {
            do { try checkFork() } catch {
                qkshim_fatal("QueueKit: DBQueue.read in a forked child, on a DB queue that was being written at the fork")
            }
        }
        return try withReadAccess(body)
    }

    /// Runs `body` now, exclusively, after every write submitted before it, and returns its value.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` when called inside a read
    ///   of this queue but no write (an upgrade); whatever `body` throws.
    public func write<R>(_ body: () throws -> R) throws -> R {
        try withWriteAccess(writeRoute(), body)
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

    /// Waits until every write submitted before the call has run.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` inside a block of this queue;
    ///   ``QueueKitError/notRecoverable`` in a forked child, when the queue was being written at the fork.
    public func flush() throws(QueueKitError) {
        if _slowPath(Fork.isChild) { try checkFork() }
        if ExecutionContext.hold(of: queue) != .none { throw .wouldDeadlock }
        Parker.withParker { parker in
            let mustWait = lane.withLock { lane in
                guard lane.completed < lane.issued else { return false }
                lane.flushWaiters.append(Waiter(target: lane.issued, parker: parker))
                return true
            }
            if mustWait { _ = parker.park() }
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
        acquireWrite()
        releaseWrite()
    }

    // MARK: Core (the C API calls these)

    /// Runs `body` with read access, inline when the thread already has access.
    @inline(__always)
    func withReadAccess<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let caller = ExecutionContext.innermost
        if caller == nil || ExecutionContext.hold(of: queue, from: caller) == .none {
            acquireRead()
            defer { releaseRead() }
            return try ExecutionContext.run(on: queue, exclusive: false, outer: caller, body)
        }
        return try ExecutionContext.run(on: queue, exclusive: false, outer: caller, body)
    }

    /// How a write gets access, decided before anything runs.
    struct WriteRoute {
        /// The calling thread's innermost frame: the caller of the write's block.
        let caller: UnsafePointer<ExecutionFrame>?
        /// The thread already writes: the block runs inline.
        let isInline: Bool
    }

    /// Inline when the thread already has write access; `wouldDeadlock` when it has only read
    /// access (an upgrade could never proceed); otherwise through the lane.
    @inline(__always)
    func writeRoute() throws(QueueKitError) -> WriteRoute {
        if _slowPath(Fork.isChild) { try checkFork() }
        let caller = ExecutionContext.innermost
        switch caller == nil ? .none : ExecutionContext.hold(of: queue, from: caller) {
        case .exclusive: return WriteRoute(caller: caller, isInline: true)
        case .shared: throw .wouldDeadlock
        case .none: return WriteRoute(caller: caller, isInline: false)
        }
    }

    /// Runs `body` with write access, as `route` says.
    @inline(__always)
    func withWriteAccess<R, E: Error>(_ route: WriteRoute, _ body: () throws(E) -> R) throws(E) -> R {
        if route.isInline {
            return try ExecutionContext.run(on: queue, exclusive: true, outer: route.caller, body)
        }
        acquireWrite()
        defer { releaseWrite() }
        return try ExecutionContext.run(on: queue, exclusive: true, outer: route.caller, body)
    }

    /// Queues a write; returns at once.
    ///
    /// - Throws: ``QueueKitError/notRecoverable`` in a forked child (nothing queued).
    func writeAsync(_ work: CWork) throws(QueueKitError) {
        if _slowPath(Fork.isChild) { throw .notRecoverable }
        let wake = lane.withLock { lane in
            lane.issued += 1
            lane.pending.append(.async(work))
            closeGate(&lane)
            return lane.writerActive ? Wake() : startNext(&lane, inDrainer: false)
        }
        wake.perform(on: self)
    }

    // MARK: Readers

    @inline(__always)
    private func acquireRead() {
        var current = state.load(ordering: .relaxed)
        while current & Self.gate == 0 {
            let (exchanged, original) = state.weakCompareExchange(
                expected: current, desired: current &+ Self.oneReader,
                successOrdering: .acquiring, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
        acquireReadWaiting()
    }

    /// A write is running or pending: wait until every write submitted so far has run; the
    /// finishing writer counts this reader in before waking it.
    @inline(never)
    private func acquireReadWaiting() {
        Parker.withParker { parker in
            let mustWait = lane.withLock { lane in
                if state.load(ordering: .relaxed) & Self.gate == 0 {
                    state.wrappingAdd(Self.oneReader, ordering: .acquiringAndReleasing)
                    return false
                }
                lane.waitingReaders.append(Waiter(target: lane.issued, parker: parker))
                return true
            }
            if mustWait { _ = parker.park() }
        }
    }

    @inline(__always)
    private func releaseRead() {
        let before = state.wrappingSubtract(Self.oneReader, ordering: .releasing).oldValue
        if before == Self.oneReader | Self.gate { lastReaderLeft() }
    }

    /// The last reader left while a write is due: start it.
    ///
    /// The reader still uses the queue here, after its decrement: no other thread may start the
    /// write meanwhile (`Lane.lastReaderStartsNext`), or a `destroy` could free the queue under it.
    @inline(never)
    private func lastReaderLeft() {
        #if QUEUEKIT_TESTING
        testHookBeforeLastReaderStarts?()
        #endif
        let wake = lane.withLock { lane in
            lane.lastReaderStartsNext = false
            return lane.writerActive ? Wake() : startNext(&lane, inDrainer: false)
        }
        wake.perform(on: self)
    }

    // MARK: Writers

    private func acquireWrite() {
        Parker.withParker { parker in
            let (mustWait, wake) = lane.withLock { lane -> (Bool, Wake) in
                lane.issued += 1
                if !lane.writerActive && lane.pending.isEmpty
                    && state.compareExchange(expected: 0, desired: Self.gate, ordering: .acquiringAndReleasing).exchanged
                {
                    lane.writerActive = true
                    return (false, Wake())
                }
                lane.pending.append(.sync(parker))
                closeGate(&lane)
                // The readers may all have left before the gate closed, and then nobody else
                // starts the next write: do it here (it may be ours, or an earlier one).
                var wake = lane.writerActive ? Wake() : startNext(&lane, inDrainer: false)
                if let index = wake.parkers.firstIndex(where: { $0.word == parker.word }) {
                    wake.parkers.remove(at: index)
                    return (false, wake)
                }
                return (true, wake)
            }
            wake.perform(on: self)
            if mustWait { _ = parker.park() }
        }
    }

    private func releaseWrite() {
        let wake = lane.withLock { lane in finishWrite(&lane, inDrainer: false) }
        wake.perform(on: self)
    }

    /// Runs queued asynchronous writes one after another for as long as they are next in line.
    private func drain(_ first: CWork) {
        var next: CWork? = first
        while let work = next {
            ExecutionContext.run(on: queue, exclusive: true, outer: nil) { work() }
            let wake = lane.withLock { lane in finishWrite(&lane, inDrainer: true) }
            wake.unparkAll()
            next = wake.asyncWork
        }
    }

    // MARK: The lane (always called with `lane` locked)

    /// A write finished: count it, let in the flushers and readers it satisfies, start the next.
    private func finishWrite(_ lane: inout Lane, inDrainer: Bool) -> Wake {
        lane.writerActive = false
        lane.completed += 1
        var wake = Wake()
        let completed = lane.completed
        // The emptiness checks matter: `removeAll(where:)` and `+=` reallocate even an empty
        // array, which cost every uncontended write hundreds of instructions and two mallocs.
        if !lane.flushWaiters.isEmpty {
            lane.flushWaiters.removeAll { waiter in
                guard waiter.target <= completed else { return false }
                wake.parkers.append(waiter.parker)
                return true
            }
        }
        admitReaders(&lane, upTo: completed, into: &wake)
        let next = startNext(&lane, inDrainer: inDrainer)
        if !next.parkers.isEmpty { wake.parkers += next.parkers }
        wake.asyncWork = next.asyncWork
        wake.needsDrainer = next.needsDrainer
        return wake
    }

    /// Counts in the waiting readers whose writes have all run, and queues their wake-up.
    private func admitReaders(_ lane: inout Lane, upTo completed: UInt64, into wake: inout Wake) {
        guard !lane.waitingReaders.isEmpty else { return }
        lane.waitingReaders.removeAll { waiter in
            guard waiter.target <= completed else { return false }
            state.wrappingAdd(Self.oneReader, ordering: .acquiringAndReleasing)
            wake.parkers.append(waiter.parker)
            return true
        }
    }

    /// Closes the gate for a write just queued. Readers already inside make the one that leaves
    /// last responsible for starting the next write.
    private func closeGate(_ lane: inout Lane) {
        let before = state.bitwiseOr(Self.gate, ordering: .acquiringAndReleasing).oldValue
        if before & Self.gate == 0 && before != 0 { lane.lastReaderStartsNext = true }
    }

    /// No write is running: start the next one if no reader is inside, or open the gate when
    /// none is pending.
    private func startNext(_ lane: inout Lane, inDrainer: Bool) -> Wake {
        var wake = Wake()
        guard let item = lane.pending.first else {
            state.bitwiseAnd(~Self.gate, ordering: .acquiringAndReleasing)
            admitReaders(&lane, upTo: .max, into: &wake)
            return wake
        }
        // With the gate closed the reader count only falls, and the decrement that empties it
        // sees the gate and calls `lastReaderLeft`: leave the start to that reader. A count seen
        // as zero is not enough: the last reader may have left without having started it yet.
        if lane.lastReaderStartsNext { return wake }
        guard state.load(ordering: .acquiring) & ~Self.gate == 0 else {
            lane.lastReaderStartsNext = true
            return wake
        }
        lane.pending.removeFirst()
        lane.writerActive = true
        switch item {
        case .sync(let parker):
            wake.parkers.append(parker)
        case .async(let work):
            wake.asyncWork = work
            wake.needsDrainer = !inDrainer
        }
        return wake
    }

    deinit {
        if brokenByFork.load(ordering: .relaxed) { return }
        let idle = lane.withLock { $0.pending.isEmpty && !$0.writerActive }
        Swift.precondition(idle, "QueueKit: a DBQueue was freed with writes pending")
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

    /// The threads that were inside the queue or waiting for it at the fork are gone: forget them.
    /// The queue stays usable when no write was running or pending; otherwise the pending writes
    /// are dropped (they never run here) and the queue is marked unusable. A lane lock still held
    /// at the fork (by a thread in the middle of queueing or finishing a write) means the same.
    private func adoptFork() {
        let hold = ExecutionContext.hold(of: queue)
        let usable = lane.withLockIfAvailable { lane -> Bool in
            let quiet = !lane.writerActive && lane.pending.isEmpty
            lane.pending = FIFO()
            lane.waitingReaders.removeAll()
            lane.flushWaiters.removeAll()
            lane.lastReaderStartsNext = false
            // Only this thread's own read or write survives, and it will end as usual.
            lane.writerActive = hold == .exclusive
            lane.completed = lane.issued - (lane.writerActive ? 1 : 0)
            state.store(
                hold == .exclusive ? Self.gate : hold == .shared ? Self.oneReader : 0, ordering: .releasing)
            return quiet
        }
        if usable != true { brokenByFork.store(true, ordering: .relaxed) }
        // A lane lock held by a thread that is gone can never be destroyed (that would trap):
        // such a queue is never freed in this process.
        if usable == nil { _ = Unmanaged.passRetained(self) }
    }
}

/// A write waiting in the lane: a thread parked in `write`, or queued work.
private enum PendingWrite: @unchecked Sendable {
    case sync(Parker)
    case async(CWork)
}

/// A thread parked until the writes up to `target` have run.
private struct Waiter: @unchecked Sendable {
    let target: UInt64
    let parker: Parker
}

/// The state behind `DBQueue.lane`.
private struct Lane: @unchecked Sendable {
    var pending = FIFO<PendingWrite>()
    var writerActive = false
    /// Writes submitted and writes completed, since creation.
    var issued: UInt64 = 0
    var completed: UInt64 = 0
    var waitingReaders: [Waiter] = []
    var flushWaiters: [Waiter] = []
    /// A write is due while readers are (or were just) inside: the reader whose decrement empties
    /// the count starts it, in `lastReaderLeft`; until then nobody else does. True exactly when
    /// the gate is closed, no write runs, and such a reader exists or is on its way to the lock.
    var lastReaderStartsNext = false
}

/// What to do once the lane's lock is released: threads to wake, and asynchronous work that
/// became due.
private struct Wake: @unchecked Sendable {
    var parkers: [Parker] = []
    var asyncWork: CWork?
    var needsDrainer = false

    func unparkAll() { parkers.forEach { $0.unpark() } }

    func perform(on db: DBQueue) {
        unparkAll()
        if needsDrainer, let work = asyncWork {
            db.startDrainer(work)
        }
    }
}

extension DBQueue {
    fileprivate func startDrainer(_ work: CWork) {
        writer.async { self.drain(work) }
    }
}

/// A first-in, first-out buffer that reuses its storage.
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ element: Element) { storage.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}
