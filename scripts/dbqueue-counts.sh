#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Instructions per call of the DB queue's reads and writes, counted by callgrind (independent of
# the machine's load): Benchmarks/counts/dbqueue_counts.c against the library installed in stage/
# (PREFIX=… for another install). Prints one line per kernel; with BREAKDOWN=1 also the
# inclusive cost of the library's functions per iteration and per call, and
# with CACHE=1 the simulated cache misses (one shared cache: line transfers between CPUs are not
# modelled).
#   ./scripts/dbqueue-counts.sh [KERNEL...]        (mixed kernels: WRITES=percent, default 10)
set -euo pipefail
source "$(dirname "$0")/common.sh"
PREFIX=${PREFIX:-$STAGE_DIR}
N=${N:-20000}
WRITES=${WRITES:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_counts dbqueue_counts "$work"
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    kernels=(read read_counted read_nested direct_call write write_then_read mixed_1 mixed_4)
fi
cache=()
if [ "${CACHE:-0}" = 1 ]; then cache=(--cache-sim=yes); fi
for kernel in "${kernels[@]}"; do
    # Counters zeroed as measure() starts and dumped as it returns (the part file .1): exactly
    # the measured calls, call counts included (a toggle would count the warm-up's calls too).
    valgrind --tool=callgrind "${cache[@]}" --zero-before=measure --dump-after=measure \
        --callgrind-out-file="$work/$kernel.all" "$work/dbqueue_counts" "$kernel" "$N" "$WRITES" >/dev/null 2>&1
    mv "$work/$kernel.all.1" "$work/$kernel.out"
    summary=$(callgrind_annotate "$work/$kernel.out" 2>/dev/null | awk '/PROGRAM TOTALS/')
    total=$(awk '{ gsub(",", "", $1); print $1 }' <<<"$summary")
    awk -v k="$kernel" -v t="$total" -v n="$N" 'BEGIN { printf "%-18s %8.1f instructions per call\n", k, t / n }'
    if [ "${CACHE:-0}" = 1 ]; then echo "  totals (Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw): $summary"; fi
    if [ "${BREAKDOWN:-0}" = 1 ]; then
        # Inclusive instructions per kernel iteration and per call, with the number of calls, of
        # the library's functions (demangled), from callgrind's caller tree.
        callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$work/$kernel.out" 2>/dev/null |
            python3 -c '
import re, subprocess, sys
n = int(sys.argv[1]); top = int(sys.argv[2]); rows = []
for block in sys.stdin.read().split("\n\n"):
    calls, name, cost = 0, None, 0
    for line in block.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+([<*])\s+(.*)", line)
        if not m: continue
        value = int(m.group(1).replace(",", ""))
        if m.group(2) == "<":
            c = re.search(r"\(([\d,]+)x\)", m.group(3))
            calls += int(c.group(1).replace(",", "")) if c else 0
        else:
            name, cost = m.group(3).split(" [")[0].split(":", 1)[-1], value
    if name and re.search(r"qk_|QueueKit|qkshim|clock_gettime", name): rows.append((cost, calls, name))
rows.sort(key=lambda r: -r[0])
rows = rows[:top]
names = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(r[2] for r in rows),
                       capture_output=True, text=True).stdout.splitlines()
for (cost, calls, _), name in zip(rows, names):
    print(f"    {cost / n:8.1f} per iteration {calls:9d} calls {cost / calls if calls else 0:8.1f} per call  {name[:100]}")
' "$N" "${TOP:-12}"
    fi
done
