#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Builds the Debian packages of the C library into dist/:
#   dist/libqueuekit0_<version>_<arch>.deb           the shared library (stripped) and its SONAME link
#   dist/libqueuekit-dev_<version>_<arch>.deb        header, .so link, queuekit.pc, CMake package, man pages
#   dist/libqueuekit0-dbgsym_<version>_<arch>.ddeb   the library's debug information
# with CPack (cmake/Packaging.cmake) from a Release build configured for /usr in build-deb/.
# (with full debug information: -DQK_DEBUG_INFO=ON), finished by scripts/deb_finish.py (no
# ldconfig maintainer scripts, dpkg's Installed-Size). Prints the three paths: runtime, -dev,
# dbgsym. Needs dpkg-dev (dpkg-shlibdeps) and file (scripts/bootstrap.sh installs them).
set -euo pipefail
source "$(dirname "$0")/common.sh"

DEB_BUILD_DIR=$ROOT/build-deb
DIST_DIR=$ROOT/dist

need_packages dpkg-dev file
quietly cmake -G Ninja -S "$ROOT" -B "$DEB_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr -DQK_MANPAGES_GZIP=ON -DQK_DEBUG_INFO=ON -DBUILD_TESTING=OFF
quietly cmake --build "$DEB_BUILD_DIR"
rm -f "$DIST_DIR"/libqueuekit*.deb "$DIST_DIR"/libqueuekit*.ddeb
(cd "$DEB_BUILD_DIR" && quietly cpack -G DEB)
rm -rf "$DIST_DIR/_CPack_Packages"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$DEB_BUILD_DIR/CMakeCache.txt")
arch=$(dpkg --print-architecture)
debs=()
for package in libqueuekit0 libqueuekit-dev libqueuekit0-dbgsym; do
    deb=$DIST_DIR/${package}_${version}_${arch}.deb
    [ "$package" = libqueuekit0-dbgsym ] && deb=${deb%.deb}.ddeb
    [ -f "$deb" ] || { echo "package.sh: $deb was not made" >&2; exit 1; }
    debs+=("$deb")
done
python3 "$ROOT/scripts/deb_finish.py" "${debs[@]}"
printf '%s\n' "${debs[@]}"
