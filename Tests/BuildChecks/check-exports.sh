#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# The dynamic symbols that libqueuekit.so defines must be exactly the functions that queuekit.h
# declares (every exported declaration carries QK_EXPORT): nothing missing, nothing extra.
#
#   check-exports.sh LIBRARY HEADER
set -euo pipefail

library=$1 header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Declarations: the first qk_name( on each line that starts with QK_EXPORT.
grep -E '^[[:space:]]*QK_EXPORT[[:space:]]' "$header" |
    grep -oE '\bqk_[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' |
    sort -u >"$tmp/declared"
# Exports: every defined dynamic symbol (any type), without version suffixes.
nm -D --defined-only "$library" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$tmp/exported"

comm -13 "$tmp/declared" "$tmp/exported" >"$tmp/extra"
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/missing"

echo "$(wc -l <"$tmp/declared") functions declared, $(wc -l <"$tmp/exported") symbols exported"
status=0
if [ -s "$tmp/extra" ]; then
    echo "FAIL: exported but not declared in $(basename "$header"):"; sed 's/^/  /' "$tmp/extra"
    status=1
fi
if [ -s "$tmp/missing" ]; then
    echo "FAIL: declared but not exported:"; sed 's/^/  /' "$tmp/missing"
    status=1
fi
exit $status
