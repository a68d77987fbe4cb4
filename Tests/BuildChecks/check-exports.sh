#!/usr/bin/env bash
# The dynamic symbols that libqueuekit.so defines must be exactly the functions that queuekit.h
# declares (every exported declaration carries QK_EXPORT).
#
#   check-exports.sh LIBRARY HEADER [PENDING]
#
# PENDING lists header functions whose implementation has not landed yet (one name a line,
# '#' comments); they may be missing from the library. Delete a name once it is exported.
set -euo pipefail

library=$1 header=$2 pending=${3:-/dev/null}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Declarations: the first qk_name( on each line that starts with QK_EXPORT.
grep -E '^[[:space:]]*QK_EXPORT[[:space:]]' "$header" |
    grep -oE '\bqk_[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' |
    sort -u >"$tmp/declared"
# Exports: every defined dynamic symbol (any type), without version suffixes.
nm -D --defined-only "$library" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$tmp/exported"
sed -e 's/#.*//' -e 's/[[:space:]]//g' "$pending" | grep -v '^$' | sort -u >"$tmp/pending" || true

comm -13 "$tmp/declared" "$tmp/exported" >"$tmp/extra"
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/missing"
comm -23 "$tmp/missing" "$tmp/pending" >"$tmp/missing-unexpected"
comm -12 "$tmp/pending" "$tmp/exported" >"$tmp/stale"

echo "$(wc -l <"$tmp/declared") functions declared, $(wc -l <"$tmp/exported") symbols exported," \
     "$(comm -12 "$tmp/missing" "$tmp/pending" | wc -l) declared but pending"
status=0
if [ -s "$tmp/extra" ]; then
    echo "FAIL: exported but not declared in $(basename "$header"):"; sed 's/^/  /' "$tmp/extra"
    status=1
fi
if [ -s "$tmp/missing-unexpected" ]; then
    echo "FAIL: declared but not exported:"; sed 's/^/  /' "$tmp/missing-unexpected"
    status=1
fi
if [ -s "$tmp/stale" ]; then
    echo "note: exported now, delete from $(basename "$pending"):"; sed 's/^/  /' "$tmp/stale"
fi
exit $status
