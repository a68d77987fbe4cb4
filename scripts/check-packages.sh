#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# The Debian packages as a user gets them: builds them (scripts/package.sh), runs lintian on them
# (no error and no warning allowed; scripts/bootstrap.sh installs lintian and gdb), shows their
# contents, checks what each must hold, their Depends and Installed-Size, that the library is
# stripped and points at its debug information, which the debug-symbols package holds under its
# build ID, unpacks the packages into a scratch root with `dpkg -x`, and builds and runs a C
# program against that root with pkg-config alone.
set -euo pipefail
source "$(dirname "$0")/common.sh"

need_packages lintian gdb
mapfile -t debs < <("$ROOT/scripts/package.sh")
runtime=${debs[0]} dev=${debs[1]} dbgsym=${debs[2]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

echo "--- lintian"
lintian --fail-on error,warning --tag-display-limit 0 "$runtime" "$dev" "$dbgsym" >"$tmp/lintian" 2>&1 ||
    fail "lintian reports errors or warnings"
grep -v 'root privileges' "$tmp/lintian" || echo "(no errors, no warnings)"

for deb in "$runtime" "$dev" "$dbgsym"; do
    echo "--- dpkg -c $(basename "$deb")"
    dpkg -c "$deb" | awk '{ print $1, $3, $6, $7, $8 }'
    # Installed-Size as dpkg-gencontrol counts it: files by their size in KiB (rounded up),
    # directories and symlinks (a link's size is its target's name) 1 KiB each.
    honest=$(dpkg -c "$deb" | awk '{ if ($1 ~ /^[dl]/) kib += 1; else kib += int(($3 + 1023) / 1024) } END { print kib }')
    declared=$(dpkg-deb -f "$deb" Installed-Size)
    echo "Installed-Size: $declared KiB declared, $honest KiB counted"
    [ "$declared" = "$honest" ] || fail "$(basename "$deb"): Installed-Size $declared, its contents are $honest KiB"
    dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -qE '^\./(postinst|postrm|preinst|prerm)$' &&
        fail "$(basename "$deb") has maintainer scripts (the ldconfig trigger is all a library needs)"
done

version=$(dpkg-deb -f "$runtime" Version)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
contains() { dpkg -c "$1" | awk '{ print $6 }' | grep -cxF "./$2" >/dev/null || fail "$(basename "$1") lacks /$2"; }
contains "$runtime" "usr/lib/$multiarch/libqueuekit.so.0"
contains "$runtime" "usr/lib/$multiarch/libqueuekit.so.$version"
contains "$runtime" "usr/share/doc/libqueuekit0/copyright"
contains "$runtime" "usr/share/doc/libqueuekit0/NOTICE"
contains "$dev" "usr/include/queuekit.h"
contains "$dev" "usr/include/queuekit.hpp"
contains "$dev" "usr/include/queuekit/condition_lock.hpp"
contains "$dev" "usr/lib/$multiarch/libqueuekit.so"
contains "$dev" "usr/lib/$multiarch/pkgconfig/queuekit.pc"
contains "$dev" "usr/lib/$multiarch/cmake/QueueKit/QueueKitConfig.cmake"
contains "$dev" "usr/share/man/man3/qk_condlock_lock_when.3.gz"
contains "$dev" "usr/share/man/man7/queuekit.7.gz"
contains "$dev" "usr/share/doc/libqueuekit-dev/copyright"
contains "$dev" "usr/share/doc/libqueuekit-dev/NOTICE"
grep -q '^License: Apache-2.0' "$ROOT/cmake/debian/copyright" || fail "cmake/debian/copyright names no license"
dpkg -c "$runtime" | awk '{ print $6 }' | grep -c 'include/\|man/\|libqueuekit\.so$' >/dev/null &&
    fail "libqueuekit0 holds development files"

echo "--- control"
depends=$(dpkg-deb -f "$runtime" Depends) dev_depends=$(dpkg-deb -f "$dev" Depends)
echo "libqueuekit0 Depends: $depends"
echo "libqueuekit-dev Depends: $dev_depends"
echo "libqueuekit0-dbgsym Depends: $(dpkg-deb -f "$dbgsym" Depends)"
[[ $depends =~ ^libc6\ \(\>=\ [0-9.]+\)$ ]] || fail "libqueuekit0 should depend on libc6 alone (the rest is linked in)"
[ "$dev_depends" = "libqueuekit0 (= $version)" ] ||
    fail "libqueuekit-dev should depend on exactly libqueuekit0 (= $version): its files need nothing else"
[ "$(dpkg-deb -f "$dbgsym" Depends)" = "libqueuekit0 (= $version)" ] || fail "libqueuekit0-dbgsym should depend on libqueuekit0 (= $version)"
dpkg-deb --ctrl-tarfile "$runtime" | tar -x -C "$tmp" ./symbols ./triggers
head -1 "$tmp/symbols" | grep -qx 'libqueuekit.so.0 libqueuekit0 #MINVER#' || fail "DEBIAN/symbols has a wrong first line"
grep -qx 'activate-noawait ldconfig' "$tmp/triggers" || fail "DEBIAN/triggers lacks the ldconfig trigger"
symbols=$(grep -c '^ qk_' "$tmp/symbols")
echo "DEBIAN/symbols: $symbols symbols"

echo "--- debug symbols"
root=$tmp/root
dpkg -x "$runtime" "$root"
dpkg -x "$dev" "$root"
dpkg -x "$dbgsym" "$root"
library=$root/usr/lib/$multiarch/libqueuekit.so.$version
build_id=$(readelf -n "$library" | sed -n 's/.*Build ID: //p')
debug_file=$root/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
echo "build ID $build_id; stripped library $(( $(stat -c %s "$library") / 1024 )) KiB; debug file $(( $(stat -c %s "$debug_file" 2>/dev/null || echo 0) / 1024 )) KiB"
[ -n "$build_id" ] && [ -f "$debug_file" ] || fail "libqueuekit0-dbgsym lacks the debug file of build ID $build_id"
readelf -SW "$library" | grep -qE ' \.(symtab|debug_info) ' && fail "the packaged library is not stripped"
python3 - "$library" "$debug_file" <<'PY' || fail "the library's .gnu_debuglink does not name its debug file"
import subprocess, sys, zlib, os
library, debug = sys.argv[1:]
out = os.path.join(os.path.dirname(debug), "link.bin")
subprocess.run(["objcopy", "--dump-section", f".gnu_debuglink={out}", library, os.devnull], check=True)
data = open(out, "rb").read()
os.remove(out)
name = data[:data.index(b"\0")].decode()
crc = int.from_bytes(data[-4:], "little")
actual = zlib.crc32(open(debug, "rb").read()) & 0xFFFFFFFF
print(f".gnu_debuglink: {name}, CRC {crc:08x} (debug file {actual:08x})")
sys.exit(0 if name == os.path.basename(debug) and crc == actual else 1)
PY
readelf -SW "$debug_file" | grep -q ' \.symtab ' || fail "the debug file has no symbol table"
readelf -SW "$debug_file" | grep -q ' \.debug_info ' || fail "the debug file has no DWARF"
# gdb finds the symbols through the build ID alone, as for a crash of a program using the package.
gdb -nx -batch -ex "set debug-file-directory $root/usr/lib/debug" -ex "file $library" \
    -ex 'info address qkshim_futex_wait' 2>&1 | tee "$tmp/gdb" | tail -1
grep -q 'qkshim_futex_wait.* is a function at address' "$tmp/gdb" || fail "gdb does not find the library's symbols in libqueuekit0-dbgsym"

echo "--- a C program against the unpacked packages"
export PKG_CONFIG_PATH=$root/usr/lib/$multiarch/pkgconfig PKG_CONFIG_SYSROOT_DIR=
flags=$(pkg-config --cflags --libs queuekit)
echo "pkg-config: $flags"
# shellcheck disable=SC2086 # $flags is a list of words
gcc -Wall -Wextra -Werror "$ROOT/examples/hello.c" $flags -Wl,-rpath,"$root/usr/lib/$multiarch" -o "$tmp/hello"
ldd "$tmp/hello" >"$tmp/ldd"
grep -qF "$root/usr/lib/$multiarch/libqueuekit.so.0" "$tmp/ldd" || fail "hello does not load the unpacked libqueuekit.so.0"
timeout 60 "$tmp/hello" || fail "hello failed"
MANPATH=$root/usr/share/man man -w 3 qk_queue_sync >/dev/null || fail "man 3 qk_queue_sync finds no page in the packages"

echo "--- what a package built against libqueuekit0 depends on (dpkg-shlibdeps, symbols file)"
# dpkg-shlibdeps as a dependent package's build runs it: libqueuekit0 unpacked as a package being
# built next to it, with its DEBIAN/symbols. hello calls qk_strerror: the minimum version is the
# newest entry among the symbols it uses, so raising that one entry must raise the dependency.
shlibdeps() {
    (cd "$tmp/build" && dpkg-shlibdeps -O -Sdebian/libqueuekit0 debian/probe/usr/bin/hello 2>/dev/null)
}
mkdir -p "$tmp/build/debian/libqueuekit0" "$tmp/build/debian/probe/usr/bin"
dpkg -x "$runtime" "$tmp/build/debian/libqueuekit0"
dpkg-deb -e "$runtime" "$tmp/build/debian/libqueuekit0/DEBIAN"
printf 'Source: probe\n\nPackage: probe\nArchitecture: any\n' >"$tmp/build/debian/control"
cp "$tmp/hello" "$tmp/build/debian/probe/usr/bin/hello"
# The newest version among the entries of the symbols hello uses (not the package's version: a
# program using only older functions keeps working with an older library).
minimum=$(nm -D --undefined-only "$tmp/hello" | awk '{print $NF}' | sed 's/@.*//' | grep '^qk_' |
    while read -r symbol; do
        awk -v s="$symbol@Base" '$1 == s {print $2}' "$tmp/build/debian/libqueuekit0/DEBIAN/symbols"
    done | sort -V | tail -n 1)
[ -n "$minimum" ] || fail "hello uses no symbol the symbols file lists"
depends=$(shlibdeps)
echo "$depends"
[[ $depends == *"libqueuekit0 (>= $minimum)"* ]] || fail "a dependent should need libqueuekit0 (>= $minimum)"
sed -i "s/^ qk_strerror@Base .*/ qk_strerror@Base $version.1/" "$tmp/build/debian/libqueuekit0/DEBIAN/symbols"
depends=$(shlibdeps)
echo "with qk_strerror recorded as new in $version.1: $depends"
[[ $depends == *"libqueuekit0 (>= $version.1)"* ]] || fail "the symbols file does not decide the minimum version"
[ $failed -eq 0 ]
