#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# pigz over QueueKit (docs/pigz.md): builds pigz twice from Debian's source, once with its own
# yarn.c (pthread mutex + condition variable) and once with examples/pigz/yarn_queuekit.c against
# the installed libqueuekit (pkg-config), compresses a deterministic ~100 MB input at -p 8 with
# both, checks that the outputs are byte-identical and decompress to the input, counts the polls
# of the QueueKit build (must be 0; its futile wake-ups are printed beside them) and prints the
# median of RUNS timings of each.
#
#   scripts/pigz-port.sh            PKG_CONFIG_PATH defaults to stage/lib/pkgconfig
#
# Environment: PIGZ_SRC=DIR uses an unpacked pigz source instead of `apt-get source pigz`;
# PIGZ_WORK=DIR (default build-pigz/) holds the sources, the builds and the input; RUNS (5);
# SIZE_MB (100); THREADS (8). When the source cannot be fetched it prints why and exits 0
# ("skipped"): apt-get source needs a mirror that serves Debian's source packages.
set -euo pipefail
source "$(dirname "$0")/common.sh"

work=${PIGZ_WORK:-$ROOT/build-pigz}
runs=${RUNS:-5}
size_mb=${SIZE_MB:-100}
threads=${THREADS:-8}
mkdir -p "$work"
work=$(cd "$work" && pwd)

skip() {
    echo "pigz-port: SKIPPED: $*"
    exit 0
}

# ---- The source ----------------------------------------------------------------------------

# apt-get source with a private deb-src list made from the configured deb sources (leaves the
# system's apt configuration alone).
fetch_with_private_sources() {
    local apt=$work/apt
    rm -rf "$apt"
    mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial"
    local file
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -e "$file" ] && sed 's/^Types:.*/Types: deb-src/' "$file" >"$apt/sources.list.d/$(basename "$file")"
    done
    [ -e /etc/apt/sources.list ] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$apt/sources.list.d/main.list"
    local options=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache")
    apt-get "${options[@]}" update >"$work/apt.log" 2>&1 \
        && apt-get "${options[@]}" source --download-only pigz >>"$work/apt.log" 2>&1
}

fetch_source() {
    command -v apt-get >/dev/null || skip "no apt-get on this system (set PIGZ_SRC to a pigz source)"
    command -v dpkg-source >/dev/null || skip "dpkg-source is missing (apt-get install dpkg-dev)"
    local dir=$work/debian-source
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && { apt-get source --download-only pigz >"$work/apt.log" 2>&1 \
        || (cd "$dir" && fetch_with_private_sources); }) \
        || skip "apt-get source pigz failed ($(grep -m1 '^E:' "$work/apt.log" || tail -n1 "$work/apt.log"))"
    (cd "$dir" && dpkg-source -x pigz_*.dsc pigz >/dev/null) || skip "dpkg-source -x failed"
    src=$dir/pigz
}

if [ -n "${PIGZ_SRC:-}" ]; then
    src=$(cd "$PIGZ_SRC" && pwd)
    echo "pigz-port: source $src (PIGZ_SRC)"
else
    fetch_source
    echo "pigz-port: source $src (apt-get source pigz)"
fi
[ -f "$src/pigz.c" ] && [ -f "$src/yarn.h" ] || skip "$src has no pigz.c and yarn.h"

# ---- The two builds ------------------------------------------------------------------------

[ -f /usr/include/zlib.h ] || skip "zlib.h is missing (apt-get install zlib1g-dev)"
export PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-$STAGE_DIR/lib/pkgconfig}
pkg-config --exists queuekit || skip "no installed queuekit through pkg-config (cmake --install build --prefix stage)"
qk_flags=$(pkg-config --cflags --libs queuekit)
qk_libdir=$(pkg-config --variable=libdir queuekit)

cflags=(-O3 -Wall -Wno-unknown-pragmas -I"$src")
common=("$src/pigz.c" "$src/try.c")
for file in "$src"/zopfli/src/zopfli/*.c; do
    case $(basename "$file") in zopfli_bin.c | zopfli_lib.c) ;; *) common+=("$file") ;; esac
done
mkdir -p "$work/bin"
gcc "${cflags[@]}" -o "$work/bin/pigz-pthread" "${common[@]}" "$src/yarn.c" -lz -lm -lpthread
# shellcheck disable=SC2086 # pkg-config's flags are words
gcc "${cflags[@]}" -o "$work/bin/pigz-queuekit" "${common[@]}" "$ROOT/examples/pigz/yarn_queuekit.c" \
    $qk_flags -Wl,-rpath,"$qk_libdir" -lz -lm -lpthread
echo "pigz-port: built pigz-pthread (yarn.c) and pigz-queuekit (yarn_queuekit.c, $(pkg-config --modversion queuekit))"

# No wait loop: no sleep, yield or timed wait anywhere in the port.
if grep -nE '\b(u?sleep|nanosleep|sched_yield|pthread_cond_|await_until|lock_until)\b' \
    "$ROOT/examples/pigz/yarn_queuekit.c"; then
    echo "pigz-port: FAILED: yarn_queuekit.c polls or sleeps" >&2
    exit 1
fi

# ---- The input: deterministic text and binary, SIZE_MB megabytes ----------------------------

input=$work/input-${size_mb}mb
if [ ! -f "$input" ]; then
    cat >"$work/make-input.c" <<'EOF'
/* Writes argv[1] megabytes: runs of words (compressible) and of pseudo-random bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static uint64_t state = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
}
int main(int argc, char **argv) {
    static const char *words[] = {"queue", "lock", "condition", "thread", "wait", "release",
                                  "deflate", "block", "window", "hand-off", "the", "of", "and"};
    long total = atol(argv[1]) * 1048576L, written = 0;
    while (written < total) {
        if (next() % 8 != 0) {
            for (int i = 0; i < 2000 && written < total; i++) {
                const char *w = words[next() % 13];
                written += fprintf(stdout, "%s%s", w, next() % 12 == 0 ? ".\n" : " ");
            }
        } else {
            for (int i = 0; i < 4096 && written < total; i++, written++) putchar((int)(next() & 0xff));
        }
    }
    return 0;
}
EOF
    gcc -O2 -o "$work/make-input" "$work/make-input.c"
    # head closes the pipe at SIZE_MB: the generator's SIGPIPE is the expected end, not an error.
    { "$work/make-input" "$size_mb" || true; } | head -c $((size_mb * 1048576)) >"$input.tmp"
    [ "$(stat -c %s "$input.tmp")" -eq $((size_mb * 1048576)) ] \
        || { echo "pigz-port: FAILED: the input generator wrote too little" >&2; exit 1; }
    mv "$input.tmp" "$input"
fi
echo "pigz-port: input $input ($(stat -c %s "$input") bytes)"

# ---- Identical output, round trip, polls ---------------------------------------------------

"$work/bin/pigz-pthread" -c -p "$threads" <"$input" >"$work/out-pthread.gz"
YARN_QUEUEKIT_STATS=1 "$work/bin/pigz-queuekit" -c -p "$threads" <"$input" >"$work/out-queuekit.gz" \
    2>"$work/queuekit-stats.txt"
cat "$work/queuekit-stats.txt"
if ! cmp -s "$work/out-pthread.gz" "$work/out-queuekit.gz"; then
    echo "pigz-port: FAILED: the two outputs differ" >&2
    exit 1
fi
"$work/bin/pigz-queuekit" -d -c -p "$threads" <"$work/out-queuekit.gz" | cmp -s - "$input" \
    || { echo "pigz-port: FAILED: the output does not decompress to the input" >&2; exit 1; }
gzip -dc <"$work/out-queuekit.gz" | cmp -s - "$input" \
    || { echo "pigz-port: FAILED: gzip does not decompress the output to the input" >&2; exit 1; }
polls=$(sed -n 's/.* \([0-9][0-9]*\) polls, .*/\1/p' "$work/queuekit-stats.txt")
futile=$(sed -n 's/.* \([0-9][0-9]*\) futile wake-ups$/\1/p' "$work/queuekit-stats.txt")
[ -n "$polls" ] && [ -n "$futile" ] || { echo "pigz-port: FAILED: no poll count" >&2; exit 1; }
echo "pigz-port: outputs byte-identical ($(stat -c %s "$work/out-queuekit.gz") bytes), round trip ok, polls $polls, futile wake-ups $futile"
[ "$polls" -eq 0 ] || { echo "pigz-port: FAILED: $polls polls" >&2; exit 1; }

# ---- Timings: RUNS of each, interleaved; the medians ----------------------------------------

time_one() { # prints the wall-clock milliseconds of one compression
    local begin end
    begin=$(date +%s%N)
    "$1" -c -p "$threads" <"$input" >/dev/null
    end=$(date +%s%N)
    echo $(((end - begin) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

pthread_ms=()
queuekit_ms=()
echo "pigz-port: load before $(cut -d' ' -f1-3 /proc/loadavg)"
for ((run = 1; run <= runs; run++)); do
    pthread_ms+=("$(time_one "$work/bin/pigz-pthread")")
    queuekit_ms+=("$(time_one "$work/bin/pigz-queuekit")")
done
echo "pigz-port: load after $(cut -d' ' -f1-3 /proc/loadavg)"
p=$(median "${pthread_ms[@]}")
q=$(median "${queuekit_ms[@]}")
echo "pigz-port: -p $threads, ${size_mb} MB, median of $runs: yarn.c ${p} ms (${pthread_ms[*]}), yarn_queuekit.c ${q} ms (${queuekit_ms[*]}), ratio $(awk -v p="$p" -v q="$q" 'BEGIN { printf "%.3f", q / p }')"
