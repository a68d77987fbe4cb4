// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Foundation
import QueueKitBenchKernels

/// The tables on stdout and the CSV files.
enum Report {
    // MARK: Ratios

    /// Every QueueKit row against every anchor row of its workload, plus the two derived
    /// figures the targets name: the nested-read overhead over the work alone, and the futile
    /// wake-ups per hand-off of the QueueKit chains.
    static func ratios(_ results: [Result]) -> [Ratio] {
        var ratios: [Ratio] = []
        var workloads: [String] = []
        for result in results where !workloads.contains(result.row.workload) { workloads.append(result.row.workload) }
        for workload in workloads {
            let rows = results.filter { $0.row.workload == workload }
            for qk in rows where qk.row.isQueueKit {
                for anchor in rows where !anchor.row.isQueueKit {
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: anchor.row.impl,
                            value: qk.median / anchor.median, kind: .ratio,
                            target: Catalog.target(workload: workload, queueKit: qk.row.impl, anchor: anchor.row.impl)))
                    if workload == Catalog.startupWorkload {
                        let anchorName = "ns more than the \(anchor.row.impl)"
                        ratios.append(
                            Ratio(
                                workload: workload, queueKit: qk.row.impl, anchor: anchorName,
                                value: qk.median - anchor.median, kind: .difference,
                                target: Catalog.target(workload: workload, queueKit: qk.row.impl, anchor: anchorName)))
                    }
                    if anchor.row.impl == Catalog.directCall {
                        let extra = Catalog.extraOverDirectCall
                        ratios.append(
                            Ratio(
                                workload: workload, queueKit: qk.row.impl, anchor: extra,
                                value: qk.median - anchor.median, kind: .difference,
                                target: Catalog.target(workload: workload, queueKit: qk.row.impl, anchor: extra)
                                    ?? Target(limit: 3, source: "read-mostly DB queue goal")))
                    }
                }
                if workload.hasPrefix("mixed "), let best = bestMixedAnchor(rows) {
                    let anchor = Catalog.bestOfMixedAnchors
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: "\(anchor) (\(best.row.impl))",
                            value: qk.median / best.median, kind: .ratio,
                            target: Catalog.target(workload: workload, queueKit: qk.row.impl, anchor: anchor)))
                }
                if let p99 = qk.writeWaitP99 {
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: Catalog.writersP99, value: p99,
                            kind: .wait,
                            target: Catalog.target(
                                workload: workload, queueKit: qk.row.impl, anchor: Catalog.writersP99)))
                }
                if workload == "ping-pong round (2 threads)", let floor = anchor(Catalog.spinFloor, in: rows) {
                    // The hand-off swings between spinning and parking from run to run: the 90th
                    // percentile shows the slow case the median hides.
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: Catalog.spinFloorP90,
                            value: Result.quantile(qk.times, 0.9) / Result.quantile(floor.times, 0.9), kind: .ratio,
                            target: Catalog.target(
                                workload: workload, queueKit: qk.row.impl, anchor: Catalog.spinFloorP90)))
                }
                if workload == Catalog.testChain, let futile = qk.futilePerOp {
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: "futile wake-ups per hand-off",
                            value: futile, kind: .count, target: Target(limit: 0, source: "condition lock goal")))
                }
                if workload.hasPrefix("chain of"), let futile = qk.futilePerOp {
                    ratios.append(
                        Ratio(
                            workload: workload, queueKit: qk.row.impl, anchor: "futile wake-ups per hand-off",
                            value: futile, kind: .count,
                            target: workload == "chain of 32 threads"
                                ? Target(limit: 0.05, source: "condition lock goal") : nil))
                }
            }
        }
        return ratios
    }

    /// The row of `impl` among `rows`, if any.
    static func anchor(_ impl: String, in rows: [Result]) -> Result? { rows.first { $0.row.impl == impl } }

    /// The fastest of a mixed workload's pthread_rwlock and GCD rows.
    static func bestMixedAnchor(_ rows: [Result]) -> Result? {
        rows.filter { Catalog.mixedAnchors.contains($0.row.impl) }.min { $0.median < $1.median }
    }

    // MARK: stdout

    static func printTables(_ results: [Result], _ ratios: [Ratio], options: Options) {
        print(
            "QueueKit benchmark — \(options.quick ? "quick" : "full") mode, \(options.reps) repetitions per row, "
                + "median (min–max, IQR %)")
        print(
            "\(ProcessInfo.processInfo.activeProcessorCount) CPUs; other processes may share them: "
                + "medians over interleaved repetitions.")
        print(FoundationAnchors.note)
        print(
            "QueueKit's C rows call the installed library from C kernels, as C programs do: "
                + (qkb_queuekit_library().map { String(cString: $0) } ?? "(not found)") + ".")
        print(
            "Its Swift-API rows use the QueueKit module. Writers' wait: from the call to the start of the "
                + "write's work (p99: median over repetitions; max: over all of them).")
        print(
            "The process starts a thread first: glibc's pthread_mutex skips its atomics while a process "
                + "has only ever had one thread, which no program needing a lock is.")
        var groups: [String] = []
        for result in results where !groups.contains(result.row.group) { groups.append(result.row.group) }
        for group in groups {
            print("\n## \(group)\n")
            // The optional columns appear in the groups that measure them.
            let members = results.filter { $0.row.group == group }
            let optional: [(title: String, value: (Result) -> String?)] = [
                ("wake-ups/op", { $0.wakeupsPerOp.map { String(format: "%.3f", $0) } }),
                ("futile/op", { $0.futilePerOp.map { String(format: "%.3f", $0) } }),
                ("writers' p99 wait", { $0.writeWaitP99.map(time) }),
                ("writers' max wait", { $0.writeWaitMax.map(time) }),
            ].filter { column in members.contains { column.value($0) != nil } }
            var table = [["workload", "implementation", "median", "min–max", "IQR %"] + optional.map(\.title)]
            var last = ""
            for result in members {
                let row = result.row
                table.append(
                    [
                        row.workload == last ? "" : row.workload,
                        row.impl,
                        "\(time(result.median))/\(row.unit)",
                        "\(time(result.minimum))–\(time(result.maximum))",
                        result.iqrPercent.isNaN ? "-" : String(format: "%.0f", result.iqrPercent),
                    ] + optional.map { $0.value(result) ?? "-" })
                last = row.workload
            }
            printTable(table)
        }
        print("\n## QueueKit / anchor (time ratios: below 1 means QueueKit is faster)\n")
        var table = [["workload", "QueueKit", "anchor", "value", "target", "verdict"]]
        for ratio in ratios {
            table.append([
                ratio.workload, ratio.queueKit, ratio.anchor, format(ratio),
                ratio.target.map { "≤ \(formatLimit($0.limit, ratio.kind)) (\($0.source))" } ?? "",
                ratio.verdict,
            ])
        }
        printTable(table)
        let measured = ratios.filter { $0.target != nil }
        let met = measured.filter { $0.verdict == "met" }.count
        print("\ntargets: \(met) of \(measured.count) met")
    }

    static func format(_ ratio: Ratio) -> String {
        switch ratio.kind {
        case .ratio: return String(format: "%.2f×", ratio.value)
        case .difference: return String(format: "%+.1f ns", ratio.value)
        case .count: return String(format: "%.3f", ratio.value)
        case .wait: return time(ratio.value)
        }
    }

    static func formatLimit(_ limit: Double, _ kind: Ratio.Kind) -> String {
        switch kind {
        case .ratio: return String(format: "%g×", limit)
        case .difference: return String(format: "%g ns", limit)
        case .count: return String(format: "%g", limit)
        case .wait: return time(limit)
        }
    }

    /// A duration in nanoseconds, in the unit that suits it.
    static func time(_ ns: Double) -> String {
        if ns < 1_000 { return String(format: ns < 10 ? "%.2f ns" : "%.1f ns", ns) }
        if ns < 1_000_000 { return String(format: "%.2f µs", ns / 1_000) }
        return String(format: "%.2f ms", ns / 1_000_000)
    }

    static func printTable(_ table: [[String]]) {
        var widths = Array(repeating: 0, count: table[0].count)
        for line in table { for (i, cell) in line.enumerated() { widths[i] = max(widths[i], cell.count) } }
        for (n, line) in table.enumerated() {
            let cells = line.enumerated().map { i, cell in cell + String(repeating: " ", count: widths[i] - cell.count)
            }
            print("| " + cells.joined(separator: " | ") + " |")
            if n == 0 { print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|") }
        }
    }

    // MARK: CSV

    static func writeCSV(_ results: [Result], _ ratios: [Ratio], to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var lines = [
            "group,workload,implementation,role,unit,operations,repetitions,median_ns,min_ns,max_ns,iqr_percent,wakeups_per_op,futile_per_op,write_wait_p99_ns,write_wait_max_ns"
        ]
        for result in results {
            let row = result.row
            lines.append(
                [
                    row.group, row.workload, row.impl, row.isQueueKit ? "queuekit" : "anchor", row.unit,
                    "\(result.operations)", "\(result.samples.count)",
                    number(result.median), number(result.minimum), number(result.maximum), number(result.iqrPercent),
                    result.wakeupsPerOp.map(number) ?? "", result.futilePerOp.map(number) ?? "",
                    result.writeWaitP99.map(number) ?? "", result.writeWaitMax.map(number) ?? "",
                ].map(field).joined(separator: ","))
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: "\(directory)/results.csv", atomically: true, encoding: .utf8)

        lines = ["workload,queuekit,anchor,kind,value,target,target_source,verdict"]
        for ratio in ratios {
            lines.append(
                [
                    ratio.workload, ratio.queueKit, ratio.anchor, ratio.kind.rawValue, number(ratio.value),
                    ratio.target.map { number($0.limit) } ?? "", ratio.target?.source ?? "", ratio.verdict,
                ].map(field).joined(separator: ","))
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: "\(directory)/ratios.csv", atomically: true, encoding: .utf8)
    }

    static func number(_ value: Double) -> String { value.isNaN ? "" : String(format: "%.6g", value) }

    static func field(_ text: String) -> String {
        text.contains(",") || text.contains("\"")
            ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
    }
}
