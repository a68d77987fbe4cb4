// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The order graph of the lock-order witness, kept acyclic, with an incremental cycle search.
///
/// **Vertices.** Each witnessed object is four vertices: asked for exclusively, asked for shared,
/// held exclusively, held shared. An edge "X held in mode a, then Y asked for in mode b" joins
/// X's held-a vertex to Y's asked-b vertex. Inside an object, an asked vertex leads to a held
/// vertex when the two modes conflict: exclusive-in leads to both held vertices, shared-in to
/// held-exclusive, and shared-in to held-shared only once a writer can get between two shared
/// holders (the object's first write or barrier: ``markWritten(_:record:)``). A cycle of vertices
/// is then exactly a cycle of orders that conflict at every object: a potential deadlock.
///
/// **Order.** The graph keeps a topological order of its vertices (each has a rank; every edge
/// goes from a lower rank to a higher one), as Pearce and Kelly's dynamic topological sort does
/// (abseil's `GraphCycles` is one). A new edge u -> v with rank(u) < rank(v) keeps the order and
/// costs nothing more; otherwise a forward search from v, bounded by u's rank, looks for u (a
/// cycle), and a backward search from u, bounded by v's rank, collects what must move: the
/// vertices found are given the same ranks again, the ones behind u first. Only the region
/// between the two ranks is visited. An edge that would close a cycle is not added (the graph
/// stays acyclic): it is reported, with the shortest cycle it closes, and remembered as known.
///
/// Not thread-safe: ``LockOrder`` keeps it behind one lock.
final class LockOrderGraph {
    /// What the report tells about the first sighting of an edge.
    struct Record {
        let call: StaticString
        let timed: Bool
        let thread: UInt64
        let threadName: String
        let site: UInt
    }

    /// An edge between objects: X held in `fromMode` -> Y asked for in `toMode`, timed or not.
    struct EdgeKey: Hashable {
        let from: UInt
        let to: UInt
        let bits: UInt32

        static func bits(from: LockOrderMode, to: LockOrderMode, timed: Bool) -> UInt32 {
            UInt32(from.rawValue) | UInt32(to.rawValue) << 1 | (timed ? 4 : 0)
        }
        var fromMode: LockOrderMode { LockOrderMode(rawValue: UInt8(bits & 1))! }
        var toMode: LockOrderMode { LockOrderMode(rawValue: UInt8(bits >> 1 & 1))! }
    }

    /// A witnessed object.
    struct Node {
        let object: LockOrderObject
        /// The first of its four vertices.
        let base: Int32
        /// Whether shared holders conflict (a DB queue written, a concurrent queue that had a barrier).
        var written = false
        /// The edges that start or end here, so forgetting the object finds them.
        var edges: [EdgeKey] = []
    }

    private struct Vertex {
        var rank: Int
        var out: [Int32] = []
        var into: [Int32] = []
        var mark: UInt32 = 0
        /// The node (object address) the vertex belongs to; 0 while the vertex is free.
        var owner: UInt
    }

    /// A cycle the new edge would close: the edges in order, starting with the one after the new
    /// edge and ending with the new edge.
    struct Cycle {
        var edges: [(key: EdgeKey, record: Record)]
    }

    private var vertices: [Vertex] = []
    private var freeBlocks: [Int32] = []
    private var nextRank = 0
    private var stamp: UInt32 = 0
    private(set) var nodes: [UInt: Node] = [:]
    /// Every edge seen, with the record of its first sighting (also those that closed a cycle and
    /// were left out of the vertex graph).
    private(set) var edges: [EdgeKey: Record] = [:]
    /// Which edge put each vertex edge in the graph (the first one that did).
    private var vertexEdges: [UInt64: EdgeKey] = [:]

    /// The most edges the graph keeps.
    static let edgeLimit = 65_536

    var edgeCount: Int { edges.count }

    // MARK: Vertices

    private static func askedVertex(_ base: Int32, _ mode: LockOrderMode) -> Int32 { base + Int32(mode.rawValue) }
    private static func heldVertex(_ base: Int32, _ mode: LockOrderMode) -> Int32 { base + 2 + Int32(mode.rawValue) }

    /// The first vertex of `object`'s node, made when it has none. (Only the vertex: a copy of
    /// the node would share its edge list, which the caller then appends to.)
    private func base(for object: LockOrderObject) -> Int32 {
        let key = object.address
        if let base = nodes[key]?.base { return base }
        let base: Int32
        if let reused = freeBlocks.popLast() {
            base = reused
        } else {
            base = Int32(vertices.count)
            for _ in 0..<4 { vertices.append(Vertex(rank: 0, owner: 0)) }
        }
        // Fresh ranks above every other vertex: an isolated node fits anywhere at the top.
        for offset in 0..<4 {
            vertices[Int(base) + offset] = Vertex(rank: nextRank, owner: key)
            nextRank += 1
        }
        let node = Node(object: object, base: base)
        nodes[key] = node
        qkshim_lockorder_node_mark(key)
        let inE = Self.askedVertex(base, .exclusive)
        let inS = Self.askedVertex(base, .shared)
        let outE = Self.heldVertex(base, .exclusive)
        let outS = Self.heldVertex(base, .shared)
        link(inE, outE)
        link(inE, outS)
        link(inS, outE)
        return base
    }

    private func link(_ from: Int32, _ to: Int32) {
        vertices[Int(from)].out.append(to)
        vertices[Int(to)].into.append(from)
    }

    private static func pair(_ from: Int32, _ to: Int32) -> UInt64 { UInt64(UInt32(from)) << 32 | UInt64(UInt32(to)) }

    // MARK: Adding

    /// Whether the edge is known (seen before, in the graph or reported).
    func contains(_ key: EdgeKey) -> Bool { edges[key] != nil }

    /// Adds the edge `key` from `from` to `to` first seen as `record`. Returns the cycle it closes
    /// (the edge is then remembered as known but left out of the order), or `nil`.
    func add(_ key: EdgeKey, from: LockOrderObject, to: LockOrderObject, record: Record) -> Cycle? {
        guard edges[key] == nil else { return nil }
        let source = base(for: from)
        let target = base(for: to)
        edges[key] = record
        nodes[key.from]?.edges.append(key)
        nodes[key.to]?.edges.append(key)
        let u = Self.heldVertex(source, key.fromMode)
        let v = Self.askedVertex(target, key.toMode)
        let pair = Self.pair(u, v)
        if vertexEdges[pair] != nil { return nil } // the same vertex edge, timed the other way
        if let path = insert(u, v) { return cycle(closing: key, record: record, path: path) }
        vertexEdges[pair] = key
        return nil
    }

    /// Marks `object` written: its shared holders conflict from now on. Returns the cycle that
    /// this closes (one that only a meeting of two shared holders of `object` held back), or
    /// `nil`; the cycle's last edge is the one into `object`'s shared side.
    func markWritten(_ object: LockOrderObject) -> Cycle? {
        let base = base(for: object)
        if nodes[object.address]?.written == true { return nil }
        nodes[object.address]?.written = true
        let inS = Self.askedVertex(base, .shared)
        let outS = Self.heldVertex(base, .shared)
        guard let path = insert(inS, outS) else { return nil }
        // The path runs from outS (held shared) around to inS (asked shared): object edges only.
        return Cycle(edges: objectEdges(along: path))
    }

    /// Inserts the vertex edge u -> v keeping the order; the path v ... u when it would close a
    /// cycle (then nothing changed).
    private func insert(_ u: Int32, _ v: Int32) -> [Int32]? {
        if u == v { return [v] }
        let upper = vertices[Int(u)].rank
        let lower = vertices[Int(v)].rank
        if upper < lower {
            link(u, v)
            return nil
        }
        stamp &+= 1
        if stamp == 0 {
            for index in vertices.indices { vertices[index].mark = 0 }
            stamp = 1
        }
        // Forward from v through ranks below u's: reaching u is a cycle.
        var forward: [Int32] = []
        var stack: [Int32] = [v]
        vertices[Int(v)].mark = stamp
        while let w = stack.popLast() {
            forward.append(w)
            for next in vertices[Int(w)].out {
                if next == u { return shortestPath(from: v, to: u) }
                let vertex = vertices[Int(next)]
                if vertex.mark != stamp && vertex.rank < upper {
                    vertices[Int(next)].mark = stamp
                    stack.append(next)
                }
            }
        }
        // Backward from u through ranks above v's.
        var backward: [Int32] = []
        stack = [u]
        vertices[Int(u)].mark = stamp
        while let w = stack.popLast() {
            backward.append(w)
            for previous in vertices[Int(w)].into {
                let vertex = vertices[Int(previous)]
                if vertex.mark != stamp && vertex.rank > lower {
                    vertices[Int(previous)].mark = stamp
                    stack.append(previous)
                }
            }
        }
        // The same ranks again, in the order: what leads to u, then what v leads to.
        backward.sort { vertices[Int($0)].rank < vertices[Int($1)].rank }
        forward.sort { vertices[Int($0)].rank < vertices[Int($1)].rank }
        let moved = backward + forward
        let ranks = moved.map { vertices[Int($0)].rank }.sorted()
        for (vertex, rank) in zip(moved, ranks) { vertices[Int(vertex)].rank = rank }
        link(u, v)
        return nil
    }

    /// The shortest path from `start` to `goal` (breadth first), both included.
    private func shortestPath(from start: Int32, to goal: Int32) -> [Int32] {
        var previous: [Int32: Int32] = [start: start]
        var frontier: [Int32] = [start]
        var index = 0
        while index < frontier.count {
            let w = frontier[index]
            index += 1
            if w == goal { break }
            for next in vertices[Int(w)].out where previous[next] == nil {
                previous[next] = w
                frontier.append(next)
            }
        }
        var path: [Int32] = [goal]
        var at = goal
        while at != start, let back = previous[at] {
            path.append(back)
            at = back
        }
        return path.reversed()
    }

    /// The object edges along a vertex path (the vertex edges that leave one object for another).
    private func objectEdges(along path: [Int32]) -> [(key: EdgeKey, record: Record)] {
        var result: [(key: EdgeKey, record: Record)] = []
        for (from, to) in zip(path, path.dropFirst()) where vertices[Int(from)].owner != vertices[Int(to)].owner {
            if let key = vertexEdges[Self.pair(from, to)], let record = edges[key] { result.append((key, record)) }
        }
        return result
    }

    private func cycle(closing key: EdgeKey, record: Record, path: [Int32]) -> Cycle {
        Cycle(edges: objectEdges(along: path) + [(key, record)])
    }

    // MARK: Forgetting

    /// Drops `address`'s node, its edges and whatever order they implied. True when it had one.
    @discardableResult
    func forget(_ address: UInt) -> Bool {
        guard let node = nodes.removeValue(forKey: address) else { return false }
        for key in node.edges {
            guard edges.removeValue(forKey: key) != nil else { continue }
            let other = key.from == address ? key.to : key.from
            nodes[other]?.edges.removeAll { $0 == key }
        }
        for offset in 0..<4 {
            let vertex = node.base + Int32(offset)
            for next in vertices[Int(vertex)].out {
                vertices[Int(next)].into.removeAll { $0 == vertex }
                vertexEdges[Self.pair(vertex, next)] = nil
            }
            for previous in vertices[Int(vertex)].into {
                vertices[Int(previous)].out.removeAll { $0 == vertex }
                vertexEdges[Self.pair(previous, vertex)] = nil
            }
            vertices[Int(vertex)] = Vertex(rank: 0, owner: 0)
        }
        freeBlocks.append(node.base)
        return true
    }

    /// The object a node stands for, if it is witnessed.
    func object(at address: UInt) -> LockOrderObject? { nodes[address]?.object }

    /// Whether `address` has been marked written.
    func isWritten(_ address: UInt) -> Bool { nodes[address]?.written ?? false }

    /// The graph's generic types, for ``MetadataWarmUp``.
    static func warmUpMetadata() {
        MetadataWarmUp.arrayStorage(Vertex.self)
        MetadataWarmUp.arrayStorage(Int32.self)
        MetadataWarmUp.arrayStorage((Int32, Int32).self)
        MetadataWarmUp.dictionaryStorage(Int32.self, Int32.self)
        MetadataWarmUp.dictionaryStorage(UInt.self, Node.self)
        MetadataWarmUp.arrayStorage(EdgeKey.self)
        MetadataWarmUp.dictionaryStorage(UInt64.self, EdgeKey.self)
        MetadataWarmUp.dictionaryStorage(EdgeKey.self, Record.self)
        MetadataWarmUp.arrayStorage((key: EdgeKey, record: Record).self)
        MetadataWarmUp.metadata((EdgeKey, Record).self)
    }

    #if QUEUEKIT_TESTING
        /// Test seam: whether every vertex edge goes from a lower rank to a higher one.
        var orderIsTopological: Bool {
            for (index, vertex) in vertices.enumerated() where vertex.owner != 0 {
                for next in vertex.out where vertices[Int(next)].rank <= vertex.rank {
                    _ = index
                    return false
                }
            }
            return true
        }
    #endif
}
