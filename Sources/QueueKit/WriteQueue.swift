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
/// Nodes are recycled, as libdispatch recycles its continuations: nodes that ran go back, a batch
/// at a time, to a free list that submitters take from, so a steady stream of writes allocates
/// nothing. The free
/// list is a lock-free stack whose head carries a 32-bit generation next to the node's index, so
/// a submitter that was preempted between reading the head and swapping it cannot pop a node
/// that was taken and given back meanwhile (the ABA problem). Nodes live in chunks that double
/// in size and are freed only with the queue, so a stale read of a node's link is always a read
/// of live memory.
///
/// Thread safety: `push` from any thread; `pop` and `recycle` only by one thread at a time, which
/// the caller serializes (the DB queue's exclusivity), and `pop` only for a write already counted
/// as submitted.
final class WriteQueue: @unchecked Sendable {
    private final class Node {
        /// The next node in the queue (bit pattern of an unmanaged reference; 0 = none).
        let next = Atomic<UInt>(0)
        /// The next free node while on the free list: its index plus one (0 = none).
        let nextFree = Atomic<UInt64>(0)
        /// The node's place in the chunks, for the free list.
        let index: UInt32
        /// The write; written by the submitter before it publishes the node.
        var work = CWork(context: nil, function: { _ in })

        init(index: UInt32) { self.index = index }
    }

    private static let firstChunkSize = 64
    private static let maxChunks = 25

    /// Submitters swap their node in here.
    private let tail: Atomic<UInt>
    /// The consumer's end: a dummy node (the last one taken out, whose write already ran), whose
    /// successor holds the oldest write. Only the consumer touches it.
    @exclusivity(unchecked) private var head: Unmanaged<Node>
    /// Free nodes: generation in the high 32 bits, index + 1 of the top node in the low 32.
    private let free = Atomic<UInt64>(0)
    /// Chunk `c` holds `firstChunkSize << c` nodes; slots are published with release stores.
    private let chunks: UnsafeMutablePointer<Atomic<UInt>>
    /// Chunks allocated so far; growing is rare and takes this lock (never the DB queue's).
    private let growth = Lock(0)

    init() {
        chunks = .allocate(capacity: Self.maxChunks)
        for c in 0..<Self.maxChunks { (chunks + c).initialize(to: Atomic(0)) }
        tail = Atomic(0)
        head = Unmanaged.passUnretained(Self.placeholder)
        // The first dummy comes from the pool like every node.
        let dummy = takeFreeNode()
        head = dummy
        tail.store(UInt(bitPattern: dummy.toOpaque()), ordering: .releasing)
    }

    deinit {
        let count = growth.withLock { $0 }
        for c in 0..<count {
            let base = chunkBase(c)
            for i in 0..<(Self.firstChunkSize << c) { base[i].release() }
            base.deallocate()
        }
        chunks.deinitialize(count: Self.maxChunks)
        chunks.deallocate()
    }

    // MARK: Producers

    /// Appends `work`. Lock-free; allocates only when every node is in use.
    func push(_ work: CWork) {
        let node = takeFreeNode()
        node.takeUnretainedValue().work = work
        link(node)
    }

    /// Stands in for `head` during `init`, before the first dummy exists.
    nonisolated(unsafe) private static let placeholder = Node(index: .max)

    private func link(_ node: Unmanaged<Node>) {
        node._withUnsafeGuaranteedRef { $0.next.store(0, ordering: .relaxed) }
        let bits = UInt(bitPattern: node.toOpaque())
        let previous = tail.exchange(bits, ordering: .acquiringAndReleasing)
        Self.node(previous)._withUnsafeGuaranteedRef { $0.next.store(bits, ordering: .releasing) }
    }

    // MARK: The consumer

    /// Takes out the oldest write. The caller knows one was submitted (counted), so this only
    /// waits for a submitter that is between its two steps. The node holding the write stays in
    /// the queue as its new dummy head; the previous dummy, which no submitter can reach any
    /// more, is recycled.
    func pop() -> CWork {
        while true {
            let dummy = head
            let next = dummy._withUnsafeGuaranteedRef { $0.next.load(ordering: .acquiring) }
            guard next != 0 else {
                sched_yield()
                continue
            }
            let node = Self.node(next)
            head = node
            retire(dummy)
            return node.takeUnretainedValue().work
        }
    }

    /// A node that left the queue waits in the consumer's chain for `recycle`.
    private func retire(_ node: Unmanaged<Node>) {
        let index = node._withUnsafeGuaranteedRef { $0.index }
        if taken != nil {
            node._withUnsafeGuaranteedRef { $0.nextFree.store(UInt64(takenFirstIndex) + 1, ordering: .relaxed) }
        } else {
            takenLast = node
        }
        taken = node
        takenFirstIndex = index
    }

    /// Gives the nodes taken out since the last call back to the free list, in one step. Called
    /// by the consumer.
    func recycle() {
        guard let first = taken, let last = takenLast else { return }
        pushFree(first: first, last: last, firstIndex: takenFirstIndex)
        taken = nil
        takenLast = nil
    }

    // MARK: The free list

    /// Nodes the consumer took out and has not recycled yet, newest first (linked through
    /// `nextFree`); only the consumer touches them.
    @exclusivity(unchecked) private var taken: Unmanaged<Node>?
    @exclusivity(unchecked) private var takenLast: Unmanaged<Node>?
    @exclusivity(unchecked) private var takenFirstIndex: UInt32 = 0

    private func takeFreeNode() -> Unmanaged<Node> {
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

    /// Pushes the chain `first`…`last` (already linked through `nextFree`) onto the free list.
    private func pushFree(first: Unmanaged<Node>, last: Unmanaged<Node>, firstIndex: UInt32) {
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
    /// Nil when another submitter grew the list while this one waited for the lock (take from it).
    @inline(never)
    private func grow() -> Unmanaged<Node>? {
        growth.withLock { count -> Unmanaged<Node>? in
            if free.load(ordering: .acquiring) & 0xFFFF_FFFF != 0 { return nil }
            Swift.precondition(count < Self.maxChunks, "QueueKit: too many DB queue writes pending at once")
            let size = Self.firstChunkSize << count
            let firstIndex = Self.firstChunkSize * ((1 << count) - 1)
            let base = UnsafeMutablePointer<Unmanaged<Node>>.allocate(capacity: size)
            for i in 0..<size {
                (base + i).initialize(to: .passRetained(Node(index: UInt32(firstIndex + i))))
            }
            for i in 1..<(size - 1) {
                base[i]._withUnsafeGuaranteedRef { $0.nextFree.store(UInt64(firstIndex + i + 1) + 1, ordering: .relaxed) }
            }
            chunks[count].store(UInt(bitPattern: base), ordering: .releasing)
            count += 1
            pushFree(first: base[1], last: base[size - 1], firstIndex: UInt32(firstIndex + 1))
            return base[0]
        }
    }

    private func chunkBase(_ c: Int) -> UnsafeMutablePointer<Unmanaged<Node>> {
        UnsafeMutablePointer(bitPattern: chunks[c].load(ordering: .acquiring))!
    }

    @inline(__always)
    private func nodeAt(_ index: UInt32) -> Unmanaged<Node> {
        let q = Int(index) / Self.firstChunkSize + 1
        let c = Int.bitWidth - 1 - q.leadingZeroBitCount
        return chunkBase(c)[Int(index) - Self.firstChunkSize * ((1 << c) - 1)]
    }

    @inline(__always)
    private static func node(_ bits: UInt) -> Unmanaged<Node> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
    }
}
