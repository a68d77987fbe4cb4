// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import CQueueKit

/// The version of QueueKit, the same numbers as `QK_VERSION_*` in `queuekit.h`.
public enum QueueKitVersion {
    public static let major = Int(QK_VERSION_MAJOR)
    public static let minor = Int(QK_VERSION_MINOR)
    public static let patch = Int(QK_VERSION_PATCH)
    /// `major*10000 + minor*100 + patch`.
    public static let number = major * 10000 + minor * 100 + patch
    /// "major.minor.patch".
    public static let string = "\(major).\(minor).\(patch)"
}
