// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// The lock-order witness: remembers in which order threads take QueueKit's objects and reports
/// a potential deadlock the first time an order closes a cycle (see ``Diagnostics/lockOrder``).
///
/// The primitives tell it, through the acquire and release hooks below, what each thread takes
/// and gives back and what a call is about to wait for. Off, each hook is one relaxed load and
/// one branch. On, a thread keeps what it holds and the edges it has already recorded in its own
/// state (``LockOrderThread``); only an edge's first sighting, an object's first write or barrier
/// and forgetting an object with edges take the graph's one lock.
///
/// Lock order: the graph's lock is taken last, after any of QueueKit's others; reports are
/// delivered with no QueueKit lock held.
@usableFromInline
package enum LockOrder {
    // MARK: Mode

    /// Whether the witness is on (report or abort). One relaxed load.
    @inlinable @inline(__always)
    static var isOn: Bool { qkshim_lockorder_mode_get() != 0 }

    /// The mode: 0 off, 1 report, 2 abort.
    package static var mode: UInt8 { qkshim_lockorder_mode_get() }

    /// Sets the mode: off -> on starts an empty graph, -> off drops it, report <-> abort keeps it.
    /// False (nothing changed) for a value that is no mode.
    @discardableResult
    package static func setMode(_ new: UInt8) -> Bool {
        guard new <= 2 else { return false }
        modeChange.withLock { _ in
            let old = qkshim_lockorder_mode_get()
            if old == 0 && new != 0 {
                graph.withLock {
                    $0 = LockOrderGraph()
                    qkshim_lockorder_nodes_clear()
                }
                qkshim_lockorder_session_bump()
                qkshim_lockorder_epoch_bump()
            }
            qkshim_lockorder_mode_set(new)
            if new == 0 && old != 0 {
                graph.withLock {
                    $0 = nil
                    qkshim_lockorder_nodes_clear()
                }
                qkshim_lockorder_epoch_bump()
            }
        }
        return true
    }

    /// Serialises mode changes (the graph is made or dropped with the change).
    private static let modeChange = Lock<Void>(())

    /// Where reports go.
    static let handler = Lock<ReportHandler>(.standardError)

    /// Sets where reports go (applies to the next report).
    package static func setHandler(_ new: ReportHandler) { handler.withLock { $0 = new } }

    /// The graph, `nil` while the witness is off (or before its first use, when the environment
    /// turned it on at load). The fork child hook abandons it (see ``resumeInChild()``).
    private static let graph: Lock<LockOrderGraph?> = {
        Fork.installHooks()
        return Lock(nil)
    }()

    // MARK: Hooks

    /// A call that may wait for `object` in `mode` (after the call's own checks, before it
    /// waits), until `deadline` (``MonotonicClock/forever``: untimed): records an edge from every
    /// object the thread holds (none when the deadline has passed: the call only tries). False
    /// when the call must be refused with `wouldDeadlock` (the thread runs the lock-order handler).
    @inlinable @inline(__always)
    static func willWait(
        for object: AnyObject, _ mode: LockOrderMode, call: StaticString, deadline: UInt64 = MonotonicClock.forever
    ) -> Bool {
        if _fastPath(!isOn) { return true }
        return record(LockOrderObject(object), mode, call: call, deadline: deadline)
    }

    /// The thread now holds the condition lock `object` (every acquisition, also a try form's
    /// and a task's). `call` names a call that may wait and took the lock without waiting: its
    /// edges are recorded here, as `willWait` would have (`nil`: recorded on the way in, or none).
    @inlinable @inline(__always)
    static func acquired(
        _ object: AnyObject, recording call: StaticString? = nil, deadline: UInt64 = MonotonicClock.forever
    ) {
        if _slowPath(isOn) { push(LockOrderObject(object), recording: call, deadline: deadline) }
    }

    /// A sync, barrier sync or perform onto `queue` that is not inline: asks for the queue
    /// (shared on a concurrent queue, unless `barrier`) and, onto a serial queue, for each serial
    /// queue it targets; a barrier onto a concurrent queue marks it written first (see
    /// ``writing(_:call:thenWaits:)``).
    /// False when the call must be refused (see ``willWait(for:_:call:deadline:)``).
    @inlinable @inline(__always)
    static func willSync(onto queue: Queue, barrier: Bool, call: StaticString) -> Bool {
        if _fastPath(!isOn) { return true }
        return recordSync(queue, barrier: barrier, call: call)
    }

    /// The thread released the condition lock `object`.
    @inlinable @inline(__always)
    static func released(_ object: AnyObject) {
        if _slowPath(isOn) { pop(LockOrderObject(object).address) }
    }

    /// Runs `body`, a block of `queue` (run by any call, also inline), with the thread holding
    /// `queue` (`exclusive` or shared) and the queues it targets, while the witness is on
    /// (``Acquisitions/holdingBlock(of:exclusive:plain:_:)``). Out of line, so that the inlined run path
    /// of every block gains only the mode check.
    @inlinable @inline(never)
    static func holding<R, E: Error>(_ queue: Queue, exclusive: Bool, _ body: () throws(E) -> R) throws(E) -> R {
        let entries = enter(queue, exclusive: exclusive)
        defer { if entries != 0 { leave(entries) } }
        return try body()
    }

    /// `queue` (a DB queue's identity queue, or a concurrent queue) is written (a write,
    /// `write_async`) or gets a barrier: its shared holders conflict from now on. Reports, on this
    /// thread, a cycle that only a meeting of two of its readers held back. `thenWaits`: the call
    /// goes on to ``willWait(for:_:call:deadline:)`` or ``willSync(onto:barrier:call:)``, which
    /// then reports nothing more (at most one report per call).
    @inlinable @inline(__always)
    static func writing(_ queue: Queue, call: StaticString, thenWaits: Bool = false) {
        if _slowPath(isOn) { markWritten(LockOrderObject(queue), call: call, thenWaits: thenWaits) }
    }

    /// `object` is being destroyed or freed: its node, edges and cycles are forgotten.
    @inlinable @inline(__always)
    static func forget(_ object: AnyObject) {
        if _slowPath(isOn) { drop(LockOrderObject(object).address) }
    }

    // MARK: Slow paths

    @usableFromInline @inline(never)
    static func push(_ object: LockOrderObject, recording call: StaticString?, deadline: UInt64) {
        let state = LockOrderThread.current
        state.pointee.join(qkshim_lockorder_session_get())
        if state.pointee.inHandler { return }
        if let call, state.pointee.count != 0 || holdsMainQueue, waits(until: deadline) {
            _ = record(object, .exclusive, call: call, timed: deadline != MonotonicClock.forever, state: state)
            state.pointee.reportedInCall = false
        }
        state.pointee.push(object.address, .exclusive, isBlock: false)
    }

    /// Whether a call with `deadline` may wait (a deadline already past only tries).
    private static func waits(until deadline: UInt64) -> Bool {
        deadline == MonotonicClock.forever || deadline > MonotonicClock.now()
    }

    @usableFromInline @inline(never)
    static func recordSync(_ queue: Queue, barrier: Bool, call: StaticString) -> Bool {
        let state = LockOrderThread.current
        state.pointee.join(qkshim_lockorder_session_get())
        if state.pointee.inHandler { return false }
        defer { state.pointee.reportedInCall = false }
        // Global queues are never held, so no cycle runs through them.
        guard queue.honoursBarriers else { return true }
        if barrier && !queue.isSerial { markWritten(LockOrderObject(queue), call: call, thenWaits: true) }
        let mode: LockOrderMode = barrier || queue.isSerial ? .exclusive : .shared
        _ = record(LockOrderObject(queue), mode, call: call, timed: false, state: state)
        // The targets dispatch acquires on the way down: a serial one alone; a concurrent one
        // (not a global queue) shared, as the queue's blocks run there.
        var ancestor = queue.parent
        while let target = ancestor {
            let held = target.takeUnretainedValue()
            if let mode = Self.targetMode(held) {
                _ = record(LockOrderObject(held), mode, call: call, timed: false, state: state)
            }
            ancestor = held.parent
        }
        return true
    }

    /// How a block of a queue holds `target`, a queue that queue targets: a serial one
    /// exclusively, a concurrent one shared (its barrier holds it exclusively, and conflicts with
    /// that), a global queue not at all.
    @inline(__always)
    static func targetMode(_ target: Queue) -> LockOrderMode? {
        target.isSerial ? .exclusive : target.honoursBarriers ? .shared : nil
    }

    @usableFromInline @inline(never)
    static func pop(_ address: UInt) {
        guard let state = LockOrderThread.currentIfAny else { return }
        state.pointee.join(qkshim_lockorder_session_get())
        state.pointee.remove(address)
    }

    @usableFromInline @inline(never)
    static func enter(_ queue: Queue, exclusive: Bool) -> Int {
        // Global queues are never held.
        guard queue.honoursBarriers else { return 0 }
        let state = LockOrderThread.current
        state.pointee.join(qkshim_lockorder_session_get())
        if state.pointee.inHandler { return 0 }
        state.pointee.push(LockOrderObject(queue).address, exclusive ? .exclusive : .shared, isBlock: true)
        var entries = 1
        var ancestor = queue.parent
        while let target = ancestor {
            let held = target.takeUnretainedValue()
            if let mode = Self.targetMode(held) {
                state.pointee.push(LockOrderObject(held).address, mode, isBlock: true)
                entries += 1
            }
            ancestor = held.parent
        }
        return entries
    }

    @usableFromInline @inline(never)
    static func leave(_ entries: Int) {
        guard let state = LockOrderThread.currentIfAny else { return }
        state.pointee.join(qkshim_lockorder_session_get())
        state.pointee.leaveBlock(entries)
    }

    /// Whether the calling thread holds the main queue outside any block (the main thread before
    /// `qk_main`).
    @inline(__always)
    private static var holdsMainQueue: Bool { qkshim_is_main_thread() && !qkshim_main_released_get() }

    @usableFromInline @inline(never)
    static func record(_ target: LockOrderObject, _ mode: LockOrderMode, call: StaticString, deadline: UInt64) -> Bool {
        let state = LockOrderThread.current
        state.pointee.join(qkshim_lockorder_session_get())
        if state.pointee.inHandler { return false }
        defer { state.pointee.reportedInCall = false }
        guard waits(until: deadline) else { return true }
        return record(target, mode, call: call, timed: deadline != MonotonicClock.forever, state: state)
    }

    /// Records the edges from everything the thread holds to `target`; on a miss in the thread's
    /// cache, in the graph, reporting the shortest cycle a new edge closes.
    private static func record(
        _ target: LockOrderObject, _ mode: LockOrderMode, call: StaticString, timed: Bool,
        state: UnsafeMutablePointer<LockOrderThread>
    ) -> Bool {
        let epoch = qkshim_lockorder_epoch_get()
        let bitsTo = UInt32(mode.rawValue) << 1 | (timed ? 4 : 0)
        var missed = false
        for index in 0..<state.pointee.count {
            let held = state.pointee.held[index]
            if held.object == target.address { continue }
            if !state.pointee.knows(held.object, target.address, UInt32(held.mode.rawValue) | bitsTo, epoch: epoch) {
                missed = true
            }
        }
        if holdsMainQueue {
            let main = LockOrderObject(Queue.main)
            if main.address != target.address
                && !state.pointee.knows(main.address, target.address, bitsTo, epoch: epoch)
            {
                missed = true
            }
        }
        if missed { recordInGraph(target, mode, call: call, timed: timed, state: state) }
        return true
    }

    @inline(never)
    private static func recordInGraph(
        _ target: LockOrderObject, _ mode: LockOrderMode, call: StaticString, timed: Bool,
        state: UnsafeMutablePointer<LockOrderThread>
    ) {
        var held: [(address: UInt, mode: LockOrderMode)] = []
        if holdsMainQueue { held.append((LockOrderObject(Queue.main).address, .exclusive)) }
        for index in 0..<state.pointee.count where state.pointee.held[index].object != target.address {
            let entry = state.pointee.held[index]
            if !held.contains(where: { $0.address == entry.object && $0.mode == entry.mode }) {
                held.append((entry.object, entry.mode))
            }
        }
        var record: LockOrderGraph.Record?
        var report: String?
        var full = false
        graph.withLock { graph in
            guard isOn else { return }
            if graph == nil { graph = LockOrderGraph() }
            let graph = graph!
            var best: LockOrderGraph.Cycle?
            for (address, heldMode) in held {
                let key = LockOrderGraph.EdgeKey(
                    from: address, to: target.address,
                    bits: LockOrderGraph.EdgeKey.bits(from: heldMode, to: mode, timed: timed))
                if graph.contains(key) { continue }
                if graph.edgeCount >= LockOrderGraph.edgeLimit {
                    full = true
                    break
                }
                if record == nil { record = firstSighting(call: call, timed: timed, state: state) }
                if let cycle = graph.add(key, from: LockOrderObject(address: address), to: target, record: record!),
                    best == nil || cycle.edges.count < best!.edges.count
                {
                    best = cycle
                }
            }
            if let best {
                report = LockOrderReport.text(call: call, object: target, cycle: best, newEdge: best.edges.last?.key)
            }
        }
        if full { overflowed() }
        if let report, !state.pointee.reportedInCall { deliver(report, state: state) }
    }

    /// What an edge's first sighting records: the call, the thread, the call site.
    private static func firstSighting(
        call: StaticString, timed: Bool, state: UnsafeMutablePointer<LockOrderThread>
    ) -> LockOrderGraph.Record {
        let now = qkshim_now_coarse_ns()
        if state.pointee.nameRead == 0 || now &- state.pointee.nameRead > 1_000_000_000 {
            state.pointee.name = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
                qkshim_thread_get_name(pthread_self(), buffer.baseAddress!, buffer.count) == 0
                    ? String(cString: buffer.baseAddress!) : ""
            }
            state.pointee.nameRead = now
        }
        let name = state.pointee.name
        #if QUEUEKIT_TESTING
            let site: UInt = recordsCallSites ? qkshim_lockorder_call_site() : 0
        #else
            let site = qkshim_lockorder_call_site()
        #endif
        return LockOrderGraph.Record(call: call, timed: timed, thread: qkshim_thread_id(), threadName: name, site: site)
    }

    #if QUEUEKIT_TESTING
        /// Test seam: whether first sightings look up their call site (a stack walk; the edge-limit
        /// test makes 65,537 of them).
        nonisolated(unsafe) static var recordsCallSites = true
    #endif

    @usableFromInline @inline(never)
    static func markWritten(_ object: LockOrderObject, call: StaticString, thenWaits: Bool) {
        let state = LockOrderThread.current
        state.pointee.join(qkshim_lockorder_session_get())
        if state.pointee.inHandler { return }
        // A pseudo-edge from the object to itself stands for "this thread saw it written".
        if state.pointee.knows(object.address, object.address, 0xFF, epoch: qkshim_lockorder_epoch_get()) { return }
        var report: String?
        graph.withLock { graph in
            guard isOn else { return }
            if graph == nil { graph = LockOrderGraph() }
            if let cycle = graph!.markWritten(object) {
                report = LockOrderReport.text(call: call, object: object, cycle: cycle, newEdge: nil)
            }
        }
        if let report {
            deliver(report, state: state)
            state.pointee.reportedInCall = thenWaits
        }
    }

    @usableFromInline @inline(never)
    static func drop(_ address: UInt) {
        // Most objects never had a node: no lock for them.
        guard qkshim_lockorder_node_maybe(address) else { return }
        let forgot = graph.withLock { graph in graph?.forget(address) ?? false }
        if forgot { qkshim_lockorder_epoch_bump() }
    }

    /// The edge limit was reached: one line, and the witness turns itself off.
    private static func overflowed() {
        guard isOn else { return }
        line("QueueKit: lock-order witness: more than \(LockOrderGraph.edgeLimit) edges; the witness is now off\n")
        setMode(0)
    }

    /// Hands `report` to the handler (no QueueKit lock held; the handler's own calls are not
    /// witnessed), then aborts in abort mode.
    private static func deliver(_ report: String, state: UnsafeMutablePointer<LockOrderThread>) {
        let abort = qkshim_lockorder_mode_get() == 2
        state.pointee.reportedInCall = true
        state.pointee.inHandler = true
        handler.call(report)
        state.pointee.inHandler = false
        if abort { qkshim_lockorder_abort() }
    }

    /// One line to stderr, in one write.
    static func line(_ text: String) { ReportHandler.standardError.call(text) }

    // MARK: fork()

    /// In a forked child (the child hook in `Lifecycle.swift`) the graph starts empty: the
    /// parent's is abandoned (leaked, never walked: a thread that did not survive may have been
    /// changing it), the graph's, the handler's and the mode change's locks are made afresh, and
    /// the forking thread's cached edges go stale. Its held set stays.
    /// The fork's prepare hook (`Lifecycle.swift`): no thread is changing the mode at the fork,
    /// and the witness's lazily made globals are made (a first use in progress on another thread
    /// is waited for): a child never waits for an initialisation that a lost thread had begun.
    static func prepareForFork() {
        modeChange.acquireForFork()
        withExtendedLifetime(graph) {}
        withExtendedLifetime(handler) {}
    }

    static func resumeInParent() { modeChange.releaseInParent() }

    static func resumeInChild() {
        graph.releaseInChild { graph in
            // Abandoned: never walked, never freed (a thread that did not survive may have been
            // changing it), but kept reachable, as what it is, rather than left to look like a leak.
            if let old = graph { abandonedInFork.append(old) }
            graph = isOn ? LockOrderGraph() : nil
            qkshim_lockorder_nodes_clear()
        }
        handler.releaseInChild()
        modeChange.releaseInChild()
        qkshim_lockorder_epoch_bump()
    }

    /// The graphs that forks left behind (in a child only).
    nonisolated(unsafe) private static var abandonedInFork: [LockOrderGraph] = []

    #if QUEUEKIT_TESTING
        /// Test seam: the number of edges the graph holds (0 when off), and whether its order is
        /// topological.
        static var edgeCount: Int { graph.withLock { $0?.edgeCount ?? 0 } }
        static var orderIsTopological: Bool { graph.withLock { $0?.orderIsTopological ?? true } }
        /// Test seam: what the calling thread holds, as the witness sees it.
        static var heldByCurrentThread: Int {
            guard let state = LockOrderThread.currentIfAny else { return 0 }
            state.pointee.join(qkshim_lockorder_session_get())
            return state.pointee.count
        }
    #endif
}
