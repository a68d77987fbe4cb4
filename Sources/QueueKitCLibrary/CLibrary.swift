// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// The link of SwiftPM's `queuekit` dynamic product: the C face (QueueKitCAPI) linked as a shared
// library whose exports are exactly the qk_* functions of include/queuekit.h (cmake/queuekit.map,
// the same version script as the installable CMake build). Nothing here but the link settings,
// which SwiftPM passes to every binary that links the target: the tests link QueueKitCAPI
// directly, so the version script never hides a sanitizer's runtime from the libraries it
// intercepts.
@_exported import QueueKitCAPI
