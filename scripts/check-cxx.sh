#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
# The C++ suite (Tests/Cxx) against the library installed in PREFIX, once per configuration:
# g++ and clang++ (the Swift toolchain's, which uses the system's libstdc++) at C++17 and C++20,
# -fno-exceptions with both, clang's -Wthread-safety (with the misuses it must reject), and the
# programs under ASan+UBSan and under TSan (gcc). Every configuration builds in
# build-cxx/<name> and runs its ctest; the script fails when any does.
#
#   scripts/check-cxx.sh PREFIX [NAME...]   (NAME: only those configurations)
set -euo pipefail
source "$(dirname "$0")/common.sh"
prefix=$(cd "${1:?usage: check-cxx.sh PREFIX [NAME...]}" && pwd)
shift
only=("$@")

clangxx=/opt/swift/usr/bin/clang++
command -v "$clangxx" >/dev/null || clangxx=$(command -v clang++ || true)

# name compiler standard flavour
configurations=(
    "gcc-17 g++ 17 -"
    "gcc-20 g++ 20 -"
    "gcc-17-noexceptions g++ 17 noexceptions"
    "gcc-17-asan-ubsan g++ 17 address"
    "gcc-17-tsan g++ 17 thread"
)
if [ -n "$clangxx" ]; then
    configurations+=("clang-17 $clangxx 17 -" "clang-20 $clangxx 20 -" "clang-20-noexceptions $clangxx 20 noexceptions")
else
    echo "note: no clang++ found; the clang configurations (and -Wthread-safety) are skipped" >&2
fi

failed=()
for configuration in "${configurations[@]}"; do
    read -r name compiler standard flavour <<<"$configuration"
    if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qxF "$name"; then continue; fi
    [ "$flavour" = - ] && flavour=
    dir=$ROOT/build-cxx/$name
    echo "--- $name"
    if quietly cmake -G Ninja -S "$ROOT/Tests/Cxx" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
            -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_CXX_STANDARD="$standard" -DQK_CXX_FLAVOR="$flavour" &&
        quietly cmake --build "$dir" &&
        ctest --test-dir "$dir" --output-on-failure; then
        :
    else
        failed+=("$name")
    fi
done
[ ${#failed[@]} -eq 0 ] || { echo "failed C++ configurations: ${failed[*]}" >&2; exit 1; }
echo "every C++ configuration passed"
