#!/usr/bin/env python3
"""brisk bench: each mode runs on small inputs and prints one valid JSON
object whose numbers are positive and consistent with each other (the speed
itself is not asserted: the machine may be shared).
Usage: test_bench.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
import json
import os
import subprocess
import sys
import tempfile

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
spm = os.path.join(shared, "tokenizer", "ggml-vocab-llama-spm.gguf")
if not os.path.exists(stories) or not os.path.exists(spm):
    print("SKIP: ../shared models are absent")
    sys.exit(77)


def run(*args, ok=True):
    p = subprocess.run([brisk, *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed: {p.stderr}")
    if not ok:
        assert p.returncode != 0, f"brisk {' '.join(args)} should fail"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk bench"), p.stderr
    return p


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


# Model mode: pp8 and tg4, two reps.
j = json.loads(run("bench", "-m", stories, "-p", "8", "-n", "4", "-r", "2", "-t", "1",
                   "--json").stdout)
assert j["architecture"] == "llama" and j["n_params"] == 260032, j
assert j["threads"] == 1 and j["reps"] == 2, j
for key, n in (("pp", 8), ("tg", 4)):
    t = j[key]
    assert t["n_tokens"] == n and len(t["tps"]) == 2, t
    assert all(x > 0 for x in t["tps"]), t
    assert t["min_tps"] <= t["median_tps"] <= t["max_tps"], t
    # The per-rep values are printed with 6 digits; the summary with more.
    assert close(t["min_tps"], min(t["tps"]), 1e-5) and close(t["max_tps"], max(t["tps"]), 1e-5), t
# stories260K: 5 layers, 4 KV heads of 8, K and V in f16: 5 * 2 * 32 * 2 bytes.
assert j["kv_bytes_per_position"] == 640, j
# It has no output.weight: the logits read the whole (tied) embedding table,
# and the token's embedding row (64 floats) is read too.
assert j["decode_weight_bytes"] == j["file_weight_bytes"] + 64 * 4, j
assert j["decode_bytes_per_token"] == j["decode_weight_bytes"] + 640 * (4 + 1) // 2, j
assert j["mem_read_gbs"] > 0 and j["mem_copy_gbs"] > 0, j
mbu = j["decode_bytes_per_token"] * j["tg"]["median_tps"] / (j["mem_read_gbs"] * 1e9)
assert close(j["mbu"], mbu, 2e-3), (j["mbu"], mbu)  # inputs are rounded to 4 digits
# 1 MiB of weights sits in any last-level cache: MBU is flagged as not applying.
assert j["llc_bytes"] == 0 or j["mbu_meaningful"] is False, j

# pp only / tg only.
j = json.loads(run("bench", "-m", stories, "-p", "4", "-n", "0", "-r", "1", "--json").stdout)
assert "pp" in j and "tg" not in j and "mbu" not in j, j
j = json.loads(run("bench", "-m", stories, "-p", "0", "-n", "3", "-r", "1", "--json").stdout)
assert "tg" in j and "pp" not in j and j["tg"]["n_tokens"] == 3, j
# A prompt longer than the default batch (512) still runs as one decode.
j = json.loads(run("bench", "-m", stories, "-p", "520", "-n", "0", "-r", "1", "--json").stdout)
assert j["pp"]["n_tokens"] == 520, j

# Text output names the tests.
out = run("bench", "-m", stories, "-p", "4", "-n", "2", "-r", "1").stdout
assert "pp4" in out and "tg2" in out and "MBU" in out, out

# Tokenizer mode: the token count equals brisk tokenize's on the same file.
with tempfile.TemporaryDirectory() as d:
    text = os.path.join(d, "t.txt")
    here = os.path.dirname(os.path.abspath(__file__))
    gen = os.path.join(here, "..", "..", "bench", "make_text.py")
    subprocess.run([sys.executable, gen, text, "--mb", "0.02"], check=True)
    assert os.path.getsize(text) <= 20000 and os.path.getsize(text) > 19000
    j = json.loads(run("bench", "--tokenize", spm, text, "-r", "2", "--json").stdout)
    ids = json.loads(run("tokenize", spm, "--file", text, "--json").stdout)["ids"]
    assert j["tokens"] == len(ids) and j["bytes"] == os.path.getsize(text), (j, len(ids))
    assert j["tokenizer"] == "spm" and j["reps"] == 2 and len(j["seconds"]) == 2, j
    assert 0 < j["min_mbs"] <= j["median_mbs"] <= j["max_mbs"], j
    # --paragraphs: one call per piece ending at a blank line, BOS on each.
    jp = json.loads(run("bench", "--tokenize", spm, text, "--paragraphs", "-r", "1",
                        "--json").stdout)
    data = open(text, "rb").read()
    pieces, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n\n", pos)
        end = len(data) if end < 0 else end + 2
        pieces.append(data[pos:end])
        pos = end
    assert jp["paragraphs"] is True and jp["pieces"] == len(pieces) > 10, (jp, len(pieces))
    total = 0
    for k, piece in enumerate(pieces[:12]):
        path = os.path.join(d, f"p{k}.txt")
        with open(path, "wb") as f:
            f.write(piece)
        total += len(json.loads(run("tokenize", spm, "--file", path, "--json").stdout)["ids"])
    # The first 12 pieces tokenized one by one; the rest as one file each
    # would be slow, so compare the whole count against a second brisk run
    # on the first 12 pieces alone.
    head = os.path.join(d, "head.txt")
    with open(head, "wb") as f:
        f.write(b"".join(pieces[:12]))
    jh = json.loads(run("bench", "--tokenize", spm, head, "--paragraphs", "-r", "1",
                        "--json").stdout)
    assert jh["pieces"] == 12 and jh["tokens"] == total, (jh, total)
    assert jp["tokens"] > j["tokens"], (jp, j)  # a BOS per piece, words split at pieces
    # The median of two reps is the mean of their rates.
    rates = [j["bytes"] / 1e6 / s for s in j["seconds"]]
    assert close(j["median_mbs"], sum(rates) / 2, 1e-3), (j, rates)

# Kernel mode, quick shapes: every weight type, at 1 and 2 threads.
j = json.loads(run("bench", "--kernels", "--quick", "-t", "2", "--json").stdout)
types = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}
assert [x["threads"] for x in j["limits"]] == [1, 2], j["limits"]
for lim in j["limits"]:
    assert lim["read_gbs"] > 0 and lim["copy_gbs"] > 0 and lim["fma_peak_gflops"] > 0, lim
    assert lim["dispatch_us"] >= 0 and lim["join_us"] > 0, lim
# ... and the packed layouts the model loader regroups weights into ("_r8").
for key in ("gemv", "gemm"):
    rows = j[key]
    seen = {r["type"] for r in rows}
    packed = {t for t in seen if t.endswith("_r8")}
    assert seen - packed == types and {"q8_0_r8", "q4_0_r8"} <= packed, rows
    assert all(t[:-3] in types for t in packed) and len(rows) == 2 * len(seen), rows
for r in j["gemv"]:
    assert r["gbs"] > 0 and r["paired_read_gbs"] > 0 and r["of_read"] > 0, r
for r in j["gemm"]:
    assert r["gflops"] > 0 and r["m"] > 4 and close(r["of_fma_peak"], r["gflops"] / next(
        x["fma_peak_gflops"] for x in j["limits"] if x["threads"] == r["threads"]), 1e-2), r

# Speculative mode: stories260K drafting for itself must have every draft
# token accepted (same model, same logits, greedy), and every run's output
# must equal plain decoding.
j = json.loads(run("bench", "--speculative", "-m", stories, "--draft", stories, "-n", "6",
                   "-r", "1", "--k", "2,3", "-t", "1", "--json").stdout)
assert j["n"] == 6 and len(j["runs"]) == 2 * (1 + 2 + 2), j
for r in j["runs"]:
    assert r["identical"] is True and len(r["tps"]) == 1 and r["median_tps"] > 0, r
    assert 0 <= r["acceptance"] <= 1 and 0 <= r["mean_accepted"] <= r["k"], r
    assert close(r["tokens_per_round"], r["mean_accepted"] + 1, 1e-3), r
    if r["drafter"] == "draft":
        assert r["acceptance"] == 1 and r["mean_accepted"] > 1, r
assert [c["k"] for c in j["chunk_cost"]] == [2, 3] and all(c["ratio"] > 0 for c in j["chunk_cost"])
# --batch: the engine with and without prompt lookup, B requests at once.
j = json.loads(run("bench", "--speculative", "-m", stories, "-n", "12", "-r", "1", "--k", "3",
                   "--batch", "1,3", "-t", "1", "--json").stdout)
assert [(b["batch"], b["k"]) for b in j["batch"]] == [(1, 3), (3, 3)], j["batch"]
for b in j["batch"]:
    assert b["identical"] is True and b["plain_tps"] > 0 and b["spec_tps"] > 0, b
    assert 0 <= b["acceptance"] <= 1 and b["speedup"] > 0, b
assert [c["k"] for c in j["chunk_cost"]] == [3], j
run("bench", "--speculative", "-m", stories, "--batch", "0", ok=False)
run("bench", "-m", stories, "--batch", "2", ok=False)
run("bench", "--speculative", "-m", stories, "--k", "0", ok=False)
run("bench", "--speculative", "--kernels", ok=False)
run("bench", "-m", stories, "--draft", stories, ok=False)

# Failures: one line on stderr, non-zero exit.
run("bench", ok=False)
run("bench", "-m", stories, "--kernels", ok=False)
run("bench", "-m", stories, "-r", "0", ok=False)
run("bench", "-m", stories, "-p", "x", ok=False)
run("bench", "-m", stories, "-p", "0", "-n", "0", ok=False)
run("bench", "-m", "/nonexistent.gguf", "-p", "1", "-n", "1", ok=False)
run("bench", "--tokenize", spm, "/nonexistent.txt", ok=False)
print("bench: all checks passed")
