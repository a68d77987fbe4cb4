// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import Glibc
import QueueKitShim
import Synchronization

// The queue's round trips at libdispatch's own level: `dispatch_sync_f`,
// `dispatch_barrier_sync_f`, `dispatch_async_f` and `dispatch_barrier_async_f`, through the shim,
// with a C function and a context. A synchronous call's context is an `Invocation` on the
// caller's stack (no closure, no block, no allocation, no box for the result); an asynchronous
// one's is an `AsyncNode` of its own. Every block QueueKit runs through
// dispatch starts and ends in `Invocation.run`: the one place that withdraws the caller's wait,
// tells ThreadSanitizer what the block holds and pushes the block's frame.

/// A C work function and its context.
public typealias CWorkFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// One block on its way through dispatch: what runs, on which queue, holding it how, and for
/// whom. A `sync` keeps it on its stack for the length of the round trip; an `async` keeps it in
/// an `AsyncNode`.
@usableFromInline
struct Invocation {
    /// The queue the block runs on (kept alive by the call for a `sync`, by the node for an `async`).
    let queue: Unmanaged<Queue>
    /// The frame of the caller that waits for the block (`sync`), or nil (`async`).
    let caller: UnsafePointer<ExecutionFrame>?
    /// The block as admitted: barrier or not, exclusive or not.
    let block: Queue.Block
    /// The thread whose published wait the block withdraws when it starts (a `sync` that waits).
    let waiter: Unmanaged<ThreadRecord>?
    let function: CWorkFunction
    let context: UnsafeMutableRawPointer?

    /// Runs the block: on whichever thread dispatch chose, as a block of `queue`.
    @inline(__always)
    func run() {
        queue._withUnsafeGuaranteedRef { queue in
            queue.runBlock(block, outer: caller, withdrawing: waiter) { function(context) }
        }
    }

    /// The C entry dispatch calls for a synchronous round trip: the context is the `Invocation`.
    static let syncEntry: CWorkFunction = { context in
        context.unsafelyUnwrapped.assumingMemoryBound(to: Invocation.self).pointee.run()
    }
}

/// The C function that runs a Swift closure whose address is its context (the Swift API's `sync`).
@usableFromInline
let closureEntry: CWorkFunction = { context in
    context.unsafelyUnwrapped.assumingMemoryBound(to: (() -> Void).self).pointee()
}

extension Queue {
    /// Runs `function(context)` the way `route` says and waits for it: inline on the calling
    /// thread, on the idle queue the route holds (given back after the block), or through
    /// `dispatch_sync_f` / `dispatch_barrier_sync_f` with the `Invocation` on this stack. The
    /// queue stays alive until the bookkeeping after the block is done, even when the block gives
    /// up the last reference to it (a round trip holds a reference; an idle hold puts the block's
    /// releases off, ``deferRelease()``).
    @usableFromInline
    func invoke(_ route: SyncRoute, _ context: UnsafeMutableRawPointer?, _ function: CWorkFunction) {
        if route.isInline {
            ExecutionContext.run(on: self, exclusive: route.block.isExclusive, outer: route.caller) {
                function(context)
            }
            return
        }
        if route.isIdle { return runIdle(route) { function(context) } }
        let retained = isImmortal ? nil : Unmanaged.passUnretained(self).retain()
        idleSubmitting()
        var invocation = Invocation(
            queue: Unmanaged.passUnretained(self), caller: route.caller, block: route.block, waiter: route.waiter,
            function: function, context: context)
        withUnsafeMutablePointer(to: &invocation) { invocation in
            qkshim_dispatch_sync(dispatchObject, route.block.isBarrier, invocation, Invocation.syncEntry)
        }
        retained?.release()
    }

    /// The C API's `sync`, `barrier_sync` and `perform`: the route, then the round trip.
    package func sync(
        barrier: Bool, perform: Bool, call: StaticString, _ context: UnsafeMutableRawPointer?,
        _ function: CWorkFunction
    ) throws(QueueKitError) {
        let route = try perform ? performRoute(call: call) : syncRoute(barrier: barrier, call: call)
        invoke(route, context, function)
    }

    /// `syncRoute` and `invoke` in one for their common case (the C API's `sync`, `barrier_sync`
    /// and `perform` call it before ``sync(barrier:perform:call:_:_:)``): a queue that takes the
    /// idle path (so it has no target, and runs blocks), outside a forked child, with the witness
    /// off (so the call records nothing).
    /// When the calling thread holds nothing of the queue and the queue is idle, runs
    /// `function(context)` there and returns true; otherwise returns false having done nothing,
    /// and the route decides (a queue the thread holds: refused or inline; a busy one: through
    /// dispatch; the checks that throw).
    package func syncIdle(barrier: Bool, _ context: UnsafeMutableRawPointer?, _ function: CWorkFunction) -> Bool {
        guard let route = idleRoute(barrier: barrier) else { return false }
        runIdle(route) { function(context) }
        return true
    }

    /// The checks of ``syncIdle(barrier:_:_:)``, then the queue taken: the route of the block to
    /// run (pass it to `runIdle` at once), or `nil` having done nothing.
    @usableFromInline @inline(__always)
    func idleRoute(barrier: Bool) -> SyncRoute? {
        guard runsIdle && !LockOrder.isOn && !Fork.isChild else { return nil }
        let caller: UnsafePointer<ExecutionFrame>?
        if let block = ExecutionContext.innermostBlock {
            if ExecutionContext.hold(of: self, from: block) != .none { return nil }
            caller = block
        } else {
            // Nothing, or the main thread's frame of the main queue: neither holds this queue
            // (it is not the main queue, and targets none).
            caller = ExecutionContext.mainThreadFrame()
        }
        let block = admit(barrier: barrier)
        guard holdIdle(block) else { return nil }
        return SyncRoute(idleFrom: caller, block: block)
    }

    /// The common `perform` of the C API, before its handle is even checked: onto the queue whose
    /// block the calling thread runs innermost, held exclusively (a serial queue's block, a
    /// barrier), with the slow paths off (no sanitizer or lock-order witness to tell, not a
    /// forked child: ``SlowPaths``) and no condition test running. `handle` is then that queue
    /// (its frame proves it alive and of the right type), and `function(context)` runs inline in
    /// a new frame: what `performRoute` would decide, and what
    /// ``ExecutionContext/run(on:exclusive:outer:_:)`` would do, without the checks that cannot
    /// apply. False, having done nothing, for every other case.
    @inlinable @inline(__always)
    package static func performInline(
        _ handle: UnsafeRawPointer, _ context: UnsafeMutableRawPointer?, _ function: CWorkFunction
    ) -> Bool {
        guard let frame = qkshim_frame_get() else { return false }
        let caller = UnsafePointer(frame.assumingMemoryBound(to: ExecutionFrame.self))
        let queue = caller.pointee.running
        guard UnsafeRawPointer(queue.toOpaque()) == handle, caller.pointee.isExclusive,
            SlowPaths.areOff, qkshim_testing_lock() == nil,
            queue._withUnsafeGuaranteedRef({ $0.dispatchObject != nil })
        else { return false }
        var inner = ExecutionFrame(running: queue, isExclusive: true, outer: caller)
        // Three words, never indexed: no stack protector for them (as in ExecutionContext.run).
        _withUnprotectedUnsafeMutablePointer(to: &inner) { inner in
            qkshim_frame_set(inner)
            function(context)
        }
        qkshim_frame_set(frame)
        return true
    }

    /// `sync` and `barrierSync`: on the idle path when it applies (``idleRoute(barrier:)``: `work`
    /// runs right here, no closure context to build), otherwise the way their route says.
    @inlinable
    func run<R>(barrier: Bool, call: StaticString, _ work: () throws -> R) throws -> R {
        if let route = idleRoute(barrier: barrier) { return try runIdle(route, work) }
        return try run(syncRoute(barrier: barrier, call: call), work)
    }

    /// Runs `work` the way `route` says and waits, returning what it returns.
    @inlinable
    func run<R>(_ route: SyncRoute, _ work: () throws -> R) throws -> R {
        if route.isInline {
            return try ExecutionContext.run(on: self, exclusive: route.block.isExclusive, outer: route.caller, work)
        }
        if route.isIdle { return try runIdle(route, work) }
        var result: R?
        var failure: (any Error)?
        // A closure literal passed as a non-escaping argument: its captures stay on this stack.
        invoke(route) {
            do { result = try work() } catch { failure = error }
        }
        if let failure { throw failure }
        return result.unsafelyUnwrapped
    }

    /// `invoke` of a Swift closure: the closure itself, in this frame, is the context.
    @usableFromInline
    func invoke(_ route: SyncRoute, _ body: () -> Void) {
        withoutActuallyEscaping(body) { body in
            var body = body
            withUnsafeMutablePointer(to: &body) { invoke(route, $0, closureEntry) }
        }
    }

    // MARK: Asynchronous submissions

    /// The shared core of `async` and `barrierAsync` (C and Swift): `function(context)` in an
    /// `AsyncNode`, handed to `dispatch_async_f` / `dispatch_barrier_async_f`; `call` names a
    /// barrier in lock-order reports.
    package func submit(
        barrier: Bool, call: StaticString, _ context: UnsafeMutableRawPointer?, _ function: CWorkFunction
    ) throws(QueueKitError) {
        try checkRunnable()
        if barrier && honoursBarriers && !isSerial { LockOrder.writing(self, call: call) }
        // A node the queue recycles, else a new one (malloc itself, without the aligned-allocation
        // detour): the blocks free nodes on dispatch's threads, so the submitting thread's own
        // allocator cache would be empty every time.
        guard let memory = qkshim_nodes_take(words) ?? malloc(MemoryLayout<AsyncNode>.stride) else {
            throw .outOfMemory
        }
        let node = memory.bindMemory(to: AsyncNode.self, capacity: 1)
        let block = admit(barrier: barrier)
        // The node owns one reference to the queue until its block has run.
        let queue = isImmortal ? Unmanaged.passUnretained(self) : Unmanaged.passRetained(self)
        node.initialize(
            to: AsyncNode(
                invocation: Invocation(
                    queue: queue, caller: nil, block: block, waiter: nil, function: function, context: context)))
        if ThreadSanitizer.isPresent { qkshim_tsan_release(node) }
        idleSubmitting()
        qkshim_dispatch_async(dispatchObject, block.isBarrier, node, AsyncNode.entry)
    }

    /// `work` as an asynchronous submission: the closure itself is the context.
    package func submit(barrier: Bool, call: StaticString, _ work: @escaping @Sendable () -> Void)
        throws(QueueKitError)
    {
        let context = Unmanaged.passRetained(AsyncClosure(work)).toOpaque()
        do {
            try submit(barrier: barrier, call: call, context, AsyncClosure.entry)
        } catch {
            Unmanaged<AsyncClosure>.fromOpaque(context).release()
            throw error
        }
    }
}

/// A Swift closure submitted asynchronously, as a C context.
private final class AsyncClosure {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }

    static let entry: CWorkFunction = { context in
        Unmanaged<AsyncClosure>.fromOpaque(context.unsafelyUnwrapped).takeRetainedValue().work()
    }
}

/// An asynchronous block's `Invocation`, in a node of its own: recycled by its queue (given back
/// by the block's thread once it ran, freed with the queue), allocated only when the queue has
/// none to spare.
struct AsyncNode {
    var invocation: Invocation

    /// The C entry dispatch calls: runs the block, then gives the node back and the queue's
    /// reference up (last: the queue may be freed with it, and its nodes with it).
    static let entry: CWorkFunction = { context in
        let node = context.unsafelyUnwrapped.assumingMemoryBound(to: AsyncNode.self)
        if ThreadSanitizer.isPresent { qkshim_tsan_acquire(node) }
        let invocation = node.pointee.invocation
        invocation.run()
        node.deinitialize(count: 1)
        let queue = invocation.queue
        let (words, isImmortal) = queue._withUnsafeGuaranteedRef { ($0.words, $0.isImmortal) }
        qkshim_nodes_give(words, node)
        if !isImmortal { queue.release() }
    }
}

// MARK: The dispatch_queue_t of a DispatchQueue

/// Where the Swift overlay keeps a `DispatchQueue`'s `dispatch_queue_t` on Linux: its one stored
/// property, right after the object header. Confirmed once, the first time it is needed, by
/// asking dispatch which queue runs a block of a fresh private queue.
enum DispatchObjectLayout {
    static let offset = 2 * MemoryLayout<UnsafeRawPointer>.size

    static let confirmed: Bool = {
        let probe = DispatchQueue(label: "org.queuekit.layout-probe")
        let read = load(probe)
        var seen: UnsafeMutableRawPointer?
        probe.sync { seen = qkshim_dispatch_current_queue() }
        return read == seen
    }()

    @inline(__always)
    static func load(_ queue: DispatchQueue) -> UnsafeMutableRawPointer {
        Unmanaged.passUnretained(queue).toOpaque().load(fromByteOffset: offset, as: UnsafeMutableRawPointer.self)
    }

    /// The `dispatch_queue_t` of `queue`; aborts with one line when the overlay is not laid out as
    /// this library was built for.
    static func object(of queue: DispatchQueue) -> UnsafeMutableRawPointer {
        if !confirmed {
            qkshim_fatal("QueueKit: this Swift Dispatch overlay does not keep dispatch_queue_t where QueueKit expects")
        }
        return load(queue)
    }
}
