#!/usr/bin/env python3
"""brisk quantize presets and brisk perplexity on stories260K.

quantize: every preset writes a file brisk loads, with the tensor types its
--json reports (read back with gguf-py when installed) and general.file_type
set; the output stays close to the golden logits. perplexity: the figure
equals one computed here in float64 from `brisk logits` of each window
(llama-perplexity's method written out independently: windows of N tokens,
the first replaced by BOS, the second half scored); KL divergence and top-1
agreement equal a float64 computation from the logits of both models; a
model against its own saved logits gives KL ~ 0 and 100 % agreement; broken
files are refused with one line.
Usage: test_quant.py BRISK SHARED_DIR SOURCE_DIR. Exit 77 (skip) without
../shared."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

brisk, shared, src = sys.argv[1], sys.argv[2], sys.argv[3]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared models are absent")
    sys.exit(77)
text = os.path.join(src, "bench", "text", "eval.txt")
NV = 512


def run(*args, ok=True):
    p = subprocess.run([brisk, *args], capture_output=True, text=True, timeout=600)
    if ok and p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed: {p.stderr}")
    if not ok:
        assert p.returncode != 0, f"brisk {' '.join(args)} should fail"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk"), p.stderr
    return p


def logits_of(model, toks, d):
    out = os.path.join(d, "l.f32")
    run("logits", model, out, *map(str, toks))
    raw = open(out, "rb").read()
    flat = struct.unpack(f"{len(toks) * NV}f", raw)
    return [flat[i * NV:(i + 1) * NV] for i in range(len(toks))]


def log_softmax(row):
    m = max(row)
    s = sum(math.exp(x - m) for x in row)
    return [x - m - math.log(s) for x in row]


try:
    import gguf  # noqa: F401
    from gguf import GGUFReader
except ImportError:
    GGUFReader = None

with tempfile.TemporaryDirectory() as d:
    # --- quantize: presets, any case --------------------------------------
    S = [1, 482, 82, 508, 499, 496, 482, 120, 488, 114, 508, 267, 482, 119, 108, 112, 496]
    gold = logits_of(stories, S, d)
    ftypes = {"Q8_0": 7, "Q4_0": 2, "Q4_K_M": 15, "Q4_K_S": 14, "Q5_K_M": 17, "Q5_K_S": 16, "Q6_K": 18, "F16": 1}
    for preset, spelled in (("Q8_0", "q8_0"), ("Q4_K_M", "q4_K_m"), ("Q6_K", "Q6_K"), ("Q5_K_S", "q5_k_s"),
                            ("Q4_0", "Q4_0"), ("F16", "f16")):
        q = os.path.join(d, f"{preset}.gguf")
        j = json.loads(run("quantize", stories, q, spelled, "-t", "2", "--json").stdout)
        assert j["preset"] == preset and j["file_type"] == ftypes[preset], j
        assert j["converted"] + j["kept"] == 47, j
        assert 0 < j["bits_per_weight"] < 33, j
        if GGUFReader:
            r = GGUFReader(q)
            assert int(r.fields["general.file_type"].parts[-1][0]) == ftypes[preset]
            counts = {}
            for t in r.tensors:
                name = t.tensor_type.name.lower()
                counts[name] = counts.get(name, 0) + 1
            assert counts == j["tensor_types"], (counts, j["tensor_types"])
            types = {t.name: t.tensor_type.name for t in r.tensors}
            # dim 64 and ffn 172 on this model: no K type fits any row, so
            # K choices fall back (Q4_K -> Q5_0, Q6_K -> Q8_0, then F16 for
            # the 172-wide ffn_down rows); norms stay F32.
            assert types["blk.0.attn_norm.weight"] == "F32", types
            if preset == "Q4_K_M":
                assert types["blk.0.attn_q.weight"] == "Q5_0", types
                # 5 layers: use_more_bits gives layers 2 and 4 (Q6_K,
                # fallen back to Q8_0).
                assert types["blk.2.attn_v.weight"] == "Q8_0", types
                assert types["blk.4.attn_v.weight"] == "Q8_0", types
                assert types["blk.1.attn_v.weight"] == "Q5_0", types
                assert types["token_embd.weight"] == "Q8_0", types  # tied: the output
                assert types["blk.0.ffn_down.weight"] == "F16", types
        mine = logits_of(q, S, d)
        tol = {"Q8_0": 0.3, "F16": 1e-2}.get(preset, 2.0)
        for a, b in zip(mine, gold):
            num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
            den = math.sqrt(sum(y * y for y in b))
            assert num / den < tol, (preset, num / den)
    run("quantize", stories, os.path.join(d, "x.gguf"), "Q3_K_XL", ok=False)
    run("quantize", stories, os.path.join(d, "x.gguf"), "q2_k", ok=False)

    # --- perplexity: the method, against a float64 computation here ------
    toks = json.loads(run("tokenize", stories, "--file", text, "--json").stdout)["ids"]
    assert toks[0] == 1  # this vocabulary adds BOS
    C, CHUNKS = 32, 3
    j = json.loads(run("perplexity", stories, "-f", text, "-c", str(C), "--chunks", str(CHUNKS),
                       "--kv-f32", "--json").stdout)
    assert j["chunks"] == CHUNKS and j["scored"] == CHUNKS * (C - 1 - C // 2), j
    assert j["tokens"] == len(toks) and j["add_bos"] is True, j
    nll, n, nll_clamped = 0.0, 0, 0.0
    windows = []
    for i in range(CHUNKS):
        win = toks[i * C:(i + 1) * C]
        windows.append(win)
        fed = [1] + win[1:]
        rows = logits_of(stories, fed, d)
        for k in range(C // 2, C - 1):
            lp = log_softmax(rows[k])
            nll -= lp[win[k + 1]]
            # A saved row keeps the top 16 nats: lower log-probabilities
            # read back as the floor (llama.cpp's format does the same).
            nll_clamped -= max(lp[win[k + 1]], max(min(lp), max(lp) - 16))
            n += 1
    ref = math.exp(nll / n)
    ref_saved = math.exp(nll_clamped / n)
    assert abs(j["ppl"] - ref) < 1e-4 * ref, (j["ppl"], ref)
    # Without --kv-f32 (F16 cache, llama-perplexity's default) the figure
    # moves by rounding only.
    j16 = json.loads(run("perplexity", "-m", stories, "-f", text, "-c", str(C), "--chunks",
                         str(CHUNKS), "--json").stdout)
    assert abs(j16["ppl"] - ref) < 5e-3 * ref, (j16["ppl"], ref)

    # --- KL divergence: saved base, compared model -----------------------
    base = os.path.join(d, "base.kld")
    jb = json.loads(run("perplexity", stories, "-f", text, "-c", str(C), "--chunks", str(CHUNKS),
                        "--kv-f32", "--kl-divergence-base", base, "--json").stdout)
    assert abs(jb["ppl"] - ref) < 1e-4 * ref
    size = 20 + 4 * CHUNKS * C + CHUNKS * (C - 1 - C // 2) * (NV + 4) * 2
    assert os.path.getsize(base) == size, (os.path.getsize(base), size)
    me = json.loads(run("perplexity", stories, "--kl-divergence-base", base, "--kl-divergence",
                        "--kv-f32", "--json").stdout)
    assert me["kld"] < 1e-4 and me["same_top"] == 1.0, me
    assert abs(me["ppl_base"] - ref_saved) < 1e-3 * ref_saved, (me, ref_saved)
    assert abs(me["ppl"] - ref) < 1e-4 * ref, (me, ref)
    q = os.path.join(d, "Q4_0.gguf")
    kq = json.loads(run("perplexity", q, "--kl-divergence-base", base, "--kl-divergence",
                        "--kv-f32", "--json").stdout)
    kls, agree, nllq = [], 0, 0.0
    for win in windows:
        fed = [1] + win[1:]
        rb, rq = logits_of(stories, fed, d), logits_of(q, fed, d)
        for k in range(C // 2, C - 1):
            lb, lq = log_softmax(rb[k]), log_softmax(rq[k])
            kls.append(sum(math.exp(a) * (a - b) for a, b in zip(lb, lq) if a > -16))
            agree += max(range(NV), key=lambda t: rb[k][t]) == max(range(NV), key=lambda t: rq[k][t])
            nllq -= lq[win[k + 1]]
    mean_kl = sum(kls) / len(kls)
    assert abs(kq["kld"] - mean_kl) < 0.01 * mean_kl + 1e-4, (kq["kld"], mean_kl)
    assert abs(kq["same_top"] - agree / len(kls)) < 1e-9, (kq["same_top"], agree / len(kls))
    assert abs(kq["ppl"] - math.exp(nllq / len(kls))) < 1e-4 * kq["ppl"], kq
    kls.sort()
    p = 0.99 * (len(kls) - 1)
    ip = int(p)
    p99 = (1 - (p - ip)) * kls[ip] + (p - ip) * kls[min(ip + 1, len(kls) - 1)]
    assert abs(kq["kld_99"] - p99) < 0.02 * p99 + 1e-4, (kq["kld_99"], p99)
    assert kq["kld_median"] <= kq["kld_99"] <= kq["kld_max"], kq

    # --- imatrix: collected statistics, and quantize --imatrix ----------
    im = os.path.join(d, "s.imatrix")
    ji = json.loads(run("imatrix", "-m", stories, "-f", text, "-o", im, "-c", str(C), "--chunks", "4",
                        "--json").stdout)
    assert ji["entries"] == 5 * 7 and ji["chunks"] == 4, ji  # 7 matrices a layer; no output
    if GGUFReader:
        import numpy as np
        r = GGUFReader(im)
        ts = {t.name: np.array(t.data, dtype=np.float64).reshape(-1) for t in r.tensors}
        assert all(ts[k][0] == 4 * C for k in ts if k.endswith(".counts")), ts
        # Layer 0's attention input is RMSNorm(embedding) * attn_norm: its
        # column sums of squares, computed here from the file's weights.
        mr = GGUFReader(stories)
        w = {t.name: np.array(t.data, dtype=np.float64) for t in mr.tensors}
        eps = float(mr.fields["llama.attention.layer_norm_rms_epsilon"].parts[-1][0])
        emb, g = w["token_embd.weight"].reshape(NV, -1), w["blk.0.attn_norm.weight"]
        want = np.zeros(emb.shape[1])
        for i in range(4):
            fed = [1] + toks[i * C + 1:(i + 1) * C]
            x = emb[fed]
            h = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * g
            want += (h * h).sum(axis=0)
        for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"):
            got = ts[name + ".in_sum2"]
            assert np.abs(got - want).max() < 1e-4 * np.abs(want).max(), (name, got[:4], want[:4])
    plain = os.path.join(d, "plain.gguf")
    wq = os.path.join(d, "weighted.gguf")
    run("quantize", stories, plain, "q4_0")
    jw = json.loads(run("quantize", stories, wq, "q4_0", "--imatrix", im, "--json").stdout)
    # ffn_down (172 wide) becomes F16, the rest Q4_0 with importance except
    # the embedding-as-output (Q8_0 fallback, no weighted search).
    assert jw["imatrix_tensors"] == 5 * 6 and jw["no_imatrix_tensors"] == 0, jw
    assert open(plain, "rb").read() != open(wq, "rb").read()
    mine = logits_of(wq, S, d)
    for a, b in zip(mine, gold):
        rel = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b))) / math.sqrt(sum(y * y for y in b))
        assert rel < 2.0, rel
    bad_im = os.path.join(d, "bad.imatrix")
    with open(bad_im, "wb") as f:
        f.write(b"\x05\x00\x00\x00garbage")
    run("quantize", stories, os.path.join(d, "x.gguf"), "q4_0", "--imatrix", bad_im, ok=False)
    run("imatrix", "-m", stories, "-f", text, ok=False)  # no -o

    # --- refusals --------------------------------------------------------
    bad = os.path.join(d, "bad.kld")
    with open(bad, "wb") as f:
        f.write(open(base, "rb").read()[:-3])
    run("perplexity", stories, "--kl-divergence-base", bad, "--kl-divergence", ok=False)
    with open(bad, "wb") as f:
        f.write(b"not a logits file at all")
    run("perplexity", stories, "--kl-divergence-base", bad, "--kl-divergence", ok=False)
    run("perplexity", stories, "--kl-divergence-base", base, "--kl-divergence", "-c", "64", ok=False)
    run("perplexity", stories, "-f", text, "-c", "100000", ok=False)  # too few tokens
    run("perplexity", stories, ok=False)  # no text
    run("perplexity", stories, "-f", "/nonexistent.txt", ok=False)
print("quant: all checks passed")
