#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""A late dlopen of libqueuekit.so works once other libraries have used up glibc's static TLS
surplus down to 256 bytes, the footprint include/queuekit.h promises.

    late_dlopen.py LIBRARY DLOPEN_CHAIN CC

The library is marked STATIC_TLS (its hot paths' thread-locals are initial-exec), so dlopen
after start-up has to fit its TLS block into what is left of the surplus glibc reserved at
start. The test measures that surplus as a plugin would see it: the largest initial-exec TLS
block a filler library (compiled here) can have and still be dlopened into DLOPEN_CHAIN, a
fresh process. Then, in fresh processes:
  - a filler that leaves exactly 256 bytes, then the library: must load and answer;
  - a filler that leaves 100 bytes (less than the library's block), then the library: must
    fail with glibc's "static TLS" error, which proves the surplus was really used up.
"""
import os
import re
import subprocess
import sys
import tempfile


def main(library, chain, cc):
    library = os.path.realpath(library)
    phdrs = subprocess.run(["readelf", "-lW", library], check=True, capture_output=True, text=True).stdout
    tls = next((int(line.split()[5], 16) for line in phdrs.splitlines() if line.split()[:1] == ["TLS"]), 0)
    print(f"late_dlopen: {os.path.basename(library)}: static TLS block {tls} bytes")
    with tempfile.TemporaryDirectory() as tmp:
        fillers = {}

        def filler(size):
            if size not in fillers:
                source, output = os.path.join(tmp, f"filler{size}.c"), os.path.join(tmp, f"libfiller{size}.so")
                with open(source, "w") as f:
                    f.write(f'__thread char filler[{max(size, 1)}] __attribute__((tls_model("initial-exec")));\n'
                            "char *filler_touch(void) { return filler; }\n")
                subprocess.run([cc, "-shared", "-fPIC", "-o", output, source], check=True)
                fillers[size] = output
            return fillers[size]

        def loads(*files):
            result = subprocess.run([chain, *files], capture_output=True, text=True)
            return result.returncode == 0, result.stdout.strip()

        # The largest filler that still loads: the surplus a late dlopen gets.
        low, high = 1, 1 << 16
        if not loads(filler(low))[0] or loads(filler(high))[0]:
            print("late_dlopen: FAIL: cannot bracket glibc's static TLS surplus", file=sys.stderr)
            return 1
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if loads(filler(middle))[0] else (low, middle)
        surplus = low
        print(f"late_dlopen: a late dlopen finds {surplus} bytes of static TLS surplus in a fresh process")

        failures = 0
        ok, out = loads(filler(surplus - 256), library)
        print(f"late_dlopen: after a filler leaving 256 bytes: {'loads' if ok else 'FAILS'} ({out})")
        if not ok or "qk_version_number() =" not in out:
            failures += 1
        ok, out = loads(filler(surplus - 100), library)
        refused = not ok and re.search(r"static TLS", out) is not None
        print(f"late_dlopen: after a filler leaving 100 bytes: {'refused' if refused else 'NOT refused'} ({out})")
        if not refused:
            failures += 1   # then the 256-byte case proves nothing
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
