#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""The one reader of include/queuekit.h, shared by the manual pages (manpages.py) and the ABI gate
(abi.py): its documented declarations, its exported functions, its status list and its version.

A declaration is documented by the /** ... */ comment right above it; a function is exported
when its declaration carries QK_EXPORT; the header's sections are its /* === */ banners.
"""
import re


class Item:
    """A documented declaration: its doc comment text, the declaration, its kind and name."""

    def __init__(self, doc, decl, section):
        self.doc, self.decl, self.section = doc, decl, section
        self.kind, self.name = classify(decl)


def classify(decl):
    if decl.startswith("#define"):
        return "macro", re.match(r"#define\s+(\w+)", decl).group(1)
    if re.search(r"\bQK_EXPORT\b", decl):
        match = re.search(r"\b(qk_\w+)\s*\(", decl)
        if match:
            return "function", match.group(1)
    if decl.startswith("typedef"):
        match = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl) or re.search(r"(\w+)\s*;\s*$", decl)
        if match:
            return "type", match.group(1)
    return "other", None


def doc_lines(comment):
    """The lines of a /** ... */ comment without the comment markers, dedented."""
    body = comment[3:-2]
    lines = body.split("\n")
    cleaned = [lines[0].strip()]
    for line in lines[1:]:
        cleaned.append(re.sub(r"^\s*\*(?=\s|$)", "", line).rstrip())
    rest = [line for line in cleaned[1:] if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    result = [cleaned[0]] + [line[indent:] for line in cleaned[1:]]
    while result and not result[-1].strip():
        result.pop()
    while result and not result[0].strip():
        result.pop(0)
    return result


def declaration_at(text, pos):
    """The declaration that starts at pos: a #define with its continuation lines, or everything
    up to the ';' that ends it outside braces. Returns (declaration, end position)."""
    if text.startswith("#define", pos):
        end = pos
        while True:
            newline = text.find("\n", end)
            if newline < 0:
                newline = len(text)
            if text[end:newline].rstrip().endswith("\\") and newline < len(text):
                end = newline + 1
                continue
            return text[pos:newline].rstrip(), newline
    depth, i = 0, pos
    while i < len(text):
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            return text[pos:i + 1], i + 1
        i += 1
    raise SystemExit(f"manpages: unterminated declaration at offset {pos}")


def read_header(path):
    """(opening comment lines, [Item], names of exported functions in the header)."""
    text = open(path, encoding="utf-8").read()
    opening = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    intro = doc_lines("/**" + opening.group(1) + "*/") if opening else []
    banner = re.compile(r"/\*\s*=+\s*\*/\s*\n\s*/\*\s*(.*?)\s*\*/\s*\n\s*/\*\s*=+\s*\*/")
    doc = re.compile(r"/\*\*(?!<).*?\*/", re.S)
    items, section, pos = [], "", opening.end() if opening else 0
    while True:
        next_doc = doc.search(text, pos)
        next_banner = banner.search(text, pos)
        if next_banner and (not next_doc or next_banner.start() < next_doc.start()):
            section = next_banner.group(1)
            pos = next_banner.end()
            continue
        if not next_doc:
            break
        start = next_doc.end()
        while start < len(text) and text[start].isspace():
            start += 1
        decl, pos = declaration_at(text, start)
        items.append(Item(doc_lines(next_doc.group(0)), decl, section))
    exported = set(re.findall(r"\bQK_EXPORT\b[^;]*?\b(qk_\w+)\s*\(", text, re.S))
    return intro, items, exported


def status_map(items):
    """[(name, description)] from QK_STATUS_MAP's XX(code, "text" "text") entries."""
    for item in items:
        if item.kind == "macro" and item.name == "QK_STATUS_MAP":
            body = item.decl.replace("\\\n", " ")
            entries = re.findall(r'XX\(\s*(\w+)\s*,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', body)
            return [(name, "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', strings)))
                    for name, strings in entries]
    return []


def header_version(header):
    text = open(header, encoding="utf-8").read()
    parts = [re.search(rf"#define\s+QK_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(p.group(1) for p in parts) if all(parts) else ""


def exported_functions(header):
    """The names of the functions the header declares with QK_EXPORT, sorted."""
    return sorted(read_header(header)[2])
