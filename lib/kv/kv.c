#include "kv/kv.h"

#include "core/alloc.h"
#include "core/error.h"
#include "kv/host_tier.h"
#include "kv/prefix_cache.h"

#include <string.h>

typedef struct kv_seq {
  int32_t len;      /* tokens held */
  int32_t n_blocks; /* always ceil(len / block_size) */
  /* Blocks held for tokens not yet written (brisk_kv_seq_reserve), stored
   * after the table: blocks[n_blocks .. n_blocks + n_spare). They are not
   * part of the table, so readers of it (snapshots, swap) never see them. */
  int32_t n_spare;
  int32_t promise; /* blocks promised for its later growth (kv->n_promised counts them) */
  size_t cap;
  int32_t *blocks; /* [cap] block table, then the spare blocks */
  /* Attention sinks + sliding window (window > 0): the table holds the
   * first sink_blocks blocks and then the newest ones; `evicted` tokens
   * (whole blocks) between them are gone, so table position p holds the
   * token at position p + evicted once p is past the sinks. A batch's
   * evictions wait in `limbo` (still held) until commit or abort. */
  int32_t sink_blocks, window, evicted;
  int32_t n_limbo;
  size_t limbo_cap;
  int32_t *limbo; /* [limbo_cap] */
} kv_seq;

struct brisk_kv {
  brisk_block_pool pool;
  int32_t block_size;
  int32_t n_seq_max;
  bool prefix;           /* prefix caching on: full blocks are published */
  brisk_prefix_cache pc; /* allocated only when prefix is set */
  kv_seq *seqs;          /* [n_seq_max] */
  int64_t n_promised;    /* sum of the sequences' promises */
  int32_t *next;         /* [n_seq_max] scratch: next expected position while reserving */
  int32_t *touched;      /* [n_seq_max] scratch: sequences in the batch, in first-seen order */
  int32_t *cow_sources;  /* [n_seq_max] scratch: blocks replaced by copies, released last */
  int32_t *n_evict; /* [n_seq_max] scratch: blocks a windowed sequence evicts while reserving */
  /* [n_blocks][block_size] the token id written in each slot: the prefix
   * cache's array, or one of its own when the prefix cache is off, so that
   * a sequence's tokens can always be read back (snapshots). */
  int32_t *tokens;
  /* Copies of published blocks the pool evicted (off: budget 0), and the
   * caller's block copies to and from it. */
  brisk_host_tier host;
  brisk_kv_host_io io;
};

brisk_status brisk_kv_create(int32_t n_blocks, int32_t block_size, int32_t n_seq_max,
                             bool prefix_cache, brisk_kv **out) {
  if (n_blocks < 1 || block_size < 1 || n_seq_max < 1)
    return brisk_error(
        BRISK_E_INVALID_ARGUMENT,
        "KV cache needs at least one block, block size and sequence (got %d, %d, %d)", n_blocks,
        block_size, n_seq_max);
  brisk_kv *kv = brisk_calloc(1, sizeof *kv);
  if (!kv) return brisk_error_oom();
  kv->block_size = block_size;
  kv->n_seq_max = n_seq_max;
  kv->seqs = brisk_calloc((size_t)n_seq_max, sizeof *kv->seqs);
  kv->next = brisk_calloc((size_t)n_seq_max, sizeof *kv->next);
  kv->touched = brisk_calloc((size_t)n_seq_max, sizeof *kv->touched);
  kv->cow_sources = brisk_calloc((size_t)n_seq_max, sizeof *kv->cow_sources);
  kv->n_evict = brisk_calloc((size_t)n_seq_max, sizeof *kv->n_evict);
  kv->prefix = prefix_cache;
  brisk_host_tier_init(&kv->host, block_size, 0, 0);
  if (!kv->seqs || !kv->next || !kv->touched || !kv->cow_sources || !kv->n_evict ||
      brisk_block_pool_init(&kv->pool, n_blocks) ||
      (prefix_cache && brisk_prefix_cache_init(&kv->pc, n_blocks, block_size))) {
    brisk_kv_free(kv);
    return brisk_error_oom();
  }
  kv->tokens = prefix_cache ? kv->pc.tokens
                            : brisk_malloc((size_t)n_blocks * (size_t)block_size * sizeof(int32_t));
  if (!kv->tokens) {
    brisk_kv_free(kv);
    return brisk_error_oom();
  }
  *out = kv;
  return BRISK_OK;
}

void brisk_kv_free(brisk_kv *kv) {
  if (!kv) return;
  if (kv->seqs)
    for (int32_t s = 0; s < kv->n_seq_max; s++) {
      brisk_free(kv->seqs[s].blocks);
      brisk_free(kv->seqs[s].limbo);
    }
  brisk_free(kv->seqs);
  brisk_free(kv->next);
  brisk_free(kv->touched);
  brisk_free(kv->cow_sources);
  brisk_free(kv->n_evict);
  if (!kv->prefix) brisk_free(kv->tokens);
  brisk_block_pool_destroy(&kv->pool);
  brisk_prefix_cache_destroy(&kv->pc);
  brisk_host_tier_destroy(&kv->host);
  brisk_free(kv);
}

void brisk_kv_set_host_tier(brisk_kv *kv, uint64_t budget, size_t block_bytes,
                            const brisk_kv_host_io *io) {
  brisk_host_tier_destroy(&kv->host);
  brisk_host_tier_init(&kv->host, kv->block_size, block_bytes, kv->prefix ? budget : 0);
  kv->io = *io;
}

const brisk_host_tier *brisk_kv_host_tier(const brisk_kv *kv) { return &kv->host; }

int32_t brisk_kv_block_size(const brisk_kv *kv) { return kv->block_size; }
int32_t brisk_kv_n_blocks(const brisk_kv *kv) { return kv->pool.n_blocks; }
int32_t brisk_kv_n_free_blocks(const brisk_kv *kv) { return brisk_block_pool_available(&kv->pool); }
int32_t brisk_kv_n_cached_blocks(const brisk_kv *kv) { return kv->pool.n_cached; }
int32_t brisk_kv_block_ref(const brisk_kv *kv, int32_t block) { return kv->pool.ref[block]; }
bool brisk_kv_block_is_published(const brisk_kv *kv, int32_t block) {
  return brisk_prefix_cache_is_published(&kv->pc, block);
}
int32_t brisk_kv_n_seq_max(const brisk_kv *kv) { return kv->n_seq_max; }

static brisk_status check_seq(const brisk_kv *kv, int32_t seq) {
  if (seq < 0 || seq >= kv->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "sequence id %d is out of range [0, %d)", seq,
                       kv->n_seq_max);
  return BRISK_OK;
}

int32_t brisk_kv_seq_len(const brisk_kv *kv, int32_t seq) {
  return seq >= 0 && seq < kv->n_seq_max ? kv->seqs[seq].len + kv->seqs[seq].evicted : 0;
}

int32_t brisk_kv_seq_held(const brisk_kv *kv, int32_t seq) {
  return seq >= 0 && seq < kv->n_seq_max ? kv->seqs[seq].len : 0;
}

int32_t brisk_kv_seq_evicted(const brisk_kv *kv, int32_t seq) {
  return seq >= 0 && seq < kv->n_seq_max ? kv->seqs[seq].evicted : 0;
}

int32_t brisk_kv_seq_evicting(const brisk_kv *kv, int32_t seq) {
  return seq >= 0 && seq < kv->n_seq_max ? kv->seqs[seq].n_limbo * kv->block_size : 0;
}

bool brisk_kv_seq_windowed(const brisk_kv *kv, int32_t seq, int32_t *sink_tokens, int32_t *window) {
  const kv_seq *s = seq >= 0 && seq < kv->n_seq_max ? &kv->seqs[seq] : NULL;
  if (sink_tokens) *sink_tokens = s ? s->sink_blocks * kv->block_size : 0;
  if (window) *window = s ? s->window : 0;
  return s && s->window > 0;
}

void brisk_kv_seq_tokens(const brisk_kv *kv, int32_t seq, int32_t *tokens) {
  const kv_seq *s = &kv->seqs[seq];
  for (int32_t p = 0; p < s->len; p++)
    tokens[p] = kv->tokens[(size_t)s->blocks[p / kv->block_size] * (size_t)kv->block_size +
                           (size_t)(p % kv->block_size)];
}

const int32_t *brisk_kv_block_table(const brisk_kv *kv, int32_t seq, int32_t *n_blocks) {
  *n_blocks = kv->seqs[seq].n_blocks;
  return kv->seqs[seq].blocks;
}

static int32_t blocks_for(const brisk_kv *kv, int32_t len) {
  return (int32_t)(((int64_t)len + kv->block_size - 1) / kv->block_size);
}

/* Whether appending to seq must first copy its partly filled last block:
 * it is shared, or published (and so immutable: the sequence was truncated
 * into it). */
static bool needs_cow(const brisk_kv *kv, const kv_seq *s) {
  if (s->len % kv->block_size == 0) return false;
  int32_t last = s->blocks[s->n_blocks - 1];
  return kv->pool.ref[last] > 1 || brisk_prefix_cache_is_published(&kv->pc, last);
}

/* Keeps a copy of published block b, which the pool is evicting, in the
 * host tier (its K/V is intact until the caller writes the batch). A block
 * the tier holds already is only marked used; one it cannot keep (no
 * memory, a failed copy) is dropped, as without the tier. */
static void spill(brisk_kv *kv, int32_t b) {
  brisk_host_tier *t = &kv->host;
  if (!brisk_host_tier_on(t)) return;
  const int32_t *tok = kv->tokens + (size_t)b * (size_t)kv->block_size;
  brisk_host_block *h = brisk_host_tier_find(t, kv->pc.hash[b], kv->pc.parent[b], tok);
  if (h) {
    brisk_host_tier_touch(t, h);
    t->n_dedup++;
    return;
  }
  h = brisk_host_tier_add(t, kv->pc.hash[b], kv->pc.parent[b], tok);
  if (!h) return;
  if (kv->io.download(kv->io.user, b, brisk_host_tier_data(t, h))) {
    brisk_host_tier_remove(t, h);
    t->n_dropped++;
    return;
  }
  t->n_stored++;
}

/* A block of the pool (the caller checked one is available); one evicted
 * from the prefix cache goes to the host tier and is forgotten here. */
static int32_t pool_take(brisk_kv *kv) {
  bool evicted;
  int32_t b = brisk_block_pool_alloc(&kv->pool, &evicted);
  if (evicted) {
    spill(kv, b);
    brisk_prefix_cache_unpublish(&kv->pc, b);
  }
  return b;
}

/* A block for new tokens of s: one of its spare blocks (the last), else a
 * block of the pool. */
static int32_t take_block(brisk_kv *kv, kv_seq *s) {
  if (s->n_spare > 0) return s->blocks[s->n_blocks + --s->n_spare];
  return pool_take(kv);
}

/* Drops one holder; a published block then stays cached for reuse. */
static void release_block(brisk_kv *kv, int32_t block) {
  brisk_block_pool_decref(&kv->pool, block, brisk_prefix_cache_is_published(&kv->pc, block));
}

/* Returns s's spare blocks to the pool (never published: they go free). */
static void release_spares(brisk_kv *kv, kv_seq *s) {
  while (s->n_spare > 0) release_block(kv, s->blocks[s->n_blocks + --s->n_spare]);
}

static void set_promise(brisk_kv *kv, kv_seq *s, int32_t blocks) {
  kv->n_promised += blocks - s->promise;
  s->promise = blocks;
}

static int64_t blocks_for64(const brisk_kv *kv, int64_t len) {
  return (len + kv->block_size - 1) / kv->block_size;
}

/* Blocks s needs, beyond those it holds (table and spares), to take tokens
 * up to length `to`: the new blocks and the copy of a shared or published
 * last block. */
static int32_t blocks_short(const brisk_kv *kv, const kv_seq *s, int64_t to) {
  if (to <= s->len) return 0;
  int64_t want = ((to + kv->block_size - 1) / kv->block_size) + (needs_cow(kv, s) ? 1 : 0);
  int64_t have = (int64_t)s->n_blocks + s->n_spare;
  return want > have ? (int32_t)(want - have) : 0;
}

/* Blocks windowed sequence s evicts when it grows to `to` table
 * positions: its oldest blocks after the sinks, while the window then still
 * holds at least `window` tokens, and only blocks written before (so a
 * batch never evicts its own tokens). 0 without a window. */
static int32_t window_evictions(const brisk_kv *kv, const kv_seq *s, int64_t to) {
  if (s->window == 0) return 0;
  int64_t bs = kv->block_size, in_window = to - (int64_t)s->sink_blocks * bs;
  int32_t k = 0;
  while (in_window - bs >= s->window && (int64_t)(s->sink_blocks + k + 1) * bs <= s->len) {
    k++;
    in_window -= bs;
  }
  return k;
}

/* Moves the k oldest blocks after s's sinks out of its table into its
 * limbo (held until commit or abort); later blocks and the spares move
 * down. Room for them was made (limbo_cap). */
static void evict(brisk_kv *kv, kv_seq *s, int32_t k) {
  if (k == 0) return;
  int32_t *first = s->blocks + s->sink_blocks;
  memcpy(s->limbo + s->n_limbo, first, (size_t)k * sizeof *first);
  s->n_limbo += k;
  memmove(first, first + k,
          (size_t)(s->n_blocks - s->sink_blocks - k + s->n_spare) * sizeof *first);
  s->n_blocks -= k;
  s->len -= k * kv->block_size;
  s->evicted += k * kv->block_size;
}

brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t n, const int32_t *seq, const int32_t *pos,
                              const int32_t *token, int64_t *slot, brisk_kv_copy *copies,
                              int32_t *n_copies) {
  *n_copies = 0;
  int32_t n_touched = 0;
  brisk_status st = BRISK_OK;
  /* 1. Validate: every sequence continues where it stands. */
  for (int32_t i = 0; i < n && !st; i++) {
    int32_t s = seq[i];
    if ((st = check_seq(kv, s))) break;
    bool seen = false;
    for (int32_t t = 0; t < n_touched && !seen; t++) seen = kv->touched[t] == s;
    if (!seen) {
      kv->touched[n_touched++] = s;
      kv->next[s] = kv->seqs[s].len + kv->seqs[s].evicted;
    }
    if (pos[i] != kv->next[s])
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "batch token %d: sequence %d continues at position %d, got %d", i, s,
                       kv->next[s], pos[i]);
    else if (kv->next[s] == INT32_MAX)
      st = brisk_error(BRISK_E_INVALID_ARGUMENT, "sequence %d is at the maximum length", s);
    else
      kv->next[s]++;
  }
  if (st) return st;
  /* 2. Count blocks and make room in the tables before changing anything.
   * From here next[] is in table positions (after evictions). */
  int64_t need = 0;
  for (int32_t t = 0; t < n_touched; t++) {
    int32_t id = kv->touched[t];
    kv_seq *s = &kv->seqs[id];
    kv->next[id] -= s->evicted;
    int32_t k = window_evictions(kv, s, kv->next[id]);
    kv->n_evict[id] = k;
    kv->next[id] -= k * kv->block_size;
    int32_t want = blocks_for(kv, kv->next[id]);
    if (k == 0) {
      need += blocks_short(kv, s, kv->next[id]);
    } else {
      /* A windowed sequence is never shared: no copy-on-write. */
      int32_t have = s->n_blocks - k + s->n_spare;
      need += want > have ? want - have : 0;
      if (brisk_grow((void **)&s->limbo, &s->limbo_cap, (size_t)(s->n_limbo + k), sizeof *s->limbo))
        return brisk_error_oom();
    }
    if (brisk_grow((void **)&s->blocks, &s->cap, (size_t)want + (size_t)s->n_spare + (size_t)k,
                   sizeof *s->blocks))
      return brisk_error_oom();
  }
  int32_t avail = brisk_block_pool_available(&kv->pool);
  if (need > avail)
    return brisk_error(BRISK_E_KV_FULL,
                       "KV cache full: the batch needs %lld blocks, %d are available",
                       (long long)need, avail);
  /* 3. Commit: copy shared or published last blocks, then append fresh
   * ones. The replaced blocks are released only after every allocation, so
   * none of them is evicted and reused before the caller copies it. */
  for (int32_t t = 0; t < n_touched; t++) {
    int32_t id = kv->touched[t];
    kv_seq *s = &kv->seqs[id];
    evict(kv, s, kv->n_evict[id]);
    if (needs_cow(kv, s)) {
      int32_t old = s->blocks[s->n_blocks - 1], fresh = take_block(kv, s);
      copies[*n_copies] = (brisk_kv_copy){old, fresh};
      kv->cow_sources[(*n_copies)++] = old;
      memcpy(kv->tokens + (size_t)fresh * (size_t)kv->block_size,
             kv->tokens + (size_t)old * (size_t)kv->block_size,
             (size_t)kv->block_size * sizeof *kv->tokens);
      s->blocks[s->n_blocks - 1] = fresh;
    }
    int32_t want = blocks_for(kv, kv->next[id]);
    /* A spare sits right after the table: taking the last one and
     * appending it keeps the rest of them after the table. */
    while (s->n_blocks < want) {
      int32_t b = take_block(kv, s);
      if (s->n_spare > 0) s->blocks[s->n_blocks + s->n_spare] = s->blocks[s->n_blocks];
      s->blocks[s->n_blocks++] = b;
    }
    s->len = kv->next[id];
  }
  for (int32_t c = 0; c < *n_copies; c++) release_block(kv, kv->cow_sources[c]);
  for (int32_t i = 0; i < n; i++) {
    const kv_seq *s = &kv->seqs[seq[i]];
    int32_t p = pos[i] - s->evicted; /* its table position */
    slot[i] = (int64_t)s->blocks[p / kv->block_size] * kv->block_size + p % kv->block_size;
    /* Only this sequence's unpublished blocks are written (copies above). */
    kv->tokens[slot[i]] = token[i];
  }
  return BRISK_OK;
}

/* Chain hash of the block before block index b of s (the root for b = 0). */
static uint64_t parent_hash(const brisk_kv *kv, const kv_seq *s, int32_t b) {
  return b == 0 ? BRISK_PREFIX_ROOT_HASH : kv->pc.hash[s->blocks[b - 1]];
}

void brisk_kv_commit(brisk_kv *kv, int32_t seq, int32_t from_len) {
  if (seq < 0 || seq >= kv->n_seq_max) return;
  kv_seq *s = &kv->seqs[seq];
  while (s->n_limbo > 0) release_block(kv, s->limbo[--s->n_limbo]); /* evicted for good */
  /* A windowed sequence's blocks are not at their positions' places in a
   * chain (and its sinks are rewritten): never published. */
  if (!kv->prefix || s->window > 0) return;
  for (int32_t b = from_len / kv->block_size; b < s->len / kv->block_size; b++)
    if (!brisk_prefix_cache_is_published(&kv->pc, s->blocks[b]))
      brisk_prefix_cache_publish(&kv->pc, s->blocks[b], parent_hash(kv, s, b));
}

/* Moves the block holding tokens after `parent` (chain hash `hash`) back
 * from the host tier into a block of the pool, held once and published as
 * if decoded; -1 when the tier lacks it, the pool has no block to spare or
 * the copy fails (the block goes back free, the copy back to the tier). */
static int32_t restore(brisk_kv *kv, uint64_t parent, uint64_t hash, const int32_t *tokens) {
  brisk_host_tier *t = &kv->host;
  if (!brisk_host_tier_on(t)) return -1;
  brisk_host_block *h = brisk_host_tier_find(t, hash, parent, tokens);
  if (!h) {
    t->n_misses++;
    return -1;
  }
  if (brisk_block_pool_available(&kv->pool) == 0) return -1;
  /* Out of the tier first: the block the pool evicts for it takes its
   * place there, and cannot push it (or the rest of this prefix) out. */
  brisk_host_tier_detach(t, h);
  int32_t b = pool_take(kv);
  if (kv->io.upload(kv->io.user, b, brisk_host_tier_data(t, h))) {
    brisk_host_tier_attach(t, h);
    brisk_block_pool_decref(&kv->pool, b, false);
    return -1;
  }
  brisk_host_tier_release(h);
  memcpy(kv->tokens + (size_t)b * (size_t)kv->block_size, tokens,
         (size_t)kv->block_size * sizeof *tokens);
  brisk_prefix_cache_publish(&kv->pc, b, parent);
  t->n_hits++;
  return b;
}

brisk_status brisk_kv_match_prefix(brisk_kv *kv, int32_t seq, const int32_t *tokens, int32_t n,
                                   int32_t *reused) {
  brisk_status st = check_seq(kv, seq);
  if (st) return st;
  kv_seq *s = &kv->seqs[seq];
  if (s->len != 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "prefix match needs an empty sequence; sequence %d holds %d tokens", seq,
                       s->len);
  *reused = 0;
  if (!kv->prefix || n < 2 || s->window > 0) return BRISK_OK;
  /* Full blocks only, and at least one token left for the caller to decode. */
  int32_t max_blocks = (n - 1) / kv->block_size;
  if (max_blocks > kv->pool.n_blocks) max_blocks = kv->pool.n_blocks;
  if (max_blocks == 0) return BRISK_OK;
  if (brisk_grow((void **)&s->blocks, &s->cap, (size_t)max_blocks, sizeof *s->blocks))
    return brisk_error_oom();
  release_spares(kv, s); /* the table takes their place */
  uint64_t parent = BRISK_PREFIX_ROOT_HASH, hash;
  int32_t k = 0;
  while (k < max_blocks) {
    const int32_t *tk = tokens + (size_t)k * (size_t)kv->block_size;
    int32_t b = brisk_prefix_cache_find(&kv->pc, parent, tk, &hash);
    /* Held at once, so that a block restored later in the walk cannot
     * evict it. A restored block is held already. */
    if (b >= 0)
      brisk_block_pool_incref(&kv->pool, b);
    else if ((b = restore(kv, parent, hash, tk)) < 0)
      break;
    s->blocks[k++] = b;
    parent = hash;
  }
  s->n_blocks = k;
  s->len = k * kv->block_size;
  *reused = s->len;
  return BRISK_OK;
}

brisk_status brisk_kv_seq_reserve(brisk_kv *kv, int32_t seq, const brisk_kv_ask *ask) {
  brisk_status st = check_seq(kv, seq);
  if (st) return st;
  kv_seq *s = &kv->seqs[seq];
  if (ask->n_tokens < 0 || ask->n_known < 0 || ask->n_grow < 0 || ask->n_forks < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "KV reserve for sequence %d: negative count (tokens %d, known %d, grow "
                       "%d, forks %d)",
                       seq, ask->n_tokens, ask->n_known, ask->n_grow, ask->n_forks);
  /* Held now up to hold_to; the forks split off at fork_at; each copy
   * grows to grow_to. */
  int64_t hold_to = (int64_t)s->len + ask->n_tokens, fork_at = hold_to + ask->n_known,
          grow_to = fork_at + ask->n_grow;
  if (grow_to > INT32_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "KV reserve for sequence %d: %lld tokens exceed the maximum length", seq,
                       (long long)grow_to);
  int32_t hold = blocks_short(kv, s, hold_to);
  /* What reaching grow_to takes beyond hold_to, plus the forks' own blocks:
   * each copies the shared last block (when partly filled) and grows. */
  int64_t reach = blocks_short(kv, s, grow_to) - (int64_t)hold;
  int64_t per_fork = blocks_for64(kv, grow_to) - blocks_for64(kv, fork_at) +
                     (fork_at % kv->block_size != 0 ? 1 : 0);
  int64_t promise = reach + (int64_t)ask->n_forks * per_fork;
  if (s->window > 0) {
    /* Its evictions give blocks back as it grows: fed in batches of at most
     * its window it never holds more than its sinks, two windows and three
     * blocks (brisk_kv_seq_set_window), so that is all it is promised. */
    int64_t most = (int64_t)s->sink_blocks + blocks_for64(kv, 2 * (int64_t)s->window) + 3;
    int64_t left = most - ((int64_t)s->n_blocks + s->n_spare + hold);
    if (promise > left) promise = left > 0 ? left : 0;
  }
  int32_t avail = brisk_block_pool_available(&kv->pool);
  if (hold > avail)
    return brisk_error(BRISK_E_KV_FULL,
                       "KV cache full: sequence %d needs %d blocks for %d tokens, %d are available",
                       seq, hold, ask->n_tokens, avail);
  if (ask->admit) {
    /* The promises of the others stand; this one counts whole, but at most
     * the pool: a sequence larger than it is admitted into an empty pool. */
    int64_t others = kv->n_promised - s->promise;
    int64_t mine = (int64_t)hold + promise;
    int64_t held = (int64_t)s->n_blocks + s->n_spare;
    if (held + mine > kv->pool.n_blocks) mine = kv->pool.n_blocks - held;
    if (mine < hold) mine = hold;
    if (mine + others > avail)
      return brisk_error(BRISK_E_KV_FULL,
                         "KV cache full: admitting sequence %d takes %lld blocks, %d are "
                         "available and %lld promised to others",
                         seq, (long long)mine, avail, (long long)others);
  }
  if (brisk_grow((void **)&s->blocks, &s->cap, (size_t)(s->n_blocks + s->n_spare + hold),
                 sizeof *s->blocks))
    return brisk_error_oom();
  for (int32_t i = 0; i < hold; i++) s->blocks[s->n_blocks + s->n_spare++] = pool_take(kv);
  set_promise(kv, s, promise > INT32_MAX ? INT32_MAX : (int32_t)promise);
  return BRISK_OK;
}

int64_t brisk_kv_seq_room(const brisk_kv *kv, int32_t seq) {
  if (seq < 0 || seq >= kv->n_seq_max) return 0;
  const kv_seq *s = &kv->seqs[seq];
  int64_t blocks = (int64_t)s->n_spare + brisk_block_pool_available(&kv->pool);
  int64_t slack = (int64_t)s->n_blocks * kv->block_size - s->len;
  if (needs_cow(kv, s)) {
    /* The partly filled last block is copied first: its slack costs a block. */
    if (blocks < 1) return 0;
    blocks--;
  }
  int64_t room = slack + blocks * kv->block_size;
  int64_t left = (int64_t)INT32_MAX - s->len;
  return room < left ? room : left;
}

int64_t brisk_kv_n_promised(const brisk_kv *kv) { return kv->n_promised; }

brisk_status brisk_kv_seq_truncate(brisk_kv *kv, int32_t seq, int32_t len) {
  brisk_status st = check_seq(kv, seq);
  if (st) return st;
  kv_seq *s = &kv->seqs[seq];
  int32_t total = s->len + s->evicted;
  if (len < 0 || len > total)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "cannot truncate sequence %d of %d tokens to %d tokens", seq, total, len);
  /* Past the sinks of a windowed sequence, only what is still held. */
  int32_t sinks = s->sink_blocks * kv->block_size;
  if (len > 0 && s->evicted > 0 && len < s->evicted + sinks)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "cannot truncate windowed sequence %d to %d tokens: positions %d .. %d "
                       "were evicted",
                       seq, len, sinks, s->evicted + sinks - 1);
  while (s->n_limbo > 0) release_block(kv, s->limbo[--s->n_limbo]);
  int32_t held = len == 0 ? 0 : len - s->evicted;
  int32_t keep = blocks_for(kv, held);
  release_spares(kv, s);
  /* Last block first: the LRU then evicts a chain's tail before its head. */
  while (s->n_blocks > keep) release_block(kv, s->blocks[--s->n_blocks]);
  s->len = held;
  if (len == 0) {
    s->evicted = 0;
    set_promise(kv, s, 0);
  }
  return BRISK_OK;
}

void brisk_kv_abort(brisk_kv *kv, int32_t seq, int32_t from_len) {
  if (seq < 0 || seq >= kv->n_seq_max) return;
  kv_seq *s = &kv->seqs[seq];
  if (s->n_limbo > 0) {
    /* The evicted blocks go back between the sinks and the rest, oldest
     * first (room: the table held them before). */
    int32_t k = s->n_limbo, *first = s->blocks + s->sink_blocks;
    memmove(first + k, first, (size_t)(s->n_blocks - s->sink_blocks + s->n_spare) * sizeof *first);
    memcpy(first, s->limbo, (size_t)k * sizeof *first);
    s->n_limbo = 0;
    s->n_blocks += k;
    s->len += k * kv->block_size;
    s->evicted -= k * kv->block_size;
  }
  brisk_kv_seq_truncate(kv, seq, from_len);
}

brisk_status brisk_kv_seq_set_window(brisk_kv *kv, int32_t seq, int32_t n_sinks, int32_t window) {
  brisk_status st = check_seq(kv, seq);
  if (st) return st;
  kv_seq *s = &kv->seqs[seq];
  if (n_sinks < 0 || window < 0 || (window == 0 && n_sinks > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "sequence %d: %d sinks and a window of %d tokens; sinks >= 0 need a "
                       "window >= 1 (0 and 0 turn it off)",
                       seq, n_sinks, window);
  if (s->len != 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "sequence %d holds %d tokens: a window is set on an empty sequence", seq,
                       s->len);
  s->sink_blocks = (int32_t)(((int64_t)n_sinks + kv->block_size - 1) / kv->block_size);
  s->window = window;
  return BRISK_OK;
}

brisk_status brisk_kv_seq_free(brisk_kv *kv, int32_t seq) {
  return brisk_kv_seq_truncate(kv, seq, 0);
}

brisk_status brisk_kv_seq_fork(brisk_kv *kv, int32_t src, int32_t dst) {
  brisk_status st;
  if ((st = check_seq(kv, src)) || (st = check_seq(kv, dst))) return st;
  if (src == dst)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "cannot fork sequence %d onto itself", src);
  kv_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
  if (s->window > 0 || d->window > 0)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "cannot fork sequence %d onto %d: a sequence with a window (attention "
                       "sinks) is not shared",
                       src, dst);
  if (d->len != 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "fork target sequence %d is not empty (%d tokens); free it first", dst,
                       d->len);
  if (brisk_grow((void **)&d->blocks, &d->cap, (size_t)s->n_blocks, sizeof *d->blocks))
    return brisk_error_oom();
  release_spares(kv, d); /* the table takes their place */
  for (int32_t b = 0; b < s->n_blocks; b++) {
    d->blocks[b] = s->blocks[b];
    brisk_block_pool_incref(&kv->pool, s->blocks[b]);
  }
  d->n_blocks = s->n_blocks;
  d->len = s->len;
  return BRISK_OK;
}
