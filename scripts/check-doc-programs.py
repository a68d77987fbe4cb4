#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
"""Compiles, and runs, every complete program the documentation shows, against the installed
library, so that a snippet that stops compiling fails the test suite.

What counts as a program:
  - a fenced ```c / ```cpp block with a `main` function, and a ```swift block that imports
    QueueKit, in README.md, CONTRIBUTING.md, docs/**/*.md, Benchmarks/README.md and the DocC
    articles (Sources/**/*.docc/**/*.md);
  - docs/**/*.c and docs/**/*.cpp;
  - the EXAMPLES section of every installed manual page that has a `main` function (C++ when it
    includes <queuekit.hpp>).

C programs are built with gcc (-std=gnu17, as `cc` builds), C++ programs with g++ (-std=c++17) against <queuekit.hpp> (skipped,
and said so, while the installed prefix has no queuekit.hpp), both with -Wall -Wextra -Werror and
`pkg-config --cflags --libs queuekit` from PREFIX. Swift programs become the executables of one
SwiftPM package that depends on this repository by path. Every program is then run (60 s at most)
and must exit with 0, unless the Markdown line right above its fence is
`<!-- docs-programs: compile-only -->` (programs that never end on their own, such as ones that
call qk_main()).

    check-doc-programs.py PREFIX        e.g. stage
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
COMPILE_ONLY = "<!-- docs-programs: compile-only -->"
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
LANGUAGES = {"c": "c", "cpp": "c++", "c++": "c++", "cxx": "c++", "swift": "swift"}
TIMEOUT = 60


class Program:
    def __init__(self, origin, language, code, run=True):
        self.origin, self.language, self.code, self.run = origin, language, code, run


def is_program(language, code):
    if language == "swift":
        return re.search(r"^\s*import\s+QueueKit\b", code, re.M) is not None
    return re.search(r"\bint\s+main\s*\(", code) is not None


def markdown_programs(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, language = match.group(1), match.group(2).lower()
        start, i = i, i + 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        language = LANGUAGES.get(language)
        code = "\n".join(body) + "\n"
        if language and is_program(language, code):
            run = not (start > 0 and lines[start - 1].strip() == COMPILE_ONLY)
            found.append(Program(f"{os.path.relpath(path, ROOT)}:{start + 1}", language, code, run))
    return found


def unroff(line):
    line = line[2:] if line.startswith("\\&") else line
    line = re.sub(r"\\\[u([0-9A-F]{4})\]", lambda m: chr(int(m.group(1), 16)), line)
    return line.replace("\\e", "\\")


def manpage_programs(mandir):
    found = []
    for path in sorted(glob.glob(os.path.join(mandir, "man*", "*"))):
        opener = __import__("gzip").open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
        match = re.search(r"^\.SH EXAMPLES\n(.*?)(?=^\.SH )", text, re.S | re.M)
        if not match:
            continue
        code = re.search(r"^\.nf\n(.*?)^\.fi$", match.group(1), re.S | re.M)
        if not code:
            continue
        body = "\n".join(unroff(line) for line in code.group(1).split("\n")) + "\n"
        language = "c++" if re.search(r"#include\s*<queuekit\.hpp>", body) else "c"
        if is_program(language, body):
            found.append(Program(os.path.relpath(path, ROOT) + " EXAMPLES", language, body))
    return found


def collect(prefix):
    markdown = [os.path.join(ROOT, name) for name in ("README.md", "CONTRIBUTING.md")]
    markdown += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    markdown += [os.path.join(ROOT, "Benchmarks", "README.md")]
    markdown += glob.glob(os.path.join(ROOT, "Sources", "**", "*.docc", "**", "*.md"), recursive=True)
    programs = []
    for path in sorted(set(p for p in markdown if os.path.exists(p))):
        programs += markdown_programs(path)
    for extension, language in (("c", "c"), ("cpp", "c++")):
        for path in sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*." + extension), recursive=True)):
            code = open(path, encoding="utf-8").read()
            if is_program(language, code):
                programs.append(Program(os.path.relpath(path, ROOT), language, code))
    programs += manpage_programs(os.path.join(prefix, "share", "man"))
    return programs


def run(command, **options):
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **options)


def pkg_config(prefix):
    environment = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    result = run(["pkg-config", "--cflags", "--libs", "queuekit"], env=environment)
    if result.returncode != 0:
        raise SystemExit(f"check-doc-programs: pkg-config finds no queuekit under {prefix}:\n{result.stdout}")
    return result.stdout.split() + [f"-Wl,-rpath,{os.path.join(prefix, 'lib')}"]


def execute(program, binary):
    if not program.run:
        return True, "built (compile-only)"
    try:
        result = run([binary], timeout=TIMEOUT, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return False, f"built, but did not end within {TIMEOUT} s"
    if result.returncode != 0:
        return False, f"built, but exited with {result.returncode}:\n{result.stdout}"
    return True, "built and ran"


def check_native(programs, prefix, work):
    flags = pkg_config(prefix)
    has_hpp = os.path.exists(os.path.join(prefix, "include", "queuekit.hpp"))
    results = []
    for n, program in enumerate(programs):
        if program.language == "c++" and not has_hpp:
            results.append((program, None, f"SKIPPED: {prefix}/include/queuekit.hpp is not installed"))
            continue
        extension, compiler, standard = (("c", "gcc", "-std=gnu17") if program.language == "c"
                                         else ("cpp", "g++", "-std=c++17"))
        source = os.path.join(work, f"program{n}.{extension}")
        binary = os.path.join(work, f"program{n}")
        with open(source, "w", encoding="utf-8") as f:
            f.write(program.code)
        built = run([compiler, standard, "-Wall", "-Wextra", "-Werror", "-pthread", source, "-o", binary] + flags)
        if built.returncode != 0:
            results.append((program, False, f"does not compile:\n{built.stdout}"))
            continue
        ok, text = execute(program, binary)
        results.append((program, ok, text))
    return results


def check_swift(programs, work):
    if not programs:
        return []
    package = os.path.join(work, "swift")
    identity = os.path.basename(ROOT).lower()
    targets = []
    for n, program in enumerate(programs):
        name = f"DocProgram{n}"
        os.makedirs(os.path.join(package, "Sources", name))
        with open(os.path.join(package, "Sources", name, "main.swift"), "w", encoding="utf-8") as f:
            f.write(program.code)
        targets.append(f'        .executableTarget(name: "{name}", '
                       f'dependencies: [.product(name: "QueueKit", package: "{identity}")]),')
    with open(os.path.join(package, "Package.swift"), "w", encoding="utf-8") as f:
        f.write("// swift-tools-version:6.0\nimport PackageDescription\n\n"
                "let package = Package(\n    name: \"DocPrograms\",\n"
                f"    dependencies: [.package(path: {ROOT!r})],\n".replace("'", '"')
                + "    targets: [\n" + "\n".join(targets) + "\n    ]\n)\n")
    scratch = os.path.join(ROOT, ".build-doc-programs")
    built = run(["swift", "build", "--package-path", package, "--scratch-path", scratch])
    results = []
    if built.returncode != 0:
        for n, program in enumerate(programs):
            errors = [line for line in built.stdout.split("\n") if f"/DocProgram{n}/" in line]
            if errors:
                results.append((program, False, "does not compile:\n" + "\n".join(errors)))
        if not results:
            results = [(programs[0], False, "the Swift package does not build:\n" + built.stdout[-3000:])]
        return results
    bin_dir = run(["swift", "build", "--package-path", package, "--scratch-path", scratch,
                   "--show-bin-path"]).stdout.strip()
    for n, program in enumerate(programs):
        ok, text = execute(program, os.path.join(bin_dir, f"DocProgram{n}"))
        results.append((program, ok, text))
    return results


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    prefix = os.path.abspath(sys.argv[1])
    programs = collect(prefix)
    if not programs:
        raise SystemExit("check-doc-programs: no programs found in the documentation")
    work = tempfile.mkdtemp(prefix="doc-programs.")
    try:
        results = check_native([p for p in programs if p.language != "swift"], prefix, work)
        results += check_swift([p for p in programs if p.language == "swift"], work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = 0
    for program, ok, text in results:
        verdict = "SKIP" if ok is None else "ok  " if ok else "FAIL"
        first, _, rest = text.partition("\n")
        print(f"{verdict} {program.origin} ({program.language}): {first}")
        if rest.strip():
            print("\n".join("       " + line for line in rest.rstrip().split("\n")[:40]))
        failed += ok is False
    skipped = sum(1 for _, ok, _ in results if ok is None)
    print(f"{len(results)} programs: {len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
