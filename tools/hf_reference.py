#!/usr/bin/env python3
"""Small random-weight Hugging Face models and transformers' logits for them.

Each architecture below is a small config.json. Its weights are made
deterministically with NumPy from the tensor names and shapes listed in the
reference file (tests/model/hf_ref/<arch>.json), so a machine without torch
can rebuild the exact folder that transformers was run on.

  hf_reference.py make ARCH OUT_DIR [REF_DIR]
      writes OUT_DIR/config.json and OUT_DIR/model.safetensors (NumPy and
      safetensors only) from the committed reference file.
  hf_reference.py reference ARCH [REF_DIR]
      (needs torch + transformers) builds the model with transformers from
      the config, records its tensor names and shapes, loads the NumPy
      weights into it and writes REF_DIR/<arch>.json: the prompt, the decode
      tokens and transformers' float32 logits for a prompt longer than the
      sliding window and for decode steps through its KV cache. Rerunning it
      reproduces the committed file.
  hf_reference.py gguf ARCH OUT.gguf [REF_DIR]
      writes the same weights as a GGUF file, as llama.cpp's converter lays
      them out (NumPy and gguf-py only); gguf-list names the architectures.
  hf_reference.py list
"""
import hashlib
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.join(HERE, "..", "tests", "model", "hf_ref")

VOCAB = 128
PROMPT = 24  # longer than every sliding window below
DECODE = 3
WINDOW = 8

BASE = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

# arch name -> (model_type, config overrides, tolerance, why that tolerance)
ARCHS = {
    "llama_rope_parameters": (
        "llama",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
        2e-5,
        "float32 both sides; only the summation order differs",
    ),
    "llama_llama3": (
        "llama",
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            }
        },
        2e-5,
        "float32 both sides; only the summation order differs",
    ),
    "mistral": (
        "mistral",
        {"sliding_window": WINDOW, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        2e-5,
        "float32 both sides; only the summation order differs",
    ),
    "mixtral": (
        "mixtral",
        {
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        },
        2e-5,
        "float32; experts are summed in another order than transformers'",
    ),
    "qwen2": (
        "qwen2",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        2e-5,
        "float32 both sides; only the summation order differs",
    ),
    "qwen3": (
        "qwen3",
        {"head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        2e-5,
        "float32 both sides; only the summation order differs",
    ),
    "granite": (
        "granite",
        {
            "embedding_multiplier": 12.0,
            "residual_multiplier": 0.22,
            "attention_multiplier": 0.0078125,
            "logits_scaling": 8.0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        2e-5,
        "float32; the multipliers are exact scalings",
    ),
    "olmo2": (
        "olmo2",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
        2e-5,
        "float32; norms over the full q/k add one more reduction",
    ),
    "gemma2": (
        "gemma2",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 24,
            "attn_logit_softcapping": 2.0,
            "final_logit_softcapping": 5.0,
            "sliding_window": WINDOW,
            "num_hidden_layers": 4,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        2e-5,
        "float32; tanhf and expf (soft-caps, gelu) differ by ulps between libms",
    ),
    "gemma3": (
        "gemma3_text",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": WINDOW,
            "num_hidden_layers": 4,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        },
        2e-5,
        "float32; expf in the tanh-form gelu differs by ulps between libms",
    ),
    "phi3": (
        "phi3",
        {
            "sliding_window": WINDOW,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        },
        2e-5,
        "float32; fused projections are split into views, the same products",
    ),
    # LongRoPE: the original context below the prompt (the long factors
    # from the first token, as transformers picks them per forward call)
    # and above prompt + decode (the short ones throughout), each with the
    # default attention factor sqrt(1 + ln(256 / orig) / ln(orig)).
    "phi3_longrope": (
        "phi3",
        {
            "sliding_window": WINDOW,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "short_factor": [1.0, 1.3, 1.9, 2.7],
                "long_factor": [1.1, 2.2, 4.5, 8.0],
            },
            # Where Phi-3's configs keep it (transformers' Phi3Config reads
            # it there, 4096 when absent, over the rope object's).
            "original_max_position_embeddings": 16,
        },
        2e-5,
        "float32; transformers forms 1 / (factor * base^(2i/d)) in float32, brisk in float64",
    ),
    "phi3_longrope_short": (
        "phi3",
        {
            "sliding_window": WINDOW,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "short_factor": [1.0, 1.3, 1.9, 2.7],
                "long_factor": [1.1, 2.2, 4.5, 8.0],
            },
            # Where Phi-3's configs keep it (transformers' Phi3Config reads
            # it there, 4096 when absent, over the rope object's).
            "original_max_position_embeddings": 64,
        },
        2e-5,
        "float32; transformers forms 1 / (factor * base^(2i/d)) in float32, brisk in float64",
    ),
    "qwen2moe": (
        "qwen2_moe",
        {
            "num_hidden_layers": 2,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 48,
            "norm_topk_prob": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        2e-5,
        "float32; experts are summed in another order than transformers'",
    ),
    "qwen2moe_mlp_only": (
        "qwen2_moe",
        {
            "num_hidden_layers": 3,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 48,
            "norm_topk_prob": False,
            "mlp_only_layers": [1],
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        2e-5,
        "float32; experts summed in another order; layer 1 dense (mlp_only_layers, not in GGUF)",
    ),
    "qwen3moe": (
        "qwen3_moe",
        {
            "head_dim": 16,
            "num_experts": 6,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "norm_topk_prob": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        2e-5,
        "float32; experts are summed in another order than transformers'",
    ),
    "deepseek2": (
        "deepseek_v2",
        {
            "num_hidden_layers": 3,
            "num_key_value_heads": 4,
            "max_position_embeddings": 64,  # = factor * original: YaRN as DeepSeek sets it
            "q_lora_rank": None,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 12,
            "first_k_dense_replace": 1,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 2,
            "moe_intermediate_size": 16,
            "topk_method": "greedy",
            "norm_topk_prob": False,
            "routed_scaling_factor": 1.0,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 0.8,
            },
        },
        2e-5,
        "float32; latent attention (kv_b absorbed) and experts sum in another order",
    ),
    "deepseek2_lite": (
        "deepseek_v2",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "max_position_embeddings": 64,
            "q_lora_rank": None,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            "first_k_dense_replace": 1,
            "n_routed_experts": 6,
            "num_experts_per_tok": 2,
            "n_shared_experts": 2,
            "moe_intermediate_size": 16,
            "topk_method": "greedy",
            "norm_topk_prob": False,
            "routed_scaling_factor": 1.0,
            # DeepSeek-V2-Lite's YaRN: mscale = mscale_all_dim, as GGUF
            # files can carry it.
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
            },
        },
        2e-5,
        "float32; latent attention (kv_b absorbed) and experts sum in another order",
    ),
    "deepseek2_group": (
        "deepseek_v2",
        {
            "num_hidden_layers": 2,
            "num_key_value_heads": 4,
            "q_lora_rank": 24,
            "kv_lora_rank": 32,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            "first_k_dense_replace": 0,
            "n_routed_experts": 8,
            "num_experts_per_tok": 3,
            "n_shared_experts": 1,
            "moe_intermediate_size": 16,
            "topk_method": "group_limited_greedy",
            "n_group": 4,
            "topk_group": 2,
            "norm_topk_prob": False,
            "routed_scaling_factor": 2.5,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        2e-5,
        "float32; latent attention (kv_b absorbed) and experts sum in another order",
    ),
}


def seed_of(arch, name):
    h = hashlib.sha256(f"{arch}/{name}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def make_tensor(arch, name, shape):
    """Deterministic float32 values for one tensor, by name only."""
    rng = np.random.Generator(np.random.PCG64(seed_of(arch, name)))
    if len(shape) == 1:
        if name.endswith("norm.weight"):
            return (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)
    if "embed_tokens" in name:
        return rng.standard_normal(shape).astype(np.float32)
    # std 1/sqrt(fan_in): activations and logits stay of order one.
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def config_of(arch):
    model_type, over, _, _ = ARCHS[arch]
    # A deep copy: transformers fills in the rope object it is given.
    cfg = json.loads(json.dumps(BASE))
    cfg["model_type"] = model_type
    cfg.update(json.loads(json.dumps(over)))
    return cfg


def tokens_of(arch):
    rng = np.random.Generator(np.random.PCG64(seed_of(arch, "tokens")))
    t = rng.integers(3, VOCAB, PROMPT + DECODE)
    return [int(x) for x in t[:PROMPT]], [int(x) for x in t[PROMPT:]]


def ref_path(arch, ref_dir):
    return os.path.join(ref_dir, f"{arch}.json")


def write_folder(arch, tensors, out):
    import safetensors.numpy

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config_of(arch), f, indent=1)
    safetensors.numpy.save_file(
        {n: make_tensor(arch, n, s) for n, s in tensors}, os.path.join(out, "model.safetensors")
    )


def cmd_make(arch, out, ref_dir):
    with open(ref_path(arch, ref_dir)) as f:
        ref = json.load(f)
    if ref["config"] != config_of(arch):
        sys.exit(f"{arch}: the committed reference was made from another config; rerun 'reference'")
    write_folder(arch, ref["tensors"], out)


def cmd_reference(arch, ref_dir):
    import torch
    import transformers

    import tempfile

    from safetensors import safe_open

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config_of(arch))
    with tempfile.TemporaryDirectory() as tmp:
        # The tensor names and shapes save_pretrained writes (the format a
        # user downloads), then transformers loads the NumPy folder itself.
        seed_model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        seed_model.save_pretrained(os.path.join(tmp, "seed"))
        with safe_open(os.path.join(tmp, "seed", "model.safetensors"), "np") as f:
            tensors = [[n, list(f.get_slice(n).get_shape())] for n in sorted(f.keys())]
        write_folder(arch, tensors, os.path.join(tmp, "np"))
        model, info = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(tmp, "np"), dtype=torch.float32, attn_implementation="eager",
            output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        sys.exit(f"{arch}: transformers did not load every tensor: {bad}")
    model.eval()
    prompt, decode = tokens_of(arch)
    with torch.no_grad():
        out = model(torch.tensor([prompt]), use_cache=True)
        prompt_logits = out.logits[0].float().numpy()
        past = out.past_key_values
        steps = []
        for i, t in enumerate(decode):
            pos = torch.tensor([[PROMPT + i]])
            o = model(torch.tensor([[t]]), past_key_values=past, use_cache=True, position_ids=pos)
            past = o.past_key_values
            steps.append(o.logits[0, -1].float().numpy())
        # The cached decode must agree with one uncached pass over it all.
        full = model(torch.tensor([prompt + decode]), use_cache=False).logits[0].float().numpy()
    for i, s in enumerate(steps):
        if np.max(np.abs(full[PROMPT + i] - s)) > 1e-4 * max(1.0, np.max(np.abs(s))):
            sys.exit(f"{arch}: transformers' cached decode step {i} differs from its full pass")
    rows = sorted({0, WINDOW - 1, WINDOW, PROMPT - 1})
    ref = {
        "arch": arch,
        "config": config_of(arch),
        "transformers": transformers.__version__,
        "tolerance": ARCHS[arch][2],
        "tolerance_reason": ARCHS[arch][3],
        "tensors": tensors,
        "prompt": prompt,
        "decode": decode,
        "prompt_rows": rows,
        "prompt_logits": [[round(float(v), 6) for v in prompt_logits[r]] for r in rows],
        "decode_logits": [[round(float(v), 6) for v in s] for s in steps],
    }
    os.makedirs(ref_dir, exist_ok=True)
    with open(ref_path(arch, ref_dir), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


# Architectures written as GGUF too, as llama.cpp's convert_hf_to_gguf.py
# writes them (its tensor names from gguf-py, q/k rows permuted for the
# llama-layout archs, Gemma norms stored as 1 + w).
GGUF_ARCHS = {
    "llama_rope_parameters": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "granite": "granite",
    "olmo2": "olmo2",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "phi3": "phi3",
    "phi3_longrope": "phi3",
    "phi3_longrope_short": "phi3",
    "mixtral": "llama",
    "qwen2moe": "qwen2moe",
    "qwen3moe": "qwen3moe",
    # deepseek2 (the YaRN one) is not here: llama.cpp's keys cannot say
    # mscale != mscale_all_dim (it keeps only yarn_log_multiplier).
    "deepseek2_group": "deepseek2",
    "deepseek2_lite": "deepseek2",
}


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate_half pairs -> adjacent."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def cmd_gguf(arch, out, ref_dir):
    import gguf

    with open(ref_path(arch, ref_dir)) as f:
        ref = json.load(f)
    cfg = config_of(arch)
    name = GGUF_ARCHS[arch]
    a = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == name)
    nl, nh, nkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // nh)
    rope = cfg.get("rope_parameters", {})
    if "full_attention" in rope:
        rope = rope["full_attention"]
    w = gguf.GGUFWriter(out, name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(nl)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    if name == "deepseek2":
        # As the current converter: MLA seen as MQA over the latent, the
        # per-head sizes in the _mla keys.
        r, dr = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
        w.add_head_count_kv(1)
        w.add_key_length(r + dr)
        w.add_value_length(r)
        w.add_key_length_mla(cfg["qk_nope_head_dim"] + dr)
        w.add_value_length_mla(cfg["v_head_dim"])
        w.add_kv_lora_rank(r)
        if cfg.get("q_lora_rank"):
            w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
        if cfg.get("topk_method") == "group_limited_greedy":
            w.add_uint32(f"{name}.expert_group_count", cfg["n_group"])
            w.add_uint32(f"{name}.expert_group_used_count", cfg["topk_group"])
        cfg = dict(cfg, num_experts=cfg["n_routed_experts"])
    else:
        w.add_head_count_kv(nkv)
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(rope.get("rope_theta", 10000.0))
    if name == "deepseek2":
        w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
    else:
        w.add_rope_dimension_count(int(hd * rope.get("partial_rotary_factor", 1.0)))
    if rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    if rope.get("rope_type") == "yarn" and name == "deepseek2":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])
    if rope.get("rope_type") == "longrope":
        # Phi3MiniModel's: the original context, the converter's attention
        # factor from max_position_embeddings / original, the two factor
        # lists as F32 tensors.
        orig = cfg.get("original_max_position_embeddings", 4096)
        scale = cfg["max_position_embeddings"] / orig
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0)
        w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32))
    if cfg.get("sliding_window"):
        w.add_sliding_window(cfg["sliding_window"])
    n_exp = cfg.get("num_local_experts") or cfg.get("num_experts")
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        if "moe_intermediate_size" in cfg:
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if cfg.get("shared_expert_intermediate_size"):
            w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if name == "granite":
        w.add_embedding_scale(cfg["embedding_multiplier"])
        w.add_residual_scale(cfg["residual_multiplier"])
        w.add_attention_scale(cfg["attention_multiplier"])
        w.add_logit_scale(cfg["logits_scaling"])
    if name.startswith("gemma"):
        if cfg.get("attn_logit_softcapping"):
            w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
        # llama.cpp's converter drops query_pre_attn_scalar (it assumes
        # head_dim, or n_embd / n_head in the 27B models); this test model
        # has another, so it is stored in the key brisk honours.
        if cfg["query_pre_attn_scalar"] != hd:
            w.add_attention_scale(cfg["query_pre_attn_scalar"] ** -0.5)
        if name == "gemma3":
            w.add_rope_freq_base_swa(cfg["rope_parameters"]["sliding_attention"]["rope_theta"])
    tmap = gguf.get_tensor_name_map(a, nl)
    # Experts are stacked per layer into one [n_expert, rows, cols] tensor.
    stacks = {}
    for n, shape in ref["tensors"]:
        parts = n.split(".")
        if "experts" in parts and parts[parts.index("experts") + 1].isdigit():
            i = parts.index("experts")
            kind = {"w1": "gate", "w3": "up", "w2": "down", "gate_proj": "gate", "up_proj": "up",
                    "down_proj": "down"}[parts[i + 2]]
            stacks.setdefault((int(parts[2]), kind), []).append(
                (int(parts[i + 1]), make_tensor(arch, n, shape)))
            continue
        t = make_tensor(arch, n, shape)
        if n.endswith("kv_b_proj.weight"):
            # The converter's split for the absorbed attention: k_b
            # transposed per head ([n_head, rank, nope]), v_b as is.
            dn, dv = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
            kv_b = t.reshape(nh, dn + dv, t.shape[-1])
            layer = n.split(".")[2]
            w.add_tensor(f"blk.{layer}.attn_k_b.weight",
                         np.ascontiguousarray(kv_b[:, :dn, :].transpose(0, 2, 1)))
            w.add_tensor(f"blk.{layer}.attn_v_b.weight", np.ascontiguousarray(kv_b[:, dn:, :]))
            continue
        if name.startswith("gemma") and n.endswith("norm.weight"):
            t = t + np.float32(1.0)
        if name in ("llama", "granite") and n.endswith("q_proj.weight"):
            t = permute(t, nh)
        if name in ("llama", "granite") and n.endswith("k_proj.weight"):
            t = permute(t, nkv)
        gname = tmap.get_name(n, try_suffixes=(".weight", ".bias"))
        if gname is None:
            sys.exit(f"{arch}: no GGUF name for {n}")
        w.add_tensor(gname, np.ascontiguousarray(t, dtype=np.float32))
    for (layer, kind), ts in sorted(stacks.items()):
        t = np.stack([x for _, x in sorted(ts, key=lambda e: e[0])])
        w.add_tensor(f"blk.{layer}.ffn_{kind}_exps.weight", np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv):
    if len(argv) >= 2 and argv[1] == "list":
        print("\n".join(ARCHS))
        return
    if len(argv) >= 4 and argv[1] == "make":
        return cmd_make(argv[2], argv[3], argv[4] if len(argv) > 4 else REF_DIR)
    if len(argv) >= 4 and argv[1] == "gguf":
        return cmd_gguf(argv[2], argv[3], argv[4] if len(argv) > 4 else REF_DIR)
    if len(argv) >= 2 and argv[1] == "gguf-list":
        print("\n".join(GGUF_ARCHS))
        return
    if len(argv) >= 3 and argv[1] == "reference":
        return cmd_reference(argv[2], argv[3] if len(argv) > 3 else REF_DIR)
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
