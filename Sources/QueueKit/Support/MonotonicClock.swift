// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Dispatch
import QueueKitShim

/// The clock of every QueueKit deadline: nanoseconds on `CLOCK_MONOTONIC`, which wall-clock
/// changes never move.
public enum MonotonicClock {
    /// A deadline that never expires (`QK_FOREVER`).
    public static let forever: UInt64 = .max

    /// Now, in nanoseconds.
    @inline(__always)
    public static func now() -> UInt64 { qkshim_now_ns() }

    /// The deadline `duration` from now (saturating at `forever`).
    public static func deadline(after duration: Duration) -> UInt64 {
        guard let ns = nanoseconds(duration) else { return forever }
        if ns == 0 { return now() }
        let (sum, overflow) = now().addingReportingOverflow(ns)
        return overflow || sum == forever ? forever : sum
    }

    /// `duration` in whole nanoseconds (rounded down): 0 for a zero or negative duration, `nil`
    /// when it does not fit in 64 bits. The one conversion of a `Duration`.
    static func nanoseconds(_ duration: Duration) -> UInt64? {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow || carry ? nil : total
    }

    /// The deadline of a `ContinuousClock` instant, mapped onto the monotonic clock.
    public static func deadline(_ instant: ContinuousClock.Instant) -> UInt64 {
        deadline(after: ContinuousClock.now.duration(to: instant))
    }

    /// The deadline of a `DispatchTime` (which is on the same clock on Linux).
    public static func deadline(_ time: DispatchTime) -> UInt64 {
        time == .distantFuture ? forever : time.uptimeNanoseconds
    }
}

/// A point in time that QueueKit's timed calls can give up at: absolute nanoseconds on
/// ``MonotonicClock`` (`UInt64`, ``MonotonicClock/forever`` never expires), a
/// `ContinuousClock.Instant`, or a `DispatchTime` (`.distantFuture`: forever).
public protocol QueueKitDeadline: Sendable {
    /// The deadline in nanoseconds on ``MonotonicClock``.
    var monotonicDeadline: UInt64 { get }
}

extension UInt64: QueueKitDeadline {
    /// The value itself: already nanoseconds on ``MonotonicClock``.
    public var monotonicDeadline: UInt64 { self }
}

extension ContinuousClock.Instant: QueueKitDeadline {
    /// ``MonotonicClock/deadline(_:)-(ContinuousClock.Instant)``.
    public var monotonicDeadline: UInt64 { MonotonicClock.deadline(self) }
}

extension DispatchTime: QueueKitDeadline {
    /// ``MonotonicClock/deadline(_:)-(DispatchTime)``.
    public var monotonicDeadline: UInt64 { MonotonicClock.deadline(self) }
}
