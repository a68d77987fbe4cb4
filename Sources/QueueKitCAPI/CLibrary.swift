// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// The `queuekit` dynamic product: the QueueKit module linked as a shared library whose exports are
// exactly the qk_* functions of include/queuekit.h (cmake/queuekit.map, the same version script
// as the installable CMake build). Nothing here but the link: Swift programs use the `QueueKit`
// product instead, whose Swift API this library does not export.
import QueueKit
