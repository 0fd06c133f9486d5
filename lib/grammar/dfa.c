/* The byte automaton behind the mask walk (see gr_dfa in grammar.h). It is
 * a cache: clearing it loses nothing but time, which the walk does when it
 * grows past its budget. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

/* Cleared at the start of a walk once past these (about 40 MB). */
enum { DFA_MAX_STATES = 1 << 18, DFA_MAX_TRANSITIONS = 1 << 21 };

static uint64_t state_hash(const int32_t *set, uint32_t n, const gr_utf8 *u) {
  return brisk_hash64(set, n * sizeof *set, 7) ^ brisk_hash64(u->byte, u->n, 11 + u->n);
}

void gr_dfa_release(gr_dfa *d) {
  brisk_free(d->sets);
  brisk_free(d->st);
  brisk_free(d->st_table);
  brisk_free(d->tr_key);
  brisk_free(d->tr_val);
  memset(d, 0, sizeof *d);
}

void gr_dfa_clear_if_full(gr_dfa *d) {
  if (d->n_st < DFA_MAX_STATES && d->tr_n < DFA_MAX_TRANSITIONS) return;
  d->n_sets = 0;
  d->n_st = 0;
  if (d->st_table) memset(d->st_table, 0xFF, d->st_table_cap * sizeof *d->st_table);
  if (d->tr_key) memset(d->tr_key, 0, d->tr_cap * sizeof *d->tr_key);
  d->tr_n = 0;
}

static int grow_states(gr_dfa *d) {
  size_t cap = d->st_table_cap ? 2 * d->st_table_cap : 1024;
  int32_t *t = brisk_malloc(cap * sizeof *t);
  if (!t) return -1;
  memset(t, 0xFF, cap * sizeof *t);
  for (size_t i = 0; i < d->n_st; i++) {
    const gr_dstate *s = &d->st[i];
    size_t h = (size_t)state_hash(d->sets + s->off, s->n, &s->u) & (cap - 1);
    while (t[h] >= 0) h = (h + 1) & (cap - 1);
    t[h] = (int32_t)i;
  }
  brisk_free(d->st_table);
  d->st_table = t;
  d->st_table_cap = cap;
  return 0;
}

/* The id of state (set, u); -1 on OOM. */
int32_t gr_dfa_intern(gr_dfa *d, const int32_t *set, uint32_t n, const gr_utf8 *u) {
  if (2 * (d->n_st + 1) > d->st_table_cap && grow_states(d)) return -1;
  uint64_t hv = state_hash(set, n, u);
  size_t h = (size_t)hv & (d->st_table_cap - 1);
  for (int32_t id; (id = d->st_table[h]) >= 0; h = (h + 1) & (d->st_table_cap - 1)) {
    const gr_dstate *s = &d->st[id];
    if (s->n == n && s->u.n == u->n && !memcmp(d->sets + s->off, set, n * sizeof *set) &&
        !memcmp(s->u.byte, u->byte, u->n))
      return id;
  }
  if (brisk_grow((void **)&d->st, &d->cap_st, d->n_st + 1, sizeof *d->st) ||
      brisk_grow((void **)&d->sets, &d->cap_sets, d->n_sets + n, sizeof *d->sets))
    return -1;
  memcpy(d->sets + d->n_sets, set, n * sizeof *set);
  int sent = 0;
  for (uint32_t i = 0; i < n && i < 2; i++) sent |= set[i] == GR_SENT; /* sorted: 0, 1, ... */
  d->st[d->n_st] = (gr_dstate){(uint32_t)d->n_sets, n, *u, (uint8_t)sent};
  d->n_sets += n;
  d->st_table[h] = (int32_t)d->n_st;
  return (int32_t)d->n_st++;
}

static int grow_transitions(gr_dfa *d) {
  size_t cap = d->tr_cap ? 2 * d->tr_cap : 4096;
  uint64_t *k = brisk_calloc(cap, sizeof *k);
  int32_t *v = brisk_malloc(cap * sizeof *v);
  if (!k || !v) {
    brisk_free(k);
    brisk_free(v);
    return -1;
  }
  for (size_t i = 0; i < d->tr_cap; i++) {
    if (!d->tr_key[i]) continue;
    size_t h = (size_t)(d->tr_key[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
    while (k[h]) h = (h + 1) & (cap - 1);
    k[h] = d->tr_key[i];
    v[h] = d->tr_val[i];
  }
  brisk_free(d->tr_key);
  brisk_free(d->tr_val);
  d->tr_key = k;
  d->tr_val = v;
  d->tr_cap = cap;
  return 0;
}

/* Slot of transition key `key` (empty if new). */
static size_t tr_slot(const gr_dfa *d, uint64_t key) {
  size_t h = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (d->tr_cap - 1);
  while (d->tr_key[h] && d->tr_key[h] != key) h = (h + 1) & (d->tr_cap - 1);
  return h;
}

/* The state after byte b from state ws: its id, -1 when b is not allowed,
 * -2 on failure (k->m.err, or OOM). */
int32_t gr_dfa_step(gr_masker *k, int32_t ws, uint8_t b) {
  gr_dfa *d = &k->dfa;
  if (2 * (d->tr_n + 1) > d->tr_cap && grow_transitions(d)) return -2;
  uint64_t key = ((uint64_t)ws << 8 | b) + 1;
  size_t h = tr_slot(d, key);
  if (d->tr_key[h]) return d->tr_val[h];
  /* Computed with the matcher, on copies: interning may move d->sets. */
  int32_t *in = k->pool, *out = k->pool + GR_MAX_SET;
  gr_dstate s = d->st[ws];
  memcpy(in, d->sets + s.off, s.n * sizeof *in);
  int n = gr_masker_step_byte(k, in, (int)s.n, &s.u, b, out);
  if (n < 0) return -2;
  int32_t next = -1;
  if (n > 0 && (next = gr_dfa_intern(d, out, (uint32_t)n, &s.u)) < 0) return -2;
  h = tr_slot(d, key); /* interning does not touch transitions, but be plain */
  d->tr_key[h] = key;
  d->tr_val[h] = next;
  d->tr_n++;
  return next;
}
