#!/usr/bin/env python3
"""Checks the include graph against docs/architecture.md.

The "Include rules" section of docs/architecture.md holds, in a fenced
block, one line per module under lib/: the module, then the modules it may
include. This script reads every .c and .h file under lib/ and fails when a
file includes a header of a module its own module may not include, when a
private header (NAME_internal.h) is included from outside its module
without an exception listed in that block ("private MODULE/HEADER by
MODULE"), when a module has no line, or when the examples include anything
of brisk's but brisk.h.

Usage: check_includes.py SOURCE_ROOT
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def rules(doc):
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"## Include rules.*?```\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"{doc}: no '## Include rules' section with a fenced block")
    allowed, private_ok = {}, set()
    for line in m.group(1).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "private":
            # private MODULE/HEADER by MODULE
            if len(words) != 4 or words[2] != "by":
                sys.exit(f"{doc}: bad line '{line}'")
            private_ok.add((words[1], words[3]))
            continue
        allowed[words[0]] = set(w for w in words[1:] if w != "-")
    return allowed, private_ok


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    allowed, private_ok = rules(os.path.join(root, "docs", "architecture.md"))
    lib = os.path.join(root, "lib")
    modules = sorted(d for d in os.listdir(lib) if os.path.isdir(os.path.join(lib, d)))
    errors = []
    for mod in modules:
        if mod not in allowed:
            errors.append(f"lib/{mod}: no line in the include rules")
    for mod in modules:
        for dirpath, _, files in os.walk(os.path.join(lib, mod)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue  # brisk.h, or a file next to it
                    inc = m.group(1)
                    dep = inc.split("/")[0]
                    if dep == mod:
                        continue
                    if dep not in modules:
                        continue  # a system or third-party header with a folder
                    if dep not in allowed.get(mod, set()):
                        errors.append(f"{rel}:{n}: lib/{mod} may not include {inc} "
                                      f"(allowed: {' '.join(sorted(allowed.get(mod, ()))) or 'none'})")
                    if os.path.basename(inc).endswith("_internal.h") and (inc, mod) not in private_ok:
                        errors.append(f"{rel}:{n}: {inc} is private to lib/{dep}")
    ex = os.path.join(root, "examples")
    for f in sorted(os.listdir(ex)) if os.path.isdir(ex) else []:
        if not f.endswith((".c", ".h")):
            continue
        for n, line in enumerate(open(os.path.join(ex, f), encoding="utf-8"), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) != "brisk.h" and "/" in m.group(1):
                errors.append(f"examples/{f}:{n}: examples use the public header only, not {m.group(1)}")
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} include rule violation(s); see docs/architecture.md, Include rules")
        return 1
    print(f"include rules hold for {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
