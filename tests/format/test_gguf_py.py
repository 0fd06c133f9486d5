#!/usr/bin/env python3
"""Cross-checks brisk's GGUF reader and writer against gguf-py.

usage: test_gguf_py.py TEST_GGUF_DUMP

1. Random files from brisk's writer: gguf-py must read them as brisk does.
2. A file from gguf-py's writer with every value type: brisk must read it
   as gguf-py does.
3. stories260K.gguf from ../shared (BRISK_SHARED_DIR) when present, or with
   BRISK_GGUF_PY_ALL=1 every GGUF file there (slow: gguf-py needs seconds
   per vocabulary).

Both sides print the format described in test_gguf_dump.c. Exits 77 (skip)
when gguf-py or numpy is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

GT = gguf.GGUFValueType
TYPE_NAMES = {GT.UINT8: "u8", GT.INT8: "i8", GT.UINT16: "u16", GT.INT16: "i16",
              GT.UINT32: "u32", GT.INT32: "i32", GT.FLOAT32: "f32", GT.BOOL: "bool",
              GT.STRING: "string", GT.ARRAY: "array", GT.UINT64: "u64", GT.INT64: "i64",
              GT.FLOAT64: "f64"}
INT_TYPES = {GT.UINT8: "<u1", GT.INT8: "<i1", GT.UINT16: "<u2", GT.INT16: "<i2",
             GT.UINT32: "<u4", GT.INT32: "<i4", GT.UINT64: "<u8", GT.INT64: "<i8",
             GT.BOOL: "<u1"}


def wsum(data: bytes) -> int:
    """The weighted byte sum of test_gguf_dump.c, in chunks to bound memory."""
    total = 0
    chunk = 1 << 22
    for start in range(0, len(data), chunk):
        b = np.frombuffer(data, dtype=np.uint8, count=min(chunk, len(data) - start), offset=start)
        i = np.arange(start, start + len(b), dtype=np.uint64)
        w = ((i * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)) + np.uint64(1)
        total = (total + int((b.astype(np.uint64) * w).sum(dtype=np.uint64))) % (1 << 64)
    return total


def scalar_text(vtype, part) -> str:
    raw = part.tobytes()
    if vtype == GT.FLOAT32:
        return "0x%08x" % int.from_bytes(raw, "little")
    if vtype == GT.FLOAT64:
        return "0x%016x" % int.from_bytes(raw, "little")
    return str(int(np.frombuffer(raw, dtype=INT_TYPES[vtype])[0]))


def py_dump(path: str) -> str:
    r = gguf.GGUFReader(path)
    out = [f"version {int(r.fields['GGUF.version'].parts[-1][0])}", f"alignment {r.alignment}"]
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        vtype = f.types[0]
        line = f"kv {key} {TYPE_NAMES[vtype]} "
        if vtype == GT.STRING:
            line += bytes(f.parts[f.data[0]]).hex() or "-"
        elif vtype == GT.ARRAY:
            elem = f.types[1] if len(f.types) > 1 else GT.UINT8
            if elem == GT.STRING:
                blob = b"".join(bytes(f.parts[i]) + b"\0" for i in f.data)
            else:
                blob = b"".join(f.parts[i].tobytes() for i in f.data)
            line += f"{TYPE_NAMES[elem]} {len(f.data)} {wsum(blob)}"
        else:
            line += scalar_text(vtype, f.parts[f.data[0]])
        out.append(line)
    for t in r.tensors:
        data = bytes(r.data[t.data_offset:t.data_offset + t.n_bytes])
        ne = ",".join(str(int(x)) for x in t.shape)
        out.append(f"tensor {t.name} {int(t.tensor_type)} {ne} {t.data_offset - r.data_offset} "
                   f"{t.n_bytes} {wsum(data)}")
    return "\n".join(out) + "\n"


def brisk_dump(exe: str, path: str) -> str:
    res = subprocess.run([exe, "dump", path], capture_output=True)
    if res.returncode != 0:
        raise RuntimeError(f"brisk cannot read {path}: {res.stderr.decode(errors='replace')}")
    return res.stdout.decode("utf-8")


def compare(exe: str, path: str) -> bool:
    ours, theirs = brisk_dump(exe, path), py_dump(path)
    if ours == theirs:
        print(f"ok   {path} ({ours.count(chr(10))} lines)")
        return True
    print(f"FAIL {path}: brisk and gguf-py differ")
    a, b = ours.splitlines(), theirs.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<none>"
        y = b[i] if i < len(b) else "<none>"
        if x != y:
            print(f"  line {i + 1}:\n    brisk:   {x[:200]}\n    gguf-py: {y[:200]}")
            break
    return False


def write_with_gguf_py(path: str, rng) -> None:
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("llama.block_count", int(rng.integers(1, 100)))
    w.add_float32("llama.rope.freq_base", float(rng.normal()))
    for vt in (GT.UINT8, GT.INT8, GT.UINT16, GT.INT16, GT.UINT32, GT.INT32, GT.UINT64,
               GT.INT64, GT.BOOL):
        info = np.iinfo(np.dtype(INT_TYPES[vt]))
        hi = 1 if vt == GT.BOOL else info.max
        vals = [int(rng.integers(info.min, hi, endpoint=True, dtype=np.dtype(INT_TYPES[vt])))
                for _ in range(int(rng.integers(1, 20)))]
        if vt == GT.BOOL:
            vals = [bool(v) for v in vals]
        w.add_key_value(f"s.{TYPE_NAMES[vt]}", vals[0], vt)
        w.add_key_value(f"a.{TYPE_NAMES[vt]}", vals, GT.ARRAY, sub_type=vt)
    for vt in (GT.FLOAT32, GT.FLOAT64):
        vals = [float(v) for v in rng.normal(size=int(rng.integers(1, 20)))]
        w.add_key_value(f"s.{TYPE_NAMES[vt]}", vals[0], vt)
        w.add_key_value(f"a.{TYPE_NAMES[vt]}", vals, GT.ARRAY, sub_type=vt)
    w.add_string("general.name", "caf\u00e9 \u2603")
    w.add_token_list(["<unk>", "", "\u2581the", "a\u00e9"] + [f"t{i}" for i in range(50)])
    # Plain and quantized tensors; quantized ones as raw bytes (their byte shape).
    w.add_tensor("f32", rng.normal(size=(3, 64)).astype(np.float32))
    w.add_tensor("f16", rng.normal(size=(5,)).astype(np.float16))
    q8 = rng.integers(0, 256, size=(2, 34 * 2), dtype=np.uint8)
    w.add_tensor("q8_0", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    q4k = rng.integers(0, 256, size=(1, 144), dtype=np.uint8)
    w.add_tensor("q4_k", q4k, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = sys.argv[1]
    seed = int(os.environ.get("BRISK_TEST_SEED", "0") or 0) or int.from_bytes(os.urandom(4), "little")
    print(f"BRISK_TEST_SEED={seed}")
    rng = np.random.default_rng(seed)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(4):
            path = os.path.join(tmp, f"brisk-{k}.gguf")
            subprocess.run([exe, "write", path, str(seed * 4 + k + 1)], check=True)
            ok &= compare(exe, path)
        path = os.path.join(tmp, "gguf-py.gguf")
        write_with_gguf_py(path, rng)
        ok &= compare(exe, path)
    # gguf-py takes seconds per 32k-token vocabulary, so by default only the
    # smallest shared model; BRISK_GGUF_PY_ALL=1 checks every shared file
    # (test_gguf_shared.c checks them all against numbers from gguf-py).
    shared = os.environ.get("BRISK_SHARED_DIR", "")
    paths = [os.path.join(shared, "models", "stories260K.gguf")]
    if os.environ.get("BRISK_GGUF_PY_ALL"):
        paths = []
        for sub in ("models", "tokenizer"):
            folder = os.path.join(shared, sub)
            if os.path.isdir(folder):
                paths += [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                          if n.endswith(".gguf")]
    for path in paths:
        if shared and os.path.isfile(path):
            ok &= compare(exe, path)
        else:
            print(f"SKIP: {path} is absent (BRISK_SHARED_DIR)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
