import Foundation
import QueueKitBenchKernels

/// The Swift-API rows of QueueKit, from libQueueKitBenchSwift.so next to this executable (see
/// Sources/QueueKitBenchSwift for why it is loaded, not linked).
enum SwiftRows {
    typealias Kernel = @convention(c) (UInt64) -> Double

    /// `DBQueue.read {}`, from Swift.
    static func dbQueueRead(_ n: UInt64) -> qkb_sample_t { sample(dbQueueReadKernel(n)) }

    nonisolated(unsafe) private static let dbQueueReadKernel: Kernel = load("qkbench_swift_dbqueue_read")

    private static func load(_ symbol: String) -> Kernel {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let path = directory.appendingPathComponent("libQueueKitBenchSwift.so").path
        guard let library = dlopen(path, RTLD_NOW | RTLD_LOCAL), let address = dlsym(library, symbol) else {
            Progress.note("queuekit-bench: cannot load \(symbol) from \(path): \(String(cString: dlerror()))")
            exit(1)
        }
        return unsafeBitCast(address, to: Kernel.self)
    }

    private static func sample(_ nsPerOp: Double) -> qkb_sample_t {
        qkb_sample_t(ns_per_op: nsPerOp, wakeups_per_op: -1, futile_per_op: -1,
                     write_wait_p99_ns: -1, write_wait_max_ns: -1)
    }
}
