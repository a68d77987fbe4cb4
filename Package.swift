// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import PackageDescription

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
        // The C face: the @_cdecl exports of include/queuekit.h over the core's `package` API, the
        // code of the `queuekit` dynamic product.
        .target(
            name: "QueueKitCAPI",
            dependencies: ["QueueKit", "CQueueKit", "QueueKitShim"],
            path: "Sources/QueueKitCAPI",
            swiftSettings: [.define("QUEUEKIT_TESTING", .when(configuration: .debug))]
        ),
        // Only the link of the `queuekit` dynamic product: its version script keeps the exports to
        // qk_* (linker settings reach every binary linking a target, hence a target of its own).
        .target(
            name: "QueueKitCLibrary",
            dependencies: ["QueueKitCAPI"],
            path: "Sources/QueueKitCLibrary",
            linkerSettings: [
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "--version-script=\(packageDirectory)/cmake/queuekit.map"])
            ]
        ),
        // What both test targets share: threads and bounded waits, C-call wrappers and handles,
        // report logs, and the core's test seams.
        .target(
            name: "QueueKitTestSupport",
            dependencies: ["QueueKit", "QueueKitCAPI", "CQueueKit", "QueueKitShim"],
            path: "Tests/QueueKitTestSupport"
        ),
        // The Swift API and the core's internals, a folder per component as in Sources/QueueKit/.
        .testTarget(
            name: "QueueKitTests",
            dependencies: ["QueueKit", "QueueKitCAPI", "CQueueKit", "QueueKitTestSupport"],
            path: "Tests/QueueKitTests"
        ),
        // The C API through include/queuekit.h, as C programs call it, a folder per component.
        .testTarget(
            name: "QueueKitCAPITests",
            dependencies: ["QueueKit", "QueueKitCAPI", "CQueueKit", "QueueKitTestSupport"],
            path: "Tests/QueueKitCAPITests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
