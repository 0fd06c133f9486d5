#!/usr/bin/env python3
"""Writes the API reference (markdown) of brisk from include/brisk.h: every
section of the header, and in it every public function, type and macro with
its declaration and its contract comment, so the reference says exactly what
the header says. The build runs it (tools/meson.build: docs/api.md in the
build folder) and tests/cli/test_apiref.py checks that every BRISK_API
function is in it with a comment.

Usage: apiref.py HEADER OUT.md [--check]  (--check: fail, naming them, when
a public function has no comment)."""
import re
import sys

RULE = re.compile(r"^/\* -{20,} \*/$")
TITLE = re.compile(r"^/\* (\S.*?)\s*\*/$")


def strip_comment(lines):
    """The text of a /* ... */ block, without the comment markers."""
    text = "\n".join(lines).strip()
    text = re.sub(r"^/\*+", "", text)
    text = re.sub(r"\*+/$", "", text)
    out = []
    for ln in text.split("\n"):
        ln = re.sub(r"^\s*\* ?", "", ln) if ln.lstrip().startswith("*") else ln.strip()
        out.append(ln.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def decl_name(code):
    """The name a declaration introduces."""
    flat = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    flat = re.sub(r"\{.*\}", "{}", flat, flags=re.S)
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", flat)  # function pointer typedef
    if m and flat.lstrip().startswith("typedef"):
        return m.group(1)
    if flat.lstrip().startswith("typedef"):
        return re.findall(r"(\w+)\s*;", flat)[-1]
    if flat.lstrip().startswith("#define"):
        return flat.split()[1].split("(")[0]
    m = re.search(r"(\w+)\s*\(", flat)
    return m.group(1) if m else flat.split()[-1].rstrip(";")


def parse(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    sections, items = [], []
    section = "Overview"
    comment, comment_end = None, -2
    i, prev_decl_end = 0, -2
    intro = None
    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if RULE.match(s) and i + 2 < len(lines) and RULE.match(lines[i + 2].strip()):
            m = TITLE.match(lines[i + 1].strip())
            if m:
                section = m.group(1)
                sections.append(section)
                comment = None
                i += 3
                continue
        if s.startswith("/*"):
            start = i
            while "*/" not in lines[i]:
                i += 1
            block = lines[start:i + 1]
            if intro is None and start < 3:
                intro = strip_comment(block)
            else:
                comment, comment_end = strip_comment(block), i
            i += 1
            continue
        is_define = s.startswith("#define BRISK_") and not s.startswith(("#define BRISK_H", "#define BRISK_API"))
        if s.startswith(("typedef", "BRISK_API", "struct", "enum")) or is_define:
            start = i
            if is_define:
                while lines[i].rstrip().endswith("\\"):
                    i += 1
            else:
                depth = 0
                while True:
                    depth += lines[i].count("{") - lines[i].count("}")
                    if depth <= 0 and ";" in re.sub(r"/\*.*?\*/", "", lines[i]):
                        break
                    i += 1
            code = "\n".join(lines[start:i + 1])
            own = comment if comment is not None and comment_end == start - 1 else None
            if own is None and prev_decl_end == start - 1 and items and items[-1]["section"] == section:
                items[-1]["codes"].append(code)  # a group under one comment
                items[-1]["names"].append(decl_name(code))
                items[-1]["api"] |= s.startswith("BRISK_API")
            else:
                items.append({"section": section, "names": [decl_name(code)], "codes": [code],
                              "doc": own or [], "api": s.startswith("BRISK_API")})
            comment, prev_decl_end = None, i
            i += 1
            continue
        if s and not s.startswith("#"):
            comment = None
        elif s.startswith("#"):
            comment = None
        i += 1
    return intro or [], sections, items


def paragraphs(doc):
    """Markdown for a comment: prose paragraphs joined; a paragraph with
    indented or list lines is kept as it is written."""
    out, para = [], []
    for ln in doc + [""]:
        if ln.strip():
            para.append(ln)
            continue
        if para:
            if any(p.startswith((" ", "-")) for p in para[1:]) or any(p.startswith("  ") for p in para):
                out.append("```text\n" + "\n".join(para) + "\n```")
            else:
                out.append(" ".join(p.strip() for p in para))
        para = []
    return "\n\n".join(out)


def anchor(name):
    return name  # case kept: BRISK_VERSION_NUMBER and brisk_version_number differ


def render(intro, sections, items):
    md = ["# brisk API reference", "",
          "Generated from `include/brisk.h` by `tools/apiref.py`; the header is the",
          "contract, and this page is its text, arranged. Declarations in the",
          "experimental section need `#define BRISK_EXPERIMENTAL` before the include.", "",
          "## Conventions", "", paragraphs(intro), "", "## Contents", ""]
    for sec in sections:
        names = [n for it in items if it["section"] == sec for n in it["names"]]
        if names:
            md.append(f"- **{sec}**: " + ", ".join(f"[`{n}`](#{anchor(n)})" for n in names))
    for sec in sections:
        sec_items = [it for it in items if it["section"] == sec]
        if sec == "Export and deprecation markers":
            continue  # the header's own machinery
        md += ["", f"## {sec}"]
        if not sec_items:
            md += ["", "Nothing is declared here in this version."]
        for it in sec_items:
            md += ["", "### " + ", ".join(f"`{n}`" for n in it["names"]), ""]
            md += [" ".join(f'<a id="{anchor(n)}"></a>' for n in it["names"]), ""]
            md += ["```c", "\n".join(it["codes"]), "```"]
            if it["doc"]:
                md += ["", paragraphs(it["doc"])]
    return "\n".join(md) + "\n"


def main():
    header, out = sys.argv[1], sys.argv[2]
    intro, sections, items = parse(header)
    missing = [n for it in items if it["api"] and not it["doc"] for n in it["names"]]
    if "--check" in sys.argv and missing:
        sys.exit(f"apiref: public functions without a contract comment: {', '.join(missing)}")
    with open(out, "w", encoding="utf-8") as f:
        f.write(render(intro, sections, items))


if __name__ == "__main__":
    main()
