#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Instructions per call of the DB queue's reads and writes, counted by callgrind (independent of
# the machine's load): Benchmarks/counts/dbqueue_counts.c against the library installed in stage/
# (PREFIX=… for another install). Prints one line per kernel; with BREAKDOWN=1 also the
# inclusive cost of the queue's functions per call (for the mixed kernels: per operation), and
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
clang -O2 -g -o "$work/dbqueue_counts" "$ROOT/Benchmarks/counts/dbqueue_counts.c" -I"$PREFIX/include" \
    -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -lqueuekit -lpthread
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    kernels=(read read_counted read_nested direct_call write write_then_read mixed_1 mixed_4)
fi
cache=()
if [ "${CACHE:-0}" = 1 ]; then cache=(--cache-sim=yes); fi
for kernel in "${kernels[@]}"; do
    valgrind --tool=callgrind "${cache[@]}" --toggle-collect=measure --toggle-collect=measure_thread --callgrind-out-file="$work/$kernel.out" \
        "$work/dbqueue_counts" "$kernel" "$N" "$WRITES" >/dev/null 2>&1
    summary=$(callgrind_annotate "$work/$kernel.out" 2>/dev/null | awk '/PROGRAM TOTALS/')
    total=$(awk '{ gsub(",", "", $1); print $1 }' <<<"$summary")
    awk -v k="$kernel" -v t="$total" -v n="$N" 'BEGIN { printf "%-18s %8.1f instructions per call\n", k, t / n }'
    if [ "${CACHE:-0}" = 1 ]; then echo "  totals (Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw): $summary"; fi
    if [ "${BREAKDOWN:-0}" = 1 ]; then
        callgrind_annotate --inclusive=yes --threshold=100 "$work/$kernel.out" 2>/dev/null |
            awk -v n="$N" '/\$s|qk_dbqueue|qkshim|clock_gettime|sched_yield|futex/ && $1 ~ /^[0-9,]+$/ {
                c = $1; gsub(",", "", c); if (c / n >= 0.5) printf "    %8.1f  %s\n", c / n, substr($0, index($0, $2), 160) }' |
            head -"${TOP:-40}"
    fi
done
