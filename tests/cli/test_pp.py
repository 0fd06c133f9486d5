#!/usr/bin/env python3
"""--pp on run, logits, bench and serve-bench: logits and greedy text of
every stage count (and of --tp 2 --pp 2) are byte for byte those of one
rank; bench reports the bubble; counts the load refuses fail with one line
saying why.
Usage: test_pp.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
import json
import os
import subprocess
import sys
import tempfile

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
tiny = os.path.join(shared, "models", "tiny-q8_0.gguf")
if not os.path.exists(stories) or not os.path.exists(tiny):
    print("SKIP: ../shared models are absent")
    sys.exit(77)


def run(*args, ok=True):
    p = subprocess.run([brisk, *args], capture_output=True, timeout=120)
    if ok and p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed: {p.stderr.decode()}")
    if not ok:
        assert p.returncode != 0, f"brisk {' '.join(args)} should fail"
    return p


grid = [("1", "1"), ("1", "2"), ("1", "3"), ("2", "2"), ("4", "3")]
with tempfile.TemporaryDirectory() as d:
    toks = ["1", "450", "4996", "17354", "1701", "29916", "432", "263", "931"]
    ref = None
    for tp, pp in grid:
        out = os.path.join(d, f"l{tp}-{pp}.f32")
        run("logits", "-m", tiny, "--tp", tp, "--pp", pp, "-t", "2", out, *toks)
        data = open(out, "rb").read()
        assert len(data) == 4 * 32000 * len(toks), len(data)
        if ref is None:
            ref = data
        assert data == ref, f"--tp {tp} --pp {pp} logits differ from one rank"

texts = set()
for tp, pp in grid[:4]:
    p = run("run", "-m", stories, "--tp", tp, "--pp", pp, "-t", "2", "-n", "24", "--temp", "0",
            "-p", "Once upon a time")
    texts.add(p.stdout)
assert len(texts) == 1, texts

j = json.loads(run("bench", "-m", stories, "--pp", "2", "-p", "16", "-n", "4", "-r", "1",
                   "-t", "2", "--json").stdout)
assert j["pp_size"] == 2 and j["tp_size"] == 1, j
# pp16 on 2 stages: 8 micro-batches per decode (warm-up and one rep), ideal
# bubble 1 / 9; tg: one token per decode, ideal bubble 1 / 2.
assert j["pp"]["micro_batches"] == 16, j
assert abs(j["pp"]["ideal_bubble"] - 1 / 9) < 1e-4, j
assert abs(j["tg"]["ideal_bubble"] - 0.5) < 1e-4, j
assert 0 <= j["pp"]["bubble"] < 1 and 0 <= j["tg"]["bubble"] < 1, j

p = run("serve-bench", "-m", stories, "--pp", "2", "-n", "3", "--rates", "0", "--prompt-len",
        "4..12", "--output-len", "4", "--kv-tokens", "128", "-t", "2", "--json")
s = json.loads(p.stdout)
assert s, p.stdout

for bad, why in (("17", "pp"), ("9", "layers")):  # tiny has 4 layers
    p = run("logits", "-m", tiny, "--pp", bad, os.path.join(tempfile.gettempdir(), "x.f32"), "1",
            ok=False)
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and why in lines[0], lines
print("ok")
