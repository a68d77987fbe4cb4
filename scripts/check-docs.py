#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers
"""Checks the documentation a user reads:
  - README.md has at most 250 lines, and the project files a newcomer looks for exist (LICENSE,
    NOTICE, CHANGELOG.md, CONTRIBUTING.md, SECURITY.md);
  - the benchmark tables of Benchmarks/README.md are generated from docs/benchmark-*.csv;
  - every repository path the README, CONTRIBUTING.md, SECURITY.md and docs/ name exists;
  - no history words in what users read (README.md, CONTRIBUTING.md, SECURITY.md, docs/, the
    manual pages' sources, Benchmarks/README.md, the DocC catalog, the public headers): the
    documentation describes what the library does, not how it came to do it. The project's
    history is CHANGELOG.md's and the commit messages'. (The benchmark's output, docs/benchmark-*,
    is data the benchmark program writes: its row names are the benchmark's.)

    check-docs.py
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
README_LIMIT = 250
REQUIRED_FILES = ["LICENSE", "NOTICE", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"]
GENERATED = re.compile(r"<!-- BEGIN GENERATED: .*? -->.*?<!-- END GENERATED: .*? -->", re.S)

HISTORY = [
    (r"\bissues?\s*#?\d+", "an issue number"),
    (r"\b(?:the|its|our) seed\b|\bseed's\b|\bseed (?:code|project|version)\b", "the seed"),
    (r"\bturns?\s+\d+\b", "a turn number"),
    (r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bwas )(?<!\bwere )(?<!\bbeing )\bused to\b", "\"used to\""),
    (r"\bthis (?:evening|morning|afternoon|round|session)\b", "a moment in time"),
    (r"\bas before\b", "\"as before\""),
    (r"\bAPI\.md\b", "the contract file"),
    (r"\bfrom this version on\b|\bused to be\b", "a version comparison"),
]


def user_facing():
    files = [os.path.join(ROOT, name) for name in ("README.md", "CONTRIBUTING.md", "SECURITY.md")]
    files += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "docs", "man", "*.txt"))
    files += glob.glob(os.path.join(ROOT, "docs", "**", "*.c"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "docs", "**", "*.cpp"), recursive=True)
    files += [os.path.join(ROOT, "Benchmarks", "README.md")]
    files += glob.glob(os.path.join(ROOT, "Sources", "**", "*.docc", "**", "*.md"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "include", "*.h")) + glob.glob(os.path.join(ROOT, "include", "*.hpp"))
    return sorted(set(f for f in files if os.path.isfile(f)))


PATH_MENTION = re.compile(r"`((?:docs|scripts|examples|include|cmake|Sources|Tests|Benchmarks)/[^`\s]*)`"
                          r"|\]\(((?:\.\./)?[\w./*-]+)\)")


def missing_paths(path):
    """Repository paths a page names (in `code` or as a relative link) that do not exist."""
    missing = []
    for number, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        for match in PATH_MENTION.finditer(line):
            named, link = match.group(1), match.group(2)
            if link and (link.startswith("http") or "://" in link):
                continue
            if "<" in (named or "") or "/.build" in (named or link):   # placeholders, build products
                continue
            where = os.path.join(ROOT, named) if named else os.path.join(os.path.dirname(path), link)
            where = where.rstrip("/").split(":")[0]
            if not glob.glob(where):
                missing.append(f"{os.path.relpath(path, ROOT)}:{number}: names {named or link}, which does not exist")
    return missing


def main():
    problems = []
    pages = [os.path.join(ROOT, name) for name in ("README.md", "CONTRIBUTING.md", "SECURITY.md")]
    pages += glob.glob(os.path.join(ROOT, "docs", "*.md")) + [os.path.join(ROOT, "Benchmarks", "README.md")]
    for page in pages:
        if os.path.isfile(page):
            problems += missing_paths(page)
    for name in REQUIRED_FILES:
        if not os.path.isfile(os.path.join(ROOT, name)):
            problems.append(f"{name}: missing")
    readme = os.path.join(ROOT, "README.md")
    count = len(open(readme, encoding="utf-8").read().rstrip("\n").split("\n"))
    print(f"README.md: {count} lines (at most {README_LIMIT})")
    if count > README_LIMIT:
        problems.append(f"README.md: {count} lines, more than {README_LIMIT}")
    files = user_facing()
    for path in files:
        text = open(path, encoding="utf-8").read()
        # Generated tables quote the benchmark's own row names; they are checked where produced.
        text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for number, line in enumerate(text.split("\n"), 1):
            for pattern, what in HISTORY:
                match = re.search(pattern, line, re.I)
                if match:
                    problems.append(f"{os.path.relpath(path, ROOT)}:{number}: {what} ({match.group(0)!r}): {line.strip()[:100]}")
    print(f"{len(files)} files read for history words")
    tables = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-tables.py"), "--verify",
                             os.path.join(ROOT, "docs")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(tables.stdout.strip())
    if tables.returncode != 0:
        problems.append("Benchmarks/README.md: tables not generated from docs/benchmark-*.csv")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
