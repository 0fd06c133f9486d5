/* Token masks: which tokens a state allows, as a bitset over the
 * vocabulary.
 *
 * A state's mask is the OR of its stacks' node entries (see gr_masker in
 * grammar.h): what each stack's top frames accept whatever lies below
 * them, made once per grammar position (at creation: one walk of the
 * vocabulary's byte trie each, dead subtrees skipped whole) and refined
 * per deeper cut only where the position leaves many tokens to the rest
 * of the stack (at creation too, for every stack a generation can reach,
 * within a budget, and for the classes of unfinished characters); the few
 * tokens still undecided are then matched from the state itself. Whole
 * state masks are cached too, so a state seen before is a hash lookup:
 * the matcher interns parse stacks, so a state is a short array of node
 * ids (plus the bytes of an unfinished character). */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <stdlib.h>
#include <string.h>

/* Budgets: state masks, and node entries; each cleared when full. */
#define GR_CACHE_BYTES (16u << 20)
#define GR_NODE_BYTES (32u << 20)
/* Made ahead at creation (precompute_reach): at most this many reachable
 * stacks, and walks worth this many of the whole vocabulary's trie
 * (automaton steps: a walk that skips dead subtrees costs less). */
#define GR_PRE_NODES (1u << 15)
#define GR_PRE_WALKS 160u

static brisk_status init_common(gr_masker *k) {
  k->n_words = (k->v.n_vocab + 31) / 32;
  size_t per = (size_t)k->n_words * 4;
  size_t cap = GR_CACHE_BYTES / per;
  if (cap < 16) cap = 16;
  if (cap > 1 << 16) cap = 1 << 16;
  k->cap_entries = cap;
  k->table_cap = 1;
  while (k->table_cap < 2 * cap) k->table_cap *= 2;
  size_t slots = GR_NODE_BYTES / per;
  if (slots < 64) slots = 64;
  if (slots > 1 << 16) slots = 1 << 16;
  k->ne_slot_cap = slots;
  /* Sparse entries take no mask slot: up to four times as many entries. */
  size_t ne_cap = 4 * slots;
  k->ne_cap = ne_cap;
  for (k->pe_cap = 1; k->pe_cap < 2 * ne_cap;) k->pe_cap *= 2; /* probed with a mask */
  k->pe_key = brisk_calloc(k->pe_cap, sizeof *k->pe_key);
  k->pe_val = brisk_calloc(k->pe_cap, sizeof *k->pe_val);
  k->ne_slot = brisk_calloc(ne_cap, sizeof *k->ne_slot);
  k->pre_nodes = GR_PRE_NODES;
  k->pre_work = (uint64_t)GR_PRE_WALKS * (uint64_t)(k->v.n_tnodes > 4096 ? k->v.n_tnodes : 4096);
  k->keys = brisk_calloc(k->table_cap, sizeof *k->keys);
  k->key_entry = brisk_calloc(k->table_cap, sizeof *k->key_entry);
  k->key_set = brisk_calloc(cap, sizeof *k->key_set);
  k->key_n = brisk_calloc(cap, sizeof *k->key_n);
  k->n_allowed = brisk_calloc(cap, sizeof *k->n_allowed);
  k->ne_dep_off = brisk_calloc(ne_cap, sizeof *k->ne_dep_off);
  k->ne_dep_n = brisk_calloc(ne_cap, sizeof *k->ne_dep_n);
  k->ne_seen = brisk_calloc(ne_cap, sizeof *k->ne_seen);
  k->ne_tok_off = brisk_calloc(ne_cap, sizeof *k->ne_tok_off);
  k->ne_tok_n = brisk_calloc(ne_cap, sizeof *k->ne_tok_n);
  /* Masks are allocated as entries are made, in chunks of `masks`. */
  k->masks = NULL;
  size_t depth = (size_t)k->v.max_len + 2;
  k->d_off = brisk_calloc(depth, sizeof *k->d_off);
  k->d_n = brisk_calloc(depth, sizeof *k->d_n);
  if (!k->pe_key || !k->pe_val || !k->ne_slot) return brisk_error_oom();
  if (!k->keys || !k->key_entry || !k->key_set || !k->key_n || !k->n_allowed || !k->ne_dep_off ||
      !k->ne_dep_n || !k->ne_seen || !k->ne_tok_off || !k->ne_tok_n || !k->d_off || !k->d_n)
    return brisk_error_oom();
  return BRISK_OK;
}

brisk_status gr_masker_init_vocab(gr_masker *k, const brisk_grammar *g, gr_vocab *v) {
  memset(k, 0, sizeof *k);
  k->v = *v;
  memset(v, 0, sizeof *v);
  brisk_status st;
  if ((st = gr_matcher_init(&k->m, g)) || (st = init_common(k)) || (st = gr_dfa_lead_bytes(k))) {
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
  brisk_free(k->ne_of);
  brisk_free(k->ne_mask);
  brisk_free(k->ne_dep_off);
  brisk_free(k->ne_dep_n);
  brisk_free(k->ne_seen);
  brisk_free(k->ne_tok_off);
  brisk_free(k->ne_tok_n);
  brisk_free(k->ne_toks);
  brisk_free(k->ne_deps);
  brisk_free(k->dtmp);
  brisk_free(k->dtmp2);
  brisk_free(k->pool);
  brisk_free(k->d_off);
  brisk_free(k->d_n);
  brisk_free(k->tok_entry);
  brisk_free(k->cset);
  brisk_free(k->lead_live);
  brisk_free(k->pe_key);
  brisk_free(k->pe_val);
  brisk_free(k->ne_slot);
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
}

static uint32_t shared_prefix(const gr_vocab *v, int32_t a, int32_t b) {
  const char *x = v->bytes + v->off[a], *y = v->bytes + v->off[b];
  uint32_t la = v->off[a + 1] - v->off[a], lb = v->off[b + 1] - v->off[b];
  uint32_t n = la < lb ? la : lb, i = 0;
  while (i < n && x[i] == y[i]) i++;
  return i;
}

static void set_bit(uint32_t *mask, int32_t t) { mask[t / 32] |= 1u << (t % 32); }
static int has_bit(const uint32_t *mask, int32_t t) { return (int)(mask[t / 32] >> (t % 32) & 1); }

/* Appends sorted entries [lo, hi) to the node entries' dependent list. */
static int push_deps(gr_masker *k, int32_t lo, int32_t hi) {
  if (hi <= lo) return 0;
  size_t n = (size_t)(hi - lo);
  if (brisk_grow((void **)&k->ne_deps, &k->cap_ne_deps, k->n_ne_deps + n, sizeof *k->ne_deps))
    return -1;
  for (int32_t i = lo; i < hi; i++) k->ne_deps[k->n_ne_deps++] = i;
  return 0;
}

/* Walks the trie from automaton state ws0, setting the bit of every token
 * whose bytes it takes whole; a subtree whose first byte is not allowed is
 * skipped in one step. With dep, the entries of a skipped subtree whose
 * path met GR_SENT are appended to k->ne_deps (below the cut, the rest of
 * the stack decides them). The count set, or -1. */
static int32_t walk_trie(gr_masker *k, int32_t ws0, uint32_t *mask, int dep) {
  const gr_vocab *v = &k->v;
  uint32_t *ws = k->d_off, *sent = k->d_n;
  ws[0] = (uint32_t)ws0;
  sent[0] = k->dfa.st[ws0].sent;
  int32_t allowed = 0;
  uint64_t steps = 0;
  for (uint32_t x = 0; x < v->n_tnodes;) {
    uint32_t d = v->t_depth[x];
    int32_t next = gr_dfa_step(k, (int32_t)ws[d], v->t_byte[x]);
    if (next == -2) return -1;
    if (next < 0) {
      if (dep && sent[d] && push_deps(k, v->t_ent[x], v->t_ent[v->t_end[x]])) return -1;
      x = v->t_end[x];
      continue;
    }
    ws[d + 1] = (uint32_t)next;
    sent[d + 1] = sent[d] | k->dfa.st[next].sent;
    steps++;
    /* Tokens ending here: the entry that made the node, if this is its last
     * byte, and any entries with the same text after it. */
    for (int32_t i = v->t_ent[x]; i < v->n_sorted && v->off[i + 1] - v->off[i] == d + 1 &&
                                  (i == v->t_ent[x] || v->lcp[i] == d + 1);
         i++) {
      set_bit(mask, v->id[i]);
      allowed++;
    }
    x++;
  }
  k->n_work += steps;
  return allowed;
}

/* The same over the sorted entries only[0 .. n_only) (ascending): each
 * shares a prefix with the one before, whose states are reused. */
static int32_t walk_list(gr_masker *k, int32_t ws0, const int32_t *only, size_t n_only,
                         uint32_t *mask, int dep) {
  const gr_vocab *v = &k->v;
  uint32_t *ws = k->d_off, *sent = k->d_n;
  ws[0] = (uint32_t)ws0;
  sent[0] = k->dfa.st[ws0].sent;
  int32_t allowed = 0, prev = -1;
  uint32_t have = 0;          /* states valid for depths 0 .. have of the last entry */
  uint32_t dead = UINT32_MAX; /* the last entry's prefix of this length is dead */
  int dead_dep = 0;           /* and met GR_SENT */
  for (size_t j = 0; j < n_only; j++) {
    int32_t i = only[j];
    uint32_t lcp = prev >= 0 ? shared_prefix(v, prev, i) : 0;
    prev = i;
    if (lcp >= dead) { /* shares the dead prefix */
      if (dead_dep && push_deps(k, i, i + 1)) return -1;
      continue;
    }
    dead = UINT32_MAX;
    dead_dep = 0;
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
      k->n_work++;
    }
    if (dead == UINT32_MAX) {
      set_bit(mask, v->id[i]);
      allowed++;
    } else if (dead_dep && push_deps(k, i, i + 1)) {
      return -1;
    }
  }
  return allowed;
}

static int32_t add_eog(gr_masker *k, const gr_state *s, uint32_t *mask) {
  if (!s->ended && !gr_state_accepting(s)) return 0;
  for (int32_t j = 0; j < k->v.n_eog; j++) set_bit(mask, k->v.eog[j]);
  return k->v.n_eog;
}

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

/* The state masks' storage: the whole budget at once, never moved (a
 * doubling copy of megabytes would land on one unlucky step). With
 * touch, every page is written now (at creation), so that no step pays
 * the page faults of a fresh entry (about five per entry at 150k tokens);
 * without, pages are touched as entries are made. -1 on OOM. */
static int masks_alloc(gr_masker *k, int touch) {
  size_t bytes = k->cap_entries * (size_t)k->n_words * sizeof *k->masks;
  if (!k->masks) {
    if (!(k->masks = brisk_malloc(bytes))) return -1;
    k->masks_cap = k->cap_entries;
    if (touch) memset(k->masks, 0, bytes);
  }
  return 0;
}

/* A new state entry for a key (room made); its index, or -1 on OOM. May
 * clear the cache first. */
static int32_t add_entry(gr_masker *k, uint64_t h, const int32_t *set, int n, int tag,
                         const uint8_t *bytes, int nb) {
  if (k->n_entries == k->cap_entries) clear_cache(k);
  size_t e = k->n_entries;
  if (masks_alloc(k, 0)) return -1;
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
  k->n_entries++;
  return (int32_t)e;
}

/* ---- node entries ---- */

/* Bits set, counted in 64-bit halves by bit arithmetic: the library is
 * built for the x86-64 baseline, where __builtin_popcount is a call per
 * word (tens of microseconds over a 150k-token mask). */
static int32_t popcount_mask(const uint32_t *mask, int32_t n_words) {
  int32_t c = 0, i = 0;
  for (; i + 1 < n_words; i += 2) {
    uint64_t x = (uint64_t)mask[i] | (uint64_t)mask[i + 1] << 32;
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    c += (int32_t)((x * 0x0101010101010101ull) >> 56);
  }
  for (; i < n_words; i++) c += __builtin_popcount(mask[i]);
  return c;
}

static void ne_clear(gr_masker *k) {
  if (k->ne_of) memset(k->ne_of, 0xFF, k->cap_ne_of * sizeof *k->ne_of);
  if (k->pe_key) memset(k->pe_key, 0, k->pe_cap * sizeof *k->pe_key);
  k->pe_n = 0;
  k->ne_n = 0;
  k->ne_slots = 0;
  k->n_ne_deps = 0;
  k->n_ne_toks = 0;
}

/* Makes room for the entries of one stack's cuts (at most 5: 1, 4, 16, 64
 * frames and the whole), clearing once past the budget, so that no entry
 * index is lost while they are being made. */
static int ne_room(gr_masker *k) {
  if (k->ne_n + 5 > k->ne_cap || k->ne_slots + 5 > k->ne_slot_cap ||
      k->n_ne_deps > (size_t)GR_NODE_BYTES / sizeof *k->ne_deps ||
      k->n_ne_toks > (size_t)GR_NODE_BYTES / sizeof *k->ne_toks)
    ne_clear(k);
  if (!k->ne_mask) { /* the whole budget, never moved (see add_entry) */
    if (!(k->ne_mask = brisk_malloc(k->ne_slot_cap * (size_t)k->n_words * sizeof *k->ne_mask)))
      return -1;
    k->ne_mask_cap = k->ne_slot_cap;
  }
  return 0;
}

/* Entries of stacks inside a character are keyed by (node, class of the
 * prefix: its length, bytes seen and representative lead byte), in a
 * small open-addressing table; the others by node id in ne_of. */
static uint64_t pe_hash(uint64_t key) {
  key ^= key >> 31;
  key *= 0x9E3779B97F4A7C15ull;
  return key ^ key >> 29;
}

static uint32_t utf8_key(const gr_utf8 *u) {
  return u->n ? (uint32_t)u->len << 12 | (uint32_t)u->n << 8 | u->byte[0] : 0;
}

/* The entry index of node x (with the prefix of class ck, 0: none), -1 if
 * none yet. */
static int32_t ne_lookup(const gr_masker *k, int32_t x, uint32_t ck) {
  if (!ck) return (size_t)x < k->cap_ne_of ? k->ne_of[x] : -1;
  if (!k->pe_cap) return -1;
  uint64_t key = (uint64_t)(uint32_t)x << 16 | ck | 1ull << 63;
  for (size_t i = (size_t)pe_hash(key) & (k->pe_cap - 1); k->pe_key[i];
       i = (i + 1) & (k->pe_cap - 1))
    if (k->pe_key[i] == key) return k->pe_val[i];
  return -1;
}

/* Binds node x (with class ck) to entry e. A cut's own entry is always
 * bound (at most ne_cap of them: half the table); a state's node only
 * while the table is under a quarter full (optional: it is found again
 * through its cuts), so the table stays under three quarters full and
 * every probe ends. */
static int ne_bind(gr_masker *k, int32_t x, uint32_t ck, int32_t e, int optional) {
  if (ck) {
    if (optional && 4 * (k->pe_n + 1) > k->pe_cap) return 0;
    uint64_t key = (uint64_t)(uint32_t)x << 16 | ck | 1ull << 63;
    size_t i = (size_t)pe_hash(key) & (k->pe_cap - 1);
    while (k->pe_key[i] && k->pe_key[i] != key) i = (i + 1) & (k->pe_cap - 1);
    if (!k->pe_key[i]) k->pe_n++;
    k->pe_key[i] = key;
    k->pe_val[i] = e;
    return 0;
  }
  if ((size_t)x >= k->cap_ne_of) {
    size_t cap = k->cap_ne_of ? k->cap_ne_of : 256;
    while (cap <= (size_t)x) cap *= 2;
    int32_t *t = brisk_realloc(k->ne_of, cap * sizeof *t);
    if (!t) return -1;
    memset(t + k->cap_ne_of, 0xFF, (cap - k->cap_ne_of) * sizeof *t);
    k->ne_of = t;
    k->cap_ne_of = cap;
  }
  k->ne_of[x] = e;
  return 0;
}

/* Entry e's tokens into mask (which they are OR-ed into, or copied). */
static void ne_or(const gr_masker *k, int32_t e, uint32_t *mask) {
  if (k->ne_tok_n[e] != UINT32_MAX) {
    /* An empty list may sit on a NULL array: no pointer arithmetic then. */
    for (uint32_t j = 0; j < k->ne_tok_n[e]; j++) set_bit(mask, k->ne_toks[k->ne_tok_off[e] + j]);
  } else {
    const uint32_t *em = k->ne_mask + (size_t)k->ne_slot[e] * (size_t)k->n_words;
    for (int32_t w = 0; w < k->n_words; w++) mask[w] |= em[w];
  }
}

/* Computes the entry of node x (a stack cut to its top frames over
 * GR_SENT, or a whole short one; with the unfinished character u, the
 * representative of its class, or none) from the entry `base` of a
 * shallower cut of the same stack (-1: none, walk the whole trie): base's
 * accepted tokens and a match of only its context-dependent ones, unless
 * those are so many that the trie walk is cheaper. Room was made by
 * ne_room. The index, or -1 on failure. */
static int32_t ne_make(gr_masker *k, int32_t x, int32_t base, const gr_utf8 *u) {
  int32_t e = (int32_t)k->ne_n;
  /* Computed in the next free slot, which a sparse entry leaves free. */
  uint32_t *mask = k->ne_mask + k->ne_slots * (size_t)k->n_words;
  int32_t ws = gr_dfa_intern(&k->dfa, &x, 1, u);
  if (ws < 0) return -1;
  size_t dep0 = k->n_ne_deps;
  if (base < 0 || (size_t)k->ne_dep_n[base] > (size_t)k->v.n_sorted / 4) {
    memset(mask, 0, (size_t)k->n_words * sizeof *mask);
    if (walk_trie(k, ws, mask, 1) < 0) return -1;
  } else {
    memset(mask, 0, (size_t)k->n_words * sizeof *mask);
    ne_or(k, base, mask);
    /* Matched from a copy: the walk appends to the same list. */
    size_t n = k->ne_dep_n[base];
    if (n > 0) {
      if (brisk_grow((void **)&k->dtmp, &k->cap_dtmp, n, sizeof *k->dtmp)) return -1;
      memcpy(k->dtmp, k->ne_deps + k->ne_dep_off[base], n * sizeof *k->dtmp);
      dep0 = k->n_ne_deps;
      if (walk_list(k, ws, k->dtmp, n, mask, 1) < 0) return -1;
    }
  }
  /* A sparse entry keeps only its tokens as a list, which a state ORs in
   * faster than the bitset (XGrammar's adaptive storage); a dense one
   * keeps the slot. */
  k->ne_tok_n[e] = UINT32_MAX;
  k->ne_slot[e] = UINT32_MAX;
  int32_t n_acc = popcount_mask(mask, k->n_words);
  if ((uint32_t)n_acc <= (uint32_t)k->n_words / 8) {
    if (brisk_grow((void **)&k->ne_toks, &k->cap_ne_toks, k->n_ne_toks + (size_t)n_acc,
                   sizeof *k->ne_toks))
      return -1;
    k->ne_tok_off[e] = (uint32_t)k->n_ne_toks;
    k->ne_tok_n[e] = (uint32_t)n_acc;
    for (int32_t w = 0; w < k->n_words; w++)
      for (uint32_t b = mask[w]; b; b &= b - 1)
        k->ne_toks[k->n_ne_toks++] = w * 32 + __builtin_ctz(b);
  } else {
    k->ne_slot[e] = (uint32_t)k->ne_slots++;
  }
  k->ne_dep_off[e] = (uint32_t)dep0;
  k->ne_dep_n[e] = (uint32_t)(k->n_ne_deps - dep0);
  if (ne_bind(k, x, utf8_key(u), e, 0)) return -1;
  k->ne_n++;
  k->n_entries_made++;
  return e;
}

/* Context-dependent tokens an entry may leave to the state's own match;
 * past it, a deeper cut of the stack is tried. Low: a deeper cut made from
 * an entry with few such tokens matches only those (cheap, and made at
 * creation for the stacks reached), while each one left costs every new
 * state a match through automaton states not yet built. */
#define NE_FEW_DEPS 4u

/* The entry of node n of a state (its id bound to it once found), with
 * the unfinished character u (a class representative; n = 0: none). The
 * stack is cut to its top element (the grammar position: shared by every
 * stack there), then to 4, 16 and 64 frames while the cut leaves more than
 * NE_FEW_DEPS tokens to what lies below it: a counted repetition such as
 * maxLength nests a frame per character, and only a deeper cut decides
 * the longer tokens. Each cut's entry starts from the one before. -1 on
 * failure. */
static int32_t ne_get(gr_masker *k, int32_t n, const gr_utf8 *u, int *cut) {
  uint32_t ck = utf8_key(u);
  int32_t e = ne_lookup(k, n, ck);
  if (e >= 0) {
    *cut |= k->ne_dep_n[e] > 0;
    return e;
  }
  if (ne_room(k)) return -1;
  int32_t base = -1;
  for (int depth = 1;; depth *= 4) {
    int32_t x = gr_truncate(&k->m, n, depth);
    if (x < 0) return -1;
    e = ne_lookup(k, x, ck);
    if (e < 0 && (e = ne_make(k, x, base, u)) < 0) return -1;
    if (x == n || k->ne_dep_n[e] <= NE_FEW_DEPS || depth >= GR_MAX_CUT) break;
    base = e;
  }
  if (e != ne_lookup(k, n, ck) && ne_bind(k, n, ck, e, 1)) return -1;
  *cut |= k->ne_dep_n[e] > 0;
  return e;
}

/* Whether one more stack's entries fit in half the node-entry budget:
 * the other half is left to generation, which would otherwise soon clear
 * them all (and then walk again). */
static int ne_fits(const gr_masker *k) {
  size_t half = (size_t)GR_NODE_BYTES / 2;
  return k->ne_n + 5 <= k->ne_cap / 2 && k->ne_slots + 5 <= k->ne_slot_cap / 2 &&
         k->n_ne_deps <= half / sizeof *k->ne_deps && k->n_ne_toks <= half / sizeof *k->ne_toks;
}

/* The representatives of the classes of unfinished characters (see
 * gr_utf8_class): a stack whose set takes every character of one has an
 * entry for it made ahead. */
static const uint8_t UTF8_REPS[][3] = {{0xC2}, {0xE0}, {0xED}, {0xE1},       {0xE1, 0x80},
                                       {0xF0}, {0xF4}, {0xF1}, {0xF1, 0x80}, {0xF1, 0x80, 0x80}};
static const uint8_t UTF8_REP_N[] = {1, 1, 1, 1, 2, 1, 1, 1, 2, 3};

/* Node n's entries for each class whose characters its set all takes. */
static int precompute_partial(gr_masker *k, int32_t n) {
  const brisk_grammar *g = k->m.g;
  uint32_t set = g->elems[k->m.nodes[n].pos].value;
  if (!(k->lead_live[2 * set] | k->lead_live[2 * set + 1])) return 0; /* ASCII only */
  for (size_t r = 0; r < sizeof UTF8_REP_N; r++) {
    gr_utf8 u = {0};
    uint32_t cp, lo, hi;
    for (int i = 0; i < UTF8_REP_N[r]; i++) gr_utf8_step(&u, UTF8_REPS[r][i], &cp, &lo, &hi);
    if (!gr_utf8_range(&u, &lo, &hi) || !gr_set_covers(g, set, lo, hi)) continue;
    if (!ne_fits(k)) return 0;
    int cut = 0;
    if (ne_get(k, n, &u, &cut) < 0) return -1;
  }
  return 0;
}

/* The entries of every stack a generation can reach, made ahead: a
 * breadth-first walk of the matcher's node graph from the start state
 * (a node's successors do not depend on the character taken), each node's
 * cuts made as a state's mask would make them (ne_get). A grammar without
 * recursion has finitely many such stacks (a counted repetition such as
 * maxLength: a handful per position), so generation then finds every
 * entry made; a recursive one (JSON mode) is covered from the shallowest
 * stacks up to the budget: k->pre_nodes stacks visited, k->pre_work
 * automaton steps of walks, and half the node-entry memory. Past
 * it, the rest is made on demand as before. 0, or -1 on failure. */
typedef struct reach {
  int32_t *queue;
  uint8_t *seen; /* [cap_seen] by node id */
  size_t cap_queue, cap_seen, head, tail;
} reach;

/* Queues node y unless seen or past the budget; -1 on OOM. */
static int reach_push(gr_masker *k, reach *r, int32_t y) {
  if (y < GR_FIRST_NODE) return 0;
  if ((size_t)y >= r->cap_seen) {
    size_t old = r->cap_seen;
    if (brisk_grow((void **)&r->seen, &r->cap_seen, (size_t)y + 1, 1)) return -1;
    memset(r->seen + old, 0, r->cap_seen - old);
  }
  if (r->seen[y]) return 0;
  r->seen[y] = 1;
  if (r->tail >= k->pre_nodes) {
    k->pre_capped = 1;
    return 0;
  }
  if (brisk_grow((void **)&r->queue, &r->cap_queue, r->tail + 1, sizeof *r->queue)) return -1;
  r->queue[r->tail++] = y;
  return 0;
}

static int precompute_reach(gr_masker *k) {
  gr_matcher *m = &k->m;
  reach r = {0};
  int rc = -1;
  uint64_t work0 = k->n_work;
  for (size_t i = 0; i < m->n_initial; i++)
    if (reach_push(k, &r, m->initial[i])) goto oom;
  while (r.head < r.tail) {
    if (k->n_work - work0 > k->pre_work || !ne_fits(k)) {
      k->pre_capped = 1;
      break;
    }
    int32_t n = r.queue[r.head++];
    int cut = 0;
    gr_dfa_clear_if_full(&k->dfa);
    if (ne_get(k, n, &(gr_utf8){0}, &cut) < 0 || precompute_partial(k, n)) goto out;
    const int32_t *succ;
    int c = gr_successors(m, n, &succ);
    if (c < 0) goto out;
    for (int j = 0; j < c; j++) /* pushing does not touch the matcher: succ stays valid */
      if (reach_push(k, &r, succ[j])) goto oom;
  }
  k->n_pre_nodes = r.head;
  rc = 0;
  goto out;
oom:
  if (!m->err) m->err = brisk_error_oom();
out:
  brisk_free(r.queue);
  brisk_free(r.seen);
  return rc;
}

brisk_status gr_masker_precompute(gr_masker *k) {
  const brisk_grammar *g = k->m.g;
  k->m.err = BRISK_OK;
  if (pool_room(k, 2 * (size_t)GR_MAX_SET)) goto fail;
  for (size_t p = 0; p < g->n_elems; p++) {
    if (g->elems[p].type != GR_SET) continue;
    if (k->ne_n + 5 > k->ne_cap || k->ne_slots + 5 > k->ne_slot_cap)
      break; /* the budget: the rest on demand */
    gr_dfa_clear_if_full(&k->dfa);
    int32_t x = gr_node_id(&k->m, (int32_t)p, GR_SENT);
    if (x < 0) goto fail;
    if (ne_lookup(k, x, 0) >= 0) continue;
    if (ne_room(k) || ne_make(k, x, -1, &(gr_utf8){0}) < 0) goto fail;
  }
  if (precompute_reach(k) || masks_alloc(k, 1)) goto fail;
  return BRISK_OK;
fail:;
  brisk_status st = k->m.err ? k->m.err : brisk_error_oom();
  k->m.err = BRISK_OK;
  return st;
}

/* Merges the sorted lists a[0, na) and b[0, nb) without duplicates into
 * out; the count. */
static size_t merge(const int32_t *a, size_t na, const int32_t *b, size_t nb, int32_t *out) {
  size_t i = 0, j = 0, n = 0;
  while (i < na || j < nb) {
    int32_t x;
    if (j >= nb || (i < na && a[i] < b[j]))
      x = a[i++];
    else if (i >= na || b[j] < a[i])
      x = b[j++];
    else
      x = a[i++], j++;
    out[n++] = x;
  }
  return n;
}

/* Fills mask[] for state s; the count of allowed tokens, or -1.
 *
 * Each stack of s contributes its node entry: the tokens it accepts
 * whatever lies below its top frames, OR-ed together, and its
 * context-dependent tokens, which are matched from s itself (only those
 * not already allowed). A state inside a character does the same with
 * entries for its class when canon (see canon_partial), and otherwise
 * walks the trie from s (few subtrees survive a continuation byte). */
static int32_t fill(gr_masker *k, const gr_state *s, int canon, uint32_t *mask) {
  memset(mask, 0, (size_t)k->n_words * sizeof *mask);
  if (s->ended) return add_eog(k, s, mask);
  gr_dfa_clear_if_full(&k->dfa);
  if (pool_room(k, 2 * (size_t)GR_MAX_SET)) return -1;
  if (s->utf8.n != 0 && !canon) {
    int32_t ws = gr_dfa_intern(&k->dfa, s->set, (uint32_t)s->n, &s->utf8);
    if (ws < 0 || walk_trie(k, ws, mask, 0) < 0) return -1;
    return popcount_mask(mask, k->n_words);
  }
  size_t nd = 0;
  int cut = 0;
  if (++k->ne_stamp == 0) { /* wrapped: forget every old mark */
    memset(k->ne_seen, 0, k->ne_cap * sizeof *k->ne_seen);
    k->ne_stamp = 1;
  }
  for (int i = 0; i < s->n; i++) {
    if (s->set[i] < GR_FIRST_NODE) continue;
    int32_t e = ne_get(k, s->set[i], &s->utf8, &cut);
    if (e < 0) return -1;
    if (k->ne_seen[e] == k->ne_stamp) continue; /* stacks often share an entry */
    k->ne_seen[e] = k->ne_stamp;
    ne_or(k, e, mask);
    size_t n = k->ne_dep_n[e];
    if (n == 0) continue;
    const int32_t *d = k->ne_deps + k->ne_dep_off[e];
    if (brisk_grow((void **)&k->dtmp2, &k->cap_dtmp2, nd + n, sizeof *k->dtmp2) ||
        brisk_grow((void **)&k->dtmp, &k->cap_dtmp, nd + n, sizeof *k->dtmp))
      return -1;
    memcpy(k->dtmp, k->dtmp2, nd * sizeof *k->dtmp);
    nd = merge(k->dtmp, nd, d, n, k->dtmp2);
  }
  if (cut) k->n_cut++;
  /* Dependent tokens another stack already allows need no matching. */
  size_t m = 0;
  for (size_t i = 0; i < nd; i++)
    if (!has_bit(mask, k->v.id[k->dtmp2[i]])) k->dtmp2[m++] = k->dtmp2[i];
  k->n_dep_tokens += m;
  if (m > 0) {
    int32_t ws = gr_dfa_intern(&k->dfa, s->set, (uint32_t)s->n, &s->utf8);
    if (ws < 0 || walk_list(k, ws, k->dtmp2, m, mask, 0) < 0) return -1;
  }
  add_eog(k, s, mask);
  return popcount_mask(mask, k->n_words);
}

/* A state inside a character, as the representative of its class when
 * that has the same mask: when every stack that can take some character
 * the prefix can still become takes all of them, and all of the
 * representative's too, the mask depends on which stacks those are, the
 * prefix's length and the validity of its continuations (its class), not
 * on its bytes: each stack then takes exactly the valid completions, and
 * goes on as it would after any of them (successors do not depend on the
 * character). So the (few) classes share cache entries where the
 * (thousands of) prefixes of a large vocabulary would each be a walk.
 * Writes the canonical state into *c (its set in k->cset); 0 if s is not
 * such a state, -1 on OOM. */
static int canon_partial(gr_masker *k, const gr_state *s, gr_state *c) {
  const brisk_grammar *g = k->m.g;
  uint32_t lo, hi, rlo, rhi;
  if (s->ended || s->utf8.n == 0 || !gr_utf8_range(&s->utf8, &lo, &hi)) return 0;
  gr_utf8 rep;
  gr_utf8_class(&s->utf8, &rep);
  if (!gr_utf8_range(&rep, &rlo, &rhi)) return 0;
  if (brisk_grow((void **)&k->cset, &k->cap_cset, (size_t)s->n + 1, sizeof *k->cset)) return -1;
  int n = 0;
  for (int i = 0; i < s->n; i++) {
    int32_t x = s->set[i];
    if (x < GR_FIRST_NODE) continue; /* takes nothing: gone once the character ends */
    uint32_t set = g->elems[k->m.nodes[x].pos].value;
    if (!gr_set_meets(g, set, lo, hi)) continue;
    if (!gr_set_covers(g, set, lo, hi) || !gr_set_covers(g, set, rlo, rhi)) return 0;
    k->cset[n++] = x;
  }
  *c = (gr_state){.set = k->cset, .n = n, .cap = n, .utf8 = rep};
  return 1;
}

brisk_status gr_mask(gr_masker *k, const gr_state *s, const uint32_t **out, int32_t *n_allowed) {
  gr_state canon;
  int r = canon_partial(k, s, &canon);
  if (r < 0) return brisk_error_oom();
  if (r) s = &canon;
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
  /* Filled in place, in the slot the new entry takes (filling makes no
   * state entries, and the cache is cleared first if full), so that a miss
   * writes its mask once. */
  if (k->n_entries == k->cap_entries) clear_cache(k);
  if (masks_alloc(k, 0)) return brisk_error_oom();
  uint32_t *mask = k->masks + k->n_entries * (size_t)k->n_words;
  k->m.err = BRISK_OK;
  int32_t allowed = fill(k, s, r, mask);
  if (allowed >= 0) {
    e = add_entry(k, h, s->set, s->n, tag, s->utf8.byte, s->utf8.n);
    if (e < 0) allowed = -1;
  }
  if (allowed < 0) {
    brisk_status st = k->m.err ? k->m.err : brisk_error_oom();
    k->m.err = BRISK_OK;
    return st;
  }
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
