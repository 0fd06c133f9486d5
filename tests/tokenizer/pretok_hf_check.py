#!/usr/bin/env python3
"""Compares brisk's GGUF pre-tokenizers with Hugging Face `tokenizers`.

For one name of every pre-tokenizer family brisk knows, a Hugging Face
tokenizer is made the way such a model's tokenizer.json is: a Sequence of
Split(regex, "isolated") steps with the family's regexes, then ByteLevel
(use_regex false) for byte-level families, or a Replace(" " -> U+2581)
normalizer and byte_fallback for the SentencePiece-style raw UTF-8 ones.
A small BPE vocabulary is trained on a multilingual corpus with that
pipeline (some characters left out of raw vocabularies, so that byte
fallback is exercised), written as a GGUF file with the name as
tokenizer.ggml.pre, and loaded by brisk. Over the corpus and other texts:

  * brisk's pieces (tok_cli --pretok) equal tokenizers' pre_tokenize_str
    over the same Split steps;
  * brisk's token ids from the GGUF equal tokenizers' encode;
  * brisk detokenizes its tokens back to the text.

Nothing is read from ../shared or the peer. Usage: pretok_hf_check.py
TOK_CLI. Exit 77 (skip) when tokenizers or gguf-py is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


try:
    import gguf
except ImportError:
    skip("python module 'gguf' is not installed")
try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:
    skip("python module 'tokenizers' is not installed (pip install tokenizers)")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! It's, they're, we'll, I'd.",
    "Hello World, HELLO world! camelCaseWord XMLHttpRequest iOS eBay McDonald's don't DON'T",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f(12))\r\n    if a != b: pass\n",
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 a1b2c3 ID42 +49 (0)30 1234-5678",
    "Ünïcödé: naïve café, résumé, Ελληνικά Γλώσσα, Русский Язык, Українська, עברית, العربية",
    "日本語のテキストと中文字符混合English words 和 数字123456, 「引用」、句読点。",
    "한국어 텍스트입니다. हिन्दी भाषा में लिखा गया। ภาษาไทยเขียนอย่างนี้ ១២៣ ẞtraße ǅemal",
    "漢字かなカナ ideographs and emoji 😁🚀👨‍👩‍👧 plus ½ ² Ⅻ and math ∑∫√ ≤ ≥ ≠",
    "https://example.com/path?query=1&x=%20 <html><body>x</body></html> user@mail.org",
    "   leading and trailing spaces   \n\n\nnewlines\r\nand CRLF\r\n tabs\tand\u00a0nbsp\u3000ideographic",
    "Árvíztűrő tükörfúrógép; Zażółć gęślą jaźń; Příliš žluťoučký kůň; Ça va? Ñandú, ¿qué tal?",
    "ক্ষ বাংলা ভাষা; தமிழ் மொழி; తెలుగు భాష; ગુજરાતી; ਪੰਜਾਬੀ; ಕನ್ನಡ; മലയാളം; සිංහල",
    "Tiếng Việt có dấu: Người ta nói rằng; Türkçe ığüşöç; Azərbaycan; Қазақ тілі; ქართული",
    "<sentinel:3> IMGIMGABCZ text  with    spaces and\ttabs; 10000000000 9876543210",
]
EXTRA = [
    "", " ", "\n", "\n\n\n", "a", "  x  ", "1234567890123", "'s 'S 'll 'LL 'Re",
    "Mixed: 日本 Korean 한국 Thai ไทย digits ๑๒๓ ٤٥٦ done.",
    "hello\n\n\nworld  \n  \t x", "ａｂｃ ＡＢＣ １２３ fullwidth！？",
    "tokenizer" * 20 + " " + "ab" * 50,
]


def brisk_names(tok_cli):
    out = subprocess.run([tok_cli, "--pre-names"], capture_output=True, check=True)
    return [json.loads(x) for x in out.stdout.decode().splitlines()]


def inp_file(texts, tmp):
    p = os.path.join(tmp, "texts.inp")
    with open(p, "wb") as f:
        f.write("\n__ggml_vocab_test__\n".join(texts).encode("utf-8"))
    return p


def run(args):
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode().split("\n")


def onig(p):
    """PCRE2 syntax brisk uses that Oniguruma spells otherwise: the Script
    property (Oniguruma's \\p{Han} is the Script, PCRE2's Script_Extensions)."""
    return p.replace("\\p{sc:Han}", "\\p{Han}")


def make_hf(e, texts):
    split = [pre_tokenizers.Split(Regex(onig(p)), "isolated") for p in e["patterns"]]
    raw = bool(e["raw_utf8"])
    specials = [f"<0x{b:02X}>" for b in range(256)] if raw else []
    tok = Tokenizer(models.BPE(byte_fallback=raw, ignore_merges=bool(e["ignore_merges"])))
    if raw:
        if e["escape_spaces"]:
            tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.pre_tokenizer = pre_tokenizers.Sequence(split)
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                         decoders.Fuse()])
        tr = trainers.BpeTrainer(vocab_size=900, special_tokens=specials, limit_alphabet=150,
                                 show_progress=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            split + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=900, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                 show_progress=False)
    tok.train_from_iterator(texts * 3, tr)
    # GGUF stores a merge as "left right", cut at the first space after the
    # first byte (llama.cpp's rule): a left half with a space in it (raw
    # whitespace vocabularies) cannot be stored; both sides go without it.
    j = json.loads(tok.to_str())
    m = [x if isinstance(x, list) else x.split(" ", 1) for x in j["model"]["merges"]]
    j["model"]["merges"] = [x for x in m if (x[0] + " " + x[1]).find(" ", 1) == len(x[0])]
    return Tokenizer.from_str(json.dumps(j)), split


def write_gguf(path, e, tok):
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(e["name"])
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))  # NORMAL, <0xXX> included (as some converters write)
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tok_cli = sys.argv[1]
    fams = {}
    for e in brisk_names(tok_cli):
        fams.setdefault(e["family"], e)
    texts = CORPUS + EXTRA
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        inp = inp_file(texts, tmp)
        for fam, e in sorted(fams.items()):
            name = e["name"]
            tok, split = make_hf(e, CORPUS)
            seq = pre_tokenizers.Sequence(split)
            pieces = run([tok_cli, "--pretok", name, inp])
            gpath = os.path.join(tmp, f"{fam}.gguf")
            write_gguf(gpath, e, tok)
            out = run([tok_cli, gpath, inp])
            bad = 0
            for k, t in enumerate(texts):
                want_p = [w for w, _ in seq.pre_tokenize_str(t)]
                got_p = [bytes.fromhex(h).decode("utf-8", "replace") for h in pieces[k].split()]
                if want_p != got_p:
                    bad += 1
                    print(f"  {name}: pieces of {t[:50]!r}\n    hf    {want_p[:24]}\n    brisk {got_p[:24]}")
                    continue
                want = tok.encode(t, add_special_tokens=False).ids
                ids = [int(x) for x in out[2 * k].split()]
                back = bytes.fromhex(out[2 * k + 1][2:])
                if ids != want:
                    bad += 1
                    print(f"  {name}: ids of {t[:50]!r}\n    hf    {want[:24]}\n    brisk {ids[:24]}")
                elif back != t.encode("utf-8"):
                    bad += 1
                    print(f"  {name}: detokenized {t[:50]!r} as {back[:60]!r}")
            print(f"{fam} ({name}{', raw UTF-8' if e['raw_utf8'] else ''}): "
                  f"{len(texts) - bad}/{len(texts)} texts agree")
            fails += bad
    print(f"{len(fams)} families, {fails} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
