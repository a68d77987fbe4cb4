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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_counts condlock_counts "$work"
kernels=("${@:-qk_lock_unlock}")
[ $# -gt 0 ] || kernels+=(mutex_lock_unlock qk_lock_when_unlock_with mutex_cond_when_with)
count_per_call "$work/condlock_counts" "${N:-20000}" "${kernels[@]}"
