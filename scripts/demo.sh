#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Builds libqueuekit.so with CMake, installs it into ./stage, builds every C example against the
# installed library twice (examples/consumer, an outside CMake project, finding it with pkg-config
# and with find_package), then runs the examples. Installs what is missing first
# (scripts/bootstrap.sh).
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$ROOT/scripts/bootstrap.sh"
echo "== building libqueuekit.so (CMake, Ninja, Release)"
cmake_build
install_stage
echo "== building the examples against $STAGE_DIR"
build_consumer pkg-config "$PKGCONFIG_BUILD_DIR"
build_consumer find_package "$CONSUMER_BUILD_DIR"
echo "== running the examples"
ctest --test-dir "$PKGCONFIG_BUILD_DIR" --verbose
echo "== demo done: the examples ran; the library is in $STAGE_DIR/lib"
