#include "tokenizer/pretok.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string.h>

typedef struct pretok_step {
  pcre2_code *re;
  brisk_split_behavior behavior;
  bool invert;
} pretok_step;

/* Backtracking steps one match may take. The pre-tokenizer patterns in use
 * need tens per match; a file's Split regex that backtracks exponentially
 * ("(a+)+$") gives up here, with an error, instead of hanging the caller. */
enum { MATCH_LIMIT = 100000 };

struct brisk_pretok {
  pcre2_general_context *gctx;
  pcre2_compile_context *cctx;
  pcre2_match_context *mctx;
  pretok_step *steps; /* [n_steps] */
  size_t n_steps, cap;
};

struct brisk_pretok_ws {
  pcre2_match_data **md; /* [n_steps] */
  size_t n;
};

/* PCRE2's own allocations go through brisk's allocator (JIT code pages are
 * mmap'ed by PCRE2 and are not counted). */
static void *pc_malloc(size_t size, void *ud) {
  (void)ud;
  return brisk_malloc(size);
}
static void pc_free(void *p, void *ud) {
  (void)ud;
  brisk_free(p);
}

brisk_status brisk_pretok_create(brisk_pretok **out) {
  brisk_pretok *p = brisk_calloc(1, sizeof *p);
  if (!p) return brisk_error_oom();
  p->gctx = pcre2_general_context_create(pc_malloc, pc_free, NULL);
  if (p->gctx) p->cctx = pcre2_compile_context_create(p->gctx);
  if (p->gctx) p->mctx = pcre2_match_context_create(p->gctx);
  if (p->mctx) pcre2_set_match_limit(p->mctx, MATCH_LIMIT);
  if (!p->gctx || !p->cctx || !p->mctx) {
    brisk_pretok_free(p);
    return brisk_error_oom();
  }
  *out = p;
  return BRISK_OK;
}

void brisk_pretok_free(brisk_pretok *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_steps; i++) pcre2_code_free(p->steps[i].re);
  brisk_free(p->steps);
  pcre2_compile_context_free(p->cctx);
  pcre2_match_context_free(p->mctx);
  pcre2_general_context_free(p->gctx);
  brisk_free(p);
}

size_t brisk_pretok_n_steps(const brisk_pretok *p) { return p->n_steps; }

brisk_status brisk_pretok_add(brisk_pretok *p, const char *pattern, bool literal,
                              brisk_split_behavior behavior, bool invert) {
  if (behavior > BRISK_SPLIT_CONTIGUOUS)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "pre-tokenizer: unknown split behavior %d",
                       (int)behavior);
  if (brisk_grow((void **)&p->steps, &p->cap, p->n_steps + 1, sizeof *p->steps) != 0)
    return brisk_error_oom();
  /* MATCH_INVALID_UTF: invalid bytes never match, so they fall into gaps;
   * DOLLAR_ENDONLY: '$' means end of piece, as in std::regex and Rust. */
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  if (literal) opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE erroff = 0;
  pcre2_code *re =
      pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &erroff, p->cctx);
  if (!re) {
    if (err == PCRE2_ERROR_HEAP_FAILED) return brisk_error_oom();
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof msg);
    return brisk_error(BRISK_E_FORMAT,
                       "pre-tokenizer: regex '%s' does not compile at offset %zu: %s", pattern,
                       (size_t)erroff, (const char *)msg);
  }
  /* JIT is an optimization: only running out of memory is an error. */
  int jrc = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  if (jrc == PCRE2_ERROR_NOMEMORY) {
    pcre2_code_free(re);
    return brisk_error_oom();
  }
  p->steps[p->n_steps].re = re;
  p->steps[p->n_steps].behavior = behavior;
  p->steps[p->n_steps].invert = invert;
  p->n_steps++;
  return BRISK_OK;
}

brisk_status brisk_pretok_ws_create(const brisk_pretok *p, brisk_pretok_ws **out) {
  brisk_pretok_ws *ws = brisk_calloc(1, sizeof *ws);
  if (!ws) return brisk_error_oom();
  if (p->n_steps) {
    ws->md = brisk_calloc(p->n_steps, sizeof *ws->md);
    if (!ws->md) {
      brisk_free(ws);
      return brisk_error_oom();
    }
  }
  for (size_t i = 0; i < p->n_steps; i++) {
    ws->md[i] = pcre2_match_data_create_from_pattern(p->steps[i].re, p->gctx);
    ws->n = i + 1;
    if (!ws->md[i]) {
      brisk_pretok_ws_free(ws);
      return brisk_error_oom();
    }
  }
  *out = ws;
  return BRISK_OK;
}

void brisk_pretok_ws_free(brisk_pretok_ws *ws) {
  if (!ws) return;
  for (size_t i = 0; i < ws->n; i++) pcre2_match_data_free(ws->md[i]);
  brisk_free(ws->md);
  brisk_free(ws);
}

/* One step's run: the pieces it produces go to the next step or to emit. */
typedef struct run_ctx {
  const brisk_pretok *p;
  brisk_pretok_ws *ws;
  brisk_pretok_emit emit;
  void *ctx;
} run_ctx;

static brisk_status run_step(const run_ctx *rc, size_t k, const char *s, size_t n);

static brisk_status forward(const run_ctx *rc, size_t k, const char *s, size_t n) {
  if (n == 0) return BRISK_OK;
  if (k + 1 < rc->p->n_steps) return run_step(rc, k + 1, s, n);
  return rc->emit(rc->ctx, s, n);
}

/* The behaviors as a state machine over (start, end, is_delimiter) intervals
 * in order; at most one piece is pending. */
typedef struct split_state {
  size_t pend_start, pend_end;
  bool has_pend, pend_delim;
} split_state;

static brisk_status on_interval(const run_ctx *rc, size_t k, const char *s, split_state *st,
                                size_t a, size_t b, bool delim) {
  brisk_status r = BRISK_OK;
  switch (rc->p->steps[k].behavior) {
  case BRISK_SPLIT_ISOLATED: return forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_REMOVED: return delim ? BRISK_OK : forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_MERGED_PREVIOUS:
    if (delim) {
      if (st->has_pend) {
        st->has_pend = false;
        return forward(rc, k, s + st->pend_start, b - st->pend_start);
      }
      return forward(rc, k, s + a, b - a);
    }
    if (st->has_pend) r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
    st->has_pend = true, st->pend_delim = false, st->pend_start = a, st->pend_end = b;
    return r;
  case BRISK_SPLIT_MERGED_NEXT:
    if (delim) {
      if (st->has_pend) r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
      st->has_pend = true, st->pend_delim = true, st->pend_start = a, st->pend_end = b;
      return r;
    }
    if (st->has_pend) {
      st->has_pend = false;
      return forward(rc, k, s + st->pend_start, b - st->pend_start);
    }
    return forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_CONTIGUOUS:
    if (delim) {
      if (st->has_pend) {
        st->pend_end = b;
        return BRISK_OK;
      }
      st->has_pend = true, st->pend_delim = true, st->pend_start = a, st->pend_end = b;
      return BRISK_OK;
    }
    if (st->has_pend) {
      st->has_pend = false;
      r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
      if (r != BRISK_OK) return r;
    }
    return forward(rc, k, s + a, b - a);
  }
  return BRISK_OK;
}

static brisk_status run_step(const run_ctx *rc, size_t k, const char *s, size_t n) {
  const pretok_step *step = &rc->p->steps[k];
  pcre2_match_data *md = rc->ws->md[k];
  split_state st = {0};
  size_t start = 0, last = 0;
  uint32_t opts = 0;
  brisk_status r = BRISK_OK;
  while (start <= n) {
    int m = pcre2_match(step->re, (PCRE2_SPTR)s, n, start, opts, md, rc->p->mctx);
    if (m == PCRE2_ERROR_NOMATCH) {
      if (opts == 0 || start >= n) break;
      /* No non-empty match where the last empty one was: move on a unit. */
      start += brisk_utf8_unit((const unsigned char *)s + start, n - start);
      opts = 0;
      continue;
    }
    if (m == PCRE2_ERROR_NOMEMORY || m == PCRE2_ERROR_HEAPLIMIT) return brisk_error_oom();
    if (m == PCRE2_ERROR_MATCHLIMIT || m == PCRE2_ERROR_DEPTHLIMIT)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "pre-tokenizer: regex %zu gives up at byte %zu of a %zu-byte piece "
                         "(more than %d backtracking steps)",
                         k, start, n, MATCH_LIMIT);
    if (m < 0) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(m, msg, sizeof msg);
      return brisk_error(BRISK_E_INTERNAL, "pre-tokenizer: regex match failed: %s",
                         (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (ms > last) r = on_interval(rc, k, s, &st, last, ms, step->invert);
    if (r == BRISK_OK && me > ms) r = on_interval(rc, k, s, &st, ms, me, !step->invert);
    if (r != BRISK_OK) return r;
    last = me;
    start = me;
    /* After an empty match, look for a non-empty one at the same place. */
    opts = me == ms ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    if (me == ms && me >= n) break;
  }
  if (last < n) r = on_interval(rc, k, s, &st, last, n, step->invert);
  if (r == BRISK_OK && st.has_pend)
    r = forward(rc, k, s + st.pend_start, st.pend_end - st.pend_start);
  return r;
}

brisk_status brisk_pretok_run(const brisk_pretok *p, brisk_pretok_ws *ws, const char *s, size_t n,
                              brisk_pretok_emit emit, void *ctx) {
  if (n == 0) return BRISK_OK;
  if (p->n_steps == 0) return emit(ctx, s, n);
  run_ctx rc = {p, ws, emit, ctx};
  return run_step(&rc, 0, s, n);
}

/* ---- The regexes llama.cpp uses for each GGUF pre-tokenizer name. ---- */

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
#define P_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+"

const char *const brisk_pretok_bytelevel_pattern = P_GPT2 "|\\s+";

typedef struct pre_family {
  const char *family;
  const char *patterns[7]; /* NULL-terminated */
} pre_family;

static const pre_family k_families[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", P_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {"gpt2", {P_GPT2, NULL}},
    {"llama3", {P_LLAMA3, NULL}},
    {"qwen2", {P_QWEN2, NULL}},
    {"deepseek-llm",
     {"[\\r\\n]", "\\s?" P_DS_LETTERS "+",
      "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
      "\\s+$", P_CJK_HANGUL, "\\p{N}+", NULL}},
    {"deepseek-v3",
     {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
      "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", P_CJK_HANGUL, "\\p{N}", NULL}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", P_GPT2, "[0-9][0-9][0-9]", NULL}},
    {"starcoder", {"\\p{N}", P_GPT2, NULL}},
    {"poro", {P_PORO, NULL}},
    {"viking", {P_PORO, "\\p{N}", NULL}},
    /* Tekken and GPT-4o: the tokenizer.json patterns; PCRE2 has \p{Lu} etc.,
     * which llama.cpp approximates with lookaheads. */
    {"tekken",
     {P_NOT_LN P_UPPER "*" P_LOWER "+|" P_NOT_LN P_UPPER "+" P_LOWER "*|\\p{N}" P_TAIL, NULL}},
    {"gpt-4o",
     {P_NOT_LN P_UPPER "*" P_LOWER "+" P_CONTRACTIONS "?|" P_NOT_LN P_UPPER "+" P_LOWER
                       "*" P_CONTRACTIONS "?|\\p{N}{1,3}" P_TAIL,
      NULL}},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", P_GPT2, NULL}},
    {"superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))", NULL}},
    {"bailingmoe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
      NULL}},
    {"seed-coder",
     {P_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
};

enum { F_IGNORE_MERGES = 1, F_KEEP_SPACES = 2, F_ADD_BOS = 4, F_NO_BOS = 8 };

typedef struct pre_name {
  const char *name;
  const char *family;
  unsigned flags;
} pre_name;

/* Names as llama.cpp's converter writes them, with llama.cpp's flags. */
static const pre_name k_names[] = {
    {"default", "default", 0},
    {"llama3", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"llama-v3", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"llama-bpe", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"falcon3", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"falcon-h1", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"pixtral", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"midm-2.0", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"lfm2", "llama3", F_IGNORE_MERGES | F_ADD_BOS},
    {"dbrx", "llama3", 0},
    {"smaug-bpe", "llama3", 0},
    {"chatglm-bpe", "llama3", F_NO_BOS},
    {"glm4", "llama3", F_NO_BOS},
    {"deepseek-llm", "deepseek-llm", F_KEEP_SPACES},
    {"deepseek-coder", "deepseek-coder", F_KEEP_SPACES},
    {"deepseek-v3", "deepseek-v3", F_KEEP_SPACES},
    {"hunyuan-dense", "deepseek-v3", F_KEEP_SPACES},
    {"falcon", "falcon", 0},
    {"gpt-2", "gpt2", 0},
    {"gpt2", "gpt2", 0},
    {"phi-2", "gpt2", 0},
    {"jina-es", "gpt2", 0},
    {"jina-de", "gpt2", 0},
    {"jina-v1-en", "gpt2", 0},
    {"jina-v2-es", "gpt2", 0},
    {"jina-v2-de", "gpt2", 0},
    {"jina-v2-code", "gpt2", 0},
    {"roberta-bpe", "gpt2", 0},
    {"gigachat", "gpt2", 0},
    {"a.x-4.0", "gpt2", 0},
    {"mellum", "gpt2", 0},
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
    {"qwen2", "qwen2", F_KEEP_SPACES},
    {"deepseek-r1-qwen", "qwen2", F_KEEP_SPACES},
    {"kormo", "qwen2", F_KEEP_SPACES},
    {"megrez", "qwen2", 0},
    {"stablelm2", "qwen2", 0},
    {"hunyuan", "qwen2", F_KEEP_SPACES},
    {"grok-2", "qwen2", F_KEEP_SPACES},
    {"poro-chat", "poro", F_KEEP_SPACES},
    {"bloom", "poro", 0},
    {"gpt3-finnish", "poro", 0},
    {"viking", "viking", F_KEEP_SPACES},
    {"tekken", "tekken", F_KEEP_SPACES | F_IGNORE_MERGES | F_ADD_BOS},
    {"chameleon", "chameleon", F_KEEP_SPACES | F_ADD_BOS},
    {"gpt-4o", "gpt-4o", F_KEEP_SPACES},
    {"llama4", "gpt-4o", F_KEEP_SPACES},
    {"minimax-m2", "gpt-4o", F_KEEP_SPACES},
    {"superbpe", "superbpe", F_KEEP_SPACES},
    {"bailingmoe", "bailingmoe", F_KEEP_SPACES},
    {"bailingmoe2", "bailingmoe", F_KEEP_SPACES},
    {"llada-moe", "bailingmoe", F_KEEP_SPACES},
    {"seed-coder", "seed-coder", F_KEEP_SPACES},
};

static const pre_name *find_name(const char *name) {
  for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
    if (strcmp(k_names[i].name, name) == 0) return &k_names[i];
  return NULL;
}

bool brisk_pretok_known(const char *name) { return name && find_name(name) != NULL; }

brisk_status brisk_pretok_add_named(brisk_pretok *p, const char *name, brisk_pretok_info *info) {
  const pre_name *pn = find_name(name);
  if (!pn) return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer: unknown pre-tokenizer '%s'", name);
  const pre_family *fam = NULL;
  for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
    if (strcmp(k_families[i].family, pn->family) == 0) fam = &k_families[i];
  if (!fam) return brisk_error(BRISK_E_INTERNAL, "tokenizer: no regexes for '%s'", pn->family);
  for (size_t i = 0; fam->patterns[i]; i++) {
    brisk_status st = brisk_pretok_add(p, fam->patterns[i], false, BRISK_SPLIT_ISOLATED, false);
    if (st != BRISK_OK) return st;
  }
  if (info) {
    info->canonical = pn->family;
    info->ignore_merges = (pn->flags & F_IGNORE_MERGES) != 0;
    info->clean_spaces = (pn->flags & F_KEEP_SPACES) == 0;
    info->add_bos = (pn->flags & F_ADD_BOS) != 0;
    info->no_bos = (pn->flags & F_NO_BOS) != 0;
  }
  return BRISK_OK;
}
