#!/usr/bin/env bash
# The C side of QueueKit under the memory checkers: every C example (examples/*.c) and every
# reliability program (Tests/Reliability/*.c) against the CMake-built libqueuekit.so.
#
#   scripts/sanitizers.sh asan       AddressSanitizer + UBSan (toolchain clang), leak detection on
#   scripts/sanitizers.sh valgrind   valgrind memcheck: no invalid access, no definitely-lost bytes
#
# The library itself is Swift and is not instrumented: ASan/UBSan check the C callers and every
# allocation (malloc is intercepted process-wide); valgrind also checks the library's own reads
# and writes. Suppressions, each with its reason, are in Tests/Reliability/{lsan,valgrind}.supp:
# only allocations inside the static Swift runtime/libdispatch may be listed there.
# The programs run at CI sizes here; see README ("Reliability") for the long runs.
set -euo pipefail
source "$(dirname "$0")/common.sh"

mode=${1:-asan}
OUT=$ROOT/build-sanitizers/$mode
RELIABILITY=$ROOT/Tests/Reliability
[ -e "$BUILD_DIR/libqueuekit.so" ] || cmake_build

shopt -s nullglob
PROGRAMS=("$ROOT"/examples/*.c "$RELIABILITY"/*.c)
shopt -u nullglob

# build COMPILER FLAGS...: each program into $OUT, linked against the CMake-built library.
build() {
    local compiler=$1 source name
    shift
    rm -rf "$OUT" && mkdir -p "$OUT"
    for source in "${PROGRAMS[@]}"; do
        name=$(basename "$source" .c)
        "$compiler" -std=c11 -g -O1 -Wall -Wextra "$@" -I "$ROOT/include" "$source" \
            -L "$BUILD_DIR" -lqueuekit -Wl,--as-needed -lbsd -lsqlite3 -lm -lpthread \
            -Wl,-rpath,"$BUILD_DIR" -o "$OUT/$name"
    done
    echo "built ${#PROGRAMS[@]} programs with $(basename "$compiler") $* into $OUT"
}

# The arguments each program runs with at CI size (examples take none).
arguments_of() {
    case $1 in
        torture) echo "--threads 4 --trees ${TORTURE_TREES:-1500} --unordered ${TORTURE_UNORDERED:-1000}" ;;
        soak) echo "--seconds ${SOAK_SECONDS:-3}" ;;
        misuse) [ "$mode" = valgrind ] && echo "--no-abort-tests" || true ;;
        *) ;;
    esac
}

# run WRAPPER...: runs every program (under WRAPPER, if any); fails if any fails.
run_all() {
    local source name failed=0 args
    for source in "${PROGRAMS[@]}"; do
        name=$(basename "$source" .c)
        args=$(arguments_of "$name")
        if [ "$mode" = valgrind ]; then
            case $name in torture) args="--threads 3 --trees 100 --unordered 100" ;; soak) args="--seconds 2" ;; esac
        fi
        echo "==> $name $args"
        # shellcheck disable=SC2086 # $args is a list of words
        if ! timeout 300 "$@" "$OUT/$name" $args; then
            echo "FAILED: $name" >&2
            failed=$((failed + 1))
        fi
    done
    [ $failed -eq 0 ]
}

case $mode in
    asan)
        clang=$(dirname "$(command -v swiftc)")/clang
        build "$clang" -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fuse-ld=lld
        export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
        export LSAN_OPTIONS=suppressions=$RELIABILITY/lsan.supp:print_suppressions=0
        export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        run_all
        ;;
    valgrind)
        build gcc
        run_all valgrind -q --error-exitcode=1 --leak-check=full --show-leak-kinds=definite \
            --errors-for-leak-kinds=definite --suppressions="$RELIABILITY/valgrind.supp"
        ;;
    *)
        echo "usage: $0 asan|valgrind" >&2
        exit 2
        ;;
esac
