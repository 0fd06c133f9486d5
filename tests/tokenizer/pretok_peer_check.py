#!/usr/bin/env python3
"""Checks brisk's GGUF pre-tokenizer names against llama.cpp's own sources.

Reads llama-vocab.cpp of the llama.cpp peer (../shared/peer/setup.sh puts it
under $BRISK_PEER_CACHE, default /tmp/brisk-peer) at test time; nothing of
it is kept in the repository. For every tokenizer.ggml.pre name llama.cpp
loads as a BPE vocabulary, brisk must know the name, give it llama.cpp's
flags (ignore_merges, clean_spaces, add_bos, add_sep, escape_whitespaces,
no BOS, byte_encode, Gemma 4's special cases) and the same regex list, the
text compared after writing control and non-ASCII characters as escapes.

Where brisk deliberately writes a pattern otherwise (the model's own
pattern where llama.cpp approximates it), DOCUMENTED names the llama.cpp
pre-tokenizer type, why, and how the two are shown to agree: by running
both through Hugging Face tokenizers' Split (Oniguruma, an implementation
neither brisk nor llama.cpp shares) on texts where llama.cpp's
approximation is exact, or against llama.cpp's hand-written splitter
reimplemented here.

Usage: pretok_peer_check.py TOK_CLI. Exit 77 (skip) without the peer's
sources or the tokenizers module.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def find_source(name):
    env = os.environ.get("BRISK_LLAMA_VOCAB_CPP")
    if env and name == "llama-vocab.cpp" and os.path.exists(env):
        return env
    cache = os.environ.get("BRISK_PEER_CACHE", "/tmp/brisk-peer")
    # Route B of setup.sh (llama-cpp-python's vendored copy), then route A.
    for pat in (f"{cache}/*/src/vendor/llama.cpp/src/{name}", f"{cache}/llama.cpp/src/{name}",
                f"{cache}/**/src/{name}"):
        hits = sorted(glob.glob(pat, recursive=True))
        if hits:
            return hits[0]
    return None


# ---- C source parsing ------------------------------------------------------

def c_strings(body):
    """The comma-separated C string-literal entries of an initializer list
    (adjacent literals concatenated, comments skipped)."""
    out, cur, i, n = [], None, 0, len(body)
    esc = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
    while i < n:
        c = body[i]
        if body.startswith("//", i):
            i = body.find("\n", i)
            i = n if i < 0 else i
            continue
        if body.startswith("/*", i):
            i = body.index("*/", i) + 2
            continue
        if c == '"':
            i += 1
            s = []
            while body[i] != '"':
                if body[i] == "\\":
                    s.append(esc.get(body[i + 1], "\\" + body[i + 1]))
                    i += 2
                else:
                    s.append(body[i])
                    i += 1
            i += 1
            cur = (cur or "") + "".join(s)
            continue
        if c in ",}":
            if cur is not None:
                out.append(cur)
            cur = None
            if c == "}":
                break
        i += 1
    if cur is not None:
        out.append(cur)
    return out


def parse_regexes(src):
    """pre type -> (regex list, byte_encode) from llm_tokenizer_bpe's switch."""
    a = src.index("llm_tokenizer_bpe(const llama_vocab & vocab)")
    b = src.index("std::vector<std::string> regex_exprs;", a)
    sw = src[a:b]
    types, out, pending = {}, {}, []
    for m in re.finditer(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):|default:|break;|regex_exprs = \{|"
                         r"byte_encode = (true|false)", sw):
        t = m.group(0)
        if t.startswith("case"):
            pending.append(m.group(1))
        elif t == "default:":
            pending.append("DEFAULT")
        elif t.startswith("regex_exprs"):
            types["re"] = c_strings(sw[m.end():])
        elif t.startswith("byte_encode"):
            types["be"] = m.group(2) == "true"
        else:  # break
            for p in pending:
                out[p] = (types.get("re"), types.get("be", True))
            pending, types = [], {}
    for p in pending:  # the default case may end without a break
        out[p] = (types.get("re"), types.get("be", True))
    return out


def parse_names(src):
    """name -> (pre type, flags) from the BPE branch of the vocabulary load."""
    a = src.index("if (type == LLAMA_VOCAB_TYPE_BPE) {")
    b = src.index("} else if (type == LLAMA_VOCAB_TYPE_SPM) {", a)
    sec = src[a:b]
    head = sec[:sec.index("if (tokenizer_pre.empty())")]
    base = {"ignore_merges": False, "add_bos": False, "add_sep": False, "no_bos": False,
            "clean_spaces": True, "escape_whitespaces": True}
    for k, v in re.findall(r"(\w+)\s*=\s*(true|false);", head):
        base[k] = v == "true"
    out = {}
    for m in re.finditer(r"if\s*\((.*?)\)\s*\{(.*?)\}", sec, re.S):
        cond, body = m.group(1), m.group(2)
        names = re.findall(r'tokenizer_pre\s*==\s*"([^"]+)"', cond)
        t = re.search(r"pre_type\s*=\s*LLAMA_VOCAB_PRE_TYPE_(\w+)", body)
        if not names or not t:
            continue
        f = dict(base)
        for k, v in re.findall(r"\b(\w+)\s*=\s*(true|false|LLAMA_TOKEN_NULL);", body):
            if k == "special_bos_id":
                f["no_bos"] = v == "LLAMA_TOKEN_NULL"
            elif k in f:
                f[k] = v == "true"
        for nm in names:
            out[nm] = (t.group(1), f)
    return out


def canon(s):
    o = []
    for ch in s:
        c = ord(ch)
        if ch == "\r":
            o.append("\\r")
        elif ch == "\n":
            o.append("\\n")
        elif ch == "\t":
            o.append("\\t")
        elif c > 127:
            o.append("\\x{%x}" % c)
        else:
            o.append(ch)
    return "".join(o)


# ---- Behavioural checks for documented differences --------------------------

ASCII_TEXTS = [
    "Hello World, HELLO world! I'm fine; they'LL go, we'Ve done it.",
    "camelCaseWord XMLHttpRequest iOS eBay McDonald's don't DON'T",
    "  def f(x):\n\treturn x**2 // 3  # comment\r\n\n\n   end  ",
    "1234567 89 0.5 3,141 a1b2c3 ID42 /path/to/file.txt C++ A-B_C",
    "MiXeD CaSe lettERS aNd 'quotes' \"double\" (parens) [brackets] {braces}",
]

MULTI_TEXTS = ASCII_TEXTS + [
    "Ünïcödé: naïve café, Ελληνικά Γλώσσα, Русский Язык, עברית, العربية",
    "日本語のテキストと中文字符混合English words 和 数字123456",
    "한국어 텍스트입니다. हिन्दी भाषा। ภาษาไทย ១២៣ ẞtraße ǅemal",
    "漢字かなカナ𠀀𪜀 ideographs 〇〆 and emoji 😁🚀 plus ½ ² Ⅻ 〒 ㊀",
    "「引用」、句読点。中文，标点！",
]


def hf_pieces(patterns, texts):
    from tokenizers import Regex, pre_tokenizers
    # Oniguruma's \p{Han} is the Script property, PCRE2's \p{sc:Han}.
    seq = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p.replace("\\p{sc:Han}", "\\p{Han}")),
                                                        "isolated") for p in patterns])
    return [[w for w, _ in seq.pre_tokenize_str(t)] for t in texts]


def brisk_pieces(tok_cli, name, texts):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write("\n__ggml_vocab_test__\n".join(texts).encode())
        path = f.name
    try:
        out = subprocess.run([tok_cli, "--pretok", name, path], capture_output=True, check=True)
    finally:
        os.unlink(path)
    lines = out.stdout.decode().split("\n")[:len(texts)]
    return [[bytes.fromhex(h).decode("utf-8", "surrogateescape") for h in ln.split()]
            for ln in lines]


def afmoe_digits(piece):
    """llama.cpp's unicode_regex_split_custom_afmoe on one piece, as written:
    a run of \\p{N} is cut into (length mod 3) digits then threes; the text
    before a run joins the run's first group."""
    import unicodedata
    isnum = [unicodedata.category(c).startswith("N") for c in piece]
    out, prev, pos, n = [], 0, 0, len(piece)

    def add(end):
        nonlocal prev
        if end > prev:
            out.append(piece[prev:end])
        prev = end
    while pos < n:
        if isnum[pos]:
            start = pos
            while pos < n and isnum[pos]:
                pos += 1
            cnt, cur = pos - start, start
            if cnt % 3:
                add(cur + cnt % 3)
                cur += cnt % 3
            while cur < start + cnt:
                add(cur + 3)
                cur += 3
            continue
        pos += 1
    add(n)
    return out


def check_ascii_equal(tok_cli, name, llama_re, brisk_re):
    """llama.cpp's approximation is exact on ASCII: same pieces there."""
    want = hf_pieces(llama_re, ASCII_TEXTS)
    got = brisk_pieces(tok_cli, name, ASCII_TEXTS)
    ref = hf_pieces(brisk_re, ASCII_TEXTS)
    return [f"{name}: ASCII text {i}: llama.cpp's regexes give {w}, brisk {g}"
            for i, (w, g, r) in enumerate(zip(want, got, ref)) if w != g or g != r]


DIGIT_TEXTS = ["1 12 123 1234 12345 123456 1234567 12345678 a1234 1234b x12345y",
               "3.14159 1,000,000 +49(0)30-1234 ١٢٣٤٥ １２３４ 99999999999999999999"]


def check_possessive(tok_cli, name, llama_re, brisk_re):
    """Possessive quantifiers where nothing could backtrack into them: the
    same pieces as llama.cpp's text, run by Oniguruma."""
    texts = MULTI_TEXTS + DIGIT_TEXTS + ["word " * 300 + "end"]
    want = hf_pieces(llama_re, texts)
    got = brisk_pieces(tok_cli, name, texts)
    return [f"{name}: text {i}: llama.cpp's regexes give {w}, brisk {g}"
            for i, (w, g) in enumerate(zip(want, got)) if w != g]


def check_kimi(tok_cli, name, llama_re, brisk_re):
    """llama.cpp's K2 splitter stands for the tiktoken pattern it quotes in
    unicode.cpp; Oniguruma runs that pattern (class intersection and all)."""
    path = find_source("unicode.cpp")
    if not path:
        return [f"{name}: unicode.cpp not found next to llama-vocab.cpp"]
    src = open(path, encoding="utf-8").read()
    m = re.search(r"// K2 system regex patterns.*\n// (.*)\n", src)
    if not m:
        return [f"{name}: the K2 pattern comment is gone from unicode.cpp"]
    want = hf_pieces([m.group(1)], MULTI_TEXTS)
    got = brisk_pieces(tok_cli, name, MULTI_TEXTS)
    return [f"{name}: text {i}: the K2 pattern gives {w}, brisk {g}"
            for i, (w, g) in enumerate(zip(want, got)) if w != g]


def check_afmoe(tok_cli, name, llama_re, brisk_re):
    """The digit splitter, then llama.cpp's other regexes (equal text), give
    brisk's pieces (texts without digits inside the CJK class: there the
    splitter's gluing of text to digits would differ)."""
    errs = []
    if [canon(x) for x in llama_re[1:]] != [canon(x) for x in brisk_re[1:]]:
        errs.append(f"{name}: regexes after the digit step differ")
    texts = ASCII_TEXTS + MULTI_TEXTS[5:7] + DIGIT_TEXTS + [
        "x1 22 333 4444 55555 666666 7777777 a12b", "١٢٣٤ ½3 12½ 9876543210 ,12,345,"]
    want = []
    for t in texts:
        pieces = afmoe_digits(t)
        want.append([w for p in pieces for w in hf_pieces(llama_re[1:], [p])[0]])
    got = brisk_pieces(tok_cli, name, texts)
    errs += [f"{name}: text {i}: llama.cpp's AFMoE split gives {w}, brisk {g}"
             for i, (w, g) in enumerate(zip(want, got)) if w != g]
    return errs


# llama.cpp pre type -> (why brisk's text differs, check)
DOCUMENTED = {
    "TEKKEN": ("tokenizer.json's \\p{Lu}/\\p{Ll} classes; llama.cpp's lookaheads are exact on "
               "ASCII only", check_ascii_equal),
    "GPT4O": ("o200k's \\p{Lu}/\\p{Ll} classes; llama.cpp's lookaheads are exact on ASCII only",
              check_ascii_equal),
    "MINIMAX_M2": ("as GPT4O", check_ascii_equal),
    "GRANITE_EMB_MULTI": ("GPT-4o's pattern; llama.cpp adds \\p{M} to its lookaheads to come "
                          "closer to it", check_ascii_equal),
    "KIMI_K2": ("the tiktoken pattern behind llama.cpp's trigger \\p{Han}+", check_kimi),
    "TINY_AYA": ("a possessive lookahead (the JIT stack on long digit runs)", check_possessive),
    "SUPERBPE": ("a possessive lookahead (the JIT stack on long digit runs)", check_possessive),
    "EXAONE_MOE": ("possessive quantifiers (the JIT stack on long sentences)", check_possessive),
    "AFMOE": ("a lookahead for the digit groups of llama.cpp's \\p{AFMoE_digits} splitter",
              check_afmoe),
}


def main():
    if len(sys.argv) != 2:
        print("usage: pretok_peer_check.py TOK_CLI")
        return 2
    tok_cli = sys.argv[1]
    path = find_source("llama-vocab.cpp")
    if not path:
        skip("llama.cpp's llama-vocab.cpp not found (run ../shared/peer/setup.sh)")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        skip("python module 'tokenizers' is not installed")
    src = open(path, encoding="utf-8").read()
    regexes = parse_regexes(src)
    names = parse_names(src)
    force_bos = set(re.findall(r"pre_type == LLAMA_VOCAB_PRE_TYPE_(\w+) && !add_bos", src))
    nl_words = set(re.findall(r"tok_pre == LLAMA_VOCAB_PRE_TYPE_(\w+) && "
                              r"word\.find_first_not_of\('\\n'\)", src))
    if len(names) < 60 or "DEFAULT" not in regexes:
        print(f"FAIL: parsed only {len(names)} names / {len(regexes)} types from {path}")
        return 1
    out = subprocess.run([tok_cli, "--pre-names"], capture_output=True, check=True)
    brisk = {}
    for line in out.stdout.decode().splitlines():
        e = json.loads(line)
        brisk[e["name"]] = e
    errs, checked = [], {}
    for nm, (ptype, f) in sorted(names.items()):
        b = brisk.get(nm)
        if b is None:
            errs.append(f"{nm}: unknown to brisk (llama.cpp type {ptype})")
            continue
        if ptype not in regexes:
            errs.append(f"{nm}: no regexes found for llama.cpp type {ptype}")
            continue
        lre, byte_encode = regexes[ptype]
        want = {"ignore_merges": f["ignore_merges"], "clean_spaces": f["clean_spaces"],
                "add_bos": f["add_bos"], "add_sep": f["add_sep"], "no_bos": f["no_bos"],
                "escape_spaces": f["escape_whitespaces"], "raw_utf8": not byte_encode,
                "force_bos": ptype in force_bos, "newline_words": ptype in nl_words}
        for k, v in want.items():
            if bool(b[k]) != v:
                errs.append(f"{nm}: {k} is {bool(b[k])} in brisk, {v} in llama.cpp")
        if [canon(x) for x in lre] == [canon(x) for x in b["patterns"]]:
            continue
        if ptype not in DOCUMENTED:
            errs.append(f"{nm}: regexes differ from llama.cpp's type {ptype}:\n  llama.cpp "
                        f"{[canon(x) for x in lre]}\n  brisk     {b['patterns']}")
            continue
        if ptype in checked:  # one behavioural check per type
            continue
        why, check = DOCUMENTED[ptype]
        e = check(tok_cli, nm, lre, b["patterns"])
        checked[ptype] = not e
        print(f"{nm} ({ptype}): documented difference: {why}: {'agrees' if not e else 'FAILS'}")
        errs += e
    for e in errs:
        print("FAIL:", e)
    print(f"{len(names)} llama.cpp names, {len(regexes)} pre types, {len(brisk)} brisk names; "
          f"{len(errs)} problems")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
