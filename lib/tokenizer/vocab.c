#include "tokenizer/vocab_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "tokenizer/utf8.h"

#include <stdio.h>
#include <string.h>

void brisk_vocab_desc_init(brisk_vocab_desc *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < BRISK_VOCAB_SPECIAL_COUNT; i++) d->special[i] = -1;
}

void brisk_norm_ops_free(brisk_norm_op *ops, size_t n) {
  if (!ops) return;
  for (size_t i = 0; i < n; i++) {
    brisk_free(ops[i].from);
    brisk_free(ops[i].to);
  }
  brisk_free(ops);
}

void brisk_vocab_free(brisk_vocab *v) {
  if (!v) return;
  brisk_strtab_free(&v->strs);
  brisk_free(v->scores);
  brisk_free(v->attrs);
  brisk_free(v->eog);
  brisk_free(v->pieces);
  brisk_free(v->piece_off);
  brisk_free(v->piece_len);
  brisk_u64map_free(&v->pairs);
  brisk_free(v->pair_cost);
  brisk_free(v->pair_result);
  brisk_u64map_free(&v->junctions);
  brisk_pretok_free(v->pre);
  brisk_norm_ops_free(v->norm, v->n_norm);
  brisk_free(v->trie);
  brisk_free(v);
}

static const char k_spm_space[] = "\xE2\x96\x81"; /* U+2581 */

/* <0xXX> with two upper- or lower-case hex digits: the byte, else -1. */
static int parse_byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Appends the rendered piece of token id to the pieces buffer. */
static brisk_status render_piece(brisk_vocab *v, int32_t id, size_t *cap) {
  const char *t = brisk_strtab_str(&v->strs, id);
  size_t n = v->strs.len[id];
  uint16_t a = v->attrs[id];
  size_t start = v->piece_off[id];
  /* A piece is never longer than its text (U+2581 and byte-level code points
   * shrink; other text is copied). */
  if (brisk_grow((void **)&v->pieces, cap, start + n + 1, 1) != 0) return brisk_error_oom();
  char *o = v->pieces + start;
  size_t k = 0;
  if (a & (BRISK_TOKEN_ATTR_CONTROL | BRISK_TOKEN_ATTR_UNKNOWN | BRISK_TOKEN_ATTR_USER_DEFINED)) {
    memcpy(o, t, n), k = n;
  } else if ((a & BRISK_TOKEN_ATTR_BYTE) && parse_byte_token(t, n) >= 0) {
    o[k++] = (char)parse_byte_token(t, n);
  } else if (v->byte_level) {
    for (size_t i = 0; i < n;) {
      uint32_t cp;
      size_t u = brisk_utf8_seq((const unsigned char *)t + i, n - i, &cp);
      int b = u ? brisk_cp_to_byte(cp) : -1;
      if (b >= 0) {
        o[k++] = (char)b;
      } else { /* not a byte-level code point: keep it as it is */
        size_t w = u ? u : 1;
        memcpy(o + k, t + i, w), k += w;
        u = w;
      }
      i += u;
    }
  } else if (v->escape_spaces) {
    for (size_t i = 0; i < n;) {
      if (i + 3 <= n && memcmp(t + i, k_spm_space, 3) == 0) {
        o[k++] = ' ';
        i += 3;
      } else {
        o[k++] = t[i++];
      }
    }
  } else {
    memcpy(o, t, n), k = n;
  }
  v->piece_len[id] = (uint32_t)k;
  if (id + 1 < v->n_tokens) v->piece_off[id + 1] = start + k;
  return BRISK_OK;
}

static brisk_status build_pieces(brisk_vocab *v) {
  size_t cap = 0;
  v->piece_off = brisk_calloc((size_t)v->n_tokens, sizeof *v->piece_off);
  v->piece_len = brisk_calloc((size_t)v->n_tokens, sizeof *v->piece_len);
  if (!v->piece_off || !v->piece_len) return brisk_error_oom();
  for (int32_t id = 0; id < v->n_tokens; id++) {
    brisk_status st = render_piece(v, id, &cap);
    if (st != BRISK_OK) return st;
  }
  return BRISK_OK;
}

static brisk_status check_special(const brisk_vocab_desc *d, int32_t *special) {
  static const char *const names[BRISK_VOCAB_SPECIAL_COUNT] = {
      "bos",  "eos",     "unknown", "padding", "eot",     "eom",     "separator",
      "mask", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"};
  for (int i = 0; i < BRISK_VOCAB_SPECIAL_COUNT; i++) {
    int32_t id = d->special[i];
    if (id < -1 || (id >= 0 && (uint32_t)id >= d->n_tokens)) {
      /* As llama.cpp: a bad id is ignored with a warning, not fatal. */
      BRISK_WARN("tokenizer: %s token id %d is not in the vocabulary of %u tokens; ignored",
                 names[i], (int)id, d->n_tokens);
      id = -1;
    }
    special[i] = id;
  }
  return BRISK_OK;
}

brisk_status brisk_vocab_build(const brisk_vocab_desc *d, brisk_pretok *pre, brisk_norm_op *norm,
                               size_t n_norm, brisk_vocab **out) {
  brisk_vocab *v = brisk_calloc(1, sizeof *v);
  if (!v) {
    brisk_pretok_free(pre);
    brisk_norm_ops_free(norm, n_norm);
    return brisk_error_oom();
  }
  v->pre = pre;
  v->norm = norm;
  v->n_norm = n_norm;
  brisk_status st = BRISK_OK;
  if (d->n_tokens == 0 || d->n_tokens > (uint32_t)INT32_MAX / 2) {
    st = brisk_error(BRISK_E_FORMAT, "tokenizer: vocabulary of %u tokens", d->n_tokens);
    goto fail;
  }
  v->type = d->type;
  snprintf(v->pre_name, sizeof v->pre_name, "%s", d->pre_name ? d->pre_name : "");
  v->n_tokens = (int32_t)d->n_tokens;
  v->add_bos = d->add_bos, v->add_eos = d->add_eos;
  v->add_space_prefix = d->add_space_prefix;
  v->strip_leading_space = d->strip_leading_space;
  v->escape_spaces = d->escape_spaces;
  v->byte_level = d->byte_level;
  v->byte_fallback = d->byte_fallback;
  v->ignore_merges = d->ignore_merges;
  v->clean_spaces = d->clean_spaces;
  v->fuse_unk = d->fuse_unk;
  v->add_sep = d->add_sep;
  v->newline_words = d->newline_words;
  check_special(d, v->special);

  brisk_strtab_init(&v->strs);
  brisk_u64map_init(&v->pairs);
  brisk_u64map_init(&v->junctions);
  v->scores = brisk_calloc(d->n_tokens, sizeof *v->scores);
  v->attrs = brisk_calloc(d->n_tokens, sizeof *v->attrs);
  v->eog = brisk_calloc(d->n_tokens, 1);
  if (!v->scores || !v->attrs || !v->eog) {
    st = brisk_error_oom();
    goto fail;
  }
  for (int i = 0; i < 256; i++) v->byte_tok[i] = -1, v->bl_unit[i] = -1;
  v->space_unit = -1;
  for (uint32_t i = 0; i < d->n_tokens; i++) {
    const brisk_vocab_str *t = &d->tokens[i];
    int32_t id;
    /* Bounds what one token adds to any text made from tokens
     * (detokenizing, the engine's events, stop-string hold-back). */
    if (t->len > BRISK_VOCAB_MAX_TOKEN_BYTES) {
      st = brisk_error(BRISK_E_FORMAT, "tokenizer: token %u is %zu bytes long; the limit is %d", i,
                       t->len, BRISK_VOCAB_MAX_TOKEN_BYTES);
      goto fail;
    }
    st = brisk_strtab_append(&v->strs, t->ptr, t->len, &id);
    if (st != BRISK_OK) goto fail;
    v->scores[i] = d->scores ? d->scores[i] : 0.0f;
    v->attrs[i] = d->attrs ? d->attrs[i] : BRISK_TOKEN_ATTR_NORMAL;
    if (v->attrs[i] == 0) v->attrs[i] = BRISK_TOKEN_ATTR_NORMAL;
    if (t->len > v->max_token_len) v->max_token_len = (uint32_t)t->len;
    int b = parse_byte_token(t->ptr, t->len);
    if (b >= 0 && (v->attrs[i] & BRISK_TOKEN_ATTR_BYTE)) v->byte_tok[b] = (int32_t)i;
  }
  /* Tokens whose texts repeat: lookups find the last one (as llama.cpp). */

  st = build_pieces(v);
  if (st == BRISK_OK) st = brisk_vocab_build_merges(v, d);
  if (st == BRISK_OK) st = brisk_vocab_build_trie(v);
  if (st != BRISK_OK) goto fail;
  brisk_vocab_mark_eog(v);
  *out = v;
  return BRISK_OK;
fail:
  brisk_vocab_free(v);
  return st;
}

void brisk_vocab_mark_eog(brisk_vocab *v) {
  static const char *const k_eog_texts[] = {
      "<|eot_id|>",      "<|im_end|>",         "<|end|>", "<end_of_turn>",
      "<|endoftext|>",   "<|eom_id|>",         "<EOT>",   "_<EOT>",
      "<|end_of_text|>", "<end_of_utterance>", NULL};
  memset(v->eog, 0, (size_t)v->n_tokens);
  const int which[] = {BRISK_VOCAB_EOS,     BRISK_VOCAB_EOT,     BRISK_VOCAB_EOM,
                       BRISK_VOCAB_FIM_PAD, BRISK_VOCAB_FIM_REP, BRISK_VOCAB_FIM_SEP};
  for (size_t i = 0; i < sizeof which / sizeof which[0]; i++)
    if (v->special[which[i]] >= 0) v->eog[v->special[which[i]]] = 1;
  for (int i = 0; k_eog_texts[i]; i++) {
    int32_t id = brisk_strtab_find(&v->strs, k_eog_texts[i], strlen(k_eog_texts[i]));
    if (id >= 0 && id < v->n_tokens && (v->attrs[id] & BRISK_TOKEN_ATTR_CONTROL)) v->eog[id] = 1;
  }
}

brisk_status brisk_vocab_set_special(brisk_vocab *v, brisk_vocab_special which, int32_t id) {
  if (!v || (int)which < 0 || which >= BRISK_VOCAB_SPECIAL_COUNT)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "tokenizer: bad special token kind %d",
                       (int)which);
  if (id < -1 || id >= v->n_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "tokenizer: special token id %d out of range (vocabulary of %d)", (int)id,
                       (int)v->n_tokens);
  v->special[which] = id;
  brisk_vocab_mark_eog(v);
  return BRISK_OK;
}

void brisk_vocab_set_add_special(brisk_vocab *v, int add_bos, int add_eos) {
  if (!v) return;
  if (add_bos >= 0) v->add_bos = add_bos != 0;
  if (add_eos >= 0) v->add_eos = add_eos != 0;
}

brisk_vocab_type brisk_vocab_get_type(const brisk_vocab *v) { return v->type; }
int32_t brisk_vocab_n_tokens(const brisk_vocab *v) { return v->n_tokens; }
const char *brisk_vocab_pre_name(const brisk_vocab *v) { return v->pre_name; }

int32_t brisk_vocab_special_id(const brisk_vocab *v, brisk_vocab_special which) {
  if ((int)which < 0 || which >= BRISK_VOCAB_SPECIAL_COUNT) return -1;
  return v->special[which];
}

bool brisk_vocab_adds_bos(const brisk_vocab *v) {
  return v->add_bos && v->special[BRISK_VOCAB_BOS] >= 0;
}
bool brisk_vocab_adds_eos(const brisk_vocab *v) {
  return v->add_eos && v->special[BRISK_VOCAB_EOS] >= 0;
}

bool brisk_vocab_adds_sep(const brisk_vocab *v) {
  return v->add_sep && v->special[BRISK_VOCAB_SEP] >= 0;
}
bool brisk_vocab_adds_space_prefix(const brisk_vocab *v) { return v->add_space_prefix; }

bool brisk_vocab_is_eog(const brisk_vocab *v, int32_t id) {
  return id >= 0 && id < v->n_tokens && v->eog[id];
}

uint32_t brisk_vocab_token_attr(const brisk_vocab *v, int32_t id) {
  return id >= 0 && id < v->n_tokens ? v->attrs[id] : 0;
}

const char *brisk_vocab_token_text(const brisk_vocab *v, int32_t id, size_t *len) {
  if (id < 0 || id >= v->n_tokens) return NULL;
  if (len) *len = v->strs.len[id];
  return brisk_strtab_str(&v->strs, id);
}

float brisk_vocab_token_score(const brisk_vocab *v, int32_t id) {
  return id >= 0 && id < v->n_tokens ? v->scores[id] : 0.0f;
}

int32_t brisk_vocab_find(const brisk_vocab *v, const char *text, size_t len) {
  if (!text && len) return -1;
  int32_t id = brisk_strtab_find(&v->strs, text ? text : "", len);
  return id < v->n_tokens ? id : -1;
}
