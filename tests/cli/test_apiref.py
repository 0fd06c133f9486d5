#!/usr/bin/env python3
"""The API reference generated from include/brisk.h (tools/apiref.py) is
complete: every BRISK_API function and every public type, found here by a
scan of the header independent of the generator, has its entry with its
declaration and a contract comment; every section of the header is there.
Usage: test_apiref.py SOURCE_ROOT [GENERATED.md]."""
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
header = os.path.join(root, "include", "brisk.h")
text = open(header).read()
funcs = set(re.findall(r"BRISK_API\b[^;{]*?\b(brisk_\w+)\s*\(", text, re.S))
types = set(re.findall(r"\}\s*(brisk_\w+)\s*;", text)) | set(re.findall(r"typedef\s+struct\s+\w+\s+(brisk_\w+)\s*;", text))
sections = re.findall(r"/\* -{20,} \*/\n/\* (\S.*?)\s*\*/\n/\* -{20,} \*/", text)
assert len(funcs) > 50 and len(types) > 20 and len(sections) > 10, (len(funcs), len(types), sections)

with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "api.md")
    p = subprocess.run([sys.executable, os.path.join(root, "tools", "apiref.py"), header, out, "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = open(out).read()
if len(sys.argv) > 2:
    assert open(sys.argv[2]).read() == md, "the built docs/api.md differs from a fresh run"

entries = {}
for block in md.split("\n### ")[1:]:
    head, _, body = block.partition("\n")
    for name in re.findall(r"`(\w+)`", head):
        entries[name] = body
for name in sorted(funcs | types):
    assert name in entries, f"{name} is missing from the API reference"
    body = entries[name]
    assert "```c" in body and name in body.split("```c", 1)[1].split("```", 1)[0], name
for name in sorted(funcs):
    doc = entries[name].split("```c", 1)[1].split("```", 1)[1].split("\n### ")[0].strip()
    doc = re.sub(r"<a id=[^>]*></a>", "", doc).strip()
    assert doc, f"{name} has no contract comment in brisk.h"
for sec in sections:
    if sec != "Export and deprecation markers":
        assert f"\n## {sec}\n" in md, sec
print(f"api reference: {len(funcs)} functions, {len(types)} types, all documented")
