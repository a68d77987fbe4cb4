// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// queuekit-bench, in a package of its own so that building QueueKit builds only the library.
//
// The C kernels call QueueKit as C programs do: through the installed <queuekit.h> and the
// CMake-built libqueuekit.so.0 of an install prefix (QUEUEKIT_PREFIX, default: the repository's
// stage/, which ./scripts/demo.sh or `cmake --install build --prefix stage` fills). The Swift-API
// rows use the QueueKit module of the package one directory up, from a library of their own that
// the driver loads at run time: linked into the driver, that module's own qk_* symbols would
// take the kernels' calls away from libqueuekit.so.0.
//
//   (cd Benchmarks && swift build -c release && .build/release/queuekit-bench --quick)
import Foundation
import PackageDescription

let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()

/// The install prefix of the C library.
let prefix =
    ProcessInfo.processInfo.environment["QUEUEKIT_PREFIX"]
    ?? repository.appendingPathComponent("stage").path

/// The directory holding <dispatch/dispatch.h> (and <os/…>, <Block.h>): the toolchain's
/// usr/lib/swift, found from the swiftc on PATH. The kernels' GCD anchors need it.
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

let package = Package(
    name: "QueueKitBenchmarks",
    products: [
        .executable(name: "queuekit-bench", targets: ["queuekit-bench"]),
        // Loaded by the driver with dlopen (see above); not linked into it.
        .library(name: "QueueKitBenchSwift", type: .dynamic, targets: ["QueueKitBenchSwift"]),
    ],
    dependencies: [.package(name: "QueueKit", path: "..")],
    targets: [
        // The timed loops in C: QueueKit through the installed header and library, next to the
        // pthread and libdispatch anchors.
        .target(
            name: "QueueKitBenchKernels",
            path: "Sources/QueueKitBenchKernels",
            cSettings: [.unsafeFlags(["-I", "\(prefix)/include", "-I", dispatchIncludeDirectory])],
            linkerSettings: [
                .linkedLibrary("queuekit"),
                .unsafeFlags(["-L", "\(prefix)/lib", "-Xlinker", "-rpath", "-Xlinker", "\(prefix)/lib"]),
            ]
        ),
        // The C++ layer's rows: <queuekit.hpp> (installed beside <queuekit.h>) against the C calls
        // it wraps and the standard library's anchors, compiled as C++17.
        .target(
            name: "QueueKitBenchCxx",
            dependencies: ["QueueKitBenchKernels"],
            path: "Sources/QueueKitBenchCxx",
            cxxSettings: [.unsafeFlags(["-I", "\(prefix)/include", "-I", dispatchIncludeDirectory])],
            linkerSettings: [
                .linkedLibrary("queuekit"),
                .unsafeFlags(["-L", "\(prefix)/lib", "-Xlinker", "-rpath", "-Xlinker", "\(prefix)/lib"]),
            ]
        ),
        // The Swift-API rows, on the Swift module.
        .target(
            name: "QueueKitBenchSwift",
            dependencies: [.product(name: "QueueKit", package: "QueueKit")],
            path: "Sources/QueueKitBenchSwift"
        ),
        // The driver: repeats, compares and reports.
        .executableTarget(
            name: "queuekit-bench",
            dependencies: ["QueueKitBenchKernels", "QueueKitBenchCxx"],
            path: "Sources/queuekit-bench"
        ),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)
