# Shared by demo.sh and test.sh (sourced, not run): the steps of building, installing and
# consuming QueueKit. Every function works from the repository root and fails on any error.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$ROOT/build                         # the CMake build of libqueuekit.so
STAGE_DIR=$ROOT/stage                         # the local install prefix
PKGCONFIG_BUILD_DIR=$ROOT/build-pkgconfig     # examples built with gcc + pkg-config
CONSUMER_BUILD_DIR=$ROOT/build-consumer       # examples built by examples/consumer (find_package)
cd "$ROOT"

# The Swift toolchain of this kind of machine, when it is not on PATH already.
if ! command -v swiftc >/dev/null && [ -x /opt/swift/usr/bin/swiftc ]; then
    export PATH=/opt/swift/usr/bin:$PATH
fi

# Runs a command silently, showing its output only when it fails.
quietly() {
    local log status=0
    log=$(mktemp)
    "$@" >"$log" 2>&1 || status=$?
    if [ $status -ne 0 ]; then
        cat "$log" >&2
        echo "failed ($status): $*" >&2
    fi
    rm -f "$log"
    return $status
}

# Installs the Debian packages the build needs, only those missing (apt-get update once).
ensure_packages() {
    local wanted=(cmake ninja-build pkg-config gcc g++ libbsd-dev libsqlite3-dev valgrind)
    if ! command -v dpkg-query >/dev/null; then
        echo "not a Debian system: make sure these are installed: ${wanted[*]}" >&2
        return 0
    fi
    ensure_debian_tools "${wanted[@]}"
}

# Installs the given Debian packages when missing (the tools of one stage: lintian, dpkg-dev, ...).
ensure_debian_tools() {
    local missing=() package sudo=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    echo "installing ${missing[*]}"
    quietly "${sudo[@]}" apt-get update -qq
    quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Configures and builds libqueuekit.so (Release), its checks and the examples in build/.
cmake_build() {
    quietly cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
    cmake --build "$BUILD_DIR"
}

# Installs into stage/ (library, header, queuekit.pc, CMake package), replacing what was there.
install_stage() {
    rm -rf "$STAGE_DIR"
    quietly cmake --install "$BUILD_DIR" --prefix "$STAGE_DIR"
    echo "installed to $STAGE_DIR"
}

# The examples, one C program each, whatever their names.
shopt -s nullglob
EXAMPLES=("$ROOT"/examples/*.c)
shopt -u nullglob

# Builds every example with gcc against the installed library, as its users would:
# cc prog.c $(pkg-config --cflags --libs queuekit). The rpath lets them run from stage/.
# Examples may use libbsd, SQLite and libm; --as-needed drops the one an example does not use.
build_examples_pkgconfig() {
    local flags source name libdir
    export PKG_CONFIG_PATH=$STAGE_DIR/lib/pkgconfig
    flags=$(pkg-config --cflags --libs queuekit)
    libdir=$(cd "$(pkg-config --variable=libdir queuekit)" && pwd)
    rm -rf "$PKGCONFIG_BUILD_DIR" && mkdir -p "$PKGCONFIG_BUILD_DIR"
    for source in "${EXAMPLES[@]}"; do
        name=$(basename "$source" .c)
        # shellcheck disable=SC2086 # $flags is a list of words
        gcc -O2 -Wall -Wextra "$source" $flags -Wl,--as-needed -lbsd -lsqlite3 -lm -Wl,-rpath,"$libdir" \
            -o "$PKGCONFIG_BUILD_DIR/$name"
    done
    echo "built ${#EXAMPLES[@]} examples with gcc and pkg-config into $PKGCONFIG_BUILD_DIR"
}

# Builds every example through examples/consumer: find_package(QueueKit) from stage/.
build_examples_find_package() {
    rm -rf "$CONSUMER_BUILD_DIR"
    quietly cmake -G Ninja -S "$ROOT/examples/consumer" -B "$CONSUMER_BUILD_DIR" \
        -DCMAKE_PREFIX_PATH="$STAGE_DIR"
    quietly cmake --build "$CONSUMER_BUILD_DIR"
    echo "built ${#EXAMPLES[@]} examples with find_package(QueueKit) into $CONSUMER_BUILD_DIR"
}

# Runs every example built in directory $1, a header line each; fails if any fails.
run_examples() {
    local dir=$1 source name failed=0
    for source in "${EXAMPLES[@]}"; do
        name=$(basename "$source" .c)
        echo "==> $name"
        if ! timeout 60 "$dir/$name"; then
            echo "FAILED: $name" >&2
            failed=$((failed + 1))
        fi
    done
    [ $failed -eq 0 ]
}

# Builds the benchmark (release) and runs its quick mode once into a scratch directory, then
# checks that every row it lists was measured and every ratio written. No timing is judged: the
# numbers are for people (README, Performance), not for tests.
bench_quick() {
    local out status=0
    out=$(mktemp -d)
    quietly swift build -c release --product queuekit-bench
    "$ROOT/.build/release/queuekit-bench" --list >"$out/expected.txt"
    "$ROOT/.build/release/queuekit-bench" --quick --out "$out" >"$out/table.txt" 2>"$out/progress.txt" || status=$?
    if [ $status -ne 0 ]; then
        cat "$out/progress.txt" >&2
        rm -rf "$out"
        return $status
    fi
    python3 - "$out" <<'PY' || status=$?
import csv, math, sys
out = sys.argv[1]
expected = [line.rstrip("\n") for line in open(f"{out}/expected.txt") if line.strip()]
with open(f"{out}/results.csv", newline="") as f:
    rows = {f'{r["workload"]} | {r["implementation"]}': r for r in csv.DictReader(f)}
with open(f"{out}/ratios.csv", newline="") as f:
    ratios = list(csv.DictReader(f))
missing = [e for e in expected if e not in rows]
unmeasured = [k for k, r in rows.items() if not r["median_ns"] or not math.isfinite(float(r["median_ns"]))]
table = open(f"{out}/table.txt").read()
absent = [e for e in expected if e.split(" | ")[1] not in table]
for name, items in (("missing from results.csv", missing), ("without a median", unmeasured),
                    ("missing from the table", absent)):
    for item in items:
        print(f"bench: row {name}: {item}", file=sys.stderr)
targets = [r for r in ratios if r["target"]]
print(f"bench: {len(rows)} of {len(expected)} rows measured, {len(ratios)} ratios, {len(targets)} with a target")
sys.exit(1 if missing or unmeasured or absent or len(expected) == 0 or not targets else 0)
PY
    rm -rf "$out"
    return $status
}
