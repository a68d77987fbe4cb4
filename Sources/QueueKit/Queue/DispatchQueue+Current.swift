// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import QueueKitShim

/// "Which queue am I on?" for plain `DispatchQueue`s: a thin layer over two sources.
///
/// - A plain dispatch queue is found through a specific key: each registered queue carries a
///   reference to itself under one private key, so dispatch's `getSpecific` (which walks the
///   running queue and its targets) finds it. Created queues are referenced weakly, so the
///   registry keeps no queue alive. The system queues (main and the global queues) are registered
///   once, lazily, on first use.
/// - A QueueKit ``Queue`` is never registered: the thread's execution frames (``Queue/current``)
///   already know it, and its creation pays for nothing here.
///
/// ``current`` combines them, innermost first: a registered queue that the user created, when
/// dispatch finds one (its block runs inside whatever QueueKit block is further out); otherwise the
/// dispatch queue of ``Queue/current`` (also the main queue on the main thread outside any block,
/// and, inside a ``DBQueue`` block, which has no dispatch queue of its own, the queue whose block
/// called it on this thread); otherwise the
/// system queue dispatch finds, or `nil`.
///
/// Like `dispatch_get_specific`, this sees the queue whose block runs (or its targets), not a plain
/// dispatch queue further out that waits in a `sync`: use ``Queue/check(_:)`` for QueueKit queues.
///
/// On Linux `DispatchQueue.main` and `DispatchQueue.global(qos:)` build a new wrapper object on
/// every access, so `DispatchQueue.current === DispatchQueue.main` can never hold there and a weak
/// reference to such a wrapper dies at once. The system queues are therefore registered with a
/// strong reference (they are never freed, so there is no cycle to fear), and ``isCurrent`` compares
/// such queues by their registration rather than by wrapper identity.
///
/// Thread safety: every member may be called from any thread.
extension DispatchQueue {
    /// What a registered queue carries under the detection key. A class, so that two wrappers of
    /// the same dispatch queue lead to the same reference.
    private final class QueueReference: @unchecked Sendable {
        /// A created queue: weak, so the registry keeps no queue alive (no retain cycle).
        weak var createdQueue: DispatchQueue?
        /// A system queue: strong, it is immortal anyway and its wrappers are temporaries.
        let systemQueue: DispatchQueue?

        init(created: DispatchQueue) {
            createdQueue = created
            systemQueue = nil
        }
        init(system: DispatchQueue) {
            createdQueue = nil
            systemQueue = system
        }

        var queue: DispatchQueue? { systemQueue ?? createdQueue }
    }

    private static let detectionKey: DispatchSpecificKey<QueueReference> = {
        let key = DispatchSpecificKey<QueueReference>()
        var systemQueues: [DispatchQueue] = [.main]
        for qos: DispatchQoS.QoSClass in [
            .background, .utility, .default, .unspecified, .userInitiated, .userInteractive,
        ] {
            systemQueues.append(.global(qos: qos))
        }
        for queue in systemQueues where queue.getSpecific(key: key) == nil {
            queue.setSpecific(key: key, value: QueueReference(system: queue))
        }
        return key
    }()

    /// The detection key's generic type, for ``MetadataWarmUp``.
    static func warmUpMetadata() {
        MetadataWarmUp.metadata(DispatchSpecificKey<QueueReference>.self)
    }

    /// Registers `queue` so that ``current`` recognises it inside its blocks. Registering a queue
    /// that already is (a system queue, or the same queue twice) changes nothing.
    public static func registerDetection(of queue: DispatchQueue) {
        let key = detectionKey
        if queue.getSpecific(key: key)?.queue != nil { return }
        // Before the queue can run a block: a Queue's sync that runs inside one on the idle path
        // notes it (see `current`).
        qkshim_plain_queue_registered_set()
        queue.setSpecific(key: key, value: QueueReference(created: queue))
    }

    /// Whether this queue is the one ``current`` reports (a system queue compared by registration,
    /// so it also holds for a fresh `DispatchQueue.main` or `.global()` wrapper). False for an
    /// unregistered plain queue. Like ``current``, it does not see queues further out that wait in
    /// a `sync`, nor the targets of the current queue (``Queue/isCurrent`` does).
    public var isCurrent: Bool {
        guard let current = DispatchQueue.current else { return false }
        if current === self { return true }
        let key = DispatchQueue.detectionKey
        guard let mine = getSpecific(key: key) else { return false }
        return mine === current.getSpecific(key: key)
    }

    /// The queue whose block is running, innermost first (see the extension's rules): a registered
    /// plain queue (or its registered target), else the dispatch queue of ``Queue/current``, else a
    /// system queue, else `nil`.
    ///
    /// The dispatch queue of a ``Queue`` is for identity checks: submit its work through the
    /// `Queue`. Handing it out closes the `Queue`'s idle path for good (from then on every `sync`
    /// goes through dispatch, which orders blocks given to that dispatch queue directly); a block
    /// given to it directly from inside a `sync` that took the queue on the idle path can still
    /// run beside that one `sync`.
    public static var current: DispatchQueue? {
        let registered = DispatchQueue.getSpecific(key: detectionKey)
        // A registered queue is innermost unless a Queue's block entered on the idle path, which
        // leaves dispatch's current queue as it was, runs inside it.
        if let registered, registered.systemQueue == nil, let created = registered.createdQueue,
            !IdleHold.innermostIsCurrent
        {
            return created
        }
        // A DB queue's frames have no dispatch queue and always run on the calling thread: the
        // frame further out is then this thread's too.
        var frame = ExecutionContext.innermost
        while let current = frame {
            if let queue = current.pointee.queue.handOutDispatchQueue() { return queue }
            frame = current.pointee.outer
        }
        return registered?.queue
    }

    /// The label of ``current``, or `nil`.
    public static var currentLabel: String? { current?.label }

    /// Creates a queue and, when `registerDetection` is true, registers it for ``current``.
    public convenience init(
        label: String,
        qos: DispatchQoS = .unspecified,
        attributes: DispatchQueue.Attributes = [],
        target: DispatchQueue? = nil,
        registerDetection: Bool
    ) {
        self.init(label: label, qos: qos, attributes: attributes, target: target)
        if registerDetection { DispatchQueue.registerDetection(of: self) }
    }
}
