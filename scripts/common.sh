# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Shared by the scripts (sourced, not run): the steps of building, installing and
# consuming QueueKit. Every function works from the repository root and fails on any error.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$ROOT/build                         # the CMake build of libqueuekit.so, its checks and programs
ASAN_BUILD_DIR=$ROOT/build-asan               # the same with the C programs under ASan + UBSan
STAGE_DIR=$ROOT/stage                         # the local install prefix
PKGCONFIG_BUILD_DIR=$ROOT/build-pkgconfig     # examples/consumer finding QueueKit with pkg-config
CONSUMER_BUILD_DIR=$ROOT/build-consumer       # examples/consumer finding QueueKit with find_package
BENCH_DIR=$ROOT/Benchmarks                    # the benchmark package (linked to $STAGE_DIR)
cd "$ROOT"

# The Swift toolchain of this kind of machine, when it is not on PATH already.
if ! command -v swiftc >/dev/null && [ -x /opt/swift/usr/bin/swiftc ]; then
    export PATH=/opt/swift/usr/bin:$PATH
fi

# Runs a command silently, showing its output only when it fails.
quietly() {
    local log status=0
    log=$(mktemp)
    "$@" >"$log" 2>&1 || status=$?
    if [ $status -ne 0 ]; then
        cat "$log" >&2
        echo "failed ($status): $*" >&2
    fi
    rm -f "$log"
    return $status
}

# Whether the Debian package $1 is installed.
package_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# need_packages PACKAGE...: fails, naming them, when Debian packages a step needs are missing
# (scripts/bootstrap.sh installs them). On other systems it trusts the caller.
need_packages() {
    command -v dpkg-query >/dev/null || return 0
    local missing=() package
    for package in "$@"; do
        package_installed "$package" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "missing packages: ${missing[*]} (run scripts/bootstrap.sh)" >&2
    return 1
}

# cmake_build [DIR [CMAKE_ARGS...]]: configures (Release) and builds libqueuekit.so, its checks,
# the reliability programs and the examples in DIR (default build/).
cmake_build() {
    local dir=${1:-$BUILD_DIR}
    shift $(($# > 0 ? 1 : 0))
    quietly cmake -G Ninja -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" || return
    cmake --build "$dir"
}

# Installs into stage/ (library, header, queuekit.pc, CMake package), replacing what was there.
install_stage() {
    rm -rf "$STAGE_DIR"
    quietly cmake --install "$BUILD_DIR" --prefix "$STAGE_DIR"
    echo "installed to $STAGE_DIR"
}

# build_consumer HOW DIR: builds every example with examples/consumer, an outside CMake project,
# against the library installed in stage/, found the way HOW says (find_package or pkg-config).
build_consumer() {
    local how=$1 dir=$2
    rm -rf "$dir"
    PKG_CONFIG_PATH=$STAGE_DIR/lib/pkgconfig quietly cmake -G Ninja -S "$ROOT/examples/consumer" -B "$dir" \
        -DQK_CONSUME="$how" -DCMAKE_PREFIX_PATH="$STAGE_DIR" || return
    quietly cmake --build "$dir" || return
    echo "built the examples with examples/consumer ($how) into $dir"
}

# memcheck DIR: the C programs of build DIR under valgrind (ctest's memcheck); shows the valgrind
# logs of what failed.
memcheck() {
    local dir=${1:-$BUILD_DIR} status=0
    ctest --test-dir "$dir" -T memcheck -L program --output-on-failure || status=$?
    if [ $status -ne 0 ]; then
        grep -l . "$dir"/Testing/Temporary/MemoryChecker.*.log 2>/dev/null | xargs -r tail -n 40 >&2
    fi
    return $status
}

# Builds the benchmark package (release, linked to the library in stage/) and runs its quick mode
# once into a scratch directory; scripts/check-bench.py then checks that every row it lists was
# measured with its columns, through stage/'s library. No timing is judged: the numbers are for
# people (Benchmarks/README.md), not for tests.
bench_quick() {
    local out status=0 bench=$BENCH_DIR/.build/release/queuekit-bench
    out=$(mktemp -d)
    # SwiftPM plans a path dependency's sources once and keeps that plan (release.yaml) even when
    # files are added to the library later: drop it so the build replans (about a second).
    rm -f "$BENCH_DIR/.build/release.yaml"
    QUEUEKIT_PREFIX=$STAGE_DIR quietly swift build -c release --package-path "$BENCH_DIR"
    ldd "$bench" | grep -F libqueuekit.so
    "$bench" --list >"$out/expected.txt"
    "$bench" --quick --out "$out" >"$out/table.txt" 2>"$out/progress.txt" || status=$?
    if [ $status -eq 0 ]; then
        python3 "$ROOT/scripts/check-bench.py" "$out" "$STAGE_DIR/lib/libqueuekit.so.0" || status=$?
    else
        cat "$out/progress.txt" >&2
    fi
    rm -rf "$out"
    return $status
}

# The line coverage of Sources/ below which the coverage stage fails, in percent (measured: 89.3 %
# of the Swift sources' lines; the C shim is not instrumented).
COVERAGE_FLOOR=${COVERAGE_FLOOR:-88}

# coverage_report: prints the line coverage of Sources/ measured by the last
# `swift test --enable-code-coverage` (the swift-test stage), per file and in total, from
# llvm-cov; fails when the total is below COVERAGE_FLOOR.
coverage_report() {
    local bin profdata tests llvm_cov
    # The toolchain's own llvm-cov: the profile format is its compiler's (a system llvm-cov of
    # another LLVM version cannot read it).
    llvm_cov=$(dirname "$(readlink -f "$(command -v swift)")")/llvm-cov
    [ -x "$llvm_cov" ] || llvm_cov=llvm-cov
    bin=$(swift build --enable-code-coverage --show-bin-path)
    profdata=$bin/codecov/default.profdata
    tests=$bin/QueueKitPackageTests.xctest
    [ -f "$profdata" ] || { echo "no coverage data: run swift test --enable-code-coverage first" >&2; return 1; }
    "$llvm_cov" report "$tests" -instr-profile="$profdata" "$ROOT/Sources"
    "$llvm_cov" export "$tests" -instr-profile="$profdata" -summary-only "$ROOT/Sources" |
        python3 -c '
import json, sys
lines = json.load(sys.stdin)["data"][0]["totals"]["lines"]
floor = float(sys.argv[1])
percent, covered, count = lines.get("percent"), lines.get("covered"), lines.get("count")
print(f"line coverage of Sources/: {percent:.1f} % ({covered} of {count} lines); floor {floor:g} %")
sys.exit(0 if percent >= floor else 1)' "$COVERAGE_FLOOR"
}

# lint: the formatters' verdict, changing nothing: `swift format lint --strict` over the Swift
# sources and tests (.swift-format), `clang-format --dry-run --Werror` over the C and C++ sources
# of the library, its public headers, the examples and the test programs (.clang-format). Fails
# when either reports a difference.
# Builds the counting program Benchmarks/counts/NAME.c into DIR against the library installed in
# PREFIX (default stage/), with any further compiler arguments.
#   build_counts NAME DIR [ARG...]
build_counts() {
    local name=$1 dir=$2 prefix=${PREFIX:-$STAGE_DIR}
    shift 2
    clang -O2 -g -o "$dir/$name" "$ROOT/Benchmarks/counts/$name.c" -I"$prefix/include" -L"$prefix/lib" \
        -Wl,-rpath,"$prefix/lib" "$@" -lqueuekit -lpthread
}

# Instructions per iteration of each kernel of a counting program (Benchmarks/counts/*.c: its
# arguments are KERNEL ITERATIONS, and it calls measure() around the counted iterations), by
# callgrind collecting only inside measure(); --fair-sched=yes, so that threads take turns as on a
# real machine. One line per kernel.
#   count_per_call PROGRAM ITERATIONS KERNEL...
count_per_call() {
    local program=$1 n=$2 kernel total out
    shift 2
    out=$(mktemp)
    for kernel in "$@"; do
        valgrind --tool=callgrind --fair-sched=yes --toggle-collect=measure --callgrind-out-file="$out" \
            "$program" "$kernel" "$n" >/dev/null 2>&1
        total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
        awk -v k="$kernel" -v t="$total" -v n="$n" 'BEGIN { printf "%-26s %8.1f instructions per call\n", k, t / n }'
    done
    rm -f "$out"
}

lint() {
    local status=0 c_files=()
    swift format lint --strict --recursive --parallel "$ROOT/Sources" "$ROOT/Tests" || status=1
    mapfile -t c_files < <(find "$ROOT/Sources" "$ROOT/include" "$ROOT/examples" "$ROOT/Tests" \
        \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) | sort)
    clang-format --dry-run --Werror "${c_files[@]}" || status=1
    [ $status -eq 0 ] && echo "lint: $(find "$ROOT/Sources" "$ROOT/Tests" -name '*.swift' | wc -l) Swift files and ${#c_files[@]} C and C++ files formatted"
    return $status
}
