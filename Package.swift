// swift-tools-version:6.0
import Foundation
import PackageDescription

/// The directory holding <dispatch/dispatch.h> (and <os/…>, <Block.h>): the toolchain's
/// usr/lib/swift, found from the swiftc on PATH. Only the benchmark's C kernels need it.
let dispatchIncludeDirectory: String = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for directory in path.split(separator: ":") {
        let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("swiftc")
        guard FileManager.default.isExecutableFile(atPath: candidate.path) else { continue }
        let include = candidate.resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("../lib/swift").standardizedFileURL.path
        if FileManager.default.fileExists(atPath: include + "/dispatch/dispatch.h") { return include }
    }
    return "/opt/swift/usr/lib/swift"
}()

/// The package's own directory, for the linker's version script.
let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

let package = Package(
    name: "QueueKit",
    products: [
        // The C library: libqueuekit.so, exporting exactly the qk_* functions of include/queuekit.h.
        // (The installable, SONAME'd, static-stdlib build of it is made by CMake.)
        .library(name: "queuekit", type: .dynamic, targets: ["QueueKitCLibrary"]),
        // The Swift library, for Swift programs that `import QueueKit`.
        .library(name: "QueueKit", targets: ["QueueKit"]),
    ],
    targets: [
        // The C header as a Clang module, so the @_cdecl exports are checked against it and the
        // tests call the library through it, as C programs do.
        .systemLibrary(name: "CQueueKit", path: "include"),
        // Thread-locals and futexes: what Swift cannot express.
        .target(name: "QueueKitShim", path: "Sources/QueueKitShim", linkerSettings: [.linkedLibrary("bsd")]),
        .target(
            name: "QueueKit",
            dependencies: ["CQueueKit", "QueueKitShim"],
            path: "Sources/QueueKit",
            // Test seams (hooks and counters the tests observe) exist in debug builds only.
            swiftSettings: [.define("QUEUEKIT_TESTING", .when(configuration: .debug))]
        ),
        // Only the link of the `queuekit` dynamic product: its version script keeps the exports to qk_*.
        .target(
            name: "QueueKitCLibrary",
            dependencies: ["QueueKit"],
            path: "Sources/QueueKitCLibrary",
            linkerSettings: [.unsafeFlags(["-use-ld=lld", "-Xlinker", "--version-script=\(packageDirectory)/cmake/queuekit.map"])]
        ),
        // The benchmark (README, Performance): C kernels calling QueueKit through <queuekit.h> next to
        // the pthread and libdispatch anchors, and the Swift driver that repeats, compares and reports.
        .target(
            name: "QueueKitBenchKernels",
            dependencies: ["QueueKit"],
            path: "Sources/QueueKitBenchKernels",
            cSettings: [.headerSearchPath("../../include"), .unsafeFlags(["-I", dispatchIncludeDirectory])]
        ),
        .executableTarget(
            name: "queuekit-bench",
            dependencies: ["QueueKit", "QueueKitBenchKernels"],
            path: "Sources/QueueKitBench"
        ),
        .testTarget(
            name: "QueueKitTests",
            dependencies: ["QueueKit", "CQueueKit"],
            path: "Tests/QueueKitTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
