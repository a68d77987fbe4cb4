#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""The ABI gate of libqueuekit.so.0: its exported symbols against the record in the repository.

The record is cmake/libqueuekit0.symbols, a Debian symbols file (it becomes the libqueuekit0
package's DEBIAN/symbols, so dependent packages get the right minimum version): for every
exported symbol, the version it first appeared in, and above it, as a comment, its C prototype
without parameter names (taken from include/queuekit.h).

    abi.py check LIBRARY HEADER RECORD   fails when a recorded symbol is no longer exported or its
                                         prototype or symbol version changed (incompatible under
                                         the same SONAME), and when an exported symbol is not
                                         recorded yet (adding one means adding it to the record)
    abi.py gate LIBRARY HEADER RECORD    the check, after proving it catches each kind of break
                                         on altered copies of the record (the test stage)
    abi.py entry HEADER NAME VERSION     prints the record lines of one function
    abi.py control RECORD OUTPUT         writes the record without its comments (DEBIAN/symbols)
"""
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from manpages import header_version, read_header  # noqa: E402  (the one parser of the header)

QUALIFIERS = {"const", "volatile", "restrict", "signed", "unsigned", "struct", "enum", "union"}


def prototype(decl):
    """A declaration as one line without export macros and parameter names:
    'int qk_queue_sync(qk_queue_t *, void *, qk_function_t)'."""
    decl = re.sub(r"\bQK_(EXPORT|NORETURN)\b", "", decl)
    decl = " ".join(decl.replace(";", "").split())
    match = re.match(r"(.*?\bqk_\w+)\s*\((.*)\)$", decl)
    if not match:
        return decl
    params = []
    for param in match.group(2).split(","):
        param = param.strip()
        named = re.match(r"(.*?)\s*\b([A-Za-z_]\w*)$", param)
        if named and set(re.findall(r"[A-Za-z_]\w*", named.group(1))) - QUALIFIERS:
            param = named.group(1).strip()
        params.append(param)
    return f"{match.group(1)}({', '.join(params)})".replace("( ", "(")


def header_prototypes(header):
    _, items, _ = read_header(header)
    return {i.name: prototype(i.decl) for i in items if i.kind == "function"}


def exported_symbols(library):
    """{name: version tag} of the defined dynamic symbols ('Base' when unversioned)."""
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        name = line.split()[-1]
        base, _, version = name.replace("@@", "@").partition("@")
        symbols[base] = version or "Base"
    return symbols


def read_record(path):
    """(header line, {name: (version tag, minimum version, prototype comment)})."""
    lines = open(path, encoding="utf-8").read().splitlines()
    record, comment = {}, None
    for line in lines[1:]:
        if line.startswith("# "):
            comment = line[2:].strip()
        elif line.startswith(" "):
            symbol, minimum = line.split()[:2]
            name, _, tag = symbol.partition("@")
            record[name] = (tag, minimum, comment)
            comment = None
    return lines[0], record


def entry(name, proto, version):
    return f"# {proto}\n {name}@Base {version}"


def check(library, header, path):
    _, record = read_record(path)
    exported = exported_symbols(library)
    prototypes = header_prototypes(header)
    version = header_version(header)
    rel = os.path.relpath(path)
    problems = []
    for name, (tag, minimum, proto) in sorted(record.items()):
        if name not in exported:
            problems.append(f"REMOVED {name}: recorded in {rel} since {minimum} but no longer exported. "
                            "Programs linked against libqueuekit.so.0 would fail to load: restore it "
                            "(removing or changing a symbol needs a new SONAME, i.e. a new major version).")
            continue
        if exported[name] != tag:
            problems.append(f"CHANGED {name}: symbol version {exported[name]}, recorded {tag}.")
        if name in prototypes and proto != prototypes[name]:
            problems.append(f"CHANGED {name}: the header declares\n    {prototypes[name]}\n  "
                            f"the record says\n    {proto}\n  an incompatible change under the same "
                            "SONAME: keep the old signature (add a new function instead).")
    for name in sorted(set(exported) - set(record)):
        proto = prototypes.get(name, "(not declared in the header)")
        problems.append(f"NEW {name}: exported but not in the ABI record. Adding a symbol requires "
                        f"updating the record: append to {rel}\n{entry(name, proto, version)}\n  "
                        "(the version is the first release that ships it: the header's QK_VERSION_*).")
    for problem in problems:
        print(f"abi: {problem}", file=sys.stderr)
    print(f"abi: {len(exported)} symbols exported, {len(record)} recorded, {len(problems)} problems")
    return 1 if problems else 0


def gate(library, header, path):
    """The check, after proving on altered copies of the record that it catches each kind of
    break: a symbol gone, a prototype changed, a symbol new and unrecorded."""
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    symbol_at = next(i for i, line in enumerate(lines) if line.startswith(" qk_"))
    name = lines[symbol_at].split()[0].split("@")[0]
    altered = {
        "a recorded symbol that is no longer exported": lines + [
            "# int qk_removed_function(void)\n", " qk_removed_function@Base 0.1.0\n"],
        "a changed prototype": [("# void " + name + "(void)\n") if i == symbol_at - 1 else line
                                for i, line in enumerate(lines)],
        "an exported symbol missing from the record": [
            line for i, line in enumerate(lines) if i not in (symbol_at - 1, symbol_at)],
    }
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        for what, content in altered.items():
            copy = os.path.join(tmp, "record.symbols")
            with open(copy, "w", encoding="utf-8") as f:
                f.writelines(content)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                caught = check(library, header, copy) != 0
            print(f"abi: the gate {'catches' if caught else 'MISSES'} {what}")
            if not caught:
                missed.append(what)
    return check(library, header, path) or (1 if missed else 0)


def control(path, output):
    with open(output, "w", encoding="utf-8") as out:
        for line in open(path, encoding="utf-8"):
            if not line.startswith("#"):
                out.write(line)


def main(argv):
    if len(argv) == 4 and argv[0] == "check":
        return check(*argv[1:])
    if len(argv) == 4 and argv[0] == "gate":
        return gate(*argv[1:])
    if len(argv) == 4 and argv[0] == "entry":
        print(entry(argv[2], header_prototypes(argv[1])[argv[2]], argv[3]))
        return 0
    if len(argv) == 3 and argv[0] == "control":
        control(*argv[1:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
