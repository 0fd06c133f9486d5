#!/usr/bin/env python3
"""The constraint front ends against independent implementations:

- JSON Schema: random strings of each schema's grammar parse as JSON and
  validate with Python's `jsonschema` (formats checked); strings the
  matcher accepts after random edits validate too (soundness); skipped
  without jsonschema.
- JSON mode: the matcher accepts exactly what json.loads takes as an object
  (on derived strings and random edits of them).
- Regular expressions: the matcher accepts exactly what re.fullmatch (ASCII)
  does, on derived strings, random edits and random text.

Usage: test_grammar_ref.py GRAMMAR_TOOL SHARED_DIR."""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

tool = sys.argv[1]
seed = int(os.environ.get("BRISK_TEST_SEED", random.randrange(1 << 30)))
print(f"seed {seed} (BRISK_TEST_SEED replays)")
rng = random.Random(seed)
tmp = tempfile.mkdtemp()


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def gen(kind, path, n):
    p = subprocess.run([tool, "gen", kind, path, str(n), str(rng.randrange(1 << 30))],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def check(kind, path, strings):
    inp = "".join(json.dumps(s, ensure_ascii=True) + "\n" for s in strings)
    p = subprocess.run([tool, "check", kind, path], input=inp, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout.split()
    assert len(out) == len(strings), (len(out), len(strings))
    return [o == "1" for o in out]


ALPHABET = 'ab01 -.,:"\\{}[]eE+\n\tzé'


def edits(strings, n):
    out = []
    for _ in range(n):
        s = list(rng.choice(strings))
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(3)
            i = rng.randrange(len(s) + 1)
            if op == 0 and s:
                del s[min(i, len(s) - 1)]
            elif op == 1:
                s.insert(i, rng.choice(ALPHABET))
            elif s:
                s[min(i, len(s) - 1)] = rng.choice(ALPHABET)
        out.append("".join(s))
    return out


# ---- regular expressions: exact agreement with re.fullmatch ----
PATTERNS = [
    r"[a-z]+@[a-z]+\.(com|org)",
    r"^\d{3}-\d{4}$",
    r"(ab|a)*b?",
    r"[^abc]{2,4}x",
    r"\w+\s\W?",
    r"a{0,3}(b{2,}|c)?",
    r"(?:[0-9a-f]{2}:){2}[0-9a-f]{2}",
    r"x.y",
    r"[\d\-.]+",
    r"(?P<year>\d{4})-(0[1-9]|1[0-2])",
    r"a|b|",
    r"\{\}\[\]\.\*",
    r"é+[α-ω]*",
    r"[\\\]]+",
    r"a{,2}b",
]
for pat in PATTERNS:
    path = write("re.txt", pat + "\n")
    rx = re.compile(pat, re.ASCII)
    derived = gen("regex", path, 60)
    for s in derived:
        assert rx.fullmatch(s), (pat, s)
    probes = derived + edits(derived, 200) + [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(100)]
    got = check("regex", path, probes)
    for s, g in zip(probes, got):
        assert g == bool(rx.fullmatch(s)), (pat, s, g)
print(f"regex: {len(PATTERNS)} patterns agree with re.fullmatch")

# ---- JSON mode: exact agreement with json.loads (objects) ----
def is_json_object(s):
    if re.search(r"[ \t\n\r]{21}", s):  # the grammar limits whitespace runs
        return None
    if s != s.strip(" \t\n\r"):
        return False  # no whitespace around the object
    try:
        v = json.loads(s, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (ValueError, RecursionError):
        return False
    return isinstance(v, dict)


derived = gen("json", "-", 150)
for s in derived:
    assert is_json_object(s), s
probes = derived + edits(derived, 600)
got = check("json", "-", probes)
n = 0
for s, g in zip(probes, got):
    want = is_json_object(s)
    if want is None:
        continue
    assert g == want, (s, g, want)
    n += 1
print(f"json: {n} strings agree with json.loads")

# ---- JSON Schema: every accepted string validates ----
try:
    import jsonschema
except ImportError:
    print("SKIP: jsonschema is not installed (pip install jsonschema)")
    sys.exit(77)

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name"]},
    {"type": "object",
     "properties": {"a": {"type": "integer", "minimum": -37, "maximum": 1205},
                    "b": {"type": "number", "minimum": 0, "maximum": 1},
                    "c": {"type": "number", "exclusiveMinimum": 2.5, "exclusiveMaximum": 10},
                    "d": {"type": "integer", "exclusiveMaximum": -3},
                    "e": {"type": "integer", "minimum": 1000000}},
     "required": ["a", "b", "c", "d", "e"]},
    {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 5},
     "minItems": 1, "maxItems": 4},
    {"enum": ["red", "green", 3, None, {"k": [1, 2]}]},
    {"const": {"x": "y\"z"}},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "integer"},
               {"type": "null"}]},
    {"type": ["string", "boolean"]},
    {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date-time"},
        "mail": {"type": "string", "format": "email"},
        "ip": {"type": "string", "format": "ipv4"},
        "t": {"type": "string", "format": "time"}},
     "required": ["id", "when", "mail", "ip", "t"]},
    {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}\"?\\\\?$"},
        "opt": {"type": "boolean"}}, "required": ["code"]},
    {"$defs": {"node": {"type": "object",
                        "properties": {"v": {"type": "integer"},
                                       "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                "maxItems": 2}},
                        "required": ["v"]}},
     "$ref": "#/$defs/node"},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "properties": {"p": {}, "q": True}, "required": ["r"]},
    {"title": "real-world: a tool call", "type": "object",
     "properties": {"function": {"enum": ["get_weather", "search"]},
                    "arguments": {"type": "object",
                                  "properties": {"city": {"type": "string", "maxLength": 20},
                                                 "unit": {"enum": ["c", "f"]},
                                                 "days": {"type": "integer", "minimum": 1,
                                                          "maximum": 14}},
                                  "required": ["city"]}},
     "required": ["function", "arguments"]},
    {"description": "real-world: a product", "type": "object",
     "properties": {"sku": {"type": "string", "pattern": "[A-Z0-9]{8}"},
                    "price": {"type": "number", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "dims": {"type": "object", "properties": {
                        "w": {"type": "number"}, "h": {"type": "number"}},
                        "required": ["w", "h"]},
                    "stock": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}},
     "required": ["sku", "price"]},
    {"type": "array", "items": {"type": "object", "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}}
]


def random_schema(depth=0):
    """A random schema over the supported keywords."""
    t = rng.choice(["string", "integer", "number", "boolean", "null", "object", "array", "enum"]
                   if depth < 3 else ["string", "integer", "boolean", "enum"])
    if t == "string":
        s = {"type": "string"}
        c = rng.randrange(4)
        if c == 1:
            lo = rng.randint(0, 4)
            s.update(minLength=lo, maxLength=lo + rng.randint(0, 5))
        elif c == 2:
            s["format"] = rng.choice(["date", "uuid", "ipv4", "date-time"])
        elif c == 3:
            s["pattern"] = rng.choice(["^[a-c]+$", "x\\d*", "^(ab|\"q)?z$"])
        return s
    if t in ("integer", "number"):
        s = {"type": t}
        if rng.random() < 0.7:
            lo = rng.randint(-1000, 1000)
            s["minimum" if rng.random() < 0.5 else "exclusiveMinimum"] = lo
            if rng.random() < 0.7:
                s["maximum" if rng.random() < 0.5 else "exclusiveMaximum"] = lo + rng.randint(2, 3000)
        return s
    if t in ("boolean", "null"):
        return {"type": t}
    if t == "enum":
        return {"enum": rng.sample(["a", "b c", 1, 2.5, True, None, [1], {"z": 0}], 3)}
    if t == "array":
        s = {"type": "array", "items": random_schema(depth + 1)}
        if rng.random() < 0.5:
            lo = rng.randint(0, 2)
            s.update(minItems=lo, maxItems=lo + rng.randint(0, 3))
        return s
    props = {f"k{i}": random_schema(depth + 1) for i in range(rng.randint(0, 4))}
    req = [k for k in props if rng.random() < 0.5]
    return {"type": "object", "properties": props, "required": req}


schemas = SCHEMAS + [random_schema() for _ in range(25)]
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
total = 0
for i, schema in enumerate(schemas):
    path = write("schema.json", json.dumps(schema))
    derived = gen("schema", path, 40)
    for s in derived:
        try:
            v = json.loads(s)
        except ValueError as e:
            sys.exit(f"schema {i} {json.dumps(schema)}: not JSON: {s!r}: {e}")
        try:
            jsonschema.validate(v, schema, format_checker=checker)
        except jsonschema.ValidationError as e:
            sys.exit(f"schema {i} {json.dumps(schema)}: {s!r} does not validate: {e.message}")
    assert all(check("schema", path, derived)), i
    probes = edits(derived, 150)
    for s, ok in zip(probes, check("schema", path, probes)):
        if ok:
            jsonschema.validate(json.loads(s), schema, format_checker=checker)
    total += len(derived)
print(f"json_schema: {total} strings of {len(schemas)} schemas validate")
