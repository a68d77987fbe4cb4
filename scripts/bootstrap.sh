#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
#
# Installs the Debian packages that building, testing and packaging QueueKit need, only those
# missing (apt-get update once). The other scripts call it once (test.sh, demo.sh) or only check
# for their tools (need_packages in common.sh); run it by hand on a fresh machine:
#
#   scripts/bootstrap.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

wanted=(
    cmake ninja-build pkg-config gcc g++ libbsd-dev libsqlite3-dev valgrind   # build, test
    abigail-tools                                                             # the ABI gate (abidiff)
    dpkg-dev file lintian gdb                                                 # Debian packages, their debug symbols
    clang-format                                                              # formatting C
)

if ! command -v dpkg-query >/dev/null; then
    echo "not a Debian system: make sure these are installed: ${wanted[*]}" >&2
    exit 0
fi

missing=()
for package in "${wanted[@]}"; do
    package_installed "$package" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "installing ${missing[*]}"
quietly "${sudo[@]}" apt-get update -qq
quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
