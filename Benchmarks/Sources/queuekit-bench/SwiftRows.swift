// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import QueueKitBenchKernels

/// The rows that use QueueKit's Swift API: their kernels are in libQueueKitBenchSwift.so next to
/// this executable (Sources/QueueKitBenchSwift), loaded at run time rather than linked, because
/// the QueueKit module linked in here would also define the qk_* functions, and the C kernels'
/// calls would bind to that copy instead of the installed libqueuekit.so.0.
///
/// A Swift-API kernel there is `@_cdecl("name") public func name(_ n: UInt64) -> Double`, which
/// runs `n` operations and returns the nanoseconds per operation; a row runs it as
/// `SwiftRows.kernel("name")`.
enum SwiftRows {
    private typealias Kernel = @convention(c) (UInt64) -> Double

    /// The kernel exported as `symbol`; exits with a message when it cannot be loaded.
    static func kernel(_ symbol: String) -> (UInt64) -> qkb_sample_t {
        let function = unsafeBitCast(address(of: symbol), to: Kernel.self)
        return { n in
            qkb_sample_t(
                ns_per_op: function(n), wakeups_per_op: -1, futile_per_op: -1,
                write_wait_p99_ns: -1, write_wait_max_ns: -1)
        }
    }

    nonisolated(unsafe) private static var library: UnsafeMutableRawPointer?

    private static func address(of symbol: String) -> UnsafeMutableRawPointer {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let path = directory.appendingPathComponent("libQueueKitBenchSwift.so").path
        if library == nil { library = dlopen(path, RTLD_NOW | RTLD_LOCAL) }
        guard let library, let address = dlsym(library, symbol) else {
            Progress.note("queuekit-bench: cannot load \(symbol) from \(path): \(String(cString: dlerror()))")
            exit(1)
        }
        return address
    }
}
