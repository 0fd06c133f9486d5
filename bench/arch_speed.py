#!/usr/bin/env python3
"""Decode speed per byte of weights of every architecture brisk runs, at the
size of SmolLM2-135M, against a llama model of the same shapes.

    arch_speed.py --brisk build/tools/brisk [--archs llama,gemma2,...]
                  [--rounds 3] [-n 64] [-t 2] [--workdir DIR] [--json]

Each architecture gets a random-weight model made by transformers from a
config at SmolLM2-135M's shapes (hidden 576, 30 layers, 9 query and 3 KV
heads of 64, FFN 1536, vocabulary 49152, tied embeddings), with each
family's own features on (soft-capping, sliding windows, QK-norm, post-norms,
fused QKV, multipliers, MLA); mixture-of-experts models get 8 experts of FFN
768 with 2 used per token (and a shared expert where the family has one),
so a token reads about as many bytes as a dense layer's FFN. The folders are
saved in F16 and loaded by brisk as they are.

The measure is decode bandwidth: `brisk bench -p 0 -n N` tokens/s times the
bytes a decode step reads (the bench's decode_bytes_per_token: the weights
the token goes through, its experts only, plus its KV), so that models of
different sizes compare per byte. The architectures run one after another
within each round (each round starting one later), for --rounds rounds, and the ratio to llama is taken
round by round (the same minute of machine load on both sides), then the
median. Needs torch and transformers (a tool, not a test: it is not run in
CI); the models go to --workdir (default: a temporary folder), never into
the repository. Prints a markdown table, the CPU and the load average.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SMOL = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 768}

# name -> (model_type, overrides)
ARCHS = {
    "llama": ("llama", {}),
    "qwen2": ("qwen2", {}),
    "qwen3": ("qwen3", {}),
    "mistral": ("mistral", {"sliding_window": None}),
    "gemma2": ("gemma2", {"query_pre_attn_scalar": 64, "sliding_window": 4096,
                          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}),
    "gemma3": ("gemma3_text", {"query_pre_attn_scalar": 64, "sliding_window": 512,
                               "sliding_window_pattern": 6}),
    "phi3": ("phi3", {"tie_word_embeddings": False, "pad_token_id": 0}),
    "olmo2": ("olmo2", {}),
    "granite": ("granite", {"embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                            "attention_multiplier": 0.015625, "logits_scaling": 8.0}),
    "mixtral": ("mixtral", {"num_local_experts": 8, "num_experts_per_tok": 2,
                            "intermediate_size": 768}),
    "qwen2moe": ("qwen2_moe", dict(MOE, shared_expert_intermediate_size=768,
                                   decoder_sparse_step=1, mlp_only_layers=[])),
    "qwen3moe": ("qwen3_moe", dict(MOE, decoder_sparse_step=1, mlp_only_layers=[],
                                   norm_topk_prob=True)),
    "deepseek2": ("deepseek_v2", {"n_routed_experts": 8, "num_experts_per_tok": 2,
                                  "moe_intermediate_size": 768, "n_shared_experts": 1,
                                  "first_k_dense_replace": 1, "kv_lora_rank": 128,
                                  "q_lora_rank": None, "qk_rope_head_dim": 32,
                                  "qk_nope_head_dim": 64, "v_head_dim": 64,
                                  "topk_method": "greedy", "n_group": 1, "topk_group": 1,
                                  "num_key_value_heads": 9, "head_dim": 96}),
}


def make_model(arch, out):
    if os.path.exists(os.path.join(out, "config.json")):
        return
    import torch
    import transformers

    model_type, over = ARCHS[arch]
    cfg = transformers.AutoConfig.for_model(model_type, **dict(SMOL, **over))
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # small weights, so activations stay finite in F16
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    model.half().save_pretrained(out, safe_serialization=True)


def bench(brisk, model, n, threads):
    cmd = [brisk, "bench", "-m", model, "-p", "0", "-n", str(n), "-r", "1", "-t",
           str(threads), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    j = json.loads(p.stdout)
    return j["tg"]["median_tps"], j["decode_bytes_per_token"]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brisk", required=True)
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--workdir")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    archs = a.archs.split(",")
    for x in archs:
        if x not in ARCHS:
            ap.error(f"unknown architecture {x!r}; known: {', '.join(ARCHS)}")
    if "llama" not in archs:
        archs.insert(0, "llama")
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"arch_speed: needs torch and transformers ({e})", file=sys.stderr)
        return 2
    work = a.workdir or tempfile.mkdtemp(prefix="brisk-arch-speed-")
    paths = {}
    for x in archs:
        paths[x] = os.path.join(work, x)
        print(f"arch_speed: making {x} in {paths[x]}", file=sys.stderr)
        make_model(x, paths[x])
    load_before = os.getloadavg()
    runs = {x: [] for x in archs}  # per round: (tok/s, bytes/token)
    for r in range(a.rounds):
        # Each round starts one architecture later, so none always runs first.
        k = r % len(archs)
        for x in archs[k:] + archs[:k]:
            runs[x].append(bench(a.brisk, paths[x], a.n, a.t))
            tps, bpt = runs[x][-1]
            print(f"arch_speed: round {r + 1} {x}: {tps:.1f} tok/s, "
                  f"{bpt / 1e6:.1f} MB/token", file=sys.stderr)
    load_after = os.getloadavg()
    rows = []
    for x in archs:
        gbs = [t * b / 1e9 for t, b in runs[x]]
        ratio = [g / (t * b / 1e9) for g, (t, b) in zip(gbs, runs["llama"])]
        rows.append({
            "arch": x,
            "mb_per_token": runs[x][0][1] / 1e6,
            "tok_s": statistics.median(t for t, _ in runs[x]),
            "gb_s": statistics.median(gbs),
            "ratio_to_llama": statistics.median(ratio),
            "ratios": ratio,
        })
    info = {"cpu": cpu_name(), "threads": a.t, "n_gen": a.n, "rounds": a.rounds,
            "load_before": load_before, "load_after": load_after, "rows": rows}
    if a.json:
        print(json.dumps(info))
        return 0
    print(f"CPU: {info['cpu']}; {a.t} threads; tg{a.n}, {a.rounds} rounds; load average "
          f"{' '.join(f'{v:.2f}' for v in load_before)} -> "
          f"{' '.join(f'{v:.2f}' for v in load_after)}")
    print()
    print("| architecture | MB read / token | tok/s (median) | GB/s (median) | per byte vs llama "
          "(median of rounds) | rounds |")
    print("|---|---:|---:|---:|---:|---|")
    for w in rows:
        print(f"| {w['arch']} | {w['mb_per_token']:.1f} | {w['tok_s']:.1f} | {w['gb_s']:.2f} | "
              f"{w['ratio_to_llama']:.2f} | {', '.join(f'{v:.2f}' for v in w['ratios'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
