#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# ThreadSanitizer against the installed, uninstrumented library: Tests/ThreadSanitizer/handoffs.c,
# whose shared data only QueueKit guards, is built with -fsanitize=thread by gcc and by the Swift
# toolchain's clang (where it links) with pkg-config from the install prefix, and run:
#   - as is, it must report no warning at all (no race, no lock-order inversion);
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
run() {
    local compiler=$1 variant=$2 expected=$3 binary log warnings races on_unguarded status=0
    binary=$tmp/handoffs-$(basename "$compiler")-$variant log=$binary.log
    local defines=() extra=()
    [ "$variant" = unguarded ] && defines=(-DUNGUARDED_COUNTER)
    [ "$compiler" = "$toolchain_clang" ] && extra=("${clang_extra[@]}")
    # shellcheck disable=SC2086 # $flags is a list of words
    "$compiler" -O1 -g -Wall -Wextra -Werror -fsanitize=thread "${defines[@]}" "$source_file" $flags \
        -lpthread -Wl,-rpath,"$libdir" "${extra[@]}" -o "$binary"
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0" timeout 300 "$binary" >"$log" 2>&1 || status=$?
    # A report whose stacks (threads' creation aside) show no frame of the program — two accesses
    # or lock acquisitions both made inside libqueuekit.so, by the Swift runtime's first-use
    # metadata instantiation (lock-free caches read through intercepted memcpy/bcmp/strcmp, its
    # own mutexes) — is counted apart and shown, not failed: it is not about the program's data
    # or locks. Every other warning counts.
    read -r internal internal_races < <(python3 - "$log" <<'PY'
import re, sys
blocks = open(sys.argv[1]).read().split("WARNING: ThreadSanitizer: ")[1:]
inside = [b for b in blocks if "handoffs.c" not in re.split(r"\n  (?:Location is|Thread T)", b)[0]]
print(len(inside), sum(1 for b in inside if b.startswith("data race")))
PY
)
    warnings=$(( $(grep -c 'WARNING: ThreadSanitizer:' "$log" || true) - internal ))
    races=$(( $(grep -c 'WARNING: ThreadSanitizer: data race' "$log" || true) - internal_races ))
    on_unguarded=$(grep -c "Location is global 'unguarded'" "$log" || true)
    echo "$(basename "$compiler") $variant: $warnings TSan warnings ($races data races, $on_unguarded on 'unguarded'), exit $status"
    if [ "$internal" -gt 0 ]; then
        echo "NOTE: $internal more report(s) with no frame of the program, all inside libqueuekit.so:"
        grep -E '^    #2 ' "$log" | grep -v handoffs.c | sort | uniq -c | sort -rn | head -4 | cut -c1-160 || true
    fi
    if [ "$status" -ne 0 ] && [ "$status" -ne 66 ]; then
        echo "FAIL: the program failed (not a TSan report):"; tail -20 "$log"; failed=1; return
    fi
    if [ "$warnings" -ne "$expected" ] || [ "$races" -ne "$on_unguarded" ]; then
        echo "FAIL: expected $expected warning(s), each a data race on 'unguarded':"
        sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY/p' "$log" | head -80 || true
        failed=1
    fi
}

for compiler in "${compilers[@]}"; do
    run "$compiler" guarded 0
    run "$compiler" unguarded 1
done
[ $failed -eq 0 ]
