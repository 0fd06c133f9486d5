#!/usr/bin/env python3
"""`mpirun -np 2 brisk run --tp 2` and `brisk logits`, and the same with
`--pp 2` (the processes as pipeline stages): the two processes' greedy text
and logits are byte for byte those of one process; `brisk bench` and
`brisk serve-bench` under mpirun: rank 0 reports once (the other rank
follows), serve-bench's completions are those of one process; a job whose
size is not --tp or --pp fails on every rank with one line saying so; `--tp
2 --pp 2` over 4 processes (a grid) gives one process's logits too.
Usage: test_mpi.py BRISK_BINARY SHARED_DIR MPIRUN. Exit 77 (skip) without
../shared or mpirun."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

brisk, shared, mpirun = sys.argv[1], sys.argv[2], sys.argv[3]
stories = os.path.join(shared, "models", "stories260K.gguf")
tiny = os.path.join(shared, "models", "tiny-q8_0.gguf")
if not os.path.exists(stories) or not os.path.exists(tiny):
    print("SKIP: ../shared models are absent")
    sys.exit(77)
if not shutil.which(mpirun):
    print("SKIP: mpirun is absent")
    sys.exit(77)
env = dict(os.environ, OMPI_MCA_btl="self,vader,tcp")
env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")


def run(*args, np=0, ok=True):
    cmd = [brisk, *args]
    if np:
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np), *cmd]
    p = subprocess.run(cmd, capture_output=True, timeout=120, env=env)
    if ok and p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.decode()}")
    if not ok:
        assert p.returncode != 0, f"{' '.join(cmd)} should fail"
    return p


with tempfile.TemporaryDirectory() as d:
    toks = ["1", "450", "4996", "17354", "1701", "29916", "432"]
    one, two = os.path.join(d, "one.f32"), os.path.join(d, "two.f32")
    run("logits", "-m", tiny, "-t", "2", one, *toks)
    run("logits", "-m", tiny, "--tp", "2", "-t", "1", two, *toks, np=2)
    assert open(one, "rb").read() == open(two, "rb").read(), "logits over 2 processes differ"
    run("logits", "-m", tiny, "--pp", "2", "-t", "1", two, *toks, np=2)
    assert open(one, "rb").read() == open(two, "rb").read(), "logits over 2 stages differ"
    # A grid of 4 processes: 2 stages of 2 TP ranks.
    run("logits", "-m", tiny, "--tp", "2", "--pp", "2", "-t", "1", two, *toks, np=4)
    assert open(one, "rb").read() == open(two, "rb").read(), "logits over a 2 x 2 grid differ"

gen = ["-n", "24", "--temp", "0", "-p", "Once upon a time"]
a = run("run", "-m", stories, "-t", "2", *gen).stdout
b = run("run", "-m", stories, "--tp", "2", "-t", "1", *gen, np=2).stdout
assert a == b and a, (a, b)
b = run("run", "-m", stories, "--pp", "2", "-t", "1", *gen, np=2).stdout
assert a == b, (a, b)

# bench: rank 0 measures and prints one report; the other rank follows.
for split in (["--tp", "2"], ["--pp", "2"]):
    out = run("bench", "-m", stories, *split, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--json",
              np=2).stdout.decode()
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1, out
    j = json.loads(lines[0])
    assert j["tp_size" if split[0] == "--tp" else "pp_size"] == 2, j
    assert j["pp"]["tps"] and j["tg"]["tps"], j
    # Rank 0 holds its part of the weights only.
    assert j["mpi_processes"] == 2 and 0 < j["rank0_weight_bytes"] < j["file_weight_bytes"], j

# serve-bench: the same completions (their hashes) as one process.
sb = ["serve-bench", "-m", stories, "-n", "4", "--rates", "0", "--prompt-len", "4..16",
      "--output-len", "2..6", "--kv-tokens", "128", "--seed", "3", "-t", "1", "--json"]
ref = json.loads(run(*sb).stdout)
for split in (["--tp", "2"], ["--pp", "2"]):
    out = run(*sb, *split, np=2).stdout.decode()
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1, out
    got = json.loads(lines[0])
    assert [r["config"] for r in got["runs"]] == [r["config"] for r in ref["runs"]], got
    for r, q in zip(ref["runs"], got["runs"]):
        assert r["requests"]["out_hash"] == q["requests"]["out_hash"], (split, r["config"])

p = run("logits", "-m", tiny, "--tp", "4", "-t", "1", os.path.join(tempfile.gettempdir(), "x.f32"),
        "1", np=2, ok=False)
# Both ranks refuse; their stderr lines may interleave, so count the parts.
err = p.stderr.decode()
assert err.count("brisk logits:") == 2 and err.count("needs a job of 4 processes (mpirun -np 4)") == 2, err
p = run("run", "-m", tiny, "--tp", "2", "--pp", "2", "-n", "1", "-p", "x", np=2, ok=False)
assert p.stderr.decode().count("--tp 2 x --pp 2 needs a job of 4 processes") == 2, p.stderr
print("ok")
