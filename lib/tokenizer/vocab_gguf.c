/* A vocabulary from GGUF metadata (tokenizer.ggml.*), as llama.cpp reads it. */
#include "tokenizer/vocab_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"

#include <stdio.h>
#include <string.h>

/* GGUF token_type values. */
enum {
  GGUF_TT_NORMAL = 1,
  GGUF_TT_UNKNOWN,
  GGUF_TT_CONTROL,
  GGUF_TT_USER_DEFINED,
  GGUF_TT_UNUSED,
  GGUF_TT_BYTE
};

static uint16_t attr_from_gguf(int32_t t) {
  switch (t) {
  case GGUF_TT_UNKNOWN: return BRISK_TOKEN_ATTR_UNKNOWN;
  case GGUF_TT_CONTROL: return BRISK_TOKEN_ATTR_CONTROL;
  case GGUF_TT_USER_DEFINED: return BRISK_TOKEN_ATTR_USER_DEFINED;
  case GGUF_TT_UNUSED: return BRISK_TOKEN_ATTR_UNUSED;
  case GGUF_TT_BYTE: return BRISK_TOKEN_ATTR_BYTE;
  default: return BRISK_TOKEN_ATTR_NORMAL; /* NORMAL and UNDEFINED */
  }
}

static const struct {
  brisk_vocab_special which;
  const char *key;
} k_special_keys[] = {
    {BRISK_VOCAB_BOS, "tokenizer.ggml.bos_token_id"},
    {BRISK_VOCAB_EOS, "tokenizer.ggml.eos_token_id"},
    {BRISK_VOCAB_UNK, "tokenizer.ggml.unknown_token_id"},
    {BRISK_VOCAB_PAD, "tokenizer.ggml.padding_token_id"},
    {BRISK_VOCAB_EOT, "tokenizer.ggml.eot_token_id"},
    {BRISK_VOCAB_EOM, "tokenizer.ggml.eom_token_id"},
    {BRISK_VOCAB_SEP, "tokenizer.ggml.seperator_token_id"}, /* sic, as written by converters */
    {BRISK_VOCAB_MASK, "tokenizer.ggml.mask_token_id"},
    {BRISK_VOCAB_FIM_PRE, "tokenizer.ggml.prefix_token_id"}, /* deprecated names first */
    {BRISK_VOCAB_FIM_SUF, "tokenizer.ggml.suffix_token_id"},
    {BRISK_VOCAB_FIM_MID, "tokenizer.ggml.middle_token_id"},
    {BRISK_VOCAB_FIM_PRE, "tokenizer.ggml.fim_pre_token_id"},
    {BRISK_VOCAB_FIM_SUF, "tokenizer.ggml.fim_suf_token_id"},
    {BRISK_VOCAB_FIM_MID, "tokenizer.ggml.fim_mid_token_id"},
    {BRISK_VOCAB_FIM_PAD, "tokenizer.ggml.fim_pad_token_id"},
    {BRISK_VOCAB_FIM_REP, "tokenizer.ggml.fim_rep_token_id"},
    {BRISK_VOCAB_FIM_SEP, "tokenizer.ggml.fim_sep_token_id"},
};

/* An optional bool: BRISK_OK leaves *out untouched when absent. */
static brisk_status opt_bool(const brisk_gguf *g, const char *key, bool *out) {
  bool b;
  brisk_status st = brisk_gguf_get_bool(g, key, &b);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st == BRISK_OK) *out = b;
  return st;
}

/* A string array's kv index and length, checked. */
static brisk_status str_array(const brisk_gguf *g, const char *key, int64_t *idx, uint64_t *n) {
  brisk_gguf_type et;
  brisk_status st = brisk_gguf_get_arr(g, key, &et, n);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: key '%s' is missing", key);
  if (st != BRISK_OK) return st;
  if (et != BRISK_GGUF_STRING)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: key '%s' is an array of type %d, not strings",
                       key, (int)et);
  *idx = brisk_gguf_find_key(g, key);
  return BRISK_OK;
}

/* A numeric array of exactly n elements of type want, or absent (*data NULL). */
static brisk_status num_array(const brisk_gguf *g, const char *key, brisk_gguf_type want,
                              uint64_t n, const void **data) {
  brisk_gguf_type et;
  uint64_t len;
  *data = NULL;
  brisk_status st = brisk_gguf_get_arr(g, key, &et, &len);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st != BRISK_OK) return st;
  if (et != want || len != n)
    return brisk_error(BRISK_E_FORMAT,
                       "tokenizer: key '%s' is an array of %llu elements of type %d; expected "
                       "%llu of type %d",
                       key, (unsigned long long)len, (int)et, (unsigned long long)n, (int)want);
  *data = brisk_gguf_arr_data(g, brisk_gguf_find_key(g, key));
  return BRISK_OK;
}

/* The pre-tokenizer a BPE vocabulary names in tokenizer.ggml.pre, into
 * `name` (64 bytes). A missing name, or one brisk does not know, means the
 * 'default' regexes with a warning, as llama.cpp does for a missing one:
 * the model still tokenizes, though not always as it was trained. */
static brisk_status pre_tokenizer(const brisk_gguf *g, bool gemma4, char *name, brisk_pretok **pre,
                                  brisk_pretok_info *info) {
  brisk_gguf_str pn = {"default", 7};
  brisk_status st = gemma4 ? BRISK_OK : brisk_gguf_get_str(g, "tokenizer.ggml.pre", &pn);
  if (gemma4) {
    pn = (brisk_gguf_str){"gemma4", 6}; /* llama.cpp: the model name decides */
  } else if (st == BRISK_E_NOT_FOUND) {
    BRISK_WARN("tokenizer: no tokenizer.ggml.pre in the file; using the 'default' regexes");
    pn = (brisk_gguf_str){"default", 7};
  } else if (st != BRISK_OK) {
    return st;
  }
  bool ok = pn.len < 64 && !memchr(pn.ptr, 0, (size_t)pn.len);
  if (ok) {
    memcpy(name, pn.ptr, (size_t)pn.len);
    name[pn.len] = '\0';
    ok = brisk_pretok_known(name);
  }
  if (!ok) {
    char shown[65];
    size_t n = pn.len < 64 ? (size_t)pn.len : 64;
    for (size_t i = 0; i < n; i++)
      shown[i] = pn.ptr[i] >= 0x20 && pn.ptr[i] < 0x7f ? pn.ptr[i] : '?';
    shown[n] = '\0';
    BRISK_WARN("tokenizer: unknown pre-tokenizer '%s%s'; using the 'default' regexes, so "
               "words may be split unlike the model's own tokenizer",
               shown, pn.len > 64 ? "..." : "");
    snprintf(name, 64, "%s", shown);
  }
  st = brisk_pretok_create(pre);
  if (st == BRISK_OK) st = brisk_pretok_add_named(*pre, ok ? name : "default", info);
  return st;
}

/* Raw UTF-8 vocabularies fall back to <0xXX> tokens by their text, as
 * llama.cpp looks them up; converters do not always type them BYTE. */
static void mark_byte_tokens(const brisk_vocab_str *toks, uint16_t *attrs, uint64_t n) {
  static const char hex[] = "0123456789ABCDEF";
  for (uint64_t i = 0; i < n; i++) {
    const char *t = toks[i].ptr;
    if (toks[i].len != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>' ||
        attrs[i] != BRISK_TOKEN_ATTR_NORMAL)
      continue;
    if (memchr(hex, t[3], 16) && memchr(hex, t[4], 16)) attrs[i] = BRISK_TOKEN_ATTR_BYTE;
  }
}

/* ' ' -> U+2581 before pre-tokenization (llama.cpp's escape_whitespaces). */
static brisk_status escape_op(brisk_norm_op **ops, size_t *n) {
  brisk_norm_op *op = brisk_calloc(1, sizeof *op);
  if (op) op->from = brisk_malloc(2), op->to = brisk_malloc(4);
  if (!op || !op->from || !op->to) {
    brisk_norm_ops_free(op, op ? 1 : 0);
    return brisk_error_oom();
  }
  op->kind = BRISK_NORM_REPLACE;
  memcpy(op->from, " ", 2), op->from_len = 1;
  memcpy(op->to, "\xE2\x96\x81", 4), op->to_len = 3;
  *ops = op, *n = 1;
  return BRISK_OK;
}

brisk_status brisk_vocab_from_gguf(const brisk_gguf *g, brisk_vocab **out) {
  if (!g || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "vocab_from_gguf: NULL argument");
  brisk_gguf_str model;
  brisk_status st = brisk_gguf_get_str(g, "tokenizer.ggml.model", &model);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: key 'tokenizer.ggml.model' is missing");
  if (st != BRISK_OK) return st;
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  bool gemma4 = false;
  if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0) {
    d.type = BRISK_VOCAB_SPM;
  } else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0) {
    d.type = BRISK_VOCAB_BPE;
  } else if (model.len == 6 && memcmp(model.ptr, "gemma4", 6) == 0) {
    d.type = BRISK_VOCAB_BPE; /* BPE over U+2581-escaped text, pre "gemma4" (llama.cpp) */
    gemma4 = true;
  } else {
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tokenizer: tokenizer.ggml.model '%.*s' is not supported",
                       (int)(model.len > 64 ? 64 : model.len), model.ptr);
  }

  int64_t tok_idx;
  uint64_t n_tok;
  st = str_array(g, "tokenizer.ggml.tokens", &tok_idx, &n_tok);
  if (st != BRISK_OK) return st;
  if (n_tok == 0 || n_tok > (uint64_t)INT32_MAX / 2)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries",
                       (unsigned long long)n_tok);
  const void *scores_raw, *types_raw;
  st = num_array(g, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, n_tok, &scores_raw);
  if (st == BRISK_OK)
    st = num_array(g, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, n_tok, &types_raw);
  if (st != BRISK_OK) return st;

  brisk_vocab_str *toks = brisk_malloc(n_tok * sizeof *toks);
  float *scores = brisk_malloc(n_tok * sizeof *scores);
  uint16_t *attrs = brisk_malloc(n_tok * sizeof *attrs);
  brisk_vocab_str *ml = NULL, *mr = NULL;
  brisk_pretok *pre = NULL;
  brisk_norm_op *norm = NULL;
  size_t n_norm = 0;
  if (!toks || !scores || !attrs) {
    st = brisk_error_oom();
    goto done;
  }
  for (uint64_t i = 0; i < n_tok; i++) {
    brisk_gguf_str s = brisk_gguf_arr_str(g, tok_idx, i);
    toks[i].ptr = s.ptr, toks[i].len = (size_t)s.len;
    float sc = 0.0f;
    int32_t tt = GGUF_TT_NORMAL;
    if (scores_raw) memcpy(&sc, (const char *)scores_raw + 4 * i, 4);
    if (types_raw) memcpy(&tt, (const char *)types_raw + 4 * i, 4);
    scores[i] = sc;
    attrs[i] = attr_from_gguf(tt);
  }
  d.n_tokens = (uint32_t)n_tok;
  d.tokens = toks;
  d.scores = scores;
  d.attrs = attrs;

  brisk_pretok_info info = {0};
  char name[64]; /* the pre-tokenizer name, referenced by d until built */
  if (d.type == BRISK_VOCAB_SPM) {
    d.pre_name = "";
    d.special[BRISK_VOCAB_BOS] = 1, d.special[BRISK_VOCAB_EOS] = 2, d.special[BRISK_VOCAB_UNK] = 0;
    d.add_bos = true;
    d.add_space_prefix = true;
    d.escape_spaces = true;
    d.byte_fallback = true;
  } else {
    int64_t m_idx;
    uint64_t n_merges;
    st = str_array(g, "tokenizer.ggml.merges", &m_idx, &n_merges);
    if (st != BRISK_OK) goto done;
    if (n_merges > (1u << 30)) {
      st = brisk_error(BRISK_E_FORMAT, "tokenizer: tokenizer.ggml.merges has %llu entries",
                       (unsigned long long)n_merges);
      goto done;
    }
    ml = brisk_malloc((n_merges ? n_merges : 1) * sizeof *ml);
    mr = brisk_malloc((n_merges ? n_merges : 1) * sizeof *mr);
    if (!ml || !mr) {
      st = brisk_error_oom();
      goto done;
    }
    for (uint64_t i = 0; i < n_merges; i++) {
      brisk_gguf_str s = brisk_gguf_arr_str(g, m_idx, i);
      /* "left right", split at the first space after the first byte. */
      const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', (size_t)s.len - 1) : NULL;
      if (!sp) {
        ml[i] = mr[i] = (brisk_vocab_str){"", 0}; /* malformed: never applies */
        continue;
      }
      ml[i] = (brisk_vocab_str){s.ptr, (size_t)(sp - s.ptr)};
      mr[i] = (brisk_vocab_str){sp + 1, (size_t)(s.ptr + s.len - sp - 1)};
    }
    d.n_merges = (size_t)n_merges;
    d.merge_left = ml, d.merge_right = mr;

    st = pre_tokenizer(g, gemma4, name, &pre, &info);
    if (st != BRISK_OK) goto done;
    d.pre_name = name;
    d.byte_level = !info.raw_utf8;
    d.byte_fallback = info.raw_utf8; /* llama.cpp: <0xXX> tokens for what no token covers */
    d.escape_spaces = info.escape_spaces;
    d.ignore_merges = info.ignore_merges;
    d.clean_spaces = info.clean_spaces;
    d.add_bos = info.add_bos;
    d.add_sep = info.add_sep;
    d.newline_words = info.newline_words;
    if (info.raw_utf8) mark_byte_tokens(toks, attrs, n_tok);
    if (info.escape_spaces) {
      st = escape_op(&norm, &n_norm);
      if (st != BRISK_OK) goto done;
    }
  }

  for (size_t i = 0; i < sizeof k_special_keys / sizeof k_special_keys[0]; i++) {
    uint32_t id;
    brisk_status s2 = brisk_gguf_get_u32(g, k_special_keys[i].key, &id);
    if (s2 == BRISK_E_NOT_FOUND) continue;
    if (s2 != BRISK_OK) {
      st = s2;
      goto done;
    }
    if (id >= n_tok) { /* as llama.cpp: warn and keep the default */
      BRISK_WARN("tokenizer: %s = %u is not in the vocabulary of %llu tokens; ignored",
                 k_special_keys[i].key, id, (unsigned long long)n_tok);
      continue;
    }
    d.special[k_special_keys[i].which] = (int32_t)id;
  }
  if (info.no_bos && brisk_gguf_find_key(g, "tokenizer.ggml.bos_token_id") < 0)
    d.special[BRISK_VOCAB_BOS] = -1;
  st = opt_bool(g, "tokenizer.ggml.add_bos_token", &d.add_bos);
  if (st == BRISK_OK) st = opt_bool(g, "tokenizer.ggml.add_eos_token", &d.add_eos);
  if (st == BRISK_OK) st = opt_bool(g, "tokenizer.ggml.add_sep_token", &d.add_sep);
  if (st == BRISK_OK && info.force_bos && !d.add_bos) {
    BRISK_WARN("tokenizer: tokenizer.ggml.add_bos_token = false overridden to true for '%s' "
               "(as llama.cpp does for Gemma 4)",
               name);
    d.add_bos = true;
  }
  if (st == BRISK_OK && d.type == BRISK_VOCAB_SPM)
    st = opt_bool(g, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix);
  if (st != BRISK_OK) goto done;
  d.strip_leading_space = d.add_space_prefix;

  st = brisk_vocab_build(&d, pre, norm, n_norm, out);
  pre = NULL, norm = NULL; /* owned by the vocab (or freed) now */
done:
  brisk_pretok_free(pre);
  brisk_norm_ops_free(norm, n_norm);
  brisk_free(toks);
  brisk_free(scores);
  brisk_free(attrs);
  brisk_free(ml);
  brisk_free(mr);
  return st;
}

brisk_status brisk_vocab_from_gguf_file(const char *path, brisk_vocab **out) {
  if (!path || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "vocab_from_gguf_file: NULL argument");
  brisk_gguf *g = NULL;
  brisk_status st = brisk_gguf_open(path, &g);
  if (st != BRISK_OK) return st;
  st = brisk_vocab_from_gguf(g, out);
  brisk_gguf_close(g);
  return st;
}
