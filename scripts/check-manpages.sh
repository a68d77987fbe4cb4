#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Checks the installed manual pages of an install prefix (the test suite's stage/):
#   - every page renders with `man --warnings -l` and `groff -ww` without a single warning, and
#     has NAME, LIBRARY, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, EXAMPLES and SEE ALSO;
#   - every function the installed libqueuekit.so exports has its section-3 page, and
#     `man 3 NAME` / `man 7 queuekit` find them through the prefix's manpath;
#   - the generator copes with declarations the header may gain (Tests/ManPages/future.h: a
#     function-pointer type, prototypes over several lines, lists and code in a doc comment), and
#     refuses an exported function without a doc comment, and a page without its supplement
#     (docs/man/NAME.txt: RETURN VALUE, ERRORS, EXAMPLES).
#
#   check-manpages.sh PREFIX
set -euo pipefail
source "$(dirname "$0")/common.sh"

prefix=$1
mandir=$prefix/share/man
library=
for candidate in "$prefix"/lib/libqueuekit.so "$prefix"/lib/*/libqueuekit.so; do
    [ -e "$candidate" ] && { library=$candidate; break; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# render PAGE...: fails (and shows the messages) when man or groff warns about a page.
render() {
    local page messages count=0
    for page in "$@"; do
        messages=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
        messages+=$(zcat -f "$page" | LC_ALL=C.UTF-8 groff -ww -z -man -Tutf8 2>&1)
        if [ -n "$messages" ]; then
            echo "FAIL: $page renders with warnings:"; echo "$messages" | sed 's/^/  /'
            failed=1
        fi
        for section in NAME LIBRARY SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS EXAMPLES "SEE ALSO"; do
            if ! zcat -f "$page" | grep -Eq "^\.SH \"?$section\"?\$"; then
                echo "FAIL: $page has no $section section"; failed=1
            fi
        done
        count=$((count + 1))
    done
    echo "$count pages rendered"
}

shopt -s nullglob
pages=("$mandir"/man3/*.3* "$mandir"/man7/*.7*)
shopt -u nullglob
[ ${#pages[@]} -gt 1 ] || { echo "FAIL: no manual pages under $mandir"; exit 1; }
render "${pages[@]}"

# Every exported function has its page, found by name.
[ -n "$library" ] || { echo "FAIL: no libqueuekit.so under $prefix"; exit 1; }
nm -D --defined-only "$library" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$tmp/exported"
while read -r name; do
    if ! MANPATH=$mandir man -w 3 "$name" >/dev/null 2>&1; then
        echo "FAIL: $name is exported but \`man 3 $name\` finds no page"
        failed=1
    fi
done <"$tmp/exported"
echo "$(wc -l <"$tmp/exported") exported functions, each with its page"
MANPATH=$mandir man -w 7 queuekit >/dev/null || { echo "FAIL: man 7 queuekit finds nothing"; failed=1; }

# The generator on declarations to come.
python3 "$ROOT/scripts/manpages.py" "$ROOT/Tests/ManPages/future.h" "$tmp/future" --version 9.9.9 2>/dev/null
for name in qk_set_deadlock_handler qk_copy_wait_report qk_set_stall_handler; do
    [ -f "$tmp/future/man3/$name.3" ] || { echo "FAIL: no page for $name from future.h"; failed=1; }
done
grep -q 'qk_report_function_t' "$tmp/future/man3/qk_set_stall_handler.3" ||
    { echo "FAIL: qk_set_stall_handler's synopsis lacks the type it uses"; failed=1; }
render "$tmp"/future/man*/*
sed 's|^/\*\* Calls `handler` once.*|/* (an ordinary comment) */|' "$ROOT/Tests/ManPages/future.h" >"$tmp/undocumented.h"
if python3 "$ROOT/scripts/manpages.py" "$tmp/undocumented.h" --list >/dev/null 2>"$tmp/error"; then
    echo "FAIL: the generator accepted an exported function without a doc comment"; failed=1
else
    echo "refused as it should: $(cat "$tmp/error")"
fi
mkdir "$tmp/no-supplements"
if python3 "$ROOT/scripts/manpages.py" "$ROOT/include/queuekit.h" --list --pages "$tmp/no-supplements" >/dev/null 2>"$tmp/error"; then
    echo "FAIL: the generator accepted pages without their supplements"; failed=1
else
    echo "refused as it should: $(head -n 2 "$tmp/error" | tr '\n' ' ')"
fi
[ $failed -eq 0 ]
