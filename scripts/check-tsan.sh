#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# ThreadSanitizer against the installed, uninstrumented library: Tests/ThreadSanitizer/handoffs.c,
# whose shared data only QueueKit guards, is built with -fsanitize=thread by gcc and by the Swift
# toolchain's clang (where it links) with pkg-config from the install prefix, and run:
#   - as is, it must report no warning at all (no race, no lock-order inversion), also none whose
#     stacks lie wholly inside libqueuekit.so: it runs TSAN_RUNS times (10 by default), since
#     first-use paths of the library's Swift runtime race only now and then;
#   - with -DUNGUARDED_COUNTER it must still report the one deliberate race, on `unguarded`, and
#     nothing else.
#
#   check-tsan.sh PREFIX
set -euo pipefail
source "$(dirname "$0")/common.sh"

prefix=$(cd "$1" && pwd)
source_file=$ROOT/Tests/ThreadSanitizer/handoffs.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs queuekit)
libdir=$(pkg-config --variable=libdir queuekit)
failed=0

# The toolchain's clang links its TSan runtime statically, and that runtime's libdispatch
# interceptors need a libdispatch to bind to: the toolchain's own (QueueKit's copy inside
# libqueuekit.so is private and stays unaffected).
toolchain_bin=$(dirname "$(command -v swiftc)")
toolchain_clang=$toolchain_bin/clang
toolchain_libs=$(cd "$toolchain_bin/../lib/swift/linux" 2>/dev/null && pwd || true)
clang_extra=(-L"$toolchain_libs" -ldispatch -lBlocksRuntime -Wl,-rpath,"$toolchain_libs")
compilers=(gcc)
if [ -x "$toolchain_clang" ] && echo 'int main(void){return 0;}' |
        "$toolchain_clang" -fsanitize=thread -x c - "${clang_extra[@]}" -o "$tmp/probe" 2>/dev/null; then
    compilers+=("$toolchain_clang")
else
    echo "note: the toolchain's clang cannot link -fsanitize=thread programs here; gcc only"
fi

# run COMPILER VARIANT EXPECTED: builds and runs one variant; the number of TSan warnings must be
# EXPECTED, and every data race must be on `unguarded`.
runs=${TSAN_RUNS:-10}

# build COMPILER VARIANT: the program, built as a user would, against the installed library.
build() {
    local compiler=$1 variant=$2 binary defines=() extra=()
    binary=$tmp/handoffs-$(basename "$compiler")-$variant
    [ "$variant" = unguarded ] && defines=(-DUNGUARDED_COUNTER)
    [ "$compiler" = "$toolchain_clang" ] && extra=("${clang_extra[@]}")
    # shellcheck disable=SC2086 # $flags is a list of words
    "$compiler" -O1 -g -Wall -Wextra -Werror -fsanitize=thread "${defines[@]}" "$source_file" $flags \
        -lpthread -Wl,-rpath,"$libdir" "${extra[@]}" -o "$binary"
    echo "$binary"
}

# run BINARY LABEL EXPECTED: one run; every ThreadSanitizer warning counts, the library's own
# included; EXPECTED of them, each a data race on `unguarded`.
run() {
    local binary=$1 label=$2 expected=$3 log=$1.log status=0 warnings races on_unguarded
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0" timeout 300 "$binary" >"$log" 2>&1 || status=$?
    warnings=$(grep -c 'WARNING: ThreadSanitizer:' "$log" || true)
    races=$(grep -c 'WARNING: ThreadSanitizer: data race' "$log" || true)
    on_unguarded=$(grep -c "Location is global 'unguarded'" "$log" || true)
    if [ "$status" -ne 0 ] && [ "$status" -ne 66 ]; then
        echo "FAIL $label: the program failed (not a TSan report):"; tail -20 "$log"; failed=1; return 1
    fi
    if [ "$warnings" -ne "$expected" ] || [ "$races" -ne "$on_unguarded" ]; then
        echo "FAIL $label: $warnings TSan warnings ($races data races, $on_unguarded on 'unguarded'); expected $expected, each a data race on 'unguarded':"
        sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY/p' "$log" | head -80 || true
        failed=1
        return 1
    fi
}

for compiler in "${compilers[@]}"; do
    name=$(basename "$compiler")
    guarded=$(build "$compiler" guarded)
    clean=0
    for i in $(seq 1 "$runs"); do run "$guarded" "$name guarded, run $i" 0 && clean=$((clean + 1)); done
    echo "$name guarded: $clean of $runs runs without a TSan warning"
    unguarded=$(build "$compiler" unguarded)
    run "$unguarded" "$name unguarded" 1 && echo "$name unguarded: exactly the deliberate race on 'unguarded'"
done
[ $failed -eq 0 ]
