/* GGUF tokenizer.ggml.pre names: which regexes split the text before BPE,
 * and what else llama.cpp ties to the name (its flags, raw UTF-8 words,
 * escaped spaces).
 *
 * The names and flags are llama.cpp's (llama-vocab.cpp, the load of a BPE
 * vocabulary); the regexes are the ones llama.cpp lists per pre-tokenizer
 * type. Where llama.cpp approximates a model's tokenizer.json pattern
 * because std::regex has no Unicode classes (lookaheads for \p{Lu}, a
 * hand-written splitter behind a trigger string such as \p{Han}+), the
 * pattern here is the tokenizer.json one, which PCRE2 runs as written: that
 * is what the model was trained with and what Hugging Face tokenizers
 * computes. Each such place says so. Non-ASCII characters of llama.cpp's
 * patterns are written as \x{...} escapes. */
#include "tokenizer/pretok.h"

#include "core/error.h"

#include <string.h>

#define P_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* (?i:'s|'t|...) written out: PCRE2's caseless matching would also fold
 * U+017F and U+212A, which the reference implementations do not. */
#define P_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define P_LLAMA3                                                                                   \
  P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"      \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define P_QWEN2                                                                                    \
  P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"           \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define P_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define P_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define P_NOT_LN "[^\\r\\n\\p{L}\\p{N}]?"
#define P_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-4o's (o200k) pattern; tiny_aya, youtu and others reuse its parts. */
#define P_GPT4O_WORDS                                                                              \
  P_NOT_LN P_UPPER "*" P_LOWER "+" P_CONTRACTIONS "?|" P_NOT_LN P_UPPER "+" P_LOWER                \
                   "*" P_CONTRACTIONS "?"
/* Cased letters of DeepSeek's tokenizer.json, as code point ranges. */
#define P_DS_LETTERS                                                                               \
  "[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}\\x{1c4}-\\x{293}" \
  "\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}\\x{386}"            \
  "\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}"  \
  "\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}"  \
  "\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{"     \
  "1f15}"                                                                                          \
  "\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}" \
  "\\x{1f5d}\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}" \
  "\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{"     \
  "1ff4}"                                                                                          \
  "\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}"  \
  "\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}"           \
  "\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}"           \
  "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}" \
  "\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{"     \
  "fb17}"                                                                                          \
  "\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}"               \
  "\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"           \
  "\\x{1e900}-\\x{1e943}]"
#define P_CJK_HANGUL "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"
#define P_CJK_KANA "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+"
#define P_DS3_PUNCT_WORD "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
#define P_DS3_LETTERS "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
#define P_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+"
#define P_HAN "\\p{sc:Han}"
/* P_UPPER and P_LOWER without Han, by their complements. */
#define P_UPPER_NOT_HAN "[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" P_HAN "]"
#define P_LOWER_NOT_HAN "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" P_HAN "]"
#define P_NEWLINES "[^\\n]+|[\\n]+"

const char *const brisk_pretok_bytelevel_pattern = P_GPT2 "|\\s+";

typedef struct pre_family {
  const char *family;
  bool raw_utf8;           /* llama.cpp's byte_encode = false */
  const char *patterns[7]; /* NULL-terminated */
} pre_family;

static const pre_family k_families[] = {
    {"default", false, {"[\\p{P}\\$\\+<=>\\^~\\|]+", P_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {"gpt2", false, {P_GPT2, NULL}},
    {"llama3", false, {P_LLAMA3, NULL}},
    {"jais2",
     false,
     {P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                     "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|"
                     "\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|"
                     "\\s{1,2}(?!\\S)|\\s{1}",
      NULL}},
    {"qwen2", false, {P_QWEN2, NULL}},
    {"qwen35",
     false,
     {P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
                     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"deepseek-llm",
     false,
     {"[\\r\\n]", "\\s?" P_DS_LETTERS "+",
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
      "\\s+$", P_CJK_HANGUL, "\\p{N}+", NULL}},
    {"deepseek-v3",
     false,
     {"\\p{N}{1,3}", P_CJK_KANA,
      P_DS3_PUNCT_WORD "|" P_DS3_LETTERS
                       "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"spark2_5",
     false,
     {"\\p{N}{1,3}", P_CJK_KANA,
      P_DS3_PUNCT_WORD "|" P_DS3_LETTERS "| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+", "\\p{N}",
      NULL}},
    {"youtu",
     false,
     {"[\\x{ac00}-\\x{d7a3}\\x{3131}-\\x{318e}]+|[\\x{ff01}\\x{2026}\\x{201c}\\x{201d}\\x{2018}"
      "\\x{2019}\\x{2014}\\x{ff1a}\\x{ff1b}\\x{ff0c}\\x{3001}-\\x{303f}\\x{fe30}-\\x{fe4f}]+|"
      "[\\x{3105}-\\x{312f}]+|" P_CJK_KANA,
      P_GPT4O_WORDS "|\\p{N}" P_TAIL, NULL}},
    {"deepseek-coder",
     false,
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", P_CJK_HANGUL, "\\p{N}", NULL}},
    {"falcon", false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", P_GPT2, "[0-9][0-9][0-9]", NULL}},
    {"starcoder", false, {"\\p{N}", P_GPT2, NULL}},
    {"poro", false, {P_PORO, NULL}},
    {"viking", false, {P_PORO, "\\p{N}", NULL}},
    /* Tekken and GPT-4o: the tokenizer.json patterns; PCRE2 has \p{Lu} etc.,
     * which llama.cpp approximates with lookaheads ((?=[\p{L}])[^a-z]),
     * exact on ASCII only. granite-embed-multi-97m is GPT-4o's pattern too:
     * llama.cpp's variant adds \p{M} to its lookaheads to come closer to it
     * (P_UPPER and P_LOWER include \p{M}). */
    {"tekken",
     false,
     {P_NOT_LN P_UPPER "*" P_LOWER "+|" P_NOT_LN P_UPPER "+" P_LOWER "*|\\p{N}" P_TAIL, NULL}},
    {"gpt-4o", false, {P_GPT4O_WORDS "|\\p{N}{1,3}" P_TAIL, NULL}},
    /* Digits in threes from the right: llama.cpp runs its AFMoE splitter for
     * this pattern, which gives the same groups except that it does not
     * stop at the \b a letter right after the digits removes. The lookahead
     * is possessive here (the same matches: fewer threes leave a digit
     * next, where \b fails), so a long run of digits does not exhaust the
     * JIT stack; afmoe and superbpe likewise. */
    {"tiny_aya", false, {"\\d{1,3}(?=(?:\\d{3})*+\\b)", P_GPT4O_WORDS "|\\p{N}{1,3}" P_TAIL, NULL}},
    /* Kimi K2's tiktoken pattern (tokenization_kimi.py), which llama.cpp
     * implements by hand behind the trigger "\p{Han}+": its class
     * intersections [...&&[^\p{Han}]] are written as complements (every
     * code point has one general category: Lu Lt Lm Lo M are the ones not
     * Ll N P S Z C), so that no group repeats per letter. Han is
     * the Script property, as in Oniguruma and llama.cpp's Han ranges:
     * PCRE2's bare \p{Han} is Script_Extensions, which adds CJK punctuation
     * such as U+3001 and U+300C. */
    {"kimi-k2",
     false,
     {P_HAN "+|" P_NOT_LN P_UPPER_NOT_HAN "*" P_LOWER_NOT_HAN "+" P_CONTRACTIONS
            "?|" P_NOT_LN P_UPPER_NOT_HAN "+" P_LOWER_NOT_HAN "*" P_CONTRACTIONS
            "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
            "\\s+",
      NULL}},
    {"chameleon",
     false,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", P_GPT2, NULL}},
    /* superbpe: possessive threes in the lookahead (the same matches), for
     * the JIT stack as in tiny_aya. */
    {"superbpe", false, {"\\p{N}+", "(?=(?:\\d{3})++(?!\\d))", NULL}},
    {"bailingmoe",
     false,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    {"seed-coder",
     false,
     {P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"ufakzeka",
     false,
     {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+",
      NULL}},
    /* AFMoE: llama.cpp's trigger "\p{AFMoE_digits}" runs a splitter that cuts
     * every run of digits into a first group of (length mod 3) digits, if
     * any, then groups of three; the lookahead says the same. The CJK class
     * is llama.cpp's, U+8C48 included (likely U+F900 folded by NFC). */
    {"afmoe",
     false,
     {"\\p{N}{1,3}(?=(?:\\p{N}{3})*+(?!\\p{N}))",
      "[\\x{4e00}-\\x{9fff}\\x{3400}-\\x{4dbf}\\x{8c48}-\\x{faff}\\x{3040}-\\x{309f}"
      "\\x{30a0}-\\x{30ff}\\x{ff65}-\\x{ff9f}\\x{2f00}-\\x{2fdf}\\x{e40}-\\x{e7f}\\x{e80}-\\x{eff}"
      "\\x{1780}-\\x{17ff}\\x{1000}-\\x{109f}\\x{aa60}-\\x{aa7f}\\x{a9e0}-\\x{a9ff}"
      "\\x{ac00}-\\x{d7af}\\x{1100}-\\x{11ff}]+",
      P_DS3_PUNCT_WORD "|" P_DS3_LETTERS
                       "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"laguna", false, {P_NEWLINES, P_QWEN2, NULL}},
    /* Words joined by single spaces make one piece: possessive quantifiers,
     * the same matches (nothing follows the group in its alternative), keep
     * a long sentence from exhausting PCRE2's JIT stack. */
    {"exaone-moe",
     false,
     {P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*+(?: \\p{L}\\p{M}*+)*+)++|\\p{N}| "
                     "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    /* SentencePiece-style BPE (Gemma 4, Sarvam): spaces are U+2581 (the
     * name's escape_spaces), merges run over whole lines of raw UTF-8. */
    {"gemma4", true, {P_NEWLINES, NULL}},
    {"minicpm5",
     false,
     {"\\p{N}{1,3}",
      P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    /* jina-embeddings-v2-base-zh: words between whitespace, raw UTF-8 (the
     * whitespace between them stays, as pieces of its own, as in llama.cpp). */
    {"whitespace", true, {"\\S+", NULL}},
};

enum {
  F_IGNORE_MERGES = 1,
  F_KEEP_SPACES = 2, /* llama.cpp's clean_spaces = false */
  F_ADD_BOS = 4,
  F_NO_BOS = 8,
  F_ADD_SEP = 16,
  F_ESCAPE = 32, /* llama.cpp's escape_whitespaces */
  F_GEMMA4 = 64, /* llama.cpp's pre-type GEMMA4 special cases */
};

typedef struct pre_name {
  const char *name;
  const char *family;
  unsigned flags;
} pre_name;

#define LLAMA3_FLAGS (F_IGNORE_MERGES | F_ADD_BOS)

/* Names as llama.cpp's converter writes them, with llama.cpp's flags. */
static const pre_name k_names[] = {
    {"default", "default", 0},
    {"llama3", "llama3", LLAMA3_FLAGS},
    {"llama-v3", "llama3", LLAMA3_FLAGS},
    {"llama-bpe", "llama3", LLAMA3_FLAGS},
    {"falcon3", "llama3", LLAMA3_FLAGS},
    {"falcon-h1", "llama3", LLAMA3_FLAGS},
    {"pixtral", "llama3", LLAMA3_FLAGS},
    {"midm-2.0", "llama3", LLAMA3_FLAGS},
    {"lfm2", "llama3", LLAMA3_FLAGS},
    {"jina-v5-nano", "llama3", LLAMA3_FLAGS},
    {"dbrx", "llama3", 0},
    {"smaug-bpe", "llama3", 0},
    {"chatglm-bpe", "llama3", F_NO_BOS},
    {"glm4", "llama3", F_NO_BOS | F_IGNORE_MERGES},
    {"glm5", "llama3", F_NO_BOS | F_IGNORE_MERGES},
    {"jais-2", "jais2", 0},
    {"minicpm5", "minicpm5", F_IGNORE_MERGES},
    {"deepseek-llm", "deepseek-llm", F_KEEP_SPACES},
    {"deepseek-coder", "deepseek-coder", F_KEEP_SPACES},
    {"deepseek-v3", "deepseek-v3", F_KEEP_SPACES},
    {"hunyuan-dense", "deepseek-v3", F_KEEP_SPACES},
    {"hy_v4", "deepseek-v3", F_KEEP_SPACES},
    {"joyai-llm", "deepseek-v3", F_KEEP_SPACES},
    {"spark2_5", "spark2_5", F_KEEP_SPACES},
    {"youtu", "youtu", F_KEEP_SPACES | F_IGNORE_MERGES},
    {"falcon", "falcon", 0},
    {"gpt-2", "gpt2", 0},
    {"gpt2", "gpt2", 0},
    {"phi-2", "gpt2", 0},
    {"jina-es", "gpt2", 0},
    {"jina-de", "gpt2", 0},
    {"jina-v2-es", "gpt2", 0},
    {"jina-v2-de", "gpt2", 0},
    {"jina-v1-en", "gpt2", F_ADD_SEP},
    {"jina-v2-code", "gpt2", F_ADD_SEP},
    {"roberta-bpe", "gpt2", F_ADD_SEP},
    {"gigachat", "gpt2", 0},
    {"a.x-4.0", "gpt2", 0},
    {"mellum", "gpt2", 0},
    {"modern-bert", "gpt2", 0},
    {"exaone4", "gpt2", 0},
    {"mpt", "gpt2", 0},
    {"olmo", "gpt2", 0},
    {"jais", "gpt2", 0},
    {"trillion", "gpt2", F_KEEP_SPACES},
    {"granite-docling", "gpt2", F_KEEP_SPACES},
    {"starcoder", "starcoder", 0},
    {"refact", "starcoder", 0},
    {"command-r", "starcoder", F_KEEP_SPACES},
    {"smollm", "starcoder", F_KEEP_SPACES},
    {"codeshell", "starcoder", 0},
    {"exaone", "starcoder", 0},
    {"minerva-7b", "starcoder", 0},
    {"mellum2", "starcoder", 0},
    {"qwen2", "qwen2", F_KEEP_SPACES},
    {"deepseek-r1-qwen", "qwen2", F_KEEP_SPACES},
    {"kormo", "qwen2", F_KEEP_SPACES},
    {"f2llmv2", "qwen2", F_KEEP_SPACES},
    {"megrez", "qwen2", 0},
    {"stablelm2", "qwen2", 0},
    {"hunyuan", "qwen2", F_KEEP_SPACES},
    {"grok-2", "qwen2", F_KEEP_SPACES},
    {"solar-open", "qwen2", F_KEEP_SPACES},
    {"qwen35", "qwen35", F_KEEP_SPACES},
    {"poro-chat", "poro", F_KEEP_SPACES},
    {"bloom", "poro", 0},
    {"gpt3-finnish", "poro", 0},
    {"viking", "viking", F_KEEP_SPACES},
    {"tekken", "tekken", F_KEEP_SPACES | F_IGNORE_MERGES | F_ADD_BOS},
    {"chameleon", "chameleon", F_KEEP_SPACES | F_ADD_BOS},
    {"gpt-4o", "gpt-4o", F_KEEP_SPACES},
    {"llama4", "gpt-4o", F_KEEP_SPACES},
    {"kanana2", "gpt-4o", F_KEEP_SPACES},
    {"talkie", "gpt-4o", F_KEEP_SPACES},
    {"minimax-m2", "gpt-4o", F_KEEP_SPACES},
    {"granite-embed-multi-97m", "gpt-4o", F_KEEP_SPACES | F_IGNORE_MERGES},
    {"tiny_aya", "tiny_aya", F_KEEP_SPACES},
    {"cohere2moe", "tiny_aya", F_KEEP_SPACES},
    {"kimi-k2", "kimi-k2", F_KEEP_SPACES},
    {"superbpe", "superbpe", F_KEEP_SPACES},
    {"bailingmoe", "bailingmoe", F_KEEP_SPACES},
    {"bailingmoe2", "bailingmoe", F_KEEP_SPACES},
    {"llada-moe", "bailingmoe", F_KEEP_SPACES},
    {"seed-coder", "seed-coder", F_KEEP_SPACES},
    {"ufakzeka", "ufakzeka", F_KEEP_SPACES},
    {"afmoe", "afmoe", F_KEEP_SPACES},
    {"laguna", "laguna", F_KEEP_SPACES},
    {"exaone-moe", "exaone-moe", 0},
    {"gemma4", "gemma4", F_ESCAPE | F_GEMMA4},
    {"granite-embed-multi-311m", "gemma4", F_ESCAPE | F_GEMMA4},
    {"sarvam-moe", "gemma4", F_ESCAPE | F_KEEP_SPACES},
    {"whitespace", "whitespace", 0},
};

static const pre_name *find_name(const char *name) {
  for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
    if (strcmp(k_names[i].name, name) == 0) return &k_names[i];
  return NULL;
}

static const pre_family *find_family(const char *family) {
  for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
    if (strcmp(k_families[i].family, family) == 0) return &k_families[i];
  return NULL;
}

bool brisk_pretok_known(const char *name) { return name && find_name(name) != NULL; }

size_t brisk_pretok_n_names(void) { return sizeof k_names / sizeof k_names[0]; }

const char *brisk_pretok_name_at(size_t i) {
  return i < sizeof k_names / sizeof k_names[0] ? k_names[i].name : NULL;
}

const char *const *brisk_pretok_lookup(const char *name, brisk_pretok_info *info) {
  const pre_name *pn = name ? find_name(name) : NULL;
  const pre_family *fam = pn ? find_family(pn->family) : NULL;
  if (!fam) return NULL;
  if (info) {
    memset(info, 0, sizeof *info);
    info->canonical = pn->family;
    info->ignore_merges = (pn->flags & F_IGNORE_MERGES) != 0;
    info->clean_spaces = (pn->flags & F_KEEP_SPACES) == 0;
    info->add_bos = (pn->flags & F_ADD_BOS) != 0;
    info->no_bos = (pn->flags & F_NO_BOS) != 0;
    info->add_sep = (pn->flags & F_ADD_SEP) != 0;
    info->raw_utf8 = fam->raw_utf8;
    info->escape_spaces = (pn->flags & F_ESCAPE) != 0;
    info->force_bos = (pn->flags & F_GEMMA4) != 0;
    info->newline_words = (pn->flags & F_GEMMA4) != 0;
  }
  return fam->patterns;
}

brisk_status brisk_pretok_add_named(brisk_pretok *p, const char *name, brisk_pretok_info *info) {
  const char *const *pat = brisk_pretok_lookup(name, info);
  if (!pat)
    return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer: unknown pre-tokenizer '%s'",
                       name ? name : "(null)");
  for (size_t i = 0; pat[i]; i++) {
    brisk_status st = brisk_pretok_add(p, pat[i], false, BRISK_SPLIT_ISOLATED, false);
    if (st != BRISK_OK) return st;
  }
  return BRISK_OK;
}
