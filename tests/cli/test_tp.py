#!/usr/bin/env python3
"""--tp on run, logits, bench and serve-bench: logits and greedy text of
every split are byte for byte those of --tp 1; sizes the split refuses fail
with one line saying why.
Usage: test_tp.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
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


with tempfile.TemporaryDirectory() as d:
    toks = ["1", "450", "4996", "17354", "1701", "29916", "432"]
    ref = None
    for tp in ("1", "2", "4", "8"):
        out = os.path.join(d, f"l{tp}.f32")
        run("logits", "-m", tiny, "--tp", tp, "-t", "2", out, *toks)
        data = open(out, "rb").read()
        assert len(data) == 4 * 32000 * len(toks), len(data)
        if ref is None:
            ref = data
        assert data == ref, f"--tp {tp} logits differ from --tp 1"

texts = set()
for tp in ("1", "2", "4"):
    p = run("run", "-m", stories, "--tp", tp, "-t", "2", "-n", "24", "--temp", "0",
            "-p", "Once upon a time")
    texts.add(p.stdout)
assert len(texts) == 1, texts

j = json.loads(run("bench", "-m", stories, "--tp", "2", "-p", "8", "-n", "4", "-r", "1",
                   "-t", "2", "--json").stdout)
assert j["threads"] == 2, j

# --tp N --device cuda: one rank per GPU. Without GPUs (or the CUDA plugin)
# it fails with one line saying why; with two or more, the logits are byte
# for byte those of one GPU (tests/gpu/run.sh runs that on GPU machines).
devs = json.loads(run("version", "--json").stdout).get("devices", [])
gpus = [x for x in devs if str(x.get("id", "")).startswith("cuda")]
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "g.f32")
    if not gpus:
        p = run("logits", "-m", tiny, "--tp", "2", "--device", "cuda", out, "1", ok=False)
        lines = p.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "cuda" in lines[0].lower(), lines
    elif len(gpus) >= 2:
        run("logits", "-m", tiny, "--device", "cuda:0", out + "1", *toks)
        run("logits", "-m", tiny, "--device", "cuda:0", "--tp", "2", out + "2", *toks)
        assert open(out + "1", "rb").read() == open(out + "2", "rb").read(), "--tp 2 on GPUs"

for bad in ("3", "9"):
    p = run("logits", "-m", tiny, "--tp", bad, os.path.join(tempfile.gettempdir(), "x.f32"), "1",
            ok=False)
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "tp" in lines[0], lines
print("ok")
