#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
"""Writes the benchmark tables of Benchmarks/README.md from queuekit-bench's CSV output.

queuekit-bench writes results.csv (one line per measured row) and ratios.csv (every QueueKit /
anchor ratio, with its target and verdict) into its --out directory. This script turns them into
Markdown tables and replaces what stands between the markers

    <!-- BEGIN GENERATED: scripts/bench-tables.py -->
    <!-- END GENERATED: scripts/bench-tables.py -->

in the README, so the published numbers are always one run's output, never edited by hand.

    bench-tables.py [RESULTS_DIR] [README]     defaults: bench-results Benchmarks/README.md
    bench-tables.py --verify RESULTS_DIR       fail unless the README's tables are RESULTS_DIR's

RESULTS_DIR holds results.csv and ratios.csv (or benchmark-results.csv and benchmark-ratios.csv,
the names of the copies kept in docs/).
"""
import csv
import os
import sys

BEGIN = "<!-- BEGIN GENERATED: scripts/bench-tables.py -->"
END = "<!-- END GENERATED: scripts/bench-tables.py -->"

# Optional columns of results.csv: shown in a group only when one of its rows has a value.
OPTIONAL = [
    ("wakeups_per_op", "wake-ups/op", "count"),
    ("futile_per_op", "futile/op", "count"),
    ("write_wait_p99_ns", "writers' p99 wait", "time"),
    ("write_wait_max_ns", "writers' max wait", "time"),
]


def read(directory, name):
    for candidate in (name + ".csv", "benchmark-" + name + ".csv"):
        path = os.path.join(directory, candidate)
        if os.path.exists(path):
            with open(path, newline="", encoding="utf-8") as f:
                return list(csv.DictReader(f))
    raise SystemExit(f"bench-tables: no {name}.csv in {directory}")


def duration(ns):
    ns = float(ns)
    for limit, unit, scale in ((1e3, "ns", 1), (1e6, "µs", 1e3), (1e9, "ms", 1e6)):
        if ns < limit:
            value = ns / scale
            return (f"{value:.3g}" if value < 100 else f"{value:.0f}") + " " + unit
    return f"{ns / 1e9:.3g} s"


def cell(value, kind):
    if value in (None, ""):
        return "-"
    return duration(value) if kind == "time" else f"{float(value):.3f}"


def results_tables(results):
    out = []
    groups = list(dict.fromkeys(r["group"] for r in results))
    for group in groups:
        rows = [r for r in results if r["group"] == group]
        optional = [o for o in OPTIONAL if any(r.get(o[0]) for r in rows)]
        header = ["workload", "implementation", "median", "min–max", "IQR %"] + [o[1] for o in optional]
        out += [f"### {group}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        previous = None
        for r in rows:
            workload = r["workload"] if r["workload"] != previous else ""
            previous = r["workload"]
            cells = [workload, r["implementation"], f"{duration(r['median_ns'])}/{r['unit']}",
                     f"{duration(r['min_ns'])}–{duration(r['max_ns'])}", f"{float(r['iqr_percent']):.0f}"]
            cells += [cell(r.get(key), kind) for key, _, kind in optional]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return out


def ratio_value(r):
    value = float(r["value"])
    if r["kind"] == "ratio":
        return f"{value:.2f}×"
    if r["kind"] == "difference":
        return f"+{value:.1f} ns"
    if r["kind"] == "wait":
        return duration(value)
    return f"{value:.3f}"


def target_text(r):
    if not r.get("target"):
        return ""
    limit = float(r["target"])
    if r["kind"] == "ratio":
        return f"≤ {limit:g}×"
    if r["kind"] == "wait":
        return f"≤ {duration(limit)}"
    if r["kind"] == "difference":
        return f"≤ +{limit:g} ns"
    return f"≤ {limit:g}"


def targets_table(ratios):
    targeted = [r for r in ratios if r.get("target")]
    met = sum(1 for r in targeted if r.get("verdict") == "met")
    out = ["### Targets", "",
           f"{met} of {len(targeted)} targets met in this run (time ratios QueueKit / anchor: below 1 "
           "QueueKit is faster).", "",
           "| workload | QueueKit | anchor | value | target | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for r in targeted:
        cells = [r["workload"], r["queuekit"], r["anchor"], ratio_value(r), target_text(r), r.get("verdict", "")]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out.append("")
    return out


def render(directory):
    results, ratios = read(directory, "results"), read(directory, "ratios")
    if not results:
        raise SystemExit("bench-tables: results.csv has no rows")
    return targets_table(ratios) + results_tables(results)


def main():
    args = sys.argv[1:]
    verify = args[:1] == ["--verify"]
    args = args[1:] if verify else args
    directory = args[0] if args else "bench-results"
    readme = args[1] if len(args) > 1 else os.path.join(os.path.dirname(__file__), "..", "Benchmarks", "README.md")
    text = open(readme, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"bench-tables: {readme} lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    body = "\n".join(render(directory))
    if verify:
        if current != "\n\n" + body + "\n":
            raise SystemExit(f"bench-tables: the tables of {readme} are not those of {directory}: "
                             f"run scripts/bench-tables.py {directory}")
        print(f"bench-tables: the tables of {os.path.normpath(readme)} are those of {directory}")
        return
    with open(readme, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + "\n\n" + body + "\n" + END + tail)
    print(f"bench-tables: tables of {directory} written into {readme}")


if __name__ == "__main__":
    main()
