#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
# Instructions per operation of <queuekit.hpp> against the C call it wraps, under callgrind (load
# independent, unlike wall-clock figures on a shared machine). Builds layer_cost.cpp with g++ -O2
# against the library installed in PREFIX (default: the repository's stage/).
#
#   Benchmarks/callgrind/layer_cost.sh [PREFIX]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cd "${1:-$here/../../stage}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$prefix/include" "$here/layer_cost.cpp" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lqueuekit -pthread -o "$work/layer_cost"

# instructions VARIANT N: the total instruction count of one run.
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$work/out" "$work/layer_cost" "$1" "$2" 2>"$work/log" ||
        { cat "$work/log" >&2; return 1; }
    grep -E '^(summary|totals):' "$work/out" | head -1 | awk '{ print $2 }'
}

small=20000 large=120000
printf '%-10s %12s %12s %10s\n' operation "C Ir/op" "C++ Ir/op" "layer"
for op in sync read lock; do
    declare -A per
    for side in c cxx; do
        a=$(instructions "$side-$op" $small)
        b=$(instructions "$side-$op" $large)
        per[$side]=$(( (b - a) / (large - small) ))
    done
    printf '%-10s %12d %12d %+10d\n' "$op" "${per[c]}" "${per[cxx]}" $(( per[cxx] - per[c] ))
done
