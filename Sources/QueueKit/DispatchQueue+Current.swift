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
extension DispatchQueue {
    private struct QueueReference: @unchecked Sendable {
        weak var queue: DispatchQueue?
    }

    private static let detectionKey: DispatchSpecificKey<QueueReference> = {
        let key = DispatchSpecificKey<QueueReference>()
        var systemQueues: [DispatchQueue] = [.main]
        for qos: DispatchQoS.QoSClass in [.background, .utility, .default, .unspecified, .userInitiated, .userInteractive] {
            systemQueues.append(.global(qos: qos))
        }
        for queue in systemQueues {
            queue.setSpecific(key: key, value: QueueReference(queue: queue))
        }
        return key
    }()

    /// Registers `queue` so that ``current`` recognises it inside its blocks.
    public static func registerDetection(of queue: DispatchQueue) {
        queue.setSpecific(key: detectionKey, value: QueueReference(queue: queue))
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
