/* A vocabulary as the mask walk needs it: every token with text, sorted by
 * its bytes, with the prefix it shares with the one before. Control tokens
 * (no text) are never allowed by a constraint, except end-of-generation
 * tokens, which are allowed exactly when the text is a whole match. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
  uint32_t off, len;
  int32_t id;
} entry;

static int cmp_entry(const void *pa, const void *pb, void *ctx) {
  const entry *a = pa, *b = pb;
  const char *bytes = ctx;
  uint32_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(bytes + a->off, bytes + b->off, n);
  if (c) return c;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

void gr_vocab_release(gr_vocab *v) {
  brisk_free(v->id);
  brisk_free(v->off);
  brisk_free(v->lcp);
  brisk_free(v->bytes);
  brisk_free(v->eog);
  brisk_free(v->is_eog);
  brisk_free(v->t_byte);
  brisk_free(v->t_depth);
  brisk_free(v->t_end);
  brisk_free(v->t_ent);
  memset(v, 0, sizeof *v);
}

/* The byte trie over the sorted texts, in preorder: entry i adds the nodes
 * of its bytes past lcp[i], so node x is made by entry t_ent[x] and its
 * subtree is nodes [x, t_end[x]), the entries [t_ent[x], t_ent[t_end[x]])
 * (n_sorted past the last node). A walk that finds a node's byte not
 * allowed skips its whole subtree in one step. */
static brisk_status build_trie(gr_vocab *v) {
  size_t cap = (size_t)v->off[v->n_sorted] + 1;
  uint32_t *open = brisk_malloc(((size_t)v->max_len + 1) * sizeof *open);
  v->t_byte = brisk_malloc(cap);
  v->t_depth = brisk_malloc(cap * sizeof *v->t_depth);
  v->t_end = brisk_malloc(cap * sizeof *v->t_end);
  v->t_ent = brisk_malloc(cap * sizeof *v->t_ent);
  if (!open || !v->t_byte || !v->t_depth || !v->t_end || !v->t_ent) {
    brisk_free(open);
    return brisk_error_oom();
  }
  uint32_t sp = 0, n = 0;
  for (int32_t i = 0; i < v->n_sorted; i++) {
    uint32_t l = v->lcp[i], len = v->off[i + 1] - v->off[i];
    while (sp > l) v->t_end[open[--sp]] = n;
    for (uint32_t d = l; d < len; d++) {
      v->t_byte[n] = (uint8_t)v->bytes[v->off[i] + d];
      v->t_depth[n] = d;
      v->t_ent[n] = i;
      open[sp++] = n++;
    }
  }
  while (sp > 0) v->t_end[open[--sp]] = n;
  v->t_ent[n] = v->n_sorted;
  v->n_tnodes = n;
  brisk_free(open);
  return BRISK_OK;
}

/* Sorts the n entries over `bytes` (taken over) into v. */
static brisk_status finish(gr_vocab *v, entry *e, int32_t n, char *bytes, size_t n_bytes) {
  qsort_r(e, (size_t)n, sizeof *e, cmp_entry, bytes);
  v->id = brisk_malloc(((size_t)n + 1) * sizeof *v->id);
  v->off = brisk_malloc(((size_t)n + 1) * sizeof *v->off);
  v->lcp = brisk_malloc(((size_t)n + 1) * sizeof *v->lcp);
  v->bytes = brisk_malloc(n_bytes ? n_bytes : 1);
  if (!v->id || !v->off || !v->lcp || !v->bytes) {
    brisk_free(bytes);
    return brisk_error_oom();
  }
  uint32_t k = 0;
  for (int32_t i = 0; i < n; i++) {
    v->id[i] = e[i].id;
    v->off[i] = k;
    memcpy(v->bytes + k, bytes + e[i].off, e[i].len);
    uint32_t l = 0;
    if (i > 0) {
      uint32_t m = e[i].len < e[i - 1].len ? e[i].len : e[i - 1].len;
      const char *a = bytes + e[i].off, *b = bytes + e[i - 1].off;
      while (l < m && a[l] == b[l]) l++;
    }
    v->lcp[i] = l;
    if (e[i].len > v->max_len) v->max_len = e[i].len;
    k += e[i].len;
  }
  v->off[n] = k;
  v->n_sorted = n;
  brisk_free(bytes);
  return build_trie(v);
}

static brisk_status set_eog(gr_vocab *v, const int32_t *eog, int32_t n_eog) {
  v->is_eog = brisk_calloc((size_t)v->n_vocab, 1);
  v->eog = brisk_malloc(((size_t)n_eog + 1) * sizeof *v->eog);
  if (!v->is_eog || !v->eog) return brisk_error_oom();
  for (int32_t i = 0; i < n_eog; i++) {
    if (eog[i] < 0 || eog[i] >= v->n_vocab || v->is_eog[eog[i]]) continue;
    v->is_eog[eog[i]] = 1;
    v->eog[v->n_eog++] = eog[i];
  }
  return BRISK_OK;
}

brisk_status gr_vocab_build_texts(int32_t n_vocab, const char *const *texts, const uint32_t *len,
                                  const int32_t *eog, int32_t n_eog, gr_vocab *v) {
  memset(v, 0, sizeof *v);
  v->n_vocab = n_vocab;
  brisk_status st = set_eog(v, eog, n_eog);
  if (st) goto fail;
  size_t total = 0;
  for (int32_t t = 0; t < n_vocab; t++)
    if (!v->is_eog[t] && brisk_add_overflow_size(total, len[t], &total)) {
      st = brisk_error(BRISK_E_INVALID_ARGUMENT, "grammar: the vocabulary's texts are too long");
      goto fail;
    }
  if (total > UINT32_MAX) {
    st = brisk_error(BRISK_E_INVALID_ARGUMENT, "grammar: the vocabulary's texts are too long");
    goto fail;
  }
  entry *e = brisk_malloc(((size_t)n_vocab + 1) * sizeof *e);
  char *bytes = brisk_malloc(total ? total : 1);
  if (!e || !bytes) {
    brisk_free(e);
    brisk_free(bytes);
    st = brisk_error_oom();
    goto fail;
  }
  int32_t n = 0;
  uint32_t k = 0;
  for (int32_t t = 0; t < n_vocab; t++) {
    if (v->is_eog[t] || len[t] == 0) continue;
    memcpy(bytes + k, texts[t], len[t]);
    e[n++] = (entry){k, len[t], t};
    k += len[t];
  }
  st = finish(v, e, n, bytes, k);
  brisk_free(e);
  if (st) goto fail;
  return BRISK_OK;
fail:
  gr_vocab_release(v);
  return st;
}

brisk_status gr_vocab_build(const brisk_model *model, gr_vocab *v) {
  memset(v, 0, sizeof *v);
  int32_t n_vocab = brisk_model_n_vocab(model);
  if (n_vocab < 1 || !brisk_model_tokenizer(model)[0])
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "grammar: a constraint needs a model with a vocabulary (texts of tokens)");
  v->n_vocab = n_vocab;
  brisk_status st = BRISK_OK;
  int32_t *eog = brisk_malloc((size_t)n_vocab * sizeof *eog);
  entry *e = brisk_malloc((size_t)n_vocab * sizeof *e);
  size_t cap = (size_t)n_vocab * 8, n_bytes = 0;
  char *bytes = brisk_malloc(cap);
  int32_t n_eog = 0, n = 0;
  if (!eog || !e || !bytes) goto oom;
  for (int32_t t = 0; t < n_vocab; t++) {
    if (brisk_token_is_eog(model, t)) {
      eog[n_eog++] = t;
      continue;
    }
    size_t len = 0;
    for (;;) {
      st = brisk_token_to_piece(model, t, 0, bytes + n_bytes, cap - n_bytes, &len);
      if (st != BRISK_E_BUFFER_TOO_SMALL) break;
      if (brisk_grow((void **)&bytes, &cap, n_bytes + len, 1)) goto oom;
    }
    if (st) goto fail;
    if (len == 0) continue;
    if (n_bytes + len > UINT32_MAX) {
      st = brisk_error(BRISK_E_UNSUPPORTED, "grammar: the vocabulary's texts are too long");
      goto fail;
    }
    e[n++] = (entry){(uint32_t)n_bytes, (uint32_t)len, t};
    n_bytes += len;
  }
  if ((st = set_eog(v, eog, n_eog))) goto fail;
  st = finish(v, e, n, bytes, n_bytes);
  bytes = NULL;
  if (st) goto fail;
  brisk_free(eog);
  brisk_free(e);
  return BRISK_OK;
oom:
  st = brisk_error_oom();
fail:
  brisk_free(eog);
  brisk_free(e);
  brisk_free(bytes);
  gr_vocab_release(v);
  return st;
}
