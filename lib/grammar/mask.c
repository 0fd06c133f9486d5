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

#include <stdlib.h>
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
  k->ci_off = brisk_calloc(cap, sizeof *k->ci_off);
  k->ci_n = brisk_calloc(cap, sizeof *k->ci_n);
  k->tset = brisk_malloc(GR_MAX_SET * sizeof *k->tset);
  /* Masks are allocated as entries are made, in chunks of `masks`. */
  k->masks = NULL;
  size_t depth = (size_t)k->v.max_len + 2;
  k->d_off = brisk_calloc(depth, sizeof *k->d_off);
  k->d_n = brisk_calloc(depth, sizeof *k->d_n);
  k->d_utf8 = brisk_calloc(depth, sizeof *k->d_utf8);
  if (!k->keys || !k->key_entry || !k->key_set || !k->key_n || !k->n_allowed || !k->ci_off ||
      !k->ci_n || !k->tset || !k->d_off || !k->d_n || !k->d_utf8)
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
  brisk_free(k->ci_off);
  brisk_free(k->ci_n);
  brisk_free(k->ci_dep);
  brisk_free(k->tset);
  brisk_free(k->scratch);
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

static void clear_cache(gr_masker *k) {
  memset(k->keys, 0, k->table_cap * sizeof *k->keys);
  k->n_entries = 0;
  k->n_key_sets = 0;
  k->n_ci_dep = 0;
}

static uint32_t shared_prefix(const gr_vocab *v, int32_t a, int32_t b) {
  const char *x = v->bytes + v->off[a], *y = v->bytes + v->off[b];
  uint32_t la = v->off[a + 1] - v->off[a], lb = v->off[b + 1] - v->off[b];
  uint32_t n = la < lb ? la : lb, i = 0;
  while (i < n && x[i] == y[i]) i++;
  return i;
}

/* Walks the sorted vocabulary (or only its entries only[0 .. n_only),
 * ascending) from node set set[0, n) with decoder *u, setting the bit of
 * every token whose bytes the set takes whole; the count set, or -1.
 * With dep: appends to k->ci_dep the entries not taken whose path met
 * GR_SENT (the set is truncated: the rest of the stack decides them). */
static int32_t walk_from(gr_masker *k, const int32_t *set, int n, const gr_utf8 *u,
                         const int32_t *only, int32_t n_only, uint32_t *mask, int dep) {
  const gr_vocab *v = &k->v;
  if (pool_room(k, 2 * (size_t)GR_MAX_SET)) return -1;
  int32_t ws0 = gr_dfa_intern(&k->dfa, set, (uint32_t)n, u);
  if (ws0 < 0) return -1;
  /* Per depth: the automaton state after d bytes, and whether GR_SENT was
   * in a set at depth <= d. */
  uint32_t *ws = k->d_off, *sent = k->d_n;
  ws[0] = (uint32_t)ws0;
  sent[0] = k->dfa.st[ws0].sent;
  int32_t allowed = 0, prev = -1;
  uint32_t have = 0;          /* states valid for depths 0 .. have of the last entry */
  uint32_t dead = UINT32_MAX; /* the last entry's prefix of this length is dead */
  int dead_dep = 0;           /* and met GR_SENT */
  int32_t count = only ? n_only : v->n_sorted;
  for (int32_t j = 0; j < count; j++) {
    int32_t i = only ? only[j] : j;
    uint32_t lcp = only ? (prev >= 0 ? shared_prefix(v, prev, i) : 0) : v->lcp[i];
    prev = i;
    if (lcp >= dead) { /* shares the dead prefix */
      if (dead_dep &&
          brisk_grow((void **)&k->ci_dep, &k->cap_ci_dep, k->n_ci_dep + 1, sizeof *k->ci_dep))
        return -1;
      if (dead_dep) k->ci_dep[k->n_ci_dep++] = i;
      continue;
    }
    dead = UINT32_MAX;
    if (have > lcp) have = lcp;
    const uint8_t *bytes = (const uint8_t *)v->bytes + v->off[i];
    uint32_t len = v->off[i + 1] - v->off[i];
    while (have < len) {
      int32_t next = gr_dfa_step(k, (int32_t)ws[have], bytes[have]);
      if (next == -2) return -1;
      if (next < 0) {
        dead = have + 1;
        dead_dep = dep && sent[have];
        break;
      }
      ws[have + 1] = (uint32_t)next;
      sent[have + 1] = sent[have] | k->dfa.st[next].sent;
      have++;
    }
    if (have == len && dead == UINT32_MAX) {
      int32_t t = v->id[i];
      mask[t / 32] |= 1u << (t % 32);
      allowed++;
    } else if (dead_dep) {
      if (brisk_grow((void **)&k->ci_dep, &k->cap_ci_dep, k->n_ci_dep + 1, sizeof *k->ci_dep))
        return -1;
      k->ci_dep[k->n_ci_dep++] = i;
    }
  }
  return allowed;
}

static int32_t add_eog(gr_masker *k, const gr_state *s, uint32_t *mask) {
  if (!s->ended && !gr_state_accepting(s)) return 0;
  for (int32_t j = 0; j < k->v.n_eog; j++) {
    int32_t t = k->v.eog[j];
    mask[t / 32] |= 1u << (t % 32);
  }
  return k->v.n_eog;
}

/* A cache slot for a key: the set, then `tag` (an unfinished character's
 * byte count, or CI_TAG for the entry of a truncated set), then its bytes. */
#define CI_TAG 255

static uint64_t key_hash(const int32_t *set, int n, int tag, const uint8_t *bytes, int nb) {
  uint64_t h = brisk_hash64(set, (size_t)n * sizeof *set, 0x51ED);
  h ^= (nb ? brisk_hash64(bytes, (size_t)nb, (uint64_t)tag + 1) : (uint64_t)tag + 1) * 31;
  return h | 1; /* 0 marks an empty slot */
}

static int key_equal(const gr_masker *k, int32_t e, const int32_t *set, int n, int tag,
                     const uint8_t *bytes, int nb) {
  const int32_t *x = k->key_sets + k->key_set[e];
  if (k->key_n[e] != n + 1 + nb || x[n] != tag) return 0;
  if (memcmp(x, set, (size_t)n * sizeof *x)) return 0;
  for (int i = 0; i < nb; i++)
    if (x[n + 1 + i] != bytes[i]) return 0;
  return 1;
}

/* The entry of a key, or -1; *slot receives where a new one would go. */
static int32_t find(const gr_masker *k, uint64_t h, const int32_t *set, int n, int tag,
                    const uint8_t *bytes, int nb, size_t *slot) {
  size_t i = (size_t)h & (k->table_cap - 1);
  for (; k->keys[i]; i = (i + 1) & (k->table_cap - 1))
    if (k->keys[i] == h && key_equal(k, k->key_entry[i], set, n, tag, bytes, nb)) {
      *slot = i;
      return k->key_entry[i];
    }
  *slot = i;
  return -1;
}

/* A new entry for a key (room made); its index, or -1 on OOM. May clear
 * the cache first, which ends every entry index held by the caller. */
static int32_t add_entry(gr_masker *k, uint64_t h, const int32_t *set, int n, int tag,
                         const uint8_t *bytes, int nb) {
  if (k->n_entries == k->cap_entries) clear_cache(k);
  size_t e = k->n_entries;
  if (e == k->masks_cap) { /* doubling, up to the budget */
    size_t cap = k->masks_cap ? 2 * k->masks_cap : 8;
    if (cap > k->cap_entries) cap = k->cap_entries;
    uint32_t *m = brisk_realloc(k->masks, cap * (size_t)k->n_words * sizeof *m);
    if (!m) return -1;
    k->masks = m;
    k->masks_cap = cap;
  }
  size_t key_len = (size_t)n + 1 + (size_t)nb;
  if (brisk_grow((void **)&k->key_sets, &k->cap_key_sets, k->n_key_sets + key_len,
                 sizeof *k->key_sets))
    return -1;
  int32_t *key = k->key_sets + k->n_key_sets;
  memcpy(key, set, (size_t)n * sizeof *key);
  key[n] = tag;
  for (int i = 0; i < nb; i++) key[n + 1 + i] = bytes[i];
  k->key_set[e] = (int32_t)k->n_key_sets;
  k->key_n[e] = (int32_t)key_len;
  k->n_key_sets += key_len;
  size_t slot;
  find(k, h, set, n, tag, bytes, nb, &slot);
  k->keys[slot] = h;
  k->key_entry[slot] = (int32_t)e;
  k->ci_off[e] = 0;
  k->ci_n[e] = 0;
  k->n_entries++;
  return (int32_t)e;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* State s's stacks cut to their top frames (sorted, unique) into k->tset;
 * its size, 0 when no stack was cut (the set is s's own), -1 on failure. */
static int truncated(gr_masker *k, const gr_state *s) {
  int n = 0, cut = 0;
  for (int i = 0; i < s->n; i++) {
    int32_t t = gr_truncate(&k->m, s->set[i]);
    if (t < 0) return -1;
    cut |= t != s->set[i];
    k->tset[n++] = t;
  }
  if (!cut) return 0;
  if (n > 1) qsort(k->tset, (size_t)n, sizeof *k->tset, cmp_i32);
  int u = 0;
  for (int i = 0; i < n; i++)
    if (u == 0 || k->tset[u - 1] != k->tset[i]) k->tset[u++] = k->tset[i];
  return u;
}

/* Fills mask[] for state s; the count of allowed tokens, or -1.
 *
 * Cut stacks first (what XGrammar calls context-independent tokens): the
 * tokens a state allows depend mostly on the top few frames of its stacks,
 * so the walk runs on the stacks cut to GR_TRUNC_DEPTH frames, whose
 * results are shared by every state with those tops (at any nesting
 * depth). It settles every token except those whose path reached the cut
 * (GR_SENT); only those few are then matched from s itself. */
static int32_t fill(gr_masker *k, const gr_state *s, uint32_t *mask, int32_t e_self) {
  memset(mask, 0, (size_t)k->n_words * sizeof *mask);
  if (s->ended) return add_eog(k, s, mask);
  int nt = s->utf8.n == 0 ? truncated(k, s) : 0;
  if (nt < 0) return -1;
  gr_dfa_clear_if_full(&k->dfa);
  if (nt == 0) { /* nothing cut, or an unfinished character: walk s itself */
    int32_t a = walk_from(k, s->set, s->n, &s->utf8, NULL, 0, mask, 0);
    return a < 0 ? -1 : a + add_eog(k, s, mask);
  }
  static const gr_utf8 none;
  k->n_cut++;
  size_t slot;
  uint64_t h = key_hash(k->tset, nt, CI_TAG, NULL, 0);
  int32_t ci = find(k, h, k->tset, nt, CI_TAG, NULL, 0, &slot);
  if (ci < 0) {
    /* The entry of the cut set; adding it may clear the cache, so s's own
     * entry is made after (the caller passes -1 and adds it then). */
    (void)e_self;
    int n = nt;
    int32_t *tcopy = brisk_malloc((size_t)n * sizeof *tcopy);
    if (!tcopy) return -1;
    memcpy(tcopy, k->tset, (size_t)n * sizeof *tcopy);
    ci = add_entry(k, h, tcopy, n, CI_TAG, NULL, 0);
    if (ci < 0) {
      brisk_free(tcopy);
      return -1;
    }
    uint32_t *cm = k->masks + (size_t)ci * (size_t)k->n_words;
    memset(cm, 0, (size_t)k->n_words * sizeof *cm);
    size_t dep0 = k->n_ci_dep;
    int32_t a = walk_from(k, tcopy, n, &none, NULL, 0, cm, 1);
    brisk_free(tcopy);
    if (a < 0) return -1;
    k->n_allowed[ci] = a;
    k->ci_off[ci] = (int32_t)dep0;
    k->ci_n[ci] = (int32_t)(k->n_ci_dep - dep0);
  }
  const uint32_t *cm = k->masks + (size_t)ci * (size_t)k->n_words;
  memcpy(mask, cm, (size_t)k->n_words * sizeof *mask);
  int32_t allowed = k->n_allowed[ci];
  int32_t n_dep = k->ci_n[ci];
  if (n_dep > 0) {
    /* Copied: the walk below may grow k->ci_dep. */
    int32_t *dep = brisk_malloc((size_t)n_dep * sizeof *dep);
    if (!dep) return -1;
    memcpy(dep, k->ci_dep + k->ci_off[ci], (size_t)n_dep * sizeof *dep);
    int32_t a = walk_from(k, s->set, s->n, &s->utf8, dep, n_dep, mask, 0);
    brisk_free(dep);
    if (a < 0) return -1;
    allowed += a;
  }
  return allowed + add_eog(k, s, mask);
}

brisk_status gr_mask(gr_masker *k, const gr_state *s, const uint32_t **out, int32_t *n_allowed) {
  int tag = s->ended ? 4 : s->utf8.n;
  uint64_t h = key_hash(s->set, s->n, tag, s->utf8.byte, s->utf8.n);
  size_t slot;
  int32_t e = find(k, h, s->set, s->n, tag, s->utf8.byte, s->utf8.n, &slot);
  if (e >= 0) {
    k->n_hits++;
    *out = k->masks + (size_t)e * (size_t)k->n_words;
    *n_allowed = k->n_allowed[e];
    return BRISK_OK;
  }
  k->n_misses++;
  /* Filled in scratch first: filling may add (and clear) cache entries. */
  if (!k->scratch && !(k->scratch = brisk_malloc((size_t)k->n_words * sizeof *k->scratch)))
    return brisk_error_oom();
  k->m.err = BRISK_OK;
  int32_t allowed = fill(k, s, k->scratch, -1);
  if (allowed >= 0) {
    e = add_entry(k, h, s->set, s->n, tag, s->utf8.byte, s->utf8.n);
    if (e < 0) allowed = -1;
  }
  if (allowed < 0) {
    brisk_status st = k->m.err ? k->m.err : brisk_error_oom();
    k->m.err = BRISK_OK;
    return st;
  }
  uint32_t *mask = k->masks + (size_t)e * (size_t)k->n_words;
  memcpy(mask, k->scratch, (size_t)k->n_words * sizeof *mask);
  k->n_allowed[e] = allowed;
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
