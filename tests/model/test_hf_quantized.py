#!/usr/bin/env python3
"""GPTQ and AWQ checkpoints (tools/hf_quantized.py) against a float64 forward.

Usage: test_hf_quantized.py HF_LOGITS_HELPER HF_QUANTIZED_TOOL

Every variant's folder is made with NumPy + safetensors, loaded by brisk
(its linear layers repacked into Q4_1) on the CPU and on the emulated CUDA
device, and its logits for a prompt batch and decode steps through the KV
cache are compared (max |difference| / max |logit|) with float64 forwards:

  * a control folder holding the exact dequantized weights,
    w = scale * (q - zero), as float32, against the forward over those
    weights: within 2e-5 (float32 against float64);
  * the quantized folder on the emulated CUDA device, whose Q4_1 kernels take
    float32 activations, against the forward over the values the Q4_1
    blocks hold (d = scale, m = -scale * zero rounded to float16): within
    2e-5, so every nibble, scale and zero point is where the format puts it
    (a real GPU, BRISK_TEST_DEVICE, may round to half precision in its
    GEMMs: 2e-3);
  * the quantized folder against the exact dequantized forward: on the CUDA
    device within 5e-3 (the float16 rounding of m, at most 1/128 of a scale
    per weight; symmetric GPTQ is exact); on the CPU within 6e-2, since its
    Q4_1 kernels quantize activations to 8 bits per 32-element block (about
    2^-8 relative per matmul, over 14 matmuls, 15 with a quantized lm_head).

Act-order (desc_act) variants, whose g_idx puts the groups in a permuted
column order, load as brisk sorts them (columns by group, the activations
gathered by the same order before each such matmul) and meet the same
tolerances; they are also run as two pipeline stages on the CPU and with
only their first layer on the emulated device (n_gpu_layers 1), and a
tensor-parallel load is refused with a message, since a row-parallel
slice of a permuted matrix would need the other ranks' activations.

Bad folders (wrong shapes, g_idx out of range or inconsistent with the group
size, unsupported methods, bits, formats and versions) must fail to load
with a message naming the tensor or the key. Exits 77 (skip) without numpy
or safetensors.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import safetensors.numpy
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (pip install numpy safetensors)")
    sys.exit(77)

DEVICES = ["cpu", os.environ.get("BRISK_TEST_DEVICE") or "cudaemu:0"]
PROMPT = [1, 17, 42, 99, 5, 63, 120, 7, 31, 88, 12, 54]
DECODE = [77, 3, 101]
TOL_EXACT = 2e-5
TOL_Q4_1_VALUES = {"cudaemu:0": 2e-5}  # else 2e-3
TOL_CPU = 6e-2
TOL_CUDA = 5e-3


def load_tool(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_quantized", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(helper, folder, device):
    r = subprocess.run([helper, folder, device, " ".join(map(str, PROMPT)),
                        " ".join(map(str, DECODE))], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return np.array([[float(v) for v in line.split()] for line in r.stdout.splitlines()]), ""


def rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def write(folder, cfg, tensors):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    safetensors.numpy.save_file(tensors, os.path.join(folder, "model.safetensors"))


def read(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    return cfg, dict(safetensors.numpy.load_file(os.path.join(folder, "model.safetensors")))


# name -> (base variant, change to (cfg, tensors), [hf_logits device suffix,]
#          fragment of the expected message)
def bad_cases():
    L0 = "model.layers.0.self_attn.q_proj"

    def set_qc(key, value):
        def f(cfg, t):
            cfg["quantization_config"][key] = value
        return f

    def drop_qc(key):
        def f(cfg, t):
            del cfg["quantization_config"][key]
        return f

    def tensor(name, fn):
        def f(cfg, t):
            t[name] = fn(t[name])
        return f

    def g_idx_at(k, v):
        def fn(g):
            g = g.copy()
            g[k] = v
            return g
        return fn

    return {
        "qweight_shape": ("gptq_asym_g32", tensor(L0 + ".qweight", lambda x: x[:-1]),
                          f"tensor '{L0}.qweight' has shape [15, 128]"),
        "qzeros_dtype": ("awq_g32", tensor(L0 + ".qzeros", lambda x: x.astype(np.float32)),
                         f"tensor '{L0}.qzeros' is F32"),
        "scales_missing": ("awq_g64", lambda cfg, t: t.pop(L0 + ".scales"),
                           f"tensor '{L0}.scales' is missing"),
        "g_idx_range": ("gptq_asym_g32", tensor(L0 + ".g_idx", g_idx_at(5, 4)),
                        f"tensor '{L0}.g_idx': g_idx[5] = 4 is out of range [0, 4)"),
        "g_idx_negative": ("gptq_asym_g32", tensor(L0 + ".g_idx", g_idx_at(0, -1)),
                           "g_idx[0] = -1 is out of range"),
        "g_idx_counts": ("gptq_asym_g32", tensor(L0 + ".g_idx", g_idx_at(0, 1)),
                         f"tensor '{L0}.g_idx': group 0 has 31 columns; group_size 32 gives 32"),
        # the tensors were made for groups of 32: scales have 4 rows, not 2
        "group_size_mismatch": ("gptq_asym_g32", set_qc("group_size", 64),
                                f"tensor '{L0}.qzeros' has shape [4, 16]"),
        "desc_act_tp2": ("gptq_desc_act_g32", None, "tp2",
                         "tensor 'model.layers.0.self_attn.o_proj.qweight': an act-order "
                         "(desc_act) GPTQ matrix cannot be split by input columns"),
        "bits": ("gptq_asym_g32", set_qc("bits", 8), "quantization_config.bits = 8"),
        "group_size_odd": ("awq_g32", set_qc("group_size", 48),
                           "quantization_config.group_size = 48 is not supported"),
        "method": ("awq_g32", set_qc("quant_method", "exl2"),
                   "quantization_config.quant_method 'exl2' is not supported"),
        "method_missing": ("awq_g32", drop_qc("quant_method"),
                           "quantization_config.quant_method is missing"),
        "marlin": ("gptq_asym_g32", set_qc("checkpoint_format", "marlin"),
                   "quantization_config.checkpoint_format 'marlin' is not supported"),
        "is_marlin": ("gptq_asym_g32", set_qc("is_marlin_format", True), "is_marlin_format"),
        "awq_version": ("awq_g32", set_qc("version", "gemv"),
                        "quantization_config.version 'gemv' is not supported"),
        "awq_no_zero": ("awq_g32", set_qc("zero_point", False), "zero_point = false"),
        "bits_type": ("awq_g32", set_qc("bits", "4"), "bits"),
        "no_config": ("awq_g32", lambda cfg, t: cfg.pop("quantization_config"),
                      "is quantized but config.json has no quantization_config"),
        "int32_weight": ("awq_g32", lambda cfg, t: t.__setitem__(
            "model.norm.weight", np.zeros(128, np.int32)), "'model.norm.weight' is int32"),
    }


def main():
    helper, tool_path = sys.argv[1], sys.argv[2]
    tool = load_tool(tool_path)
    failed = 0
    tokens = PROMPT + DECODE
    with tempfile.TemporaryDirectory(prefix="brisk-hf-quant-") as tmp:
        for variant in tool.VARIANTS:
            act_order = tool.VARIANTS[variant].get("desc_act")
            folder = os.path.join(tmp, variant)
            tool.cmd_make(variant, folder)
            want = tool.forward(variant, tokens)
            want_q4_1 = tool.forward(variant, tokens, q4_1=True)
            # The control: the exact dequantized weights as float32.
            cfg, w = tool.weights(variant)
            del cfg["quantization_config"]
            control = os.path.join(tmp, variant + "_f32")
            write(control, cfg, {k: v.astype(np.float32) for k, v in w.items()})
            devices = DEVICES + (["cpu+pp2", DEVICES[1] + "+ngl1"] if act_order else [])
            for dev in devices:
                # a CPU pass, or one whose second layer runs on the CPU
                cpu = dev.startswith("cpu") or "+ngl" in dev
                checks = [("control", control, want, TOL_EXACT),
                          ("quantized", folder, want, TOL_CPU if cpu else TOL_CUDA)]
                if not cpu:
                    checks.append(("Q4_1 vals", folder, want_q4_1,
                                   TOL_Q4_1_VALUES.get(dev, 2e-3)))
                for what, path, ref, tol in checks:
                    got, err = run(helper, path, dev)
                    if got is None:
                        print(f"FAIL {variant} {what} {dev}: {err}")
                        failed += 1
                        continue
                    e = rel(got, ref)
                    ok = e <= tol
                    failed += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {variant:21} {what:9} {dev:15} "
                          f"max|diff|/max|logit| = {e:.2e} (tolerance {tol:g})")
            print(f"     {variant:18} Q4_1 mapping: max |Q4_1 - exact| = "
                  f"{tool.q4_1_error(variant):.4f} scale")
        for case, spec in bad_cases().items():
            variant, change, frag = spec[0], spec[1], spec[-1]
            suffix = "+" + spec[2] if len(spec) == 4 else ""
            folder = os.path.join(tmp, "bad_" + case)
            tool.cmd_make(variant, folder)
            if change:
                cfg, t = read(folder)
                change(cfg, t)
                write(folder, cfg, t)
            got, err = run(helper, folder, "cpu" + suffix)
            ok = got is None and frag in err
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} bad {case}: {err if got is None else 'loaded'}")
    if failed:
        print(f"{failed} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
