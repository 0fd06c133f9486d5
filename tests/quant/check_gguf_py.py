#!/usr/bin/env python3
"""Cross-checks brisk's block layouts against gguf-py (an independent
implementation of ggml's formats), through quant_tool.

  check_gguf_py.py QUANT_TOOL

1. For every type brisk quantizes: brisk quantizes fresh random data, and
   gguf-py's dequantizer must decode it to exactly brisk's own dequantization.
2. Where gguf-py can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16): its bytes
   must equal brisk's bytes for the same float32 input.
3. For every dequantizable type: random block bytes (finite fp16 scales)
   decode identically in both.
4. With ../shared/models (tiny-{f16,q8_0,q4_0}.gguf): the q8_0 / q4_0 tensors
   decode to the f16 tensors within the quantization error; brisk's quantizer
   applied to the generator's float32 weights reproduces the files' bytes
   exactly; re-quantizing the f16 tensors (already rounded to fp16) reproduces
   them nearly, and the mismatch rate is printed.

Exit 77 (skip) when numpy or gguf is missing; 0 on success; 1 on a mismatch.
"""
import os
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf import quants
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (python3 -m pip install gguf numpy)")
    sys.exit(77)

TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="brisk-quant-")
SEED = int(os.environ.get("BRISK_TEST_SEED", "0") or 0) or int.from_bytes(os.urandom(4), "little")
print(f"BRISK_TEST_SEED={SEED}")
rng = np.random.default_rng(SEED)
failures = []

QUANTIZABLE = [QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q4_K, QT.Q5_K, QT.Q6_K]
GGUF_QUANTIZES = [QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1]
DEQUANT_ONLY = [QT.Q2_K, QT.Q3_K]


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def run_tool(mode, qtype, n, data: bytes) -> bytes:
    src, dst = os.path.join(TMP, "in.bin"), os.path.join(TMP, "out.bin")
    with open(src, "wb") as f:
        f.write(data)
    subprocess.run([TOOL, mode, str(int(qtype)), str(n), src, dst], check=True)
    with open(dst, "rb") as f:
        return f.read()


def brisk_quantize(x: np.ndarray, qtype) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    return np.frombuffer(run_tool("quantize", qtype, x.size, x.tobytes()), dtype=np.uint8)


def brisk_dequantize(b: np.ndarray, qtype, n) -> np.ndarray:
    return np.frombuffer(run_tool("dequantize", qtype, n, b.tobytes()), dtype=np.float32)


def gguf_dequantize(b: np.ndarray, qtype, n) -> np.ndarray:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return quants.dequantize(b.reshape(n // block, size), qtype).astype(np.float32).ravel()


def random_rows(block, n_blocks):
    """Normal data with per-block scales over many magnitudes, plus blocks that
    are constant, all-positive, all-negative, or mostly zero."""
    x = rng.standard_normal(n_blocks * block).astype(np.float32)
    x = x.reshape(n_blocks, block)
    x *= (10.0 ** rng.uniform(-4, 2, size=(n_blocks, 1))).astype(np.float32)
    if n_blocks >= 6:
        x[1] = np.float32(0.37)
        x[2] = np.abs(x[2])
        x[3] = -np.abs(x[3])
        x[4, 3:] = 0
    return x.ravel()


def same_floats(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def bits_equal_or_both_nan(a, b):
    both_nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | both_nan))


for qt in QUANTIZABLE:
    block, _ = gguf.GGML_QUANT_SIZES[qt]
    n_blocks = 64 if block == 256 else 300
    x = random_rows(block, n_blocks)
    ours = brisk_quantize(x, qt)
    deq_ours = brisk_dequantize(ours, qt, x.size)
    deq_gguf = gguf_dequantize(ours, qt, x.size)
    check(same_floats(deq_ours, deq_gguf), f"{qt.name}: brisk-quantized blocks decode identically in gguf-py")
    if qt in GGUF_QUANTIZES:
        theirs = quants.quantize(x.reshape(-1, block), qt).view(np.uint8).ravel()
        diff = int(np.count_nonzero(theirs != ours))
        check(diff == 0, f"{qt.name}: brisk's bytes equal gguf-py's quantizer output ({diff} of {ours.size} differ)")
        check(same_floats(brisk_dequantize(theirs, qt, x.size), gguf_dequantize(theirs, qt, x.size)),
              f"{qt.name}: gguf-py-quantized blocks decode identically in brisk")

for qt in [QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K]:
    block, size = gguf.GGML_QUANT_SIZES[qt]
    n_blocks = 50
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    # fp16 scale fields: finite values in a sane range (offsets per layout)
    f16_fields = {QT.Q8_0: [0], QT.Q4_0: [0], QT.Q5_0: [0], QT.Q4_1: [0, 2], QT.Q5_1: [0, 2],
                  QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208]}[qt]
    for off in f16_fields:
        vals = rng.uniform(-2, 2, size=n_blocks).astype(np.float16)
        raw[:, off:off + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
    n = n_blocks * block
    ours = brisk_dequantize(raw.ravel(), qt, n)
    theirs = gguf_dequantize(raw.ravel(), qt, n)
    check(bits_equal_or_both_nan(ours, theirs), f"{qt.name}: random block bytes decode identically")

# ---- the shared model files -------------------------------------------------
shared = os.environ.get("BRISK_SHARED_DIR", os.path.join("..", "shared"))
models = os.path.join(shared, "models")
paths = {t: os.path.join(models, f"tiny-{t}.gguf") for t in ("f16", "q8_0", "q4_0")}
if not all(os.path.exists(p) for p in paths.values()):
    print(f"SKIP (part 4): {models}/tiny-*.gguf not found")
else:
    readers = {t: gguf.GGUFReader(p) for t, p in paths.items()}
    tensors = {t: {x.name: x for x in r.tensors} for t, r in readers.items()}
    names = ["blk.0.attn_q.weight", "blk.1.attn_k.weight", "blk.2.ffn_gate.weight", "blk.3.ffn_up.weight"]
    for name in names:
        f16 = tensors["f16"][name]
        shape = tuple(int(v) for v in reversed(f16.shape))  # rows, cols
        ref16 = np.asarray(f16.data, dtype=np.float16).astype(np.float32).ravel()
        # make_models.py's recipe: a stream per tensor from (seed 0, crc32(name))
        gen = np.random.default_rng([0, zlib.crc32(name.encode())])
        f32 = (gen.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).ravel()
        if not np.array_equal(f32.astype(np.float16).astype(np.float32), ref16):
            check(False, f"{name}: the generator recipe does not reproduce tiny-f16.gguf")
            continue
        # (file, type, levels per amax, allowed error in steps: half a step for
        # rounding, a whole step on q4_0's clamped side, plus fp16 rounding of
        # the inputs and of d)
        for t, qt, step_of, tol in (("q8_0", QT.Q8_0, 127, 0.65), ("q4_0", QT.Q4_0, 8, 1.02)):
            qt_tensor = tensors[t][name]
            file_bytes = np.asarray(qt_tensor.data, dtype=np.uint8).ravel()
            deq = brisk_dequantize(file_bytes, qt, f32.size)
            # error per element <= one quantization step of its block (+ f16 rounding)
            blocks = ref16.reshape(-1, 32)
            step = np.abs(blocks).max(axis=1, keepdims=True) / step_of
            err = np.abs(deq.reshape(-1, 32) - blocks)
            check(bool(np.all(err <= step * tol + 1e-9)),
                  f"{name} {t}: dequantized file tensor matches the f16 tensor within {tol} step "
                  f"(max err/step {float((err / np.maximum(step, 1e-30)).max()):.3f})")
            ours = brisk_quantize(f32, qt)
            diff = int(np.count_nonzero(ours != file_bytes))
            check(diff == 0, f"{name} {t}: quantizing the generator's float32 weights reproduces "
                             f"the file bytes ({diff} of {ours.size} differ)")
            again = brisk_quantize(ref16, qt)
            nblk = f32.size // 32
            bad_blocks = int(np.count_nonzero((again.reshape(nblk, -1) != file_bytes.reshape(nblk, -1)).any(axis=1)))
            bad_q = int(np.count_nonzero(again.reshape(nblk, -1)[:, 2:] != file_bytes.reshape(nblk, -1)[:, 2:]))
            print(f"info {name} {t}: re-quantizing the f16 tensor: {bad_blocks} of {nblk} blocks differ, "
                  f"{bad_q} of {nblk * (again.size // nblk - 2)} quant bytes")
            # fp16 rounding of the inputs moves values across rounding boundaries only rarely
            check(bad_q <= 0.02 * nblk * (again.size // nblk - 2),
                  f"{name} {t}: re-quantized f16 tensor nearly reproduces the file")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
