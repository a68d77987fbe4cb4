#!/usr/bin/env bash
# Builds libqueuekit.so with CMake, installs it into ./stage, builds every C example against the
# installed library twice (gcc + pkg-config, and the find_package(QueueKit) consumer project),
# then runs the examples. Installs cmake, ninja, libbsd-dev, ... first when they are missing.
set -euo pipefail
source "$(dirname "$0")/common.sh"

ensure_packages
echo "== building libqueuekit.so (CMake, Ninja, Release)"
cmake_build
install_stage
echo "== building the examples against $STAGE_DIR"
build_examples_pkgconfig
build_examples_find_package
echo "== running the examples"
run_examples "$PKGCONFIG_BUILD_DIR"
echo "== demo done: ${#EXAMPLES[@]} examples ran; the library is in $STAGE_DIR/lib"
