#!/usr/bin/env python3
"""brisk serve-bench: a few requests on stories260K through every
configuration; the JSON is complete and consistent with itself (every
statistic is recomputed from the per-request samples it prints), all
configurations generate the same tokens, the static baseline has the slots
the KV budget allows, and the SVG plots are well-formed. Speed is not
asserted (the machine may be shared).
Usage: test_serve_bench.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
import json
import math
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared models are absent")
    sys.exit(77)


def run(*args, ok=True):
    p = subprocess.run([brisk, "serve-bench", *args], capture_output=True, text=True, timeout=60)
    if ok and p.returncode != 0:
        sys.exit(f"brisk serve-bench {' '.join(args)} failed: {p.stderr}")
    if not ok:
        assert p.returncode != 0, f"brisk serve-bench {' '.join(args)} should fail"
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brisk serve-bench"), p.stderr
    return p


def close(a, b, rel=1e-3, abs_tol=1e-6):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def nearest_rank(sorted_v, p):
    if not sorted_v:
        return 0.0
    rank = min(max(math.ceil(p / 100 * len(sorted_v)), 1), len(sorted_v))
    return sorted_v[rank - 1]


def check_dist(d, samples_s):
    v = sorted(x * 1e3 for x in samples_s)
    assert d["n"] == len(v), (d, len(v))
    if not v:
        return
    for key, p in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert close(d[key], nearest_rank(v, p), 1e-4, 1e-3), (key, d, v)
    assert close(d["mean"], sum(v) / len(v), 1e-4, 1e-3), (d, v)
    assert close(d["max"], v[-1], 1e-4, 1e-3), (d, v)
    assert d["p50"] <= d["p90"] <= d["p99"] <= d["max"], d


N, RATES, SLO_TTFT, SLO_TPOT = 10, (0.0, 400.0), 5.0, 2.0
with tempfile.TemporaryDirectory() as out:
    j = json.loads(run("-m", stories, "-n", str(N), "--rates", ",".join(map(str, RATES)),
                       "--prompt-len", "4..40", "--output-len", "1..12", "--prefix-frac", "0.5",
                       "--kv-tokens", "128", "--seed", "7", "-t", "1", "--compare", "all",
                       "--slo-ttft-ms", str(SLO_TTFT), "--slo-tpot-ms", str(SLO_TPOT),
                       "--out-dir", out, "--json").stdout)
    svgs = {f: ET.parse(os.path.join(out, f)).getroot() for f in sorted(os.listdir(out))}

assert j["kv_tokens"] == 128 and j["block_size"] == 16 and j["rates"] == list(RATES), j
assert j["workload"] == {"n_requests": N, "prompt_len": [4, 40], "output_len": [1, 12],
                         "prefix_frac": 0.5, "prefix_groups": 1, "seed": 7}, j["workload"]
prefix = True
configs = ["continuous", "static", "continuous-eqbatch"] + (["prefix-cache"] if prefix else []) + \
    ["chunked-64"]
assert [r["config"] for r in j["runs"]] == configs * len(RATES), [r["config"] for r in j["runs"]]

# Static slots reserve the longest request (40 + 12 tokens: 4 blocks of 16) out of the
# 8 blocks of the budget: 2 slots; the equal-batch engine runs 2 at a time.
for r in j["runs"]:
    if r["config"] == "static":
        assert r["kind"] == "static" and r["n_slots"] == 2 and r["slot_tokens"] == 64, r
    else:
        assert r["kind"] == "continuous", r
        assert r["max_running"] == (2 if r["config"] == "continuous-eqbatch" else 64), r
        assert r["prefill_chunk"] == (64 if r["config"] == "chunked-64" else 0), r

first = j["runs"][0]["requests"]
for r in j["runs"]:
    q = r["requests"]
    # One workload per rate; lengths and tokens do not depend on the rate.
    assert q["n_prompt"] == first["n_prompt"] and q["n_output"] == first["n_output"], q
    assert all(4 <= n <= 40 for n in q["n_prompt"]) and all(1 <= n <= 12 for n in q["n_output"])
    # Greedy and batch-invariant: every configuration generates the same tokens.
    assert q["out_hash"] == first["out_hash"], (r["config"], q["out_hash"], first["out_hash"])
    arr = q["arrival_s"]
    if r["rate"] == 0:
        assert all(a == 0 for a in arr), arr
    else:
        assert all(b >= a for a, b in zip(arr, arr[1:])) and arr[-1] > 0, arr
    for a, t, e in zip(arr, q["ttft_s"], q["e2e_s"]):
        assert 0 < t <= e and a + e <= r["duration_s"] + 1e-6, (a, t, e, r["duration_s"])
    assert close(max(a + e for a, e in zip(arr, q["e2e_s"])), r["duration_s"], 1e-6), r
    assert r["n_requests"] == N and r["prompt_tokens"] == sum(q["n_prompt"]), r
    assert r["output_tokens"] == sum(q["n_output"]), r
    d = r["duration_s"]
    assert close(r["output_tok_s"], r["output_tokens"] / d), r
    assert close(r["total_tok_s"], (r["output_tokens"] + r["prompt_tokens"]) / d), r
    assert close(r["req_s"], N / d), r
    tpot = [(e - t) / (n - 1) for t, e, n in zip(q["ttft_s"], q["e2e_s"], q["n_output"]) if n > 1]
    check_dist(r["ttft_ms"], q["ttft_s"])
    check_dist(r["e2e_ms"], q["e2e_s"])
    check_dist(r["tpot_ms"], tpot)
    # Inter-token latencies: every gap between two tokens of a request; they add up to
    # each request's e2e - TTFT.
    itl = r["itl_ms"]
    assert itl["n"] == sum(n - 1 for n in q["n_output"]), (itl, q["n_output"])
    span = sum(e - t for t, e in zip(q["ttft_s"], q["e2e_s"])) * 1e3
    assert itl["n"] == 0 or close(itl["mean"] * itl["n"], span, 1e-3, 1e-2), (itl, span)
    assert itl["max"] <= max(q["e2e_s"]) * 1e3 + 1e-3, itl
    if itl["n"]:
        assert itl["p50"] <= itl["p90"] <= itl["p99"] <= itl["max"], itl
    ok = sum(1 for t, e, n in zip(q["ttft_s"], q["e2e_s"], q["n_output"])
             if t * 1e3 <= SLO_TTFT and (n < 2 or (e - t) / (n - 1) * 1e3 <= SLO_TPOT))
    assert r["n_slo_ok"] == ok and close(r["goodput_req_s"], ok / d), (r["n_slo_ok"], ok)
    # Each request runs its prompt and all but its last token through the model
    # (more after a preemption; fewer with prefix-cache hits).
    need = sum(p + o - 1 for p, o in zip(q["n_prompt"], q["n_output"]))
    if r["config"] != "prefix-cache":
        assert r["n_computed_tokens"] >= need, (r["n_computed_tokens"], need)
    if r["kind"] == "static" or r["n_preemptions"] == 0 and r["config"] != "prefix-cache":
        assert r["n_computed_tokens"] == need, (r["config"], r["n_computed_tokens"], need)
    assert sum(q["n_preemptions"]) >= r["n_preemptions"] >= 0 and r["n_steps"] > 0, r
    assert r["cpu_s"] >= 0, r
    assert 0 <= r["prefix_hit_tokens"] <= r["prefix_lookup_tokens"], r
    if r["config"] != "prefix-cache":
        assert r["prefix_lookup_tokens"] == 0, r
    elif r["n_preemptions"] == 0:
        assert r["n_computed_tokens"] + r["prefix_hit_tokens"] == need, r

by = {(r["config"], r["rate"]): r for r in j["runs"]}
names = [c["name"] for c in j["comparisons"]]
assert names == (["static", "prefix", "chunked"] if prefix else ["static", "chunked"]) * len(RATES)
for c in j["comparisons"]:
    cont = by[("continuous", c["rate"])]
    if c["name"] == "static":
        assert c["n_slots"] == 2, c
        assert close(c["continuous_over_static_output_tok_s"],
                     cont["output_tok_s"] / by[("static", c["rate"])]["output_tok_s"]), c
        assert close(c["eqbatch_over_static_output_tok_s"],
                     by[("continuous-eqbatch", c["rate"])]["output_tok_s"] /
                     by[("static", c["rate"])]["output_tok_s"]), c
    elif c["name"] == "prefix":
        assert close(c["mean_ttft_off_over_on"], cont["ttft_ms"]["mean"] /
                     by[("prefix-cache", c["rate"])]["ttft_ms"]["mean"], 1e-3, 1e-3), c
    else:
        assert c["prefill_chunk"] == 64, c
        assert close(c["p99_tpot_ms_off"], cont["tpot_ms"]["p99"], 1e-4, 1e-3), c
        assert close(c["p99_tpot_ms_on"], by[("chunked-64", c["rate"])]["tpot_ms"]["p99"],
                     1e-4, 1e-3), c
        assert close(c["p99_itl_ms_off"], cont["itl_ms"]["p99"], 1e-4, 1e-3), c
        assert close(c["p99_itl_ms_on"], by[("chunked-64", c["rate"])]["itl_ms"]["p99"],
                     1e-4, 1e-3), c

# Plots: standalone SVG; one curve per run (CDFs) or per configuration (rates).
SVG = "{http://www.w3.org/2000/svg}"
assert sorted(svgs) == ["e2e-cdf.svg", "throughput-vs-rate.svg", "tpot-p99-vs-rate.svg",
                        "ttft-cdf.svg"], sorted(svgs)
for name, root in svgs.items():
    assert root.tag == SVG + "svg", root.tag
    lines = root.findall(SVG + "polyline")
    want = len(j["runs"]) if "cdf" in name else len(configs)
    assert len(lines) == want, (name, len(lines), want)
    for pl in lines:
        pts = [tuple(map(float, p.split(","))) for p in pl.get("points").split()]
        assert pts and all(0 <= x <= 720 and 0 <= y <= 420 for x, y in pts), (name, pts)
    if "rate" in name:
        assert len(root.findall(SVG + "circle")) == len(j["runs"]), name

# Static batches: requests in arrival order, 2 per batch; one prefill step (the prompts fit
# in a step) and then a decode step per token of the batch's longest request. Padded, the
# finished slots keep decoding until then.
for pad in ([], ["--static-pad"]):
    j = json.loads(run("-m", stories, "-n", "7", "--rate", "0", "--prompt-len", "4..40",
                       "--output-len", "1..12", "--kv-tokens", "128", "-t", "1", "--compare",
                       "static", *pad, "--json").stdout)
    r = j["runs"][1]
    assert r["config"] == ("static-padded" if pad else "static") and r["padded"] == bool(pad), r
    q = r["requests"]
    batches = [range(i, min(i + 2, 7)) for i in range(0, 7, 2)]
    assert r["n_steps"] == sum(max(q["n_output"][i] for i in b) for b in batches), r
    computed = sum(q["n_prompt"]) + sum(
        len(b) * (max(q["n_output"][i] for i in b) - 1) if pad else
        sum(q["n_output"][i] - 1 for i in b) for b in batches)
    assert r["n_computed_tokens"] == computed, (r["n_computed_tokens"], computed)
    assert q["out_hash"] == j["runs"][0]["requests"]["out_hash"], q
    # A batch starts together: its requests share their first-token time.
    first = [a + t for a, t in zip(q["arrival_s"], q["ttft_s"])]
    for b in batches:
        assert max(first[i] for i in b) - min(first[i] for i in b) < 1e-9, first

# Prefix cache: 48-token prompts whose first 36 tokens are common, arriving one at a time:
# later requests reuse full blocks of the common prefix (two when the first is done).
j = json.loads(run("-m", stories, "-n", "6", "--rate", "20", "--prompt-len", "48",
                   "--prefix-frac", "0.75", "--output-len", "4", "--kv-tokens", "512", "-t", "1",
                   "--compare", "prefix", "--json").stdout)
off, on = j["runs"]
assert off["config"] == "continuous" and on["config"] == "prefix-cache", j["runs"]
assert off["prefix_hit_tokens"] == 0 and on["prefix_hit_tokens"] >= 32, on
assert on["n_computed_tokens"] == off["n_computed_tokens"] - on["prefix_hit_tokens"], (on, off)
assert on["requests"]["out_hash"] == off["requests"]["out_hash"]
c = j["comparisons"][0]
assert c["name"] == "prefix" and close(
    c["mean_ttft_off_over_on"], off["ttft_ms"]["mean"] / on["ttft_ms"]["mean"], 1e-3, 1e-3), c

# The prefix cache's host tier: 4 shared prefixes of 96 tokens (24 blocks of 4) in a pool
# of 32 blocks, requests one at a time. The pool alone keeps about one prefix; the host
# tier brings the others back: more tokens reused, the same tokens generated.
j = json.loads(run("-m", stories, "-n", "16", "--rate", "0", "--prompt-len", "100",
                   "--prefix-frac", "0.96", "--prefix-groups", "4", "--output-len", "2",
                   "--kv-tokens", "128", "--block-size", "4", "--max-running", "1", "-t", "1",
                   "--compare", "prefix", "--prefix-host-bytes", "64M", "--json").stdout)
assert j["workload"]["prefix_groups"] == 4, j["workload"]
off, pc, ph = j["runs"]
assert [r["config"] for r in j["runs"]] == ["continuous", "prefix-cache", "prefix-host"]
assert ph["prefix_host_bytes"] == 64 << 20 and pc["prefix_host_bytes"] == 0, ph
assert pc["host_tier_hits"] == 0 and pc["host_tier_bytes"] == 0, pc
assert ph["host_tier_hits"] > 0 and ph["host_tier_bytes"] > 0, ph
assert ph["host_tier_evictions"] == 0, ph  # 64 MiB holds every prefix of this model
assert ph["prefix_hit_tokens"] > pc["prefix_hit_tokens"], (ph, pc)
# Every block brought back is reused (hit tokens count them and the pool's own).
assert ph["prefix_hit_tokens"] >= 4 * ph["host_tier_hits"], ph
assert ph["n_computed_tokens"] == off["n_computed_tokens"] - ph["prefix_hit_tokens"], (ph, off)
assert ph["requests"]["out_hash"] == off["requests"]["out_hash"] == pc["requests"]["out_hash"]
c = [c for c in j["comparisons"] if c["name"] == "prefix-host"][0]
assert c["baseline"] == "prefix-cache" and close(
    c["mean_ttft_baseline_over_host"], pc["ttft_ms"]["mean"] / ph["ttft_ms"]["mean"], 1e-3, 1e-3)
assert close(c["hit_rate_host"], ph["prefix_hit_tokens"] / ph["prefix_lookup_tokens"]), c

# Preemption under a small KV pool (no growth reserve, so admission fills
# it), by recompute or by swap: same tokens either way.
outs = {}
for mode in ("recompute", "swap"):
    j = json.loads(run("-m", stories, "-n", "8", "--rate", "0", "--prompt-len", "16..40",
                       "--output-len", "8..24", "--kv-tokens", "128", "-t", "1", "--preempt",
                       mode, "--reserve-blocks", "0", "--json").stdout)
    assert j["preempt"] == mode, j["preempt"]
    r = j["runs"][0]
    assert r["n_preemptions"] > 0 and sum(r["requests"]["n_preemptions"]) == r["n_preemptions"], r
    outs[mode] = r["requests"]["out_hash"]
assert outs["recompute"] == outs["swap"], outs

# The workload: Poisson arrivals (exponential gaps of mean 1 / rate), uniform lengths,
# the same for the same seed.
def workload(seed):
    j = json.loads(run("-m", stories, "-n", "400", "--rate", "100000", "--prompt-len", "1..3",
                       "--output-len", "1", "--seed", str(seed), "-t", "1", "--json").stdout)
    return j["runs"][0]["requests"]


w1, w2, w3 = workload(3), workload(3), workload(4)
assert w1["arrival_s"] == w2["arrival_s"] and w1["n_prompt"] == w2["n_prompt"]
assert w1["arrival_s"] != w3["arrival_s"] and w1["n_prompt"] != w3["n_prompt"]
arr = w1["arrival_s"]
gaps = [b - a for a, b in zip([0.0] + arr, arr)]
assert min(gaps) >= 0 and abs(sum(gaps) / len(gaps) - 1e-5) < 0.2e-5, sum(gaps) / len(gaps)
assert sorted(set(w1["n_prompt"])) == [1, 2, 3] and abs(sum(w1["n_prompt"]) / 400 - 2) < 0.2
assert set(w1["n_output"]) == {1}

# Text output: the table and the comparisons.
p = run("-m", stories, "-n", "4", "--prompt-len", "8", "--output-len", "3", "--rate", "0",
        "--kv-tokens", "64", "-t", "1", "--compare", "static")
assert "continuous" in p.stdout and "static" in p.stdout and "TTFT p50" in p.stdout, p.stdout
assert "continuous / static output tok/s" in p.stdout, p.stdout

# Errors: one line each, nonzero exit.
run(ok=False)
run("-m", stories, "--output-len", "5..2", ok=False)
# --window: every request attends to its sinks and last W tokens, so requests
# 3x longer than the KV budget run through it; each generates all its tokens.
j = json.loads(run("-m", stories, "-n", "3", "--rate", "0", "--prompt-len", "40",
                   "--output-len", "160", "--kv-tokens", "64", "--block-size", "4", "--window",
                   "16", "--sinks", "4", "-t", "1", "--json").stdout)
r = j["runs"][0]
assert r["output_tokens"] == 3 * 160 and r["prompt_tokens"] == 3 * 40, r
run("-m", stories, "--sinks", "4", ok=False)
run("-m", stories, "--window", "16", "--compare", "static", ok=False)
run("-m", stories, "--rate", "-1", ok=False)
run("-m", stories, "--compare", "bogus", ok=False)
run("-m", stories, "--preempt", "sometimes", ok=False)
run("-m", stories, "--prefix-host-bytes", "lots", ok=False)
run("-m", stories, "--prefix-groups", "0", ok=False)
run("-m", stories, "--prompt-len", "100", "--output-len", "100", "--kv-tokens", "64", ok=False)
run("-m", "/nonexistent.gguf", ok=False)
