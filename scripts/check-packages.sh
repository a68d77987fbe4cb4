#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# The Debian packages as a user gets them: builds them (scripts/package.sh), runs lintian on them
# (no error allowed; scripts/bootstrap.sh installs lintian), shows their contents, checks what each
# must hold and its Depends, unpacks both into a scratch root with `dpkg -x`, and builds and runs a
# C program against that root with pkg-config alone.
set -euo pipefail
source "$(dirname "$0")/common.sh"

need_packages lintian
mapfile -t debs < <("$ROOT/scripts/package.sh")
runtime=${debs[0]} dev=${debs[1]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

echo "--- lintian"
lintian --fail-on error --tag-display-limit 0 "$runtime" "$dev" >"$tmp/lintian" 2>&1 || fail "lintian reports errors"
grep -v 'root privileges' "$tmp/lintian" || echo "(no tags)"

for deb in "$runtime" "$dev"; do
    echo "--- dpkg -c $(basename "$deb")"
    dpkg -c "$deb" | awk '{ print $1, $6, $7, $8 }'
done

version=$(dpkg-deb -f "$runtime" Version)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
contains() { dpkg -c "$1" | awk '{ print $6 }' | grep -cxF "./$2" >/dev/null || fail "$(basename "$1") lacks /$2"; }
contains "$runtime" "usr/lib/$multiarch/libqueuekit.so.0"
contains "$runtime" "usr/lib/$multiarch/libqueuekit.so.$version"
contains "$dev" "usr/include/queuekit.h"
contains "$dev" "usr/lib/$multiarch/libqueuekit.so"
contains "$dev" "usr/lib/$multiarch/pkgconfig/queuekit.pc"
contains "$dev" "usr/lib/$multiarch/cmake/QueueKit/QueueKitConfig.cmake"
contains "$dev" "usr/share/man/man3/qk_condlock_lock_when.3.gz"
contains "$dev" "usr/share/man/man7/queuekit.7.gz"
dpkg -c "$runtime" | awk '{ print $6 }' | grep -c 'include/\|man/\|libqueuekit\.so$' >/dev/null &&
    fail "libqueuekit0 holds development files"

echo "--- control"
depends=$(dpkg-deb -f "$runtime" Depends) dev_depends=$(dpkg-deb -f "$dev" Depends)
echo "libqueuekit0 Depends: $depends"
echo "libqueuekit-dev Depends: $dev_depends"
[[ $depends == *libc6* && $depends == *libbsd0* ]] || fail "libqueuekit0's Depends lack libc6/libbsd0 (dpkg-shlibdeps)"
[[ $dev_depends == *"libqueuekit0 (= $version)"* && $dev_depends == *libbsd-dev* ]] ||
    fail "libqueuekit-dev must depend on libqueuekit0 (= $version) and libbsd-dev"
dpkg-deb --ctrl-tarfile "$runtime" | tar -x -C "$tmp" ./symbols
head -1 "$tmp/symbols" | grep -qx 'libqueuekit.so.0 libqueuekit0 #MINVER#' || fail "DEBIAN/symbols has a wrong first line"
symbols=$(grep -c '^ qk_' "$tmp/symbols")
echo "DEBIAN/symbols: $symbols symbols"

echo "--- a C program against the unpacked packages"
root=$tmp/root
dpkg -x "$runtime" "$root"
dpkg -x "$dev" "$root"
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
depends=$(shlibdeps)
echo "$depends"
[[ $depends == *"libqueuekit0 (>= $version)"* ]] || fail "a dependent should need libqueuekit0 (>= $version)"
sed -i "s/^ qk_strerror@Base .*/ qk_strerror@Base $version.1/" "$tmp/build/debian/libqueuekit0/DEBIAN/symbols"
depends=$(shlibdeps)
echo "with qk_strerror recorded as new in $version.1: $depends"
[[ $depends == *"libqueuekit0 (>= $version.1)"* ]] || fail "the symbols file does not decide the minimum version"
[ $failed -eq 0 ]
