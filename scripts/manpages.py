#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""Generates QueueKit's manual pages from the documentation of include/queuekit.h.

The header is the reference manual: every declaration carries a /** ... */ comment right above
it. This script turns it into
  - one section-3 page per exported function (qk_queue_sync.3, ...): the prototype with the types
    it uses, its documentation, the documentation of those types, the statuses it names, and the
    other functions of its header section;
  - queuekit.7, the overview: the header's opening comment, the table of statuses (from
    QK_STATUS_MAP, the one status list), and each header section's types, macros and functions.
Nothing is listed by hand: a function declared with QK_EXPORT gets its page; a declaration of it
without a doc comment is an error.

    manpages.py HEADER OUTDIR [--version X.Y.Z] [--gzip]   write the pages
    manpages.py HEADER --list                               print the page file names
"""
import argparse
import gzip
import os
import re
import sys

from queuekit_header import header_version, read_header, status_map  # the one reader of the header

MANUAL = "QueueKit Manual"


# ------------------------------------------------------------------------------------------
# Writing roff
# ------------------------------------------------------------------------------------------

def escape(text):
    """Text safe inside a roff line (not at its start); non-ASCII as groff's \\[uXXXX]."""
    text = text.replace("\\", "\\e")
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)


def line_start(line):
    """A roff text line: a leading '.' or "'" would be a request."""
    return "\\&" + line if line[:1] in (".", "'") else line


def inline(text):
    """Escaped text with `code` and QueueKit names in bold."""
    out, pos = [], 0
    for match in re.finditer(r"`([^`]+)`|\b((?:qk|QK)_\w+(?:\(\))?)", text):
        out.append(escape(text[pos:match.start()]))
        out.append("\\fB" + escape(match.group(1) or match.group(2)) + "\\fR")
        pos = match.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def paragraphs(lines):
    """Doc comment lines as roff: paragraphs, '- ' and 'N. ' lists, underlined headings, and
    indented code blocks."""
    out, i = [], 0
    base = 0

    def indent_of(line):
        return len(line) - len(line.lstrip())

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following.strip() and set(following.strip()) <= set("-=") and len(following.strip()) >= 3:
            out += [".SS " + escape(line.strip())]
            i += 2
            continue
        item = re.match(r"(\s*)(- |\* |\d+\. )(.*)", line)
        if item:
            marker = item.group(2).strip()
            text, level = [item.group(3)], indent_of(line)
            i += 1
            while i < len(lines) and lines[i].strip() and indent_of(lines[i]) > level:
                text.append(lines[i].strip())
                i += 1
            bullet = "\\(bu" if marker in ("-", "*") else marker
            out += [f".IP {bullet} 4"] + [line_start(inline(t)) for t in text]
            continue
        if indent_of(line) >= base + 4:
            code = []
            while i < len(lines) and (not lines[i].strip() or indent_of(lines[i]) >= base + 4):
                code.append(lines[i][base + 4:] if lines[i].strip() else "")
                i += 1
            while code and not code[-1]:
                code.pop()
            out += [".PP", ".RS 4", ".nf"] + [line_start(escape(c)) for c in code] + [".fi", ".RE"]
            continue
        text = []
        while i < len(lines) and lines[i].strip() and indent_of(lines[i]) < base + 4 \
                and not re.match(r"\s*(- |\* |\d+\. )", lines[i]):
            text.append(lines[i].strip())
            i += 1
        out += [".PP"] + [line_start(inline(t)) for t in text]
    return out


def code_block(decl):
    """A declaration as no-fill text, the export macros removed and member docs as comments."""
    lines = re.sub(r"/\*\*<\s*", "/* ", decl).split("\n")
    first = re.sub(r"\bQK_(EXPORT|NORETURN)\s+", "", lines[0])
    shift = len(lines[0]) - len(first)       # continuation lines stay aligned with the first
    rest = [line[shift:] if not line[:shift].strip() else line for line in lines[1:]]
    return [line_start(escape(line.rstrip())) for line in [first] + rest]


def first_sentence(lines):
    """The first sentence of a doc comment's first paragraph, for NAME lines and lists."""
    paragraph = []
    for line in lines:
        if not line.strip():
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph)
    text = text.replace("`", "")
    match = re.match(r"(.+?\.)(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence.rstrip(".:")


def title(name, section, version):
    return [f'.TH "{name}" "{section}" "" "QueueKit {version}" "{MANUAL}"',
            ".\\\" Generated by scripts/manpages.py from include/queuekit.h; do not edit.",
            ".nh", ".ad l"]  # identifiers are not hyphenated; ragged right


def see_also(names):
    out = [".SH SEE ALSO"]
    for n, (name, section) in enumerate(names):
        out.append(f".BR {name} ({section})" + ("," if n + 1 < len(names) else ""))
    return out


def function_page(item, items, statuses, version):
    types = {i.name: i for i in items if i.kind == "type"}
    used = [types[name] for name in dict.fromkeys(re.findall(r"\b\w+_t\b", item.decl)) if name in types]
    out = title(item.name, 3, version)
    out += [".SH NAME", f"{item.name} \\- {escape(first_sentence(item.doc))}"]
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.h>", ".PP"]
    for t in used:
        out += code_block(t.decl) + [""]
    out += code_block(item.decl) + [".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(item.doc)
    for t in used:
        if len(t.doc) > 1 or t.doc[0] != "":
            out += [f".SS {t.name}"] + paragraphs(t.doc)
    named = [(name, text) for name, text in statuses if re.search(rf"\b{name}\b", " ".join(item.doc))]
    if named:
        out += [".SH ERRORS", "The statuses this page names (every status: \\fBqueuekit\\fR(7)):"]
        for name, text in named:
            out += [".TP", f".B {name}", line_start(escape(text))]
    siblings = [i.name for i in items if i.kind == "function" and i.section == item.section and i is not item]
    out += see_also([(n, 3) for n in siblings] + [("queuekit", 7)])
    return out


def overview_page(intro, items, statuses, version):
    out = title("QUEUEKIT", 7, version)
    heading = intro[0] if intro else "queuekit.h"
    summary = re.sub(r"^[\w.]+\.h\s+\S+\s+", "", heading).rstrip(".") or "the C interface of QueueKit"
    out += [".SH NAME", f"queuekit \\- {escape(summary)}"]
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.h>", ".PP",
            "cc program.c $(pkg\\-config \\-\\-cflags \\-\\-libs queuekit)", ".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(intro[1:])
    out += [".SH STATUSES", "0 is success; every other status is one of these <errno.h> values "
            "(\\fBqk_strerror\\fR(3) describes one, \\fBqk_status_name\\fR(3) names it):"]
    for name, text in statuses:
        out += [".TP", f".B {name}", line_start(escape(text))]
    sections = list(dict.fromkeys(i.section for i in items))
    for section in sections:
        members = [i for i in items if i.section == section]
        out += [f'.SH "{escape(section.upper())}"' if section else ".SH DECLARATIONS"]
        for i in members:
            if i.kind == "function":
                continue
            if i.kind == "macro" and i.name == "QK_STATUS_MAP":
                out += [f".SS {i.name}"] + paragraphs(i.doc)
                continue
            out += [f".SS {escape(i.name or 'declaration')}", ".PP", ".nf"] + code_block(i.decl) + [".fi"]
            out += paragraphs(i.doc)
        functions = [i for i in members if i.kind == "function"]
        if functions:
            out += [".SS Functions"]
            for i in functions:
                out += [".TP", f".BR {i.name} (3)", line_start(inline(first_sentence(i.doc))) + "."]
    out += see_also([(i.name, 3) for i in items if i.kind == "function"])
    return out


# ------------------------------------------------------------------------------------------

def pages(header, version):
    intro, items, exported = read_header(header)
    documented = {i.name for i in items if i.kind == "function"}
    undocumented = sorted(exported - documented)
    if undocumented:
        raise SystemExit("manpages: exported without a /** */ doc comment right above: "
                         + ", ".join(undocumented))
    statuses = status_map(items)
    result = {f"{i.name}.3": function_page(i, items, statuses, version)
              for i in items if i.kind == "function"}
    result["queuekit.7"] = overview_page(intro, items, statuses, version)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("header")
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("--version", help="the version in the page footers (default: the header's)")
    parser.add_argument("--gzip", action="store_true", help="write NAME.N.gz (gzip -9n) instead")
    parser.add_argument("--list", action="store_true", help="print the page file names and exit")
    args = parser.parse_args()
    generated = pages(args.header, args.version or header_version(args.header))
    if args.list:
        print("\n".join(sorted(generated)))
        return
    if not args.outdir:
        parser.error("OUTDIR is required unless --list")
    for name, lines in generated.items():
        section = name.rsplit(".", 1)[1]
        directory = os.path.join(args.outdir, f"man{section}")
        os.makedirs(directory, exist_ok=True)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path = os.path.join(directory, name)
        if args.gzip:
            with open(path + ".gz", "wb") as raw:
                with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as f:
                    f.write(data)
        else:
            with open(path, "wb") as f:
                f.write(data)
    print(f"manpages: {len(generated)} pages in {args.outdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
