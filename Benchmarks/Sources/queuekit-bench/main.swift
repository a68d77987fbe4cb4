// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// queuekit-bench: QueueKit side by side with its anchors, in one process.
//
//   (in Benchmarks/, after installing the CMake-built library into ../stage)
//   swift build -c release && .build/release/queuekit-bench [--quick] [--reps N] [--out DIR]
//                                                          [--filter TEXT] [--list]
//
// Prints a progress line on stderr, the tables on stdout, and writes DIR/results.csv (one line per
// row) and DIR/ratios.csv (QueueKit / anchor, with the targets that apply). scripts/chart.py
// turns them into a PNG. Numbers are medians over repetitions; the machine is shared, so the
// spread (min–max, IQR) is printed next to every median.
import Foundation
import QueueKitBenchKernels

struct Options {
    var quick = false
    var repetitions: Int?
    var outputDirectory = "bench-results"
    var filter: String?
    var list = false

    init(_ arguments: [String]) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--quick": quick = true
            case "--reps": repetitions = iterator.next().flatMap(Int.init).map { max(1, $0) }
            case "--out": outputDirectory = iterator.next() ?? outputDirectory
            case "--filter": filter = iterator.next()
            case "--list": list = true
            case "-h", "--help":
                print("usage: queuekit-bench [--quick] [--reps N] [--out DIR] [--filter TEXT] [--list]")
                exit(0)
            default:
                FileHandle.standardError.write("queuekit-bench: unknown argument \(argument)\n".data(using: .utf8)!)
                exit(2)
            }
        }
    }

    var reps: Int { repetitions ?? (quick ? 3 : 7) }
    func operations(_ row: Row) -> UInt64 { max(1, quick ? row.operations / 10 : row.operations) }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
var rows = Catalog.rows()
if let filter = options.filter {
    rows = rows.filter { "\($0.workload) \($0.impl)".localizedCaseInsensitiveContains(filter) }
}
if options.list {
    for row in rows { print("\(row.workload) | \(row.impl)") }
    exit(0)
}

// glibc skips the atomic instructions of pthread_mutex_lock/unlock while the process has never had
// a second thread (a single-threaded fast path), which would make the mutex anchor three times
// cheaper than in any program that needs a lock. One short-lived thread ends that for good.
qkb_become_multithreaded()

#if DEBUG
    Progress.note("warning: a debug build; the numbers mean little (use swift build -c release)")
#endif

// Workloads in table order, each with its rows; the rows of a workload are interleaved within
// every repetition so that a burst of load from other processes hits all of them alike.
var workloads: [(name: String, rows: [Row])] = []
for row in rows {
    if let index = workloads.firstIndex(where: { $0.name == row.workload }) {
        workloads[index].rows.append(row)
    } else {
        workloads.append((row.workload, [row]))
    }
}

let started = Date()
var results: [Result] = []
for (index, workload) in workloads.enumerated() {
    var samples = Array(repeating: [qkb_sample_t](), count: workload.rows.count)
    for (r, row) in workload.rows.enumerated() { // warm-up: caches, thread pools, lazy globals
        Progress.show(
            "[\(index + 1)/\(workloads.count)] \(workload.name): warm-up \(r + 1)/\(workload.rows.count)",
            step: "[\(index + 1)/\(workloads.count)] \(workload.name)")
        _ = row.run(max(1, options.operations(row) / 10))
    }
    for rep in 1...options.reps {
        for (r, row) in workload.rows.enumerated() {
            Progress.show(
                "[\(index + 1)/\(workloads.count)] \(workload.name): rep \(rep)/\(options.reps), \(row.impl)",
                step: "[\(index + 1)/\(workloads.count)] \(workload.name)")
            samples[r].append(row.run(options.operations(row)))
        }
    }
    for (r, row) in workload.rows.enumerated() {
        results.append(Result(row: row, operations: options.operations(row), samples: samples[r]))
    }
}
Progress.done("measured \(results.count) rows in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")

let ratios = Report.ratios(results)
Report.printTables(results, ratios, options: options)
do {
    try Report.writeCSV(results, ratios, to: options.outputDirectory)
    Progress.note("wrote \(options.outputDirectory)/results.csv and \(options.outputDirectory)/ratios.csv")
} catch {
    Progress.note("queuekit-bench: cannot write \(options.outputDirectory): \(error)")
    exit(1)
}
