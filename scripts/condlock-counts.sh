#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Instructions per pair of calls (an acquisition and its release) of the condition lock's
# uncontended paths, beside pthread_mutex and a mutex+condvar loop, counted by callgrind
# (independent of the machine's load): Benchmarks/counts/condlock_counts.c against the library
# installed in stage/ (PREFIX=… for another install). Prints one line per kernel.
#   ./scripts/condlock-counts.sh [KERNEL...]
set -euo pipefail
source "$(dirname "$0")/common.sh"
PREFIX=${PREFIX:-$STAGE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang -O2 -g -o "$work/condlock_counts" "$ROOT/Benchmarks/counts/condlock_counts.c" -I"$PREFIX/include" \
    -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -lqueuekit -lpthread
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    kernels=(qk_lock_unlock mutex_lock_unlock qk_lock_when_unlock_with mutex_cond_when_with)
fi
count_per_call "$work/condlock_counts" "${N:-20000}" "${kernels[@]}"
