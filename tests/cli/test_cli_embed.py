#!/usr/bin/env python3
"""`brisk embed`: the tiny random BERT of tools/embed_reference.py gives
transformers' vectors (tests/model/embed_ref/tiny_bert.json) as text lines
and as JSON, options change the pooling and normalisation, bad usage fails
with one line. A decoder (../shared stories260K) gives one vector per text.
Usage: test_cli_embed.py BRISK_BINARY TOOL SHARED_DIR. Exit 77 (skip)
without numpy or safetensors."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import safetensors  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (pip install numpy safetensors)")
    sys.exit(77)

brisk, tool, shared = sys.argv[1], sys.argv[2], sys.argv[3]
REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "embed_ref",
                   "tiny_bert.json")


def run(*args, ok=True):
    p = subprocess.run([brisk, "embed", *args], capture_output=True, text=True, timeout=300)
    if ok and p.returncode != 0:
        sys.exit(f"brisk embed {' '.join(args)} failed: {p.stderr}")
    if not ok:
        assert p.returncode != 0, f"brisk embed {' '.join(args)} should fail"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk embed"), p.stderr
    return p


def close(a, b):
    a, b = np.array(a), np.array(b)
    return 1 - a.dot(b) / (np.linalg.norm(a) * np.linalg.norm(b)) < 1e-4 and \
        abs(np.linalg.norm(a) - np.linalg.norm(b)) < 1e-4 * np.linalg.norm(b)


with open(REF, encoding="utf-8") as f:
    ref = json.load(f)["sentences"][:3]
texts = [r["text"] for r in ref]
with tempfile.TemporaryDirectory(prefix="brisk-cli-embed-") as d:
    subprocess.run([sys.executable, tool, "make-bert", d], check=True)
    lines = run("-m", d, *texts).stdout.splitlines()
    assert len(lines) == 3, lines
    for line, r in zip(lines, ref):
        assert close([float(x) for x in line.split()], r["mean_normalized"]), r["text"]
    j = json.loads(run("-m", d, "--json", "--pooling", "cls", "--no-normalize", *texts).stdout)
    assert j["dim"] == 32 and len(j["data"]) == 3, j
    for v, r in zip(j["data"], ref):
        assert close(v, r["cls"]), r["text"]
    cut = json.loads(run("-m", d, "--json", "--max-tokens", "3", "-t", "1", texts[1]).stdout)
    assert len(cut["data"][0]) == 32
    run("-m", d, "--normalize", "--no-normalize", "x", ok=False)
    run("-m", d, "--pooling", "max", "x", ok=False)
    run("-m", d, ok=False)
    run("-m", os.path.join(d, "absent"), "x", ok=False)
stories = os.path.join(shared, "models", "stories260K.gguf")
if os.path.exists(stories):
    j = json.loads(run("-m", stories, "--json", "--pooling", "mean", "--normalize",
                       "Once upon a time", "there was a cat").stdout)
    assert j["dim"] == 64 and len(j["data"]) == 2, j
    assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in j["data"]), j
else:
    print("note: ../shared/models/stories260K.gguf is absent: the decoder is not checked")
print("OK")
