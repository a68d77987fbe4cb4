// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An error of QueueKit: a POSIX `errno` value, exactly the status the C API returns.
///
/// Misuse surfaces as one of these, never as a trap (only the `precondition` calls abort).
public struct QueueKitError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` value (`EINVAL`, `EDEADLK`, …).
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `EINVAL`: a wrong argument (a queue that is for identity only, a bad enum value, …).
    public static let invalidArgument = QueueKitError(rawValue: EINVAL)
    /// `EBUSY`: a try-variant could not acquire; destroying an object in use.
    public static let busy = QueueKitError(rawValue: EBUSY)
    /// `ETIMEDOUT`: the deadline passed first.
    public static let timedOut = QueueKitError(rawValue: ETIMEDOUT)
    /// `EPERM`: unlocking a lock the calling thread does not hold; a failed check.
    public static let notPermitted = QueueKitError(rawValue: EPERM)
    /// `EDEADLK`: the call would deadlock, so it did nothing (the work was not run).
    public static let wouldDeadlock = QueueKitError(rawValue: EDEADLK)
    /// `EOWNERDEAD`: the lock was acquired and is held, but its previous owner exited holding it.
    public static let ownerDied = QueueKitError(rawValue: EOWNERDEAD)
    /// `ENOTRECOVERABLE`: in a forked child, the call needs threads the child does not have.
    public static let notRecoverable = QueueKitError(rawValue: ENOTRECOVERABLE)
    /// `ENOMEM`: out of memory.
    public static let outOfMemory = QueueKitError(rawValue: ENOMEM)

    /// The description of any status (0 included), as `qk_strerror` returns it: the text of
    /// `QK_STATUS_MAP` in `queuekit.h`, the one list of statuses. Thread-safe.
    public static func describe(_ status: Int32) -> String {
        String(cString: qkshim_status_description(status))
    }

    /// The errno's symbolic name ("EDEADLK"), as `qk_status_name` returns it; "" for a status
    /// that `QK_STATUS_MAP` does not list.
    public var name: String { String(cString: qkshim_status_name(rawValue)) }

    public var description: String { "QueueKitError(\(rawValue)): \(Self.describe(rawValue))" }

    /// Matches any error that is this `QueueKitError`, so that `catch QueueKitError.wouldDeadlock`
    /// works where the error's static type is `any Error` (as in `try queue.sync { … }`).
    public static func ~= (lhs: QueueKitError, rhs: any Error) -> Bool {
        (rhs as? QueueKitError) == lhs
    }
}
