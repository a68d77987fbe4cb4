#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# libqueuekit.so stands alone and costs a program little to load: SONAME libqueuekit.so.0, no
# RUNPATH, nothing from the Swift toolchain, and only glibc as dependencies (the Swift runtime,
# libdispatch, libstdc++ and the unwinder are linked in); it stays resident after dlclose
# (NODELETE); its static TLS block is at most 256 bytes; its relative relocations are packed
# (DT_RELR) when the build's glibc reads them (2.36 and later).
#
#   check-library.sh LIBRARY TOOLCHAIN_DIR
set -euo pipefail

library=$1 toolchain=$2
status=0
fail() { echo "FAIL: $*"; status=1; }

echo "--- readelf -d"
readelf -d "$library" | grep -E 'NEEDED|SONAME|RUNPATH|RPATH|FLAGS|RELR\)' || true
echo "--- ldd"
ldd "$library"

readelf -d "$library" | grep -q 'Library soname: \[libqueuekit.so.0\]' || fail "SONAME is not libqueuekit.so.0"
if readelf -d "$library" | grep -qE 'RUNPATH|RPATH'; then
    fail "the library has a RUNPATH/RPATH (-no-toolchain-stdlib-rpath missing?)"
fi
if ldd "$library" | grep -qF "$toolchain"; then fail "ldd resolves a library from the toolchain ($toolchain)"; fi
if ldd "$library" | grep -q 'not found'; then fail "ldd: a dependency is not found"; fi
needed=$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for lib in $needed; do
    case $lib in
    libc.so.6 | libm.so.6 | ld-linux-*.so.*) ;;
    *) fail "NEEDED $lib: the library should need only glibc (cmake/Linking.cmake links the rest in)" ;;
    esac
done
readelf -d "$library" | grep -q 'Flags:.*NODELETE' || fail "not marked NODELETE (-z nodelete): dlclose would unmap running code"

# The static TLS block: the PT_TLS segment's size in memory.
tls=$(readelf -lW "$library" | awk '$1 == "TLS" { print $6 }')
tls=$((${tls:-0}))
echo "static TLS block (PT_TLS MemSiz): $tls bytes"
[ "$tls" -le 256 ] || fail "the static TLS block is $tls bytes, more than the 256 the header promises"

glibc=$(getconf GNU_LIBC_VERSION | awk '{ print $2 }')
if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = 2.36 ]; then
    readelf -d "$library" | grep -q '(RELR)' || fail "no DT_RELR although glibc $glibc reads it (-z pack-relative-relocs)"
fi
relr=$(readelf -rW "$library" | awk '/^Relocation section .\.relr\.dyn/ { getline; print $1 }')
rela=$(readelf -rW "$library" | grep -c 'R_X86_64_RELATIVE' || true)
init=$(readelf -SW "$library" | sed -n 's/.*\] \.init_array *[A-Z_]* *[0-9a-f]* *[0-9a-f]* *\([0-9a-f]*\).*/\1/p')
echo "relative relocations: ${relr:-0} packed (RELR), $rela unpacked; constructors: $((0x${init:-0} / 8))"
[ $status -eq 0 ] && echo "ok: stands alone"
exit $status
