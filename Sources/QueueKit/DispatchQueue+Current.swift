import Dispatch
import Synchronization

/// "Which queue am I on?" for plain `DispatchQueue`s, the way the seed article sketches it: each
/// registered queue carries a weak reference to itself under one private specific key, so
/// `DispatchQueue.current` is one `getSpecific` away and no queue is kept alive by the registry.
///
/// The system queues (main and the global queues) are registered once, lazily, on first use.
/// Every queue QueueKit creates (``Queue``) registers its dispatch queue too.
///
/// Like `dispatch_get_specific`, this sees the queue whose block runs (or its targets), not a
/// queue further out that waits in a `sync`: use ``Queue/check(_:)`` for that.
/// On Linux `DispatchQueue.main` and `DispatchQueue.global(qos:)` build a new wrapper object on
/// every access, so `DispatchQueue.current === DispatchQueue.main` can never hold there and a weak
/// reference to such a wrapper dies at once. The system queues are therefore registered with a
/// strong reference (they are never freed, so there is no cycle to fear), and ``isCurrent`` compares
/// queues by their registration rather than by wrapper identity.
extension DispatchQueue {
    /// What a registered queue carries under the detection key. A class, so that two wrappers of
    /// the same dispatch queue lead to the same reference.
    private final class QueueReference: @unchecked Sendable {
        /// A created queue: weak, so the registry keeps no queue alive (no retain cycle).
        weak var createdQueue: DispatchQueue?
        /// A system queue: strong, it is immortal anyway and its wrappers are temporaries.
        let systemQueue: DispatchQueue?

        init(created: DispatchQueue) { createdQueue = created; systemQueue = nil }
        init(system: DispatchQueue) { createdQueue = nil; systemQueue = system }

        var queue: DispatchQueue? { systemQueue ?? createdQueue }
    }

    private static let detectionKey: DispatchSpecificKey<QueueReference> = {
        let key = DispatchSpecificKey<QueueReference>()
        var systemQueues: [DispatchQueue] = [.main]
        for qos: DispatchQoS.QoSClass in [.background, .utility, .default, .unspecified, .userInitiated, .userInteractive] {
            systemQueues.append(.global(qos: qos))
        }
        for queue in systemQueues where queue.getSpecific(key: key) == nil {
            queue.setSpecific(key: key, value: QueueReference(system: queue))
        }
        return key
    }()

    /// Registers `queue` so that ``current`` recognises it inside its blocks. Registering a queue
    /// that already is (a system queue, or the same queue twice) changes nothing.
    public static func registerDetection(of queue: DispatchQueue) {
        let key = detectionKey
        if queue.getSpecific(key: key)?.queue != nil { return }
        queue.setSpecific(key: key, value: QueueReference(created: queue))
    }

    /// Whether this queue is the one ``current`` reports (compared by registration, so it also
    /// holds for a fresh `DispatchQueue.main` or `.global()` wrapper). False for an unregistered
    /// queue. Like ``current``, it does not see queues further out that wait in a `sync`.
    public var isCurrent: Bool {
        guard let mine = getSpecific(key: DispatchQueue.detectionKey) else { return false }
        return mine === DispatchQueue.getSpecific(key: DispatchQueue.detectionKey)
    }

    /// The registered queue whose block is running (or that it targets), or `nil`.
    public static var current: DispatchQueue? {
        DispatchQueue.getSpecific(key: detectionKey)?.queue
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
