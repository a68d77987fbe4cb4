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
  - one section-7 page per numbered header section, the component (queuekit-queue.7, ...): its
    types, functions and a complete program;
  - queuekit-cpp.7, the C++ layer, from the opening comment of <queuekit.hpp> (beside the header),
    when that header exists.
Nothing is listed by hand: a function declared with QK_EXPORT gets its page; a declaration of it
without a doc comment is an error.

Every page has NAME, LIBRARY, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, EXAMPLES and SEE ALSO.
What the header cannot say in a doc comment comes from the page's supplement, PAGES/NAME.txt
(docs/man/ by default), checked against the code by hand:

    RETURN VALUE
    0 when `work` ran; otherwise one of the statuses under ERRORS.

    ERRORS
    EDEADLK  text specific to this call (optional: the status list's text otherwise)
    EINVAL

    EXAMPLES
    code, shown verbatim (a fragment per function, a complete program per component page)

ERRORS may say "None." for a call that cannot fail. A page whose supplement is missing, or lacks
one of these sections, or names a status the library does not have, is an error.

    manpages.py HEADER OUTDIR [--version X.Y.Z] [--gzip] [--pages DIR]   write the pages
    manpages.py HEADER --list [--pages DIR]                               print the page file names
"""
import argparse
import gzip
import os
import re
import sys

from queuekit_header import doc_lines, header_version, read_header, status_map  # the one reader of the header

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
    """Escaped text with `code` and QueueKit names in bold; the header's "section N" becomes
    the component's page."""
    text = re.sub(r"\bsection (\d+)\b",
                  lambda m: f"{COMPONENTS[m.group(1)]}(7)" if m.group(1) in COMPONENTS else m.group(0), text)
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


# ------------------------------------------------------------------------------------------
# Supplements: RETURN VALUE, ERRORS and EXAMPLES of each page
# ------------------------------------------------------------------------------------------

LIBRARY = ["QueueKit (libqueuekit, \\-lqueuekit)", ".br",
           "\\fBpkg\\-config \\-\\-cflags \\-\\-libs queuekit\\fR"]
REQUIRED = ["NAME", "LIBRARY", "SYNOPSIS", "DESCRIPTION", "RETURN VALUE", "ERRORS", "EXAMPLES", "SEE ALSO"]
# Statuses a call can return that the status list does not name (they come from the system).
SYSTEM_STATUSES = {"EAGAIN": "the system lacked the resources to start a thread"}
# The component page of each numbered header section.
COMPONENTS = {"1": "queuekit-queue", "2": "queuekit-dbqueue", "3": "queuekit-condlock",
              "4": "queuekit-deadlock", "5": "queuekit-lockorder"}
DEFAULT_PAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "man")
SUPPLEMENT_SECTIONS = ("RETURN VALUE", "ERRORS", "EXAMPLES")


class PageError(Exception):
    pass


def read_supplement(pages_dir, page):
    """{section: [lines]} of PAGES/PAGE.txt; PageError when it is missing or lacks a section."""
    path = os.path.join(pages_dir, page + ".txt")
    if not os.path.exists(path):
        raise PageError(f"{page}: no supplement {os.path.normpath(path)} (RETURN VALUE, ERRORS, EXAMPLES)")
    sections, current = {}, None
    for line in open(path, encoding="utf-8").read().split("\n"):
        if line.strip() in SUPPLEMENT_SECTIONS and line == line.strip():
            current = line.strip()
            sections[current] = []
        elif current:
            sections[current].append(line.rstrip())
        elif line.strip() and not line.startswith("#"):
            raise PageError(f"{page}: text before the first section in {path}")
    for name in SUPPLEMENT_SECTIONS:
        body = sections.get(name, [])
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        if not body:
            raise PageError(f"{page}: the supplement {path} lacks {name}")
        sections[name] = body
    return sections


def error_entries(page, lines, statuses):
    """[(status, text)] of a supplement's ERRORS; [] for "None."."""
    known = dict(statuses)
    known.update(SYSTEM_STATUSES)
    if lines[0].startswith("None"):
        if len(lines) > 1:
            raise PageError(f"{page}: ERRORS says None and more")
        return lines[0].strip()
    entries = []
    for line in lines:
        if not line.strip():
            continue
        if line[:1].isspace() and entries:
            entries[-1][1].append(line.strip())
            continue
        match = re.match(r"(E[A-Z]+)\b\s*(.*)", line)
        if not match:
            raise PageError(f"{page}: ERRORS line is not 'ESTATUS [text]': {line!r}")
        name = match.group(1)
        if statuses and name not in known:     # (a header without a status list checks nothing)
            raise PageError(f"{page}: ERRORS names {name}, which no QueueKit call returns")
        entries.append((name, [match.group(2)] if match.group(2) else []))
    return [(name, " ".join(text) if text else known.get(name, name)) for name, text in entries]


def errors_section(entries, intro):
    if isinstance(entries, str):    # "None." or "None: why"
        return [".SH ERRORS", line_start(inline("None: this call cannot fail." if entries == "None." else entries))]
    if not entries:
        return [".SH ERRORS", "None: this call cannot fail."]
    out = [".SH ERRORS", intro]
    for name, text in entries:
        out += [".TP", f".B {name}", line_start(inline(text))]
    return out


def example_section(lines):
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return [".SH EXAMPLES", ".PP", ".RS 4", ".nf"] + \
        [line_start(escape(l[indent:])) for l in lines] + [".fi", ".RE"]


def check_sections(page, lines):
    present = [l[4:].strip('"') for l in lines if l.startswith(".SH ")]
    missing = [name for name in REQUIRED if name not in present]
    if missing:
        raise PageError(f"{page}: the page lacks {', '.join(missing)}")


# ------------------------------------------------------------------------------------------
# Pages
# ------------------------------------------------------------------------------------------

def component_of(section):
    match = re.match(r"(\d+)\.", section)
    return COMPONENTS.get(match.group(1)) if match else None


def function_page(item, items, statuses, version, supplement):
    types = {i.name: i for i in items if i.kind == "type"}
    used = [types[name] for name in dict.fromkeys(re.findall(r"\b\w+_t\b", item.decl)) if name in types]
    out = title(item.name, 3, version)
    out += [".SH NAME", f"{item.name} \\- {escape(first_sentence(item.doc))}"]
    out += [".SH LIBRARY"] + LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.h>", ".PP"]
    for t in used:
        out += code_block(t.decl) + [""]
    out += code_block(item.decl) + [".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(item.doc)
    for t in used:
        if len(t.doc) > 1 or t.doc[0] != "":
            out += [f".SS {t.name}"] + paragraphs(t.doc)
    out += [".SH RETURN VALUE"] + paragraphs(supplement["RETURN VALUE"])
    entries = error_entries(item.name, supplement["ERRORS"], statuses)
    intro = ("On failure it returns NULL and sets errno to one of:" if "*" in item.decl.split("(")[0]
             else "The statuses it returns (every status: \\fBqueuekit\\fR(7)):")
    out += errors_section(entries, intro)
    out += example_section(supplement["EXAMPLES"])
    siblings = [i.name for i in items if i.kind == "function" and i.section == item.section and i is not item]
    component = component_of(item.section)
    out += see_also(([(component, 7)] if component else []) + [(n, 3) for n in siblings] + [("queuekit", 7)])
    return out, entries


def declarations(members):
    """The non-function declarations of a section, each with its documentation."""
    out = []
    for i in members:
        if i.kind == "function":
            continue
        if i.kind == "macro" and i.name == "QK_STATUS_MAP":
            out += [f".SS {i.name}"] + paragraphs(i.doc)
            continue
        out += [f".SS {escape(i.name or 'declaration')}", ".PP", ".nf"] + code_block(i.decl) + [".fi"]
        out += paragraphs(i.doc)
    return out


def function_list(members):
    out = []
    for i in members:
        if i.kind == "function":
            out += [".TP", f".BR {i.name} (3)", line_start(inline(first_sentence(i.doc))) + "."]
    return out


def section_comment(text, section):
    """The plain /* ... */ comment right after a section's banner, when it has one: the
    section's introduction (section 4 of the header introduces itself that way)."""
    banner = re.search(r"/\*\s*" + re.escape(section) + r"\s*\*/\s*\n\s*/\*\s*=+\s*\*/\s*\n\s*(/\*(?!\*).*?\*/)",
                       text, re.S)
    lines = doc_lines("/**" + banner.group(1)[2:]) if banner else []
    # A block indented by two (a table in a plain comment) is shown as code, as one indented by four.
    out, in_block = [], False
    for line in lines:
        in_block = bool(line.strip()) and (in_block or (line.startswith("  ") and not line.startswith("   ")))
        out.append("  " + line if in_block else line)
    return out


def component_page(page, section, members, header_text, statuses, version, supplement, errors):
    name = re.sub(r"^\d+\.\s*", "", section)
    out = title(page, 7, version)
    out += [".SH NAME", f"{page} \\- QueueKit: {escape(name.lower())}"]
    out += [".SH LIBRARY"] + LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.h>", ".PP"]
    for i in members:
        if i.kind == "function":
            out += code_block(i.decl)
    out += [".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(section_comment(header_text, section))
    out += declarations(members)
    out += [".SS Functions"] + function_list(members)
    out += [".SH RETURN VALUE"] + paragraphs(supplement["RETURN VALUE"])
    union = {}
    for i in members:
        found = errors.get(i.name, [])
        for status, _ in (found if isinstance(found, list) else []):
            union.setdefault(status, []).append(i.name)
    order = list(dict.fromkeys([s for s, _ in statuses] + list(SYSTEM_STATUSES) + sorted(union)))
    entries = [(s, dict(statuses + list(SYSTEM_STATUSES.items())).get(s, s) + " (" +
                ", ".join(f"{n}" for n in union[s]) + ")") for s in order if s in union]
    own = error_entries(page, supplement["ERRORS"], statuses)
    entries = (own if isinstance(own, list) else []) + entries
    out += errors_section(entries, "The statuses the calls of this component return, and which calls:")
    out += example_section(supplement["EXAMPLES"])
    out += see_also([(i.name, 3) for i in members if i.kind == "function"] + [("queuekit", 7)])
    return out


def cpp_page(hpp, version, supplement):
    """queuekit-cpp(7): the opening comment of <queuekit.hpp>, its classes, and a C++ program."""
    text = open(hpp, encoding="utf-8").read()
    opening = re.search(r"/\*(.*?)\*/", text, re.S)
    if not opening:
        raise PageError("queuekit-cpp: queuekit.hpp has no opening comment")
    lines = doc_lines("/**" + opening.group(1) + "*/")
    # "queuekit.hpp — the C++ interface of QueueKit: ..." names the page; the class list below
    # it is the synopsis.
    summary = re.sub(r"^\S+\s+\S+\s+", "", lines[0]).rstrip(".")
    body = lines[1:]
    classes = [l.strip() for l in body if re.match(r"\s+qk::\w+", l)]
    description = [re.sub(r"namespace qk:$", "namespace qk (its classes: SYNOPSIS).", l)
                   for l in body if not re.match(r"\s+qk::\w+", l)]
    out = title("QUEUEKIT-CPP", 7, version)
    out += [".SH NAME", f"queuekit-cpp \\- {escape(summary)}"]
    out += [".SH LIBRARY"] + LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.hpp>", ".PP"]
    out += [line_start(escape(c)) for c in classes]
    out += [".PP", "c++ \\-std=c++17 program.cpp $(pkg\\-config \\-\\-cflags \\-\\-libs queuekit)", ".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(description)
    out += [".SH RETURN VALUE"] + paragraphs(supplement["RETURN VALUE"])
    out += [".SH ERRORS"] + paragraphs(supplement["ERRORS"])
    out += example_section(supplement["EXAMPLES"])
    out += see_also([("queuekit", 7)] + [(page, 7) for page in COMPONENTS.values()])
    return out


def overview_page(intro, items, statuses, version, supplement, components):
    out = title("QUEUEKIT", 7, version)
    heading = intro[0] if intro else "queuekit.h"
    summary = re.sub(r"^[\w.]+\.h\s+\S+\s+", "", heading).rstrip(".") or "the C interface of QueueKit"
    out += [".SH NAME", f"queuekit \\- {escape(summary)}"]
    out += [".SH LIBRARY"] + LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <queuekit.h>", ".PP",
            "cc program.c $(pkg\\-config \\-\\-cflags \\-\\-libs queuekit)", ".fi"]
    out += [".SH DESCRIPTION"] + paragraphs(intro[1:])
    if components:
        out += [".SS Components"]
        for page, section in components:
            out += [".TP", f".BR {page} (7)", escape(re.sub(r"^\d+\.\s*", "", section)) + "."]
    out += [".SH RETURN VALUE"] + paragraphs(supplement["RETURN VALUE"])
    out += [".SH ERRORS", "0 is success; every other status is one of these <errno.h> values "
            "(\\fBqk_strerror\\fR(3) describes one, \\fBqk_status_name\\fR(3) names it):"]
    for name, text in statuses:
        out += [".TP", f".B {name}", line_start(escape(text))]
    sections = list(dict.fromkeys(i.section for i in items))
    for section in sections:
        members = [i for i in items if i.section == section]
        out += [f'.SH "{escape(section.upper())}"' if section else ".SH DECLARATIONS"]
        out += declarations(members)
        if any(i.kind == "function" for i in members):
            out += [".SS Functions"] + function_list(members)
    out += example_section(supplement["EXAMPLES"])
    out += see_also([(page, 7) for page, _ in components] + [(i.name, 3) for i in items if i.kind == "function"])
    return out


# ------------------------------------------------------------------------------------------

def pages(header, version, pages_dir=DEFAULT_PAGES):
    intro, items, exported = read_header(header)
    documented = {i.name for i in items if i.kind == "function"}
    undocumented = sorted(exported - documented)
    if undocumented:
        raise SystemExit("manpages: exported without a /** */ doc comment right above: "
                         + ", ".join(undocumented))
    statuses = status_map(items)
    header_text = open(header, encoding="utf-8").read()
    problems, result, errors = [], {}, {}

    def supplement(page):
        try:
            return read_supplement(pages_dir, page)
        except PageError as error:
            problems.append(str(error))
            return None

    def add(page, make):
        try:
            lines = make()
            check_sections(page, lines)
            result[page] = lines
        except PageError as error:
            problems.append(str(error))

    for i in items:
        if i.kind != "function":
            continue
        extra = supplement(i.name)
        if extra:
            def make(i=i, extra=extra):
                lines, entries = function_page(i, items, statuses, version, extra)
                errors[i.name] = entries
                return lines
            add(f"{i.name}.3", make)
    sections = list(dict.fromkeys(i.section for i in items))
    components = [(component_of(s), s) for s in sections if component_of(s)]
    unnamed = [s for s in sections if re.match(r"\d+\.", s) and not component_of(s)]
    problems += [f"header section {s!r} has no component page name (COMPONENTS in {__file__})" for s in unnamed]
    for page, section in components:
        extra = supplement(page)
        if extra:
            members = [i for i in items if i.section == section]
            add(f"{page}.7", lambda page=page, section=section, members=members, extra=extra: component_page(
                page, section, members, header_text, statuses, version, extra, errors))
    extra = supplement("queuekit")
    if extra:
        add("queuekit.7", lambda: overview_page(intro, items, statuses, version, extra, components))
    hpp = os.path.join(os.path.dirname(header), "queuekit.hpp")
    if os.path.exists(hpp):
        extra = supplement("queuekit-cpp")
        if extra:
            add("queuekit-cpp.7", lambda: cpp_page(hpp, version, extra))
    if problems:
        raise SystemExit("manpages: pages incomplete:\n  " + "\n  ".join(problems))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("header")
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("--version", help="the version in the page footers (default: the header's)")
    parser.add_argument("--gzip", action="store_true", help="write NAME.N.gz (gzip -9n) instead")
    parser.add_argument("--list", action="store_true", help="print the page file names and exit")
    parser.add_argument("--pages", default=DEFAULT_PAGES,
                        help="the directory of the pages' supplements (default: docs/man)")
    args = parser.parse_args()
    generated = pages(args.header, args.version or header_version(args.header), args.pages)
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
