// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// A resource (a database connection, a cache, any state) that only a ``DBQueue`` reaches: reads
/// borrow it concurrently, writes get it `inout` exclusively, in FIFO order. The queue's rules
/// are the resource's rules, nesting included: a `read` inside a read or a write, and a `write`
/// inside a write, run inline, also through `sync` hops via other queues; a `write` inside a read
/// and no write throws ``QueueKitError/wouldDeadlock`` and runs nothing.
///
/// ```swift
/// let store = try GuardedResource([String: Int](), label: "store")
/// try store.write { $0["answer"] = 42 }
/// let answer = store.read { $0["answer"] }
/// ```
///
/// Nested calls reach the same storage. A `read` or `write` nested inside a `write` sees what the
/// enclosing write changed so far, and the enclosing write sees what a nested write changed once
/// the nested call returns: the enclosing body is suspended in the call meanwhile, so the
/// accesses never overlap in time. Like any reentrant access, that is for resources that are
/// references or hold them (a connection handle); for a value type, re-read the resource through
/// the `inout` parameter after a nested call rather than through a copy taken before it.
///
/// Thread safety: every member may be called from any thread; the resource is touched only
/// inside the queue's blocks.
public final class GuardedResource<Resource>: @unchecked Sendable {
    /// The DB queue that orders every access.
    public let dbQueue: DBQueue

    /// The resource, reached only inside `dbQueue`'s blocks. Through a pointer so that the inline
    /// nested accesses the queue allows are not dynamic-exclusivity traps.
    private let storage: UnsafeMutablePointer<Resource>

    /// Guards `resource`.
    public init(_ resource: Resource, label: String? = nil) throws(QueueKitError) {
        dbQueue = try DBQueue(label: label)
        storage = .allocate(capacity: 1)
        storage.initialize(to: resource)
    }

    deinit {
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// The queue that stands for the resource in identity checks (``DBQueue/queue``).
    public var queue: Queue { dbQueue.queue }

    /// Runs `body` with the resource borrowed, concurrently with other reads and never with a
    /// write, and returns its value. It sees every write submitted before the call began.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` when the read would wait
    ///   in a cycle across threads (``DBQueue/read(_:)``); whatever `body` throws.
    public func read<R>(_ body: (borrowing Resource) throws -> R) throws -> R {
        try dbQueue.read { try body(storage.pointee) }
    }

    /// Runs `body` with the resource `inout`, exclusively, after every write submitted before it,
    /// and returns its value.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` without running `body` inside a read and no write;
    ///   whatever `body` throws.
    public func write<R>(_ body: (inout Resource) throws -> R) throws -> R {
        try dbQueue.write { try body(&storage.pointee) }
    }

    /// Queues `body` to run with the resource `inout`, exclusively, FIFO with all writes; returns at
    /// once. Allowed anywhere: inside a block of this resource it runs after that block.
    public func writeAsync(_ body: @escaping @Sendable (inout Resource) -> Void) {
        dbQueue.writeAsync { body(&self.storage.pointee) }
    }

    /// Waits until every write submitted before the call has run.
    ///
    /// - Throws: ``QueueKitError/wouldDeadlock`` inside a block of this resource.
    public func flush() throws(QueueKitError) {
        try dbQueue.flush()
    }
}

// MARK: Swift concurrency

/// The resource for `async` code: the same calls, suspending while they wait, with the rules of
/// ``DBQueue``'s `async` forms (caller's isolation, cancellation while waiting, never nested).
extension GuardedResource {
    /// Runs `body` with the resource borrowed, concurrently with other reads and never with a
    /// write, and returns its value; suspends while it waits (``DBQueue/read(isolation:_:)``).
    ///
    /// - Throws: `CancellationError` (nothing ran), ``QueueKitError/wouldDeadlock``, what `body`
    ///   throws.
    public func read<R>(isolation: isolated (any Actor)? = #isolation, _ body: (borrowing Resource) throws -> R)
        async throws -> R
    {
        try await dbQueue.read(isolation: isolation) { try body(storage.pointee) }
    }

    /// Runs `body` with the resource `inout`, exclusively, after every write submitted before it;
    /// suspends while it waits (``DBQueue/write(isolation:_:)``).
    ///
    /// - Throws: `CancellationError` (nothing ran), ``QueueKitError/wouldDeadlock``, what `body`
    ///   throws.
    public func write<R>(isolation: isolated (any Actor)? = #isolation, _ body: (inout Resource) throws -> R)
        async throws -> R
    {
        try await dbQueue.write(isolation: isolation) { try body(&storage.pointee) }
    }

    /// Suspends until every write submitted before the call has run (``DBQueue/flush(isolation:)``).
    ///
    /// - Throws: `CancellationError`; ``QueueKitError/wouldDeadlock`` when the running thread
    ///   holds the queue.
    public func flush(isolation: isolated (any Actor)? = #isolation) async throws {
        try await dbQueue.flush(isolation: isolation)
    }
}
