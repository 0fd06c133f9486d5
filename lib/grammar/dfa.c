/* The byte automaton behind the mask walk (see gr_dfa in grammar.h). It is
 * a cache: clearing it loses nothing but time, which the walk does when it
 * grows past its budget. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

/* Cleared at the start of a walk once past these (about 40 MB: rows are
 * 1 KiB each). */
enum { DFA_MAX_STATES = 1 << 18, DFA_MAX_ROWS = 1 << 15 };

static uint64_t state_hash(const int32_t *set, uint32_t n, const gr_utf8 *u) {
  return brisk_hash64(set, n * sizeof *set, 7) ^ brisk_hash64(u->byte, u->n, 11 + u->n);
}

void gr_dfa_release(gr_dfa *d) {
  brisk_free(d->sets);
  brisk_free(d->st);
  brisk_free(d->st_table);
  brisk_free(d->row_of);
  brisk_free(d->rows);
  memset(d, 0, sizeof *d);
}

void gr_dfa_clear_if_full(gr_dfa *d) {
  if (d->n_st < DFA_MAX_STATES && d->n_rows < DFA_MAX_ROWS) return;
  d->n_sets = 0;
  d->n_st = 0;
  if (d->st_table) memset(d->st_table, 0xFF, d->st_table_cap * sizeof *d->st_table);
  d->n_rows = 0;
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
  if (d->n_st + 1 > d->cap_row_of) {
    size_t cap = d->cap_row_of ? 2 * d->cap_row_of : 1024;
    int32_t *t = brisk_realloc(d->row_of, cap * sizeof *t);
    if (!t) return -1;
    d->row_of = t;
    d->cap_row_of = cap;
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
  d->row_of[d->n_st] = -1;
  return (int32_t)d->n_st++;
}

/* A new row: GR_DFA_UNKNOWN, except -1 for the bytes no node of state s
 * can take, found without the matcher (ASCII from the sets' bitmaps, a
 * lead byte from the range of characters it starts), so that the few live
 * bytes are all a restrictive state ever computes. */
static void dead_bytes(gr_masker *k, const gr_dstate *s, int32_t *row) {
  const int32_t *set = k->dfa.sets + s->off;
  if (s->u.rem != 0) { /* inside a character: continuation bytes only */
    for (int b = 0; b < 256; b++) row[b] = b >= 0x80 && b <= 0xBF ? GR_DFA_UNKNOWN : -1;
    return;
  }
  const brisk_grammar *g = k->m.g;
  uint64_t ascii[2] = {0, 0};
  for (uint32_t i = 0; i < s->n; i++) {
    if (set[i] < GR_FIRST_NODE) continue;
    uint32_t set_id = g->elems[k->m.nodes[set[i]].pos].value;
    ascii[0] |= g->set_ascii[2 * set_id];
    ascii[1] |= g->set_ascii[2 * set_id + 1];
  }
  for (int b = 0; b < 128; b++) row[b] = ascii[b >> 6] >> (b & 63) & 1 ? GR_DFA_UNKNOWN : -1;
  uint64_t lead[2] = {0, 0};
  for (uint32_t i = 0; i < s->n; i++) {
    if (set[i] < GR_FIRST_NODE) continue;
    uint32_t set_id = g->elems[k->m.nodes[set[i]].pos].value;
    lead[0] |= k->lead_live[2 * set_id];
    lead[1] |= k->lead_live[2 * set_id + 1];
  }
  for (int b = 128; b < 256; b++)
    row[b] = lead[(b - 128) >> 6] >> ((b - 128) & 63) & 1 ? GR_DFA_UNKNOWN : -1;
}

brisk_status gr_dfa_lead_bytes(gr_masker *k) {
  const brisk_grammar *g = k->m.g;
  k->lead_live = brisk_calloc(2 * (g->n_sets ? g->n_sets : 1), sizeof *k->lead_live);
  if (!k->lead_live) return brisk_error_oom();
  for (size_t s = 0; s < g->n_sets; s++)
    for (int b = 128; b < 256; b++) {
      gr_utf8 u = {0};
      uint32_t cp, lo, hi;
      if (gr_utf8_step(&u, (uint8_t)b, &cp, &lo, &hi) == 0 && gr_set_meets(g, (uint32_t)s, lo, hi))
        k->lead_live[2 * s + ((b - 128) >> 6)] |= 1ull << ((b - 128) & 63);
    }
  return BRISK_OK;
}

/* The state after byte b from state ws: its id, -1 when b is not allowed,
 * -2 on failure (k->m.err, or OOM). Each state that is stepped from gets a
 * dense row of 256 next states (GR_DFA_UNKNOWN until computed), so a step
 * already taken is one load. */
int32_t gr_dfa_step(gr_masker *k, int32_t ws, uint8_t b) {
  gr_dfa *d = &k->dfa;
  int32_t r = d->row_of[ws];
  if (r < 0) {
    if (brisk_grow((void **)&d->rows, &d->cap_rows, (d->n_rows + 1) * 256, sizeof *d->rows))
      return -2;
    r = (int32_t)d->n_rows++;
    dead_bytes(k, &d->st[ws], d->rows + (size_t)r * 256);
    d->row_of[ws] = r;
  }
  int32_t next = d->rows[(size_t)r * 256 + b];
  if (next != GR_DFA_UNKNOWN) return next;
  /* Computed with the matcher, on copies: interning may move d->sets. */
  int32_t *in = k->pool, *out = k->pool + GR_MAX_SET;
  gr_dstate s = d->st[ws];
  memcpy(in, d->sets + s.off, s.n * sizeof *in);
  int n = gr_masker_step_byte(k, in, (int)s.n, &s.u, b, out);
  if (n < 0) return -2;
  next = -1;
  if (n > 0 && (next = gr_dfa_intern(d, out, (uint32_t)n, &s.u)) < 0) return -2;
  d->rows[(size_t)r * 256 + b] = next;
  d->tr_n++;
  return next;
}
