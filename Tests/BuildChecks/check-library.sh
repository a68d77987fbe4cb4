#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# libqueuekit.so stands alone: SONAME libqueuekit.so.0, no RUNPATH at all (its dependencies are
# system libraries), no Swift toolchain path in what the loader resolves, no Swift runtime or libdispatch as a separate library (they are
# linked in statically), every dependency found.
#
#   check-library.sh LIBRARY TOOLCHAIN_DIR
set -euo pipefail

library=$1 toolchain=$2
status=0
fail() { echo "FAIL: $*"; status=1; }

echo "--- readelf -d"
readelf -d "$library" | grep -E 'NEEDED|SONAME|RUNPATH|RPATH' || true
echo "--- ldd"
ldd "$library"

readelf -d "$library" | grep -q 'Library soname: \[libqueuekit.so.0\]' || fail "SONAME is not libqueuekit.so.0"
if readelf -d "$library" | grep -qE 'RUNPATH|RPATH'; then
    fail "the library has a RUNPATH/RPATH (-no-toolchain-stdlib-rpath missing?)"
fi
if ldd "$library" | grep -qF "$toolchain"; then fail "ldd resolves a library from the toolchain ($toolchain)"; fi
if ldd "$library" | grep -q 'not found'; then fail "ldd: a dependency is not found"; fi
if readelf -d "$library" | grep NEEDED | grep -qiE 'swift|dispatch|Foundation|BlocksRuntime'; then
    fail "a Swift runtime library is NEEDED: -static-stdlib did not take"
fi
[ $status -eq 0 ] && echo "ok: stands alone"
exit $status
