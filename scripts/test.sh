#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# The whole test suite, stage by stage: the documentation's own checks, SwiftPM build and tests
# (with code coverage, and its floor), the formatters' lint, the CMake build and its ctest checks
# (header, exports, standalone library, reliability programs, examples), the installed library
# consumed by an outside project (pkg-config and find_package), every program the documentation
# shows built and run against it, the sanitizer stages, and one quick run of the benchmark
# against the installed library (every row produced; no timing judged). Every stage runs even
# when one before it failed; the last line is "N passed,
# N failed" over the stages, and the exit status is non-zero when any failed.
#
# Adding a stage: write one more `stage NAME command...` line below.
set -euo pipefail
source "$(dirname "$0")/common.sh"

passed=0 failed=0 failures=()

# stage NAME COMMAND...: runs COMMAND (with `set -e` in force inside it) and records the result.
stage() {
    local name=$1 status=0 start=$SECONDS
    shift
    echo
    echo "=== stage $name"
    set +e
    (set -e; "$@")
    status=$?
    set -e
    if [ $status -eq 0 ]; then
        passed=$((passed + 1))
        echo "=== stage $name: passed ($((SECONDS - start)) s)"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "=== stage $name: FAILED with status $status ($((SECONDS - start)) s)"
    fi
}

consume_pkgconfig() { build_consumer pkg-config "$PKGCONFIG_BUILD_DIR" && ctest --test-dir "$PKGCONFIG_BUILD_DIR" --output-on-failure; }
consume_find_package() { build_consumer find_package "$CONSUMER_BUILD_DIR" && ctest --test-dir "$CONSUMER_BUILD_DIR" --output-on-failure; }
asan_ubsan() { cmake_build "$ASAN_BUILD_DIR" -DQK_SANITIZE=address && ctest --test-dir "$ASAN_BUILD_DIR" -L program --output-on-failure; }

"$ROOT/scripts/bootstrap.sh"

# The README's length, the project files, no history words in what users read.
stage docs             python3 "$ROOT/scripts/check-docs.py"
# Built and tested with coverage instrumentation once (the coverage stage reads this run).
stage swift-build      swift build --enable-code-coverage
stage swift-test       swift test --enable-code-coverage
stage coverage         coverage_report
# The formatters' verdict (.swift-format, .clang-format), changing nothing.
stage lint             lint
stage cmake-build      cmake_build
stage ctest            ctest --test-dir "$BUILD_DIR" --output-on-failure
stage install          install_stage
stage pkg-config       consume_pkgconfig
stage find-package     consume_find_package
# <queuekit.hpp>: the C++ suite (Tests/Cxx) against stage/, with g++ and clang++, C++17 and C++20,
# -fno-exceptions, clang's -Wthread-safety, ASan+UBSan and TSan.
stage cxx              "$ROOT/scripts/check-cxx.sh" "$STAGE_DIR"
stage manpages         "$ROOT/scripts/check-manpages.sh" "$STAGE_DIR"
# Every complete C, C++ and Swift program of the README, docs/, the DocC articles and the manual
# pages, built against the installed library and run.
stage docs-programs    python3 "$ROOT/scripts/check-doc-programs.py" "$STAGE_DIR"
# The ABI gate: abidiff against the recorded ABI of the release (abi/), the exports against the
# header and the symbols file; proven first on altered copies of the library.
stage abi              "$ROOT/scripts/abi.py" gate "$STAGE_DIR/lib/libqueuekit.so.0" "$ROOT/include/queuekit.h" "$ROOT/abi/libqueuekit.so.0.abi" "$ROOT/cmake/libqueuekit0.symbols"
stage packages         "$ROOT/scripts/check-packages.sh"
stage tsan-c           "$ROOT/scripts/check-tsan.sh" "$STAGE_DIR"
# Reliability (docs/reliability.md): ThreadSanitizer over the Swift tests (its own build
# directory, so the plain build stays incremental); the C programs under ASan+UBSan and valgrind.
stage tsan             env TSAN_OPTIONS="suppressions=$ROOT/Tests/tsan.supp" swift test --sanitize=thread --scratch-path "$ROOT/.build-tsan"
# The C programs (ctest label `program`): built with ASan+UBSan in a build directory of their own
# (-DQK_SANITIZE=address), and the plain build's under valgrind (ctest -T memcheck).
stage asan-ubsan       asan_ubsan
stage valgrind         memcheck "$BUILD_DIR"
# The DocC documentation of the Swift module, built offline; any DocC warning fails it.
stage docc             "$ROOT/scripts/docs.sh"
# The benchmark's quick mode once, against the installed library: every row produced (no timing judged).
stage bench-quick      bench_quick

echo
[ $failed -eq 0 ] || echo "failed stages: ${failures[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
