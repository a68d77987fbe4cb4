// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitBenchKernels

/// One implementation of one workload: a row of the table.
struct Row {
    /// "condition lock", "DB queue", "identity".
    let group: String
    /// What is measured, e.g. "ping-pong round (2 threads)"; the rows of a workload are compared.
    let workload: String
    /// Who does it, e.g. "QueueKit" or "pthread_mutex".
    let impl: String
    let isQueueKit: Bool
    /// The operation counted, e.g. "op", "round", "hand-off".
    let unit: String
    /// Operations per repetition in the full mode (the quick mode runs a tenth).
    let operations: UInt64
    /// Runs `operations` operations, returns the time per operation.
    let run: (UInt64) -> qkb_sample_t
}

/// The repetitions of one row, summarised.
struct Result {
    let row: Row
    let operations: UInt64
    let samples: [qkb_sample_t]

    var times: [Double] { samples.map(\.ns_per_op).sorted() }
    var median: Double { Self.median(times) }
    var minimum: Double { times.first ?? .nan }
    var maximum: Double { times.last ?? .nan }
    /// Interquartile range relative to the median, in percent.
    var iqrPercent: Double {
        let t = times
        guard t.count >= 3 else { return .nan }
        return (Self.quantile(t, 0.75) - Self.quantile(t, 0.25)) / median * 100
    }
    var wakeupsPerOp: Double? { Self.measured(samples.map(\.wakeups_per_op)) }
    var futilePerOp: Double? { Self.measured(samples.map(\.futile_per_op)) }
    /// The writers' wait from the call to the start of the work: the median over the
    /// repetitions of each one's 99th percentile, and the longest wait of all repetitions.
    var writeWaitP99: Double? { Self.measured(samples.map(\.write_wait_p99_ns)) }
    var writeWaitMax: Double? {
        let values = samples.map(\.write_wait_max_ns)
        return Self.measured(values) == nil ? nil : values.max()
    }

    static func measured(_ values: [Double]) -> Double? {
        values.allSatisfy({ $0 >= 0 }) && !values.isEmpty ? median(values.sorted()) : nil
    }

    static func median(_ sorted: [Double]) -> Double { quantile(sorted, 0.5) }

    static func quantile(_ sorted: [Double], _ q: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let position = q * Double(sorted.count - 1)
        let lower = Int(position)
        let upper = min(lower + 1, sorted.count - 1)
        return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - Double(lower))
    }
}

/// A QueueKit row against an anchor row of the same workload, and the target that applies.
struct Ratio {
    let workload: String
    let queueKit: String
    let anchor: String
    /// QueueKit's time divided by the anchor's (or, for `kind == .difference`, QueueKit minus
    /// anchor in ns; for `.count`, the QueueKit value itself; for `.wait`, QueueKit's writers'
    /// p99 wait in ns).
    let value: Double
    let kind: Kind
    let target: Target?

    enum Kind: String { case ratio, difference, count, wait }

    var verdict: String {
        guard let target else { return "" }
        return value <= target.limit ? "met" : "MISSED"
    }
}

/// "At most `limit`" for the ratio (or difference) of a QueueKit row and an anchor row.
struct Target {
    let limit: Double
    /// Where the target comes from, e.g. "DB queue goal".
    let source: String
}
