#!/usr/bin/env python3
"""Small random GPTQ and AWQ checkpoints, and a float64 reference forward.

Each variant below is a tiny llama-architecture Hugging Face folder whose
linear layers are stored as the quantization format stores them: int32
qweight / qzeros (8 nibbles a word), float16 scales and, for GPTQ, the g_idx
group index of every input column. The integers are drawn at random and
packed with the formats' own rules (AutoGPTQ's pack along the input axis,
with the historical zero-point offset of 1 of the "gptq" checkpoint format;
AutoAWQ's GEMM interleave [0, 2, 4, 6, 1, 3, 5, 7] along the output axis).
NumPy and safetensors only; everything is deterministic.

  hf_quantized.py make VARIANT OUT_DIR
      writes OUT_DIR/config.json and OUT_DIR/model.safetensors.
  hf_quantized.py logits VARIANT TOKENS...
      prints the float64 forward's logits (one line per position) over the
      exactly dequantized weights: w = scale * (q - zero).
  hf_quantized.py list
"""
import hashlib
import json
import os
import sys

import numpy as np

VOCAB = 128
CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": VOCAB,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float16",
}

# variant -> quantization_config
VARIANTS = {
    "gptq_sym_g128": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
                      "sym": True, "checkpoint_format": "gptq"},
    "gptq_asym_g32": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False,
                      "sym": False, "checkpoint_format": "gptq"},
    "gptq_asym_g128": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
                       "sym": False},
    "gptq_asym_whole": {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False,
                        "sym": False, "checkpoint_format": "gptq"},
    "gptq_v2_asym_g64": {"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False,
                         "sym": False, "checkpoint_format": "gptq_v2"},
    "gptq_desc_act_g32": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True,
                          "sym": False, "checkpoint_format": "gptq"},
    "gptq_desc_act_sym_g64": {"quant_method": "gptq", "bits": 4, "group_size": 64,
                              "desc_act": True, "sym": True, "checkpoint_format": "gptq"},
    "gptq_v2_desc_act_g128": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                              "desc_act": True, "sym": False, "checkpoint_format": "gptq_v2"},
    # GPTQModel's lm_head = true: the output projection quantized too
    "gptq_desc_act_lm_head_g32": {"quant_method": "gptq", "bits": 4, "group_size": 32,
                                  "desc_act": True, "sym": False, "lm_head": True},
    "awq_g128": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                 "version": "gemm"},
    "awq_g64": {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True,
                "version": "gemm"},
    "awq_g32": {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
                "version": "gemm", "modules_to_not_convert": None},
}

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]

# Act-order variants whose column orders are one per input, as GPTQ makes
# them (the order is argsort(diag(H)) of the layer input's Hessian H, so
# q/k/v share one and gate/up another); the other act-order variant draws
# an order per matrix.
SHARED_ORDER = {"gptq_desc_act_sym_g64", "gptq_v2_desc_act_g128"}


def order_key(variant, name):
    if variant not in SHARED_ORDER:
        return name
    for proj, inp in (("q_proj", "attn_in"), ("k_proj", "attn_in"), ("v_proj", "attn_in"),
                      ("gate_proj", "mlp_in"), ("up_proj", "mlp_in")):
        if name.endswith(proj):
            return name[: -len(proj)] + inp
    return name


def rng_of(variant, name):
    h = hashlib.sha256(f"{variant}/{name}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(h[:8], "little")))


def linears(cfg):
    d, ff = cfg["hidden_size"], cfg["intermediate_size"]
    hd = d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = []
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        out += [(p + "self_attn.q_proj", q, d), (p + "self_attn.k_proj", kv, d),
                (p + "self_attn.v_proj", kv, d), (p + "self_attn.o_proj", d, q),
                (p + "mlp.gate_proj", ff, d), (p + "mlp.up_proj", ff, d),
                (p + "mlp.down_proj", d, ff)]
    if cfg.get("quantization_config", {}).get("lm_head"):
        out.append(("lm_head", cfg["vocab_size"], d))
    return out


def quantized(variant, name, rows, cols):
    """The layer's integers: q [rows][cols], zero [groups][rows] (the value
    dequantization subtracts), scale [groups][rows] float16, g_idx [cols]."""
    qc = VARIANTS[variant]
    group = cols if qc["group_size"] == -1 else qc["group_size"]
    groups = cols // group
    r = rng_of(variant, name)
    q = r.integers(0, 16, (rows, cols))
    gptq = qc["quant_method"] == "gptq"
    offset = 1 if gptq and qc.get("checkpoint_format", "gptq") == "gptq" else 0
    if gptq and qc["sym"]:
        zero = np.full((groups, rows), 8)
    else:  # the stored nibble is zero - offset: all 16 values occur
        zero = r.integers(0, 16, (groups, rows)) + offset
    # |q - zero| is about 6 on average: weights of order 1/sqrt(cols).
    scale = (r.uniform(0.5, 1.5, (groups, rows)) / (6.0 * np.sqrt(cols))).astype(np.float16)
    g_idx = np.arange(cols) // group
    if gptq and qc["desc_act"]:
        # AutoGPTQ: W = W[:, perm], quantized in that order (group i: the
        # columns perm[i * group .. (i + 1) * group)), g_idx = (i // group)[invperm]
        perm = rng_of(variant, "order/" + order_key(variant, name)).permutation(cols)
        inv = np.argsort(perm)
        g_idx = inv // group
    return q, zero, scale, g_idx, offset


def dequantize(q, zero, scale, g_idx):
    """Exact, in float64: w[n][k] = scale[g][n] * (q[n][k] - zero[g][n]), g = g_idx[k]."""
    s = scale.astype(np.float64)[g_idx].T  # [rows][cols]
    z = zero[g_idx].T
    return s * (q - z)


def pack_nibbles(v, order=None):
    """[..., 8m] integers in 0..15 -> [..., m] int32, nibble j = v[..., 8i + order[j]]."""
    v = np.asarray(v, dtype=np.uint64)
    order = order or list(range(8))
    shp = v.shape[:-1] + (v.shape[-1] // 8, 8)
    v = v.reshape(shp)[..., order]
    w = np.zeros(shp[:-1], dtype=np.uint64)
    for j in range(8):
        w |= v[..., j] << np.uint64(4 * j)
    return w.astype(np.uint32).view(np.int32)


def packed(variant, name, rows, cols):
    q, zero, scale, g_idx, offset = quantized(variant, name, rows, cols)
    if VARIANTS[variant]["quant_method"] == "gptq":
        return {
            # [cols / 8][rows]: word [i][n] holds q[n][8i .. 8i + 7]
            "qweight": pack_nibbles(q.T.reshape(cols // 8, 8, rows).transpose(0, 2, 1)).reshape(
                cols // 8, rows),
            "qzeros": pack_nibbles((zero - offset) & 15),
            "scales": scale,
            "g_idx": g_idx.astype(np.int32),
        }
    return {
        "qweight": pack_nibbles(q.T, AWQ_ORDER),  # [cols][rows / 8]
        "qzeros": pack_nibbles(zero, AWQ_ORDER),
        "scales": scale,
    }


def plain(variant, cfg):
    """The unquantized tensors (float16, as quantized checkpoints keep them)."""
    d, v = cfg["hidden_size"], cfg["vocab_size"]
    t = {"model.embed_tokens.weight": rng_of(variant, "embed").standard_normal((v, d)),
         "lm_head.weight": rng_of(variant, "lm_head").standard_normal((v, d)) / np.sqrt(d),
         "model.norm.weight": 1 + 0.1 * rng_of(variant, "norm").standard_normal(d)}
    for il in range(cfg["num_hidden_layers"]):
        for n in ("input_layernorm", "post_attention_layernorm"):
            name = f"model.layers.{il}.{n}.weight"
            t[name] = 1 + 0.1 * rng_of(variant, name).standard_normal(d)
    if cfg.get("quantization_config", {}).get("lm_head"):
        del t["lm_head.weight"]  # quantized (linears)
    return {k: x.astype(np.float16) for k, x in t.items()}


def config_of(variant):
    cfg = dict(CONFIG)
    cfg["quantization_config"] = VARIANTS[variant]
    return cfg


def cmd_make(variant, out):
    import safetensors.numpy

    cfg = config_of(variant)
    tensors = plain(variant, cfg)
    for name, rows, cols in linears(cfg):
        for k, x in packed(variant, name, rows, cols).items():
            tensors[f"{name}.{k}"] = x
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    safetensors.numpy.save_file(tensors, os.path.join(out, "model.safetensors"))


def q4_1_values(q, zero, scale, g_idx):
    """The weights as brisk's Q4_1 blocks hold them: d * q + m with d = scale
    and m = -scale * zero rounded to float16 (the product is exact in float32)."""
    m = (-(scale.astype(np.float32) * zero.astype(np.float32))).astype(np.float16)
    return scale.astype(np.float64)[g_idx].T * q + m.astype(np.float64)[g_idx].T


def weights(variant, q4_1=False):
    """Every weight in float64: exactly dequantized, or (q4_1) as Q4_1 holds it."""
    cfg = config_of(variant)
    w = {k: x.astype(np.float64) for k, x in plain(variant, cfg).items()}
    for name, rows, cols in linears(cfg):
        q, zero, scale, g_idx, _ = quantized(variant, name, rows, cols)
        w[name + ".weight"] = (q4_1_values if q4_1 else dequantize)(q, zero, scale, g_idx)
    return cfg, w


def q4_1_error(variant):
    """Largest |Q4_1 value - exact value| / scale over every weight, with the
    block's m = -scale * zero rounded to float16 as the loader does."""
    cfg = config_of(variant)
    worst = 0.0
    for name, rows, cols in linears(cfg):
        q, zero, scale, g_idx, _ = quantized(variant, name, rows, cols)
        s = scale.astype(np.float64)[g_idx].T
        got = q4_1_values(q, zero, scale, g_idx)
        worst = max(worst, float(np.max(np.abs(got - dequantize(q, zero, scale, g_idx)) / s)))
    return worst


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def forward(variant, tokens, q4_1=False):
    """Float64 llama forward over all positions (causal, rotate_half RoPE)."""
    cfg, w = weights(variant, q4_1)
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, n = d // nh, cfg["rms_norm_eps"], len(tokens)
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))

    def rope(x):  # [n][heads][hd]
        rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    x = w["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, nh, hd))
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd)
        att = np.zeros((n, nh, hd))
        for hh in range(nh):
            kh = hh // (nh // nkv)
            s = q[:, hh] @ k[:, kh].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            att[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, kh]
        x = x + att.reshape(n, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    return rmsnorm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "list":
        print(" ".join(VARIANTS))
    elif len(sys.argv) == 4 and sys.argv[1] == "make":
        cmd_make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "logits":
        for row in forward(sys.argv[2], [int(t) for t in sys.argv[3:]]):
            print(" ".join(f"{v:.17g}" for v in row))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
