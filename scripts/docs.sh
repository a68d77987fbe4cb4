#!/usr/bin/env bash
# Builds the DocC documentation of the QueueKit module, offline, with the toolchain's `docc`
# (no SwiftPM plugin): the compiler writes the module's symbol graph, `docc convert` turns it and
# the catalog Sources/QueueKit/QueueKit.docc into a documentation archive. Any DocC warning (a
# broken symbol link, a missing article) fails the build.
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
quietly swift build --target QueueKit --scratch-path "$SCRATCH" \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$GRAPHS"
# Only the module's own graph (and its extensions of other modules' types), not its dependencies'.
find "$GRAPHS" -name '*.symbols.json' ! -name 'QueueKit.symbols.json' ! -name 'QueueKit@*.symbols.json' -delete

rm -rf "$OUTPUT"
docc convert "$ROOT/Sources/QueueKit/QueueKit.docc" \
    --fallback-display-name QueueKit --fallback-bundle-identifier org.queuekit.QueueKit \
    --additional-symbol-graph-dir "$GRAPHS" \
    --transform-for-static-hosting --hosting-base-path / \
    --output-path "$OUTPUT" --warnings-as-errors
echo "documentation: $OUTPUT"
