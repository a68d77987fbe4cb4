// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

/// A dispatch queue that knows its identity: the core of QueueKit's queue-identity registry.
///
/// Every `Queue` is registered from birth, so ``Queue/current``, ``isCurrent`` and ``check(_:)``
/// answer for it with no extra step, through target hierarchies and through `sync` hops.
/// `sync`, `barrierSync` and `perform` never crash or hang on a queue the calling thread already
/// holds: they throw ``QueueKitError/wouldDeadlock`` (or run inline, where that is what the caller
/// meant) instead.
///
/// In a forked child, whose dispatch threads are gone, every submission (`async`, `sync`,
/// `barrierAsync`, `barrierSync`, `perform`) throws ``QueueKitError/notRecoverable`` at once and
/// runs nothing; the identity members keep working.
///
/// Thread safety: every member may be called from any thread.
public final class Queue: @unchecked Sendable {
    /// How a queue runs its blocks.
    public enum Kind: Int32, Sendable {
        /// One block at a time, in order.
        case serial = 0
        /// Many blocks at once; barrier blocks run alone.
        case concurrent = 1
    }

    /// The quality-of-service classes of the global queues, lowest first.
    public enum QoS: Int32, Sendable, CaseIterable {
        case background = 0
        case utility, `default`, userInitiated, userInteractive

        var dispatchClass: DispatchQoS.QoSClass {
            switch self {
            case .background: .background
            case .utility: .utility
            case .default: .default
            case .userInitiated: .userInitiated
            case .userInteractive: .userInteractive
            }
        }
    }

    /// What ``check(_:)`` verifies about the calling thread (dispatch's `DispatchPredicate`).
    public enum Predicate: Int32, Sendable {
        /// The thread runs a block of the queue, here or further out (a block waiting in a `sync`).
        case onQueue = 0
        /// The thread runs the queue exclusively: a serial queue's block or a barrier block.
        case onQueueAsBarrier = 1
        /// The thread runs no block of the queue.
        case notOnQueue = 2
    }

    /// The queue's kind.
    public let kind: Kind
    /// The queue this one's blocks run on, if it was created with one.
    public let target: Queue?
    /// `target` without reference counting, for the walks on hot paths (`target` keeps it alive).
    @usableFromInline let parent: Unmanaged<Queue>?
    /// The dispatch queue underneath; `nil` for a queue that stands for identity only (a DB queue's).
    /// Inside the queue's blocks it is what `DispatchQueue.current` reports.
    @usableFromInline let dispatchQueue: DispatchQueue?
    /// `dispatchQueue`'s `dispatch_queue_t`, for the round trips through `dispatch_*_f`.
    @usableFromInline let dispatchObject: UnsafeMutableRawPointer?
    /// The object a queue that stands for identity only stands for (its DB queue), stored once
    /// as that object is made, before it is shared; `nil` for every other queue. A frame of the
    /// queue thus tells whether a C handle is that object without reading the handle
    /// (`DBQueue.readInline`). Unchecked exclusivity: written once before any read.
    @usableFromInline @exclusivity(unchecked) var identityOwner: UnsafeRawPointer?
    /// Main and global queues live forever: retain and release are no-ops on them.
    package let isImmortal: Bool
    /// The words the queue owns besides dispatch's (`queuekit_shim_idle.h`): the idle word and
    /// the recycled nodes of `async`.
    let words: UnsafeMutablePointer<qkshim_queue_words_t>
    /// The idle word: who holds the queue without dispatch, and how many blocks dispatch has been
    /// given that have not finished (see `Queue+Idle.swift`).
    @usableFromInline let idleWord: UnsafeMutablePointer<UInt64>
    /// Whether a synchronous call may take the idle path: a created queue with no target.
    @usableFromInline let runsIdle: Bool
    /// The label, kept as a C string that lives as long as the queue (for `qk_queue_label`).
    package let cLabel: CString
    let specifics = Specifics()

    @inlinable @inline(__always) var isSerial: Bool { kind == .serial }

    /// Whether a barrier flag means anything on this queue. The global (root) queues have no
    /// barriers: dispatch runs a barrier block submitted to one as an ordinary block, so such a
    /// block does not hold the queue exclusively and a `barrierSync` onto one is a plain `sync`.
    @inline(__always) var honoursBarriers: Bool { !(isImmortal && kind == .concurrent) }

    /// The queue's label ("" when anonymous).
    public var label: String { cLabel.string }

    /// Creates a queue. A `target` makes its blocks run on that queue.
    ///
    /// - Throws: ``QueueKitError/invalidArgument`` when `target` stands for identity only;
    ///   ``QueueKitError/outOfMemory``.
    public convenience init(label: String? = nil, kind: Kind = .serial, target: Queue? = nil) throws(QueueKitError) {
        try self.init(label: label, bytes: nil, kind: kind, target: target)
    }

    /// As ``init(label:kind:target:)``, keeping `bytes` (a C caller's label, not necessarily
    /// UTF-8) as the label that ``cLabel`` lends out.
    package convenience init(label: String?, bytes: UnsafePointer<CChar>?, kind: Kind, target: Queue?)
        throws(QueueKitError)
    {
        if let target, target.dispatchQueue == nil { throw .invalidArgument }
        let dispatchQueue = DispatchQueue(
            label: label ?? "",
            attributes: kind == .concurrent ? .concurrent : [],
            target: target?.dispatchQueue
        )
        try self.init(
            dispatchQueue: dispatchQueue, label: label ?? "", bytes: bytes, kind: kind, target: target, immortal: false)
    }

    init(
        dispatchQueue: DispatchQueue?, label: String, bytes: UnsafePointer<CChar>? = nil, kind: Kind, target: Queue?,
        immortal: Bool
    ) throws(QueueKitError) {
        guard let copy = bytes.map({ CString(copying: $0) }) ?? CString(label) else { throw .outOfMemory }
        guard let words = qkshim_queue_words_create() else { throw .outOfMemory }
        // A queue that targets `target` runs its blocks there through dispatch, which the idle
        // word of `target` cannot count: `target` takes the idle path no more.
        if let target, target.runsIdle { qkshim_idle_close(target.idleWord) }
        self.words = words
        self.idleWord = UnsafeMutableRawPointer(words).assumingMemoryBound(to: UInt64.self)
        self.runsIdle = !immortal && dispatchQueue != nil && target == nil
        self.cLabel = copy
        self.kind = kind
        self.target = target
        self.parent = target.map { Unmanaged.passUnretained($0) }
        self.dispatchQueue = dispatchQueue
        self.dispatchObject = dispatchQueue.map { DispatchObjectLayout.object(of: $0) }
        self.isImmortal = immortal
    }

    /// A queue that stands for something else in identity checks (a DB queue): blocks can be
    /// "run on it" only by its owner; submitting work to it is ``QueueKitError/invalidArgument``.
    static func identity(label: String, bytes: UnsafePointer<CChar>? = nil, kind: Kind) throws(QueueKitError) -> Queue {
        try Queue(dispatchQueue: nil, label: label, bytes: bytes, kind: kind, target: nil, immortal: false)
    }

    deinit {
        LockOrder.forget(self)
        ThreadSanitizer.destroying(self)
        specifics.destroyAll()
        qkshim_queue_words_free(words)
    }

    // MARK: System queues

    /// The main queue. On the main thread outside any block it is the current queue (until
    /// `qk_main` hands the main thread over to dispatch).
    public static let main: Queue = {
        let main = DispatchQueue.main
        return try! Queue(dispatchQueue: main, label: main.label, kind: .serial, target: nil, immortal: true)
    }()

    private static let globals: [Queue] = QoS.allCases.map { qos in
        let global = DispatchQueue.global(qos: qos.dispatchClass)
        return try! Queue(dispatchQueue: global, label: global.label, kind: .concurrent, target: nil, immortal: true)
    }

    /// The global concurrent queue of a QoS class.
    public static func global(qos: QoS = .default) -> Queue { globals[Int(qos.rawValue)] }

    /// The frame that stands for the main thread being on the main queue outside any block.
    nonisolated(unsafe) static let mainThreadFrame: UnsafePointer<ExecutionFrame> = {
        let frame = UnsafeMutablePointer<ExecutionFrame>.allocate(capacity: 1)
        frame.initialize(to: ExecutionFrame(queue: Queue.main, isExclusive: true, outer: nil))
        return UnsafePointer(frame)
    }()

    // MARK: Submitting work

    /// Submits `work` to run later; returns at once.
    public func async(_ work: @escaping @Sendable () -> Void) throws(QueueKitError) {
        try submit(barrier: false, call: "Queue.async", work)
    }

    /// Submits `work` as a barrier: on a concurrent queue it runs alone after the blocks before it.
    public func barrierAsync(_ work: @escaping @Sendable () -> Void) throws(QueueKitError) {
        try submit(barrier: true, call: "Queue.barrierAsync", work)
    }

    /// Runs `work` on the queue and waits for it, with dispatch's ordering.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `work` when the calling thread
    ///   holds the queue exclusively, or a queue it targets exclusively, or runs a block of a
    ///   concurrent queue it targets (where dispatch would wait behind a pending barrier), here
    ///   or further out through `sync` hops; ``QueueKitError/invalidArgument`` for an identity-only queue; and whatever `work`
    ///   throws. On a concurrent queue whose non-barrier block the thread already runs, `work`
    ///   runs inline: it can never wait behind a pending barrier.
    @inlinable
    public func sync<R>(_ work: () throws -> R) throws -> R {
        try run(barrier: false, call: "Queue.sync", work)
    }

    /// Runs `work` as a barrier and waits for it.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `work` when the calling thread runs
    ///   any block of the queue (or holds a queue it targets exclusively), and as ``sync(_:)``.
    @inlinable
    public func barrierSync<R>(_ work: () throws -> R) throws -> R {
        try run(barrier: true, call: "Queue.barrierSync", work)
    }

    /// Runs `work` on the queue now: inline when the calling thread is already on it (whenever
    /// `check(.onQueue)` holds), otherwise as ``sync(_:)``. It never deadlocks on the queue itself.
    @inlinable
    public func perform<R>(_ work: () throws -> R) throws -> R {
        try run(performRoute(call: "Queue.perform"), work)
    }

    /// How a synchronous call reaches the queue, decided before anything runs.
    @usableFromInline
    package struct SyncRoute {
        /// The calling thread's innermost frame: the caller of the new block.
        @usableFromInline let caller: UnsafePointer<ExecutionFrame>?
        /// `work` runs inline (the thread already holds the queue) rather than through dispatch.
        @usableFromInline let isInline: Bool
        /// `work` runs on the calling thread, which took the idle queue without dispatch
        /// (`Queue+Idle.swift`) and gives it back after the block.
        @usableFromInline var isIdle = false
        /// The block: a dispatch round trip's as admitted; inline, how the thread holds the queue.
        @usableFromInline let block: Block
        /// The thread whose published wait the block withdraws when it starts (routes through
        /// dispatch only).
        @usableFromInline var waiter: Unmanaged<ThreadRecord>? = nil

        /// A block that runs inline, the queue held as the thread holds it already.
        init(inlineFrom caller: UnsafePointer<ExecutionFrame>?, exclusive: Bool) {
            self.caller = caller
            isInline = true
            block = Block(isBarrier: false, isExclusive: exclusive)
        }

        /// A block of the idle queue, taken by the calling thread as `block` says.
        init(idleFrom caller: UnsafePointer<ExecutionFrame>?, block: Block) {
            self.caller = caller
            isInline = false
            isIdle = true
            self.block = block
        }

        /// A dispatch round trip of `block`, whose wait `waiter` published.
        init(roundTripFrom caller: UnsafePointer<ExecutionFrame>?, block: Block, waiter: Unmanaged<ThreadRecord>) {
            self.caller = caller
            isInline = false
            self.block = block
            self.waiter = waiter
        }
    }

    /// The deadlock checks of `sync` and `barrierSync`: how the call reaches the queue.
    ///
    /// What the calling chain already holds decides, before dispatch is asked:
    /// - this queue exclusively: nothing could ever start here, `wouldDeadlock`;
    /// - this queue shared (a non-barrier block of it, or of a queue that targets it): a barrier
    ///   would wait for ourselves (`wouldDeadlock`); a plain sync runs inline, as the reader the
    ///   thread already is, so it can never queue behind a pending barrier;
    /// - one of this queue's targets exclusively, or shared when that target honours barriers:
    ///   dispatch's sync must acquire every target on the way down, and would wait forever for the
    ///   one we hold exclusively, or behind a barrier pending on the one we share
    ///   (`wouldDeadlock`: deterministic, instead of a hang that depends on timing).
    ///
    /// Otherwise the queue is taken on the idle path when nothing of it runs or is pending
    /// (`Queue+Idle.swift`): the route holds the queue, and nothing was published, since the
    /// thread does not wait. A route through dispatch has published the wait for the
    /// cross-thread deadlock detector (`WaitRegistry`), or thrown `wouldDeadlock` (nothing
    /// submitted) because the wait would close a ring of waiting threads. Either way, pass the
    /// route to `run` at once: it gives the idle queue back after the block, and the block wrapper
    /// of a round trip withdraws the wait as soon as the block starts, on whichever thread runs it.
    /// `call` names the call in reports.
    @usableFromInline
    package func syncRoute(barrier: Bool, call: StaticString) throws(QueueKitError) -> SyncRoute {
        try checkRunnable()
        let barrier = barrier && honoursBarriers
        let caller = ExecutionContext.innermost
        if caller != nil {
            switch ExecutionContext.hold(of: self, from: caller) {
            case .exclusive:
                throw .wouldDeadlock
            case .shared:
                if barrier { throw .wouldDeadlock }
                return SyncRoute(inlineFrom: caller, exclusive: false)
            case .none:
                if chainHoldsTarget(from: caller) { throw .wouldDeadlock }
            }
        }
        guard LockOrder.willSync(onto: self, barrier: barrier, call: call) else { throw .wouldDeadlock }
        let block = admit(barrier: barrier)
        // Nothing of the queue runs or is pending and the thread holds none of it: the block runs
        // here, without waiting, so there is no wait to publish.
        if holdIdle(block) { return SyncRoute(idleFrom: caller, block: block) }
        // The record is the thread's own, alive as long as the thread: borrowed, not retained.
        let waiter = ThreadRecord.currentUnmanaged
        let refused = waiter._withUnsafeGuaranteedRef { record -> Bool in
            guard
                let refusal = WaitRegistry.enter(
                    record, call: call, target: .queue(Unmanaged.passUnretained(self), barrier: barrier),
                    frame: caller, refusable: true, stamped: false,
                    holderMayWait: { WaitRegistry.queueHolderMayWait(record) })
            else { return false }
            refusal.deliver()
            return true
        }
        if refused { throw .wouldDeadlock }
        return SyncRoute(roundTripFrom: caller, block: block, waiter: waiter)
    }

    /// Whether the chain from `frame` holds a queue this queue targets that dispatch's `sync`
    /// acquires on the way down: any target but a global queue (global queues honour no barriers
    /// and are never held alone). A `sync` onto this queue waits for such a holder: the calling
    /// thread's own chain (`syncRoute`: it would wait for itself) or another thread's (the
    /// deadlock detector, `WaitGraph.holds`). It walks `parent`, taking no references.
    @inline(__always)
    func chainHoldsTarget(from frame: UnsafePointer<ExecutionFrame>?) -> Bool {
        var ancestor = parent
        while let next = ancestor {
            let held = next._withUnsafeGuaranteedRef {
                $0.honoursBarriers && ExecutionContext.hold(of: $0, from: frame) != .none
            }
            if held { return true }
            ancestor = next._withUnsafeGuaranteedRef { $0.parent }
        }
        return false
    }

    /// The route of `perform`: inline whenever the thread holds the queue, else as `sync`.
    @usableFromInline
    package func performRoute(call: StaticString) throws(QueueKitError) -> SyncRoute {
        try checkRunnable()
        let caller = ExecutionContext.innermost
        let hold = ExecutionContext.hold(of: self, from: caller)
        if hold != .none { return SyncRoute(inlineFrom: caller, exclusive: hold == .exclusive) }
        return try syncRoute(barrier: false, call: call)
    }

    // MARK: Identity

    /// The innermost queue whose block the calling thread runs (inside a queue that targets another,
    /// the inner one); on the main thread outside any block, ``main``; elsewhere `nil`.
    public static var current: Queue? { ExecutionContext.innermost?.pointee.queue }

    /// The label of ``current``, or `nil` outside any queue.
    public static var currentLabel: String? { current?.label }

    /// Whether this queue is the current queue or one of its targets.
    public var isCurrent: Bool {
        guard let frame = ExecutionContext.innermost else { return false }
        let wanted = Unmanaged.passUnretained(self).toOpaque()
        var candidate: Unmanaged<Queue>? = frame.pointee.running
        while let queue = candidate {
            if queue.toOpaque() == wanted { return true }
            candidate = queue._withUnsafeGuaranteedRef { $0.parent }
        }
        return false
    }

    /// Whether `predicate` holds for the calling thread, as `dispatch_assert_queue` sees it: also
    /// when the queue is held further out, by a block waiting in a `sync` on another queue.
    public func check(_ predicate: Predicate) -> Bool {
        let hold = ExecutionContext.hold(of: self)
        switch predicate {
        case .onQueue: return hold != .none
        case .onQueueAsBarrier: return hold == .exclusive
        case .notOnQueue: return hold == .none
        }
    }

    /// Aborts with one line naming the expected and the current queue unless `predicate` holds.
    public func precondition(_ predicate: Predicate) {
        guard !check(predicate) else { return }
        // The current queue alone can mislead (a reader of the very queue that had to be held as a
        // barrier, or a queue held further out): say how the thread holds the expected one.
        let held =
            switch ExecutionContext.hold(of: self) {
            case .none: "the thread runs no block of '\(label)'"
            case .shared: "the thread runs '\(label)' shared, not as a barrier"
            case .exclusive: "the thread runs '\(label)' exclusively"
            }
        Queue.preconditionFailure(expected: "\(predicate.phrase) '\(label)'", held: held)
    }

    package static func preconditionFailure(expected: String, held: String? = nil) -> Never {
        let current = Queue.current.map { "'\($0.label)'" } ?? "no queue"
        let detail = held.map { " (\($0))" } ?? ""
        qkshim_fatal(
            "QueueKit precondition failed: expected to be \(expected), but the current queue is \(current)\(detail)")
    }
}

extension Queue.Predicate {
    var phrase: String {
        switch self {
        case .onQueue: "on queue"
        case .onQueueAsBarrier: "on queue as barrier"
        case .notOnQueue: "not on queue"
        }
    }
}

extension Queue {
    /// Hands the process to dispatch to run the main queue (`dispatchMain`); never returns. Call it
    /// on the main thread. From then on the main thread no longer counts as being on the main
    /// queue outside its blocks; the main queue's blocks run one at a time (on Linux, dispatch
    /// drains it on a worker thread). The main thread ends as with `pthread_exit`: the condition
    /// locks it holds are abandoned. In a forked child (no dispatch threads) it aborts with one line.
    public static func runMain() -> Never { runMain(call: "Queue.runMain()") }

    /// ``runMain()``, with `call` naming the caller in the line a forked child aborts with.
    package static func runMain(call: StaticString) -> Never {
        if Fork.isChild {
            qkshim_fatal(
                "QueueKit: \(call) called in a forked child: dispatch cannot run there (exec, or do not call it)")
        }
        ExecutionContext.releaseMainThread()
        dispatchMain()
    }
}
