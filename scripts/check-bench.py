#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""Checks one run of queuekit-bench (the test suite's bench-quick stage); judges no timing.

    check-bench.py OUT_DIR LIBRARY

OUT_DIR holds what the run left: expected.txt (`queuekit-bench --list`), table.txt (its stdout),
results.csv and ratios.csv. LIBRARY is the installed libqueuekit.so.0 the C kernels must call.
Fails when a listed row was not measured or is missing from the table, when a mixed workload
with synchronous writes lacks the writers' wait, when the kernels called another copy of the
library, or when no ratio carries a target.
"""
import csv
import math
import os
import sys

SYNC_WRITERS = ("QueueKit read + write", "pthread_rwlock", "GCD sync + barrier_sync")


def main():
    out, library = sys.argv[1], os.path.realpath(sys.argv[2])
    expected = [line.rstrip("\n") for line in open(os.path.join(out, "expected.txt")) if line.strip()]
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = {f'{r["workload"]} | {r["implementation"]}': r for r in csv.DictReader(f)}
    with open(os.path.join(out, "ratios.csv"), newline="") as f:
        ratios = list(csv.DictReader(f))
    table = open(os.path.join(out, "table.txt")).read()

    def finite(text):
        return bool(text) and math.isfinite(float(text))

    problems = {
        "missing from results.csv": [e for e in expected if e not in rows],
        "without a median": [k for k, r in rows.items() if not finite(r["median_ns"])],
        "missing from the table": [e for e in expected if e.split(" | ")[1] not in table],
        "without the writers' wait": [
            k for k, r in rows.items()
            if r["workload"].startswith("mixed ") and not r["workload"].startswith("mixed 100/0")
            and r["implementation"] in SYNC_WRITERS
            and not (finite(r["write_wait_p99_ns"]) and finite(r["write_wait_max_ns"]))],
    }
    for name, items in problems.items():
        for item in items:
            print(f"bench: row {name}: {item}", file=sys.stderr)
    failed = any(problems.values()) or not expected

    # The kernels print the file the dynamic linker took QueueKit's C API from.
    if os.path.realpath(library) not in {os.path.realpath(word.rstrip("."))
                                         for word in table.split() if word.startswith("/")}:
        print(f"bench: the C kernels did not call {library}", file=sys.stderr)
        failed = True

    targets = [r for r in ratios if r["target"]]
    failed = failed or not targets
    print(f"bench: {len(rows)} of {len(expected)} rows measured, {len(ratios)} ratios, "
          f"{len(targets)} with a target; C kernels on {library}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
