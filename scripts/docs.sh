#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Builds the DocC documentation of the QueueKit module, offline, with the toolchain's `docc`
# (no SwiftPM plugin): `swift symbolgraph-extract` writes the built module's symbol graph, and
# `docc convert` turns it and the catalog Sources/QueueKit/QueueKit.docc into a documentation
# archive. Any DocC warning (a broken symbol link, an undocumented parameter) fails the build.
#
#   scripts/docs.sh [OUTPUT]      default OUTPUT: .build-docs/QueueKit.doccarchive
#
# Open the result with `docc preview Sources/QueueKit/QueueKit.docc
# --additional-symbol-graph-dir .build-docs/symbol-graphs` (a local server), or serve the archive
# directory as static files (it is built for static hosting: `python3 -m http.server -d OUTPUT`,
# then http://localhost:8000/documentation/queuekit).
set -euo pipefail
source "$(dirname "$0")/common.sh"

SCRATCH=$ROOT/.build-docs                 # its own build directory: the main build stays incremental
GRAPHS=$SCRATCH/symbol-graphs
OUTPUT=${1:-$SCRATCH/QueueKit.doccarchive}

rm -rf "$GRAPHS"
mkdir -p "$GRAPHS"
quietly swift build --target QueueKit --scratch-path "$SCRATCH"
BIN=$(swift build --target QueueKit --scratch-path "$SCRATCH" --show-bin-path)
# The module's public symbols, with the C modules it imports found as SwiftPM finds them.
quietly swift symbolgraph-extract -module-name QueueKit -target "$(uname -m)-unknown-linux-gnu" \
    -I "$BIN/Modules" -module-cache-path "$BIN/ModuleCache" \
    -Xcc -fmodule-map-file="$ROOT/include/module.modulemap" \
    -Xcc -fmodule-map-file="$ROOT/Sources/QueueKitShim/include/module.modulemap" \
    -Xcc -I -Xcc "$ROOT/Sources/QueueKitShim/include" \
    -minimum-access-level public -output-dir "$GRAPHS"

rm -rf "$OUTPUT"
docc convert "$ROOT/Sources/QueueKit/QueueKit.docc" \
    --fallback-display-name QueueKit --fallback-bundle-identifier org.queuekit.QueueKit \
    --additional-symbol-graph-dir "$GRAPHS" \
    --transform-for-static-hosting \
    --output-path "$OUTPUT" --warnings-as-errors
echo "documentation: $OUTPUT"
