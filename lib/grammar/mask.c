/* Token masks: which tokens a state allows, as a bitset over the
 * vocabulary, cached per state.
 *
 * A miss walks the sorted vocabulary once: entry i shares lcp[i] bytes with
 * entry i - 1, so the states after those bytes are reused and only the rest
 * of its bytes are matched; when a prefix dies, every following entry that
 * shares it is skipped without matching. A hit is a hash lookup: the
 * matcher interns parse stacks, so a state is a short array of node ids
 * (plus the bytes of an unfinished character) and equal states have equal
 * keys. Generation revisits a small number of states (inside a string, after
 * a comma, ...), so after warm-up most steps are hits. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

/* Mask cache budget; cleared when full. */
#define GR_CACHE_BYTES (16u << 20)

static brisk_status init_common(gr_masker *k) {
  k->n_words = (k->v.n_vocab + 31) / 32;
  size_t per = (size_t)k->n_words * 4;
  size_t cap = GR_CACHE_BYTES / per;
  if (cap < 16) cap = 16;
  if (cap > 1 << 16) cap = 1 << 16;
  k->cap_entries = cap;
  k->table_cap = 1;
  while (k->table_cap < 2 * cap) k->table_cap *= 2;
  k->keys = brisk_calloc(k->table_cap, sizeof *k->keys);
  k->key_entry = brisk_calloc(k->table_cap, sizeof *k->key_entry);
  k->key_set = brisk_calloc(cap, sizeof *k->key_set);
  k->key_n = brisk_calloc(cap, sizeof *k->key_n);
  k->n_allowed = brisk_calloc(cap, sizeof *k->n_allowed);
  /* Masks are allocated as entries are made, in chunks of `masks`. */
  k->masks = NULL;
  size_t depth = (size_t)k->v.max_len + 2;
  k->d_off = brisk_calloc(depth, sizeof *k->d_off);
  k->d_n = brisk_calloc(depth, sizeof *k->d_n);
  k->d_utf8 = brisk_calloc(depth, sizeof *k->d_utf8);
  if (!k->keys || !k->key_entry || !k->key_set || !k->key_n || !k->n_allowed || !k->d_off ||
      !k->d_n || !k->d_utf8)
    return brisk_error_oom();
  return BRISK_OK;
}

brisk_status gr_masker_init_vocab(gr_masker *k, const brisk_grammar *g, gr_vocab *v) {
  memset(k, 0, sizeof *k);
  k->v = *v;
  memset(v, 0, sizeof *v);
  brisk_status st;
  if ((st = gr_matcher_init(&k->m, g)) || (st = init_common(k))) {
    gr_masker_release(k);
    return st;
  }
  return BRISK_OK;
}

brisk_status gr_masker_init(gr_masker *k, const brisk_grammar *g, const brisk_model *model) {
  gr_vocab v;
  brisk_status st = gr_vocab_build(model, &v);
  if (st) {
    memset(k, 0, sizeof *k);
    return st;
  }
  return gr_masker_init_vocab(k, g, &v);
}

void gr_masker_release(gr_masker *k) {
  gr_matcher_release(&k->m);
  gr_vocab_release(&k->v);
  brisk_free(k->keys);
  brisk_free(k->key_entry);
  brisk_free(k->key_set);
  brisk_free(k->key_n);
  brisk_free(k->key_sets);
  brisk_free(k->masks);
  brisk_free(k->n_allowed);
  brisk_free(k->pool);
  brisk_free(k->d_off);
  brisk_free(k->d_n);
  brisk_free(k->d_utf8);
  brisk_free(k->tok_entry);
  gr_dfa_release(&k->dfa);
  memset(k, 0, sizeof *k);
}

static int ensure_cap(gr_state *s, int n) {
  if (n <= s->cap) return 0;
  int cap = s->cap ? s->cap : 8;
  while (cap < n) cap *= 2;
  int32_t *p = brisk_realloc(s->set, (size_t)cap * sizeof *p);
  if (!p) return -1;
  s->set = p;
  s->cap = cap;
  return 0;
}

brisk_status gr_state_init(gr_masker *k, gr_state *s) {
  memset(s, 0, sizeof *s);
  if (ensure_cap(s, (int)k->m.n_initial + 1)) return brisk_error_oom();
  gr_state_reset(k, s);
  return BRISK_OK;
}

void gr_state_release(gr_state *s) {
  brisk_free(s->set);
  memset(s, 0, sizeof *s);
}

void gr_state_reset(gr_masker *k, gr_state *s) {
  memcpy(s->set, k->m.initial, k->m.n_initial * sizeof *s->set);
  s->n = (int)k->m.n_initial;
  memset(&s->utf8, 0, sizeof s->utf8);
  s->ended = 0;
}

brisk_status gr_state_copy(gr_state *dst, const gr_state *src) {
  if (ensure_cap(dst, src->n + 1)) return brisk_error_oom();
  memcpy(dst->set, src->set, (size_t)src->n * sizeof *dst->set);
  dst->n = src->n;
  dst->utf8 = src->utf8;
  dst->ended = src->ended;
  return BRISK_OK;
}

int gr_state_accepting(const gr_state *s) {
  return !s->ended && s->utf8.rem == 0 && s->n > 0 && s->set[0] == 0;
}

/* Working room for walk sets: depth d's set goes at pool[off]. */
static int pool_room(gr_masker *k, size_t need) {
  if (need <= k->cap_pool) return 0;
  if (brisk_grow((void **)&k->pool, &k->cap_pool, need, sizeof *k->pool)) {
    if (!k->m.err) k->m.err = brisk_error_oom();
    return -1;
  }
  return 0;
}

/* Takes byte b from the set in[0, n) with decoder *u into out; returns the
 * new count (0: dead), or -1 on failure. */
int gr_masker_step_byte(gr_masker *k, const int32_t *in, int n, gr_utf8 *u, uint8_t b,
                        int32_t *out) {
  uint32_t cp, lo, hi;
  int r = gr_utf8_step(u, b, &cp, &lo, &hi);
  if (r < 0) return 0;
  if (r == 1) return gr_advance(&k->m, in, n, cp, out);
  if (!gr_can_take(&k->m, in, n, lo, hi)) return 0;
  memcpy(out, in, (size_t)n * sizeof *out);
  return n;
}

int gr_state_feed(gr_masker *k, gr_state *s, const char *bytes, size_t len) {
  if (s->ended) return len == 0;
  int32_t *a = NULL, *b = NULL;
  if (pool_room(k, 2 * (size_t)GR_MAX_SET)) return -1;
  a = k->pool;
  b = k->pool + GR_MAX_SET;
  memcpy(a, s->set, (size_t)s->n * sizeof *a);
  int n = s->n;
  gr_utf8 u = s->utf8;
  for (size_t i = 0; i < len; i++) {
    n = gr_masker_step_byte(k, a, n, &u, (uint8_t)bytes[i], b);
    if (n <= 0) return n;
    int32_t *t = a;
    a = b;
    b = t;
  }
  if (ensure_cap(s, n)) {
    if (!k->m.err) k->m.err = brisk_error_oom();
    return -1;
  }
  memcpy(s->set, a, (size_t)n * sizeof *a);
  s->n = n;
  s->utf8 = u;
  return 1;
}

static uint64_t state_key(const gr_state *s) {
  uint64_t h = brisk_hash64(s->set, (size_t)s->n * sizeof *s->set, 0x51ED);
  h ^= brisk_hash64(s->utf8.byte, s->utf8.n, s->utf8.n + 1u) * 31;
  return h | 1; /* 0 marks an empty slot */
}

static int same_key(const gr_masker *k, int32_t e, const gr_state *s) {
  int32_t n = k->key_n[e];
  const int32_t *x = k->key_sets + k->key_set[e];
  if (n != s->n + 1 + s->utf8.n) return 0;
  if (memcmp(x, s->set, (size_t)s->n * sizeof *x)) return 0;
  if (x[s->n] != s->utf8.n) return 0;
  for (int i = 0; i < s->utf8.n; i++)
    if (x[s->n + 1 + i] != s->utf8.byte[i]) return 0;
  return 1;
}

static void clear_cache(gr_masker *k) {
  memset(k->keys, 0, k->table_cap * sizeof *k->keys);
  k->n_entries = 0;
  k->n_key_sets = 0;
}

/* Fills mask[] for state s by walking the sorted vocabulary; the count of
 * allowed tokens, or -1. */
static int32_t walk(gr_masker *k, const gr_state *s, uint32_t *mask) {
  const gr_vocab *v = &k->v;
  memset(mask, 0, (size_t)k->n_words * sizeof *mask);
  int32_t allowed = 0;
  if (s->ended) goto eog;
  /* States per depth: k->d_off[d] is the automaton state after d bytes. */
  if (pool_room(k, 2 * (size_t)GR_MAX_SET)) return -1;
  gr_dfa_clear_if_full(&k->dfa);
  int32_t ws0 = gr_dfa_intern(&k->dfa, s->set, (uint32_t)s->n, &s->utf8);
  if (ws0 < 0) return -1;
  k->d_off[0] = (uint32_t)ws0;
  uint32_t have = 0;          /* states valid for depths 0 .. have of the last entry */
  uint32_t dead = UINT32_MAX; /* the last entry's prefix of this length is dead */
  for (int32_t i = 0; i < v->n_sorted; i++) {
    uint32_t lcp = v->lcp[i];
    if (lcp >= dead) continue; /* shares the dead prefix */
    dead = UINT32_MAX;
    if (have > lcp) have = lcp;
    const uint8_t *bytes = (const uint8_t *)v->bytes + v->off[i];
    uint32_t len = v->off[i + 1] - v->off[i];
    while (have < len) {
      int32_t next = gr_dfa_step(k, (int32_t)k->d_off[have], bytes[have]);
      if (next == -2) return -1;
      if (next < 0) {
        dead = have + 1;
        break;
      }
      k->d_off[++have] = (uint32_t)next;
    }
    if (have == len && dead == UINT32_MAX) {
      int32_t t = v->id[i];
      mask[t / 32] |= 1u << (t % 32);
      allowed++;
    }
  }
  if (!gr_state_accepting(s)) return allowed;
eog:
  for (int32_t j = 0; j < v->n_eog; j++) {
    int32_t t = v->eog[j];
    mask[t / 32] |= 1u << (t % 32);
    allowed++;
  }
  return allowed;
}

brisk_status gr_mask(gr_masker *k, const gr_state *s, const uint32_t **out, int32_t *n_allowed) {
  uint64_t h = state_key(s);
  size_t slot = (size_t)h & (k->table_cap - 1);
  for (; k->keys[slot]; slot = (slot + 1) & (k->table_cap - 1)) {
    int32_t e = k->key_entry[slot];
    if (k->keys[slot] == h && same_key(k, e, s)) {
      k->n_hits++;
      *out = k->masks + (size_t)e * (size_t)k->n_words;
      *n_allowed = k->n_allowed[e];
      return BRISK_OK;
    }
  }
  k->n_misses++;
  if (k->n_entries == k->cap_entries) {
    clear_cache(k);
    slot = (size_t)h & (k->table_cap - 1);
  }
  size_t e = k->n_entries;
  if (e == k->masks_cap) { /* doubling, up to the budget */
    size_t cap = k->masks_cap ? 2 * k->masks_cap : 8;
    if (cap > k->cap_entries) cap = k->cap_entries;
    uint32_t *m = brisk_realloc(k->masks, cap * (size_t)k->n_words * sizeof *m);
    if (!m) return brisk_error_oom();
    k->masks = m;
    k->masks_cap = cap;
  }
  size_t key_len = (size_t)s->n + 1 + s->utf8.n;
  if (brisk_grow((void **)&k->key_sets, &k->cap_key_sets, k->n_key_sets + key_len,
                 sizeof *k->key_sets))
    return brisk_error_oom();
  uint32_t *mask = k->masks + e * (size_t)k->n_words;
  k->m.err = BRISK_OK;
  int32_t allowed = walk(k, s, mask);
  if (allowed < 0) {
    brisk_status st = k->m.err ? k->m.err : brisk_error_oom();
    k->m.err = BRISK_OK;
    return st;
  }
  int32_t *key = k->key_sets + k->n_key_sets;
  memcpy(key, s->set, (size_t)s->n * sizeof *key);
  key[s->n] = s->utf8.n;
  for (int i = 0; i < s->utf8.n; i++) key[s->n + 1 + i] = s->utf8.byte[i];
  k->key_set[e] = (int32_t)k->n_key_sets;
  k->key_n[e] = (int32_t)key_len;
  k->n_key_sets += key_len;
  k->n_allowed[e] = allowed;
  k->keys[slot] = h;
  k->key_entry[slot] = (int32_t)e;
  k->n_entries++;
  *out = mask;
  *n_allowed = allowed;
  return BRISK_OK;
}

brisk_status gr_accept(gr_masker *k, gr_state *s, int32_t t) {
  const gr_vocab *v = &k->v;
  if (t < 0 || t >= v->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_constraint_accept: token %d is outside [0, n_vocab = %d)", t,
                       v->n_vocab);
  if (v->is_eog[t]) {
    if (!s->ended && !gr_state_accepting(s))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_constraint_accept: end-of-generation token %d before the "
                         "constraint is complete",
                         t);
    s->ended = 1;
    return BRISK_OK;
  }
  /* The token's text, through a token -> sorted entry map. */
  const uint8_t *bytes = NULL;
  uint32_t len = 0;
  if (k->v.n_sorted > 0) {
    if (!k->tok_entry) {
      k->tok_entry = brisk_malloc((size_t)v->n_vocab * sizeof *k->tok_entry);
      if (!k->tok_entry) return brisk_error_oom();
      for (int32_t j = 0; j < v->n_vocab; j++) k->tok_entry[j] = -1;
      for (int32_t i = 0; i < v->n_sorted; i++) k->tok_entry[v->id[i]] = i;
    }
    int32_t i = k->tok_entry[t];
    if (i >= 0) {
      bytes = (const uint8_t *)v->bytes + v->off[i];
      len = v->off[i + 1] - v->off[i];
    }
  }
  if (!bytes)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_constraint_accept: token %d has no text (a control token), which "
                       "no constraint allows",
                       t);
  k->m.err = BRISK_OK;
  int r = gr_state_feed(k, s, (const char *)bytes, len);
  if (r < 0) {
    brisk_status st = k->m.err ? k->m.err : brisk_error_oom();
    k->m.err = BRISK_OK;
    return st;
  }
  if (r == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_constraint_accept: token %d is not allowed by the constraint here",
                       t);
  return BRISK_OK;
}
