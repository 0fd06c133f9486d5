#!/usr/bin/env python3
"""brisk's safetensors reader and writer against the reference library.

Usage: test_safetensors_reference.py DUMP_HELPER

1. The reference library writes F32/F16/BF16 tensors of many shapes (scalars,
   empty and 5-D ones included) plus metadata; brisk must read identical
   names, dtypes, shapes and bytes.
2. brisk writes the same content; the reference library must read it back
   identically.
3. A reference file with a dtype brisk does not support must be refused with
   BRISK_E_UNSUPPORTED naming the dtype and the tensor.
Exits 77 (skip) when numpy or safetensors is not installed.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import safetensors
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (pip install safetensors numpy)")
    sys.exit(77)

BRISK_E_UNSUPPORTED = 5
LONG = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64"}
SHAPES = [[], [1], [7], [3, 5], [2, 3, 4], [1, 1, 1, 1], [2, 1, 3, 1, 2], [0, 3], [4, 0]]


def random_tensors(rng):
    """name -> (DTYPE, shape, raw little-endian bytes); values never zero."""
    out = {}
    for dtype in ("F32", "F16", "BF16"):
        for i, shape in enumerate(SHAPES):
            n = int(np.prod(shape)) if shape else 1
            v = rng.standard_normal(n).astype(np.float32)
            v[v == 0] = 0.5
            if dtype == "F32":
                raw = v.astype("<f4").tobytes()
            elif dtype == "F16":
                raw = v.astype("<f2").tobytes()
            else:  # bf16: round-to-nearest-even on the float32 bits
                b = v.view(np.uint32).astype(np.uint64)
                b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype("<u2")
                raw = b.tobytes()
            out[f"model.layers.{i}.{dtype.lower()}.weight \u00e9"] = (dtype, list(shape), raw)
    return out


def ref_serialize(tensors, metadata, path):
    """Writes with the reference library, whichever API generation it has."""
    keep = []
    specs = {}
    for name, (dtype, shape, raw) in tensors.items():
        if hasattr(safetensors, "TensorSpec"):
            buf = np.frombuffer(bytearray(raw) or bytearray(1), dtype=np.uint8)
            keep.append(buf)
            specs[name] = safetensors.TensorSpec(
                dtype=LONG[dtype], shape=shape, data_ptr=buf.ctypes.data, data_len=len(raw)
            )
        else:
            specs[name] = {"dtype": LONG[dtype], "shape": shape, "data": raw}
    data = bytes(safetensors.serialize(specs, metadata=metadata))
    with open(path, "wb") as f:
        f.write(data)


def brisk_dump(helper, path):
    r = subprocess.run([helper, "dump", path], capture_output=True, text=True)
    if r.returncode != 0:
        return r.returncode, r.stdout.strip(), None, None
    meta, tensors = {}, {}
    for line in r.stdout.splitlines():
        parts = line.split(" ")
        unhex = lambda h: b"" if h == "-" else bytes.fromhex(h)
        if parts[0] == "M":
            meta[unhex(parts[1]).decode()] = unhex(parts[2]).decode()
        else:
            shape = [] if parts[3] == "-" else [int(d) for d in parts[3].split(",")]
            tensors[unhex(parts[1]).decode()] = (parts[2], shape, unhex(parts[4]))
    return 0, "", meta, tensors


def brisk_write(helper, path, tensors, metadata):
    lines = [f"M {k.encode().hex() or '-'} {v.encode().hex() or '-'}" for k, v in metadata.items()]
    for name, (dtype, shape, raw) in tensors.items():
        dims = ",".join(str(d) for d in shape) or "-"
        lines.append(f"T {name.encode().hex()} {dtype} {dims} {raw.hex() or '-'}")
    r = subprocess.run([helper, "write", path], input="\n".join(lines) + "\n", text=True,
                       capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: brisk writer: {r.stderr}")


def check_equal(what, got, want):
    if got != want:
        for k in sorted(set(got) | set(want)):
            if got.get(k) != want.get(k):
                print(f"FAIL: {what}: '{k}' differs: got {str(got.get(k))[:120]} "
                      f"want {str(want.get(k))[:120]}")
                break
        raise SystemExit(1)


def main():
    helper = sys.argv[1]
    seed = int(os.environ.get("BRISK_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"BRISK_TEST_SEED={seed}")
    rng = np.random.default_rng(seed)
    tensors = random_tensors(rng)
    metadata = {"format": "pt", "note \"q\"": "caf\u00e9 \\ \n"}
    with tempfile.TemporaryDirectory(prefix="brisk-st-ref-") as tmp:
        ref_path = os.path.join(tmp, "ref.safetensors")
        ref_serialize(tensors, metadata, ref_path)
        rc, err, meta, got = brisk_dump(helper, ref_path)
        if rc != 0:
            raise SystemExit(f"FAIL: brisk cannot read the reference file: {err}")
        check_equal("reference -> brisk tensors", got, tensors)
        check_equal("reference -> brisk metadata", meta, metadata)

        brisk_path = os.path.join(tmp, "brisk.safetensors")
        brisk_write(helper, brisk_path, tensors, metadata)
        with open(brisk_path, "rb") as f:
            back = safetensors.deserialize(f.read())
        got = {name: (d["dtype"], list(d["shape"]), bytes(d["data"])) for name, d in back}
        check_equal("brisk -> reference tensors", got, tensors)
        with safetensors.safe_open(brisk_path, framework="numpy") as f:
            check_equal("brisk -> reference metadata", f.metadata() or {}, metadata)

        bad = dict(tensors)
        bad["position_ids"] = ("I64", [3], np.arange(1, 4, dtype="<i8").tobytes())
        bad_path = os.path.join(tmp, "i64.safetensors")
        ref_serialize(bad, None, bad_path)
        rc, err, _, _ = brisk_dump(helper, bad_path)
        if rc != 2 or not err.startswith(f"E {BRISK_E_UNSUPPORTED} ") or \
                "dtype 'I64'" not in err or "position_ids" not in err:
            raise SystemExit(f"FAIL: I64 file gave rc {rc}: {err}")
    print(f"OK: {len(tensors)} tensors identical both ways")


if __name__ == "__main__":
    main()
