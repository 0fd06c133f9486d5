#!/usr/bin/env python3
"""brisk against Hugging Face transformers on small random-weight models.

Usage: test_hf_reference.py HF_LOGITS_HELPER HF_REFERENCE_TOOL [ARCH...]

For every architecture in tools/hf_reference.py, the folder is rebuilt with
NumPy + safetensors from the committed reference (tests/model/hf_ref/), then
brisk's logits (the prompt as one batch, then decode steps through the KV
cache) are compared with transformers' float32 logits within the
architecture's stated tolerance (max |difference| over max |logit|), on the
CPU and on the emulated CUDA device (BRISK_TEST_DEVICE: another); the same weights written as a GGUF file
the way llama.cpp's converter lays them out (with gguf-py) are checked
against the same logits. Exits 77 (skip) without numpy or
safetensors.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import safetensors  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (pip install numpy safetensors)")
    sys.exit(77)

# The emulated CUDA device, or a real one (tests/gpu/run.sh sets cuda:0).
DEVICES = ["cpu", os.environ.get("BRISK_TEST_DEVICE") or "cudaemu:0"]


def run(helper, model, device, ref):
    r = subprocess.run(
        [helper, model, device, " ".join(map(str, ref["prompt"])), " ".join(map(str, ref["decode"]))],
        capture_output=True, text=True, timeout=300,
    )
    if r.returncode != 0:
        return None, r.stderr.strip()
    rows = [np.array([float(v) for v in line.split()]) for line in r.stdout.splitlines()]
    return rows, ""


def compare(ref, rows):
    n = len(ref["prompt"])
    got = [rows[i] for i in ref["prompt_rows"]] + rows[n:]
    want = [np.array(r) for r in ref["prompt_logits"] + ref["decode_logits"]]
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want):
        worst = max(worst, float(np.max(np.abs(g - w)) / max(1e-6, np.max(np.abs(w)))))
    return worst


def main():
    helper, tool = sys.argv[1], sys.argv[2]
    ref_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_ref")
    archs = sys.argv[3:] or sorted(f[:-5] for f in os.listdir(ref_dir) if f.endswith(".json"))
    failed = 0
    try:
        import gguf  # noqa: F401

        have_gguf = True
    except ImportError:
        have_gguf = False
        print("note: no gguf-py (pip install gguf): the GGUF files are not checked")
    gguf_archs = subprocess.run([sys.executable, tool, "gguf-list"], capture_output=True,
                                text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory(prefix="brisk-hf-ref-") as tmp:
        for arch in archs:
            with open(os.path.join(ref_dir, arch + ".json")) as f:
                ref = json.load(f)
            folder = os.path.join(tmp, arch)
            subprocess.run([sys.executable, tool, "make", arch, folder, ref_dir], check=True)
            models = [("folder", folder)]
            if have_gguf and arch in gguf_archs:
                path = os.path.join(tmp, arch + ".gguf")
                subprocess.run([sys.executable, tool, "gguf", arch, path, ref_dir], check=True)
                models.append(("GGUF", path))
            for kind, model in models:
                for dev in DEVICES:
                    rows, err = run(helper, model, dev, ref)
                    what = f"{arch} ({kind}) on {dev}"
                    if rows is None:
                        print(f"FAIL {what}: {err}")
                        failed += 1
                        continue
                    e = compare(ref, rows)
                    ok = e <= ref["tolerance"]
                    print(f"{'ok  ' if ok else 'FAIL'} {what}: worst relative error {e:.2e} "
                          f"(tolerance {ref['tolerance']:g}: {ref['tolerance_reason']})")
                    failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
