// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import Synchronization

/// The queue of a DB queue's asynchronous writes: many threads submit without a lock, one
/// thread at a time (the holder of the DB queue's exclusivity) takes them out, in order.
///
/// It is Vyukov's multi-producer, single-consumer queue: a submitter swaps its node into `tail`
/// (one atomic exchange, wait-free) and then links it behind the node it replaced. Between the
/// two steps the node is "in transit": the consumer, which only ever takes a write that has
/// already been counted as submitted, waits those few instructions out. The consumer never
/// touches `tail`: the node it took last stays behind as the list's dummy head.
///
/// Nodes come from ``WriteNodePool`` and go back to it, a batch at a time (`recycle`), as
/// libdispatch recycles its continuations: a steady stream of writes allocates nothing.
///
/// Thread safety: `push` from any thread; `pop` and `recycle` only by one thread at a time, which
/// the caller serializes (the DB queue's exclusivity), and `pop` only for a write already counted
/// as submitted.
final class WriteQueue: @unchecked Sendable {
    private let pool = WriteNodePool.shared
    /// Submitters swap their node in here.
    private let tail: Atomic<UInt>
    /// The consumer's end: a dummy node (the last one taken out, whose write already ran), whose
    /// successor holds the oldest write. Only the consumer touches it.
    @exclusivity(unchecked) private var head: Unmanaged<WriteNode>
    /// Nodes the consumer took out and has not recycled yet, newest first (linked through
    /// `nextFree`); only the consumer touches them.
    @exclusivity(unchecked) private var taken: Unmanaged<WriteNode>?
    @exclusivity(unchecked) private var takenLast: Unmanaged<WriteNode>?
    @exclusivity(unchecked) private var takenFirstIndex: UInt32 = 0

    init() {
        let dummy = pool.take()
        dummy._withUnsafeGuaranteedRef { $0.next.store(0, ordering: .relaxed) }
        head = dummy
        tail = Atomic(UInt(bitPattern: dummy.toOpaque()))
    }

    /// Gives the dummy and the taken nodes back. Writes still queued (only in a queue that a fork
    /// left unusable) keep their nodes: they stay out of the pool for good.
    deinit {
        recycle()
        retire(head)
        recycle()
    }

    /// Appends `work`. Lock-free; allocates only when every node in the process is in use.
    func push(_ work: CWork) {
        let node = pool.take()
        node.takeUnretainedValue().work = work
        node._withUnsafeGuaranteedRef { $0.next.store(0, ordering: .relaxed) }
        let bits = UInt(bitPattern: node.toOpaque())
        let previous = tail.exchange(bits, ordering: .acquiringAndReleasing)
        Self.node(previous)._withUnsafeGuaranteedRef { $0.next.store(bits, ordering: .releasing) }
    }

    /// Takes out the oldest write. The caller knows one was submitted (counted), so this only
    /// waits for a submitter that is between its two steps. The node holding the write stays in
    /// the queue as its new dummy head; the previous dummy, which no submitter can reach any
    /// more, waits for `recycle`.
    func pop() -> CWork {
        var backoff = Backoff()
        while true {
            let dummy = head
            let next = dummy._withUnsafeGuaranteedRef { $0.next.load(ordering: .acquiring) }
            guard next != 0 else {
                backoff.pause()
                continue
            }
            let node = Self.node(next)
            head = node
            retire(dummy)
            return node.takeUnretainedValue().work
        }
    }

    /// Gives the nodes taken out since the last call back to the pool, in one step.
    func recycle() {
        guard let first = taken, let last = takenLast else { return }
        pool.giveBack(first: first, last: last, firstIndex: takenFirstIndex)
        taken = nil
        takenLast = nil
    }

    private func retire(_ node: Unmanaged<WriteNode>) {
        let index = node._withUnsafeGuaranteedRef { $0.index }
        if taken != nil {
            node._withUnsafeGuaranteedRef { $0.nextFree.store(UInt64(takenFirstIndex) + 1, ordering: .relaxed) }
        } else {
            takenLast = node
        }
        taken = node
        takenFirstIndex = index
    }

    @inline(__always)
    private static func node(_ bits: UInt) -> Unmanaged<WriteNode> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
    }
}

/// A queued asynchronous write, recycled through ``WriteNodePool``.
final class WriteNode {
    /// The next node in a write queue (bit pattern of an unmanaged reference; 0 = none).
    let next = Atomic<UInt>(0)
    /// The next free node while in the pool: its index plus one (0 = none).
    let nextFree = Atomic<UInt64>(0)
    /// The node's place in the pool's chunks.
    let index: UInt32
    /// The write; written by the submitter before it publishes the node.
    var work = CWork(context: nil, function: { _ in })

    init(index: UInt32) { self.index = index }
}

/// The nodes of every DB queue's write queue, shared by the process and never freed (as
/// libdispatch keeps its continuations), so that neither a steady stream of writes nor a new DB
/// queue allocates once the pool has grown to the most writes ever pending at once.
///
/// The free list is a lock-free stack whose head carries a 32-bit generation next to the node's
/// index, so a submitter that was preempted between reading the head and swapping it cannot pop
/// a node that was taken and given back meanwhile (the ABA problem). Nodes live in chunks that
/// double in size and are never freed, so a stale read of a node's link is always a read of live
/// memory.
///
/// Thread safety: every member may be called from any thread.
final class WriteNodePool: @unchecked Sendable {
    static let shared = WriteNodePool()

    private static let firstChunkSize = 64
    private static let maxChunks = 25

    /// Free nodes: generation in the high 32 bits, index + 1 of the top node in the low 32.
    private let free = Atomic<UInt64>(0)
    /// Chunk `c` holds `firstChunkSize << c` nodes; slots are published with release stores.
    private let chunks: UnsafeMutablePointer<Atomic<UInt>>
    /// Chunks allocated so far; growing is rare and takes this lock (never a DB queue's).
    private let growth = Lock(0)

    private init() {
        chunks = .allocate(capacity: Self.maxChunks)
        for c in 0..<Self.maxChunks { (chunks + c).initialize(to: Atomic(0)) }
    }

    /// A free node (its `work` and `next` are the caller's to set).
    func take() -> Unmanaged<WriteNode> {
        var top = free.load(ordering: .acquiring)
        while true {
            let slot = top & 0xFFFF_FFFF
            if slot == 0 {
                if let node = grow() { return node }
                top = free.load(ordering: .acquiring)
                continue
            }
            let node = nodeAt(UInt32(slot - 1))
            let below = node._withUnsafeGuaranteedRef { $0.nextFree.load(ordering: .relaxed) }
            let desired = ((top >> 32) &+ 1) << 32 | below
            let (exchanged, original) = free.weakCompareExchange(
                expected: top, desired: desired, successOrdering: .acquiring, failureOrdering: .acquiring)
            if exchanged { return node }
            top = original
        }
    }

    /// Gives back the chain `first`…`last` (linked through `nextFree`).
    func giveBack(first: Unmanaged<WriteNode>, last: Unmanaged<WriteNode>, firstIndex: UInt32) {
        var top = free.load(ordering: .relaxed)
        while true {
            last._withUnsafeGuaranteedRef { $0.nextFree.store(top & 0xFFFF_FFFF, ordering: .relaxed) }
            let desired = ((top >> 32) &+ 1) << 32 | (UInt64(firstIndex) + 1)
            let (exchanged, original) = free.weakCompareExchange(
                expected: top, desired: desired, successOrdering: .releasing, failureOrdering: .relaxed)
            if exchanged { return }
            top = original
        }
    }

    /// Every node is in use: add a chunk twice the size of the last, keep one node, free the rest.
    /// Nil when another thread grew the pool while this one waited for the lock (take from it).
    @inline(never)
    private func grow() -> Unmanaged<WriteNode>? {
        growth.withLock { count -> Unmanaged<WriteNode>? in
            if free.load(ordering: .acquiring) & 0xFFFF_FFFF != 0 { return nil }
            Swift.precondition(count < Self.maxChunks, "QueueKit: too many DB queue writes pending at once")
            let size = Self.firstChunkSize << count
            let firstIndex = Self.firstChunkSize * ((1 << count) - 1)
            let base = UnsafeMutablePointer<Unmanaged<WriteNode>>.allocate(capacity: size)
            for i in 0..<size {
                (base + i).initialize(to: .passRetained(WriteNode(index: UInt32(firstIndex + i))))
            }
            for i in 1..<(size - 1) {
                base[i]._withUnsafeGuaranteedRef {
                    $0.nextFree.store(UInt64(firstIndex + i + 1) + 1, ordering: .relaxed)
                }
            }
            chunks[count].store(UInt(bitPattern: base), ordering: .releasing)
            count += 1
            giveBack(first: base[1], last: base[size - 1], firstIndex: UInt32(firstIndex + 1))
            return base[0]
        }
    }

    // MARK: fork()

    /// The fork's prepare hook takes the growth lock, so that no thread is growing the pool at
    /// the fork and a child's first DB queue never waits for a thread that is gone (the free list
    /// itself is lock-free: a node a vanished thread had taken is only lost).
    static func prepareForFork() { shared.growth.acquireForFork() }
    static func resumeInParent() { shared.growth.releaseInParent() }
    static func resumeInChild() { shared.growth.releaseInChild() }

    @inline(__always)
    private func nodeAt(_ index: UInt32) -> Unmanaged<WriteNode> {
        let q = Int(index) / Self.firstChunkSize + 1
        let c = Int.bitWidth - 1 - q.leadingZeroBitCount
        let base = UnsafeMutablePointer<Unmanaged<WriteNode>>(bitPattern: chunks[c].load(ordering: .acquiring))!
        return base[Int(index) - Self.firstChunkSize * ((1 << c) - 1)]
    }
}
