#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Instructions per call of the queue's round trips, QueueKit next to libdispatch, counted by
# callgrind (independent of the machine's load; --fair-sched=yes, so that the worker running the
# async blocks takes turns with the submitter as on a real machine and the async count is
# stable): Benchmarks/counts/queue_counts.c against the library installed in stage/ (PREFIX=…
# for another install). Prints one line per kernel.
#   ./scripts/queue-counts.sh [KERNEL...]
set -euo pipefail
source "$(dirname "$0")/common.sh"
PREFIX=${PREFIX:-$STAGE_DIR}
N=${N:-20000}
dispatch_include=$(dirname "$(readlink -f "$(command -v swiftc)")")/../lib/swift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang -O2 -g -o "$work/queue_counts" "$ROOT/Benchmarks/counts/queue_counts.c" -I"$PREFIX/include" \
    -I"$dispatch_include" -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -lqueuekit \
    -L"$dispatch_include/linux" -Wl,-rpath,"$dispatch_include/linux" -ldispatch -lpthread
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    kernels=(qk_sync_serial gcd_sync_serial qk_sync_concurrent gcd_sync_concurrent qk_barrier_sync
        gcd_barrier_sync qk_perform_outside qk_perform_inline direct_call qk_async gcd_async)
fi
count_per_call "$work/queue_counts" "$N" "${kernels[@]}"
