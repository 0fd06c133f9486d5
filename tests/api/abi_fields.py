#!/usr/bin/env python3
"""Every field of every public struct with a struct_size is listed, in order,
in lib/core/abi_layout.c: the struct_size rule needs to know where fields end.
Compares the names parsed from include/brisk.h with the table."""
import re
import sys

root = sys.argv[1]
header = open(f"{root}/include/brisk.h").read()
table = open(f"{root}/lib/core/abi_layout.c").read()


def header_fields(body):
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        fn = re.search(r"\(\*\s*(\w+)\)", decl)
        if fn:
            names.append(fn.group(1))
            continue
        decl = re.sub(r"\[\w+\]", "", decl)
        parts = decl.split(",")
        names.append(parts[0].split()[-1].lstrip("*"))
        names.extend(p.strip().lstrip("*") for p in parts[1:])
    return names


errors = []
structs = re.findall(r"typedef struct (brisk_\w+) \{(.*?)\n\} \1;", header, re.S)
checked = 0
for name, body in structs:
    fields = header_fields(body)
    if fields[0] != "struct_size":
        continue
    listed = re.findall(r"BRISK_ABI_FIELD\(%s, (\w+)\)" % name, table)
    if listed != fields:
        errors.append(f"{name}: brisk.h has {fields}, abi_layout.c lists {listed}")
    checked += 1
if checked < 15:
    errors.append(f"only {checked} structs with a struct_size found in brisk.h")
for e in errors:
    print(e)
print(f"{checked} structs checked")
sys.exit(1 if errors else 0)
