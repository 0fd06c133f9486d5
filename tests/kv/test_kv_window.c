/* Attention sinks + sliding window in the KV manager: a windowed sequence
 * keeps its sink blocks and at least its last `window` tokens, evicts whole
 * blocks between them as it grows, maps positions to table positions, and
 * rolls a failed batch back exactly. A simulated block storage (each token
 * writes its position into its slot) checks what every table position
 * holds against an independent account of which positions are kept. */
#include "test_support.h"

#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

typedef struct sim {
  brisk_kv *kv;
  int32_t bs, n_blocks;
  int32_t *storage; /* [n_blocks * bs]: the position written in each slot */
  int32_t len;      /* positions fed to sequence 0 */
  int32_t peak;     /* most blocks held at once */
} sim;

static void sim_init(sim *m, int32_t n_blocks, int32_t bs, bool prefix) {
  memset(m, 0, sizeof *m);
  m->bs = bs;
  m->n_blocks = n_blocks;
  assert_int_equal(brisk_kv_create(n_blocks, bs, 2, prefix, &m->kv), BRISK_OK);
  m->storage = calloc((size_t)n_blocks * (size_t)bs, sizeof *m->storage);
}

static void sim_free(sim *m) {
  brisk_kv_free(m->kv);
  free(m->storage);
}

/* Reserves count positions of sequence 0 in one batch and writes them;
 * commits unless told to abort. */
static brisk_status feed(sim *m, int32_t count, bool abort) {
  int32_t seq[64], pos[64], tok[64];
  int64_t slot[64];
  brisk_kv_copy copies[64];
  int32_t n_copies;
  for (int32_t i = 0; i < count; i++) {
    seq[i] = 0;
    pos[i] = m->len + i;
    tok[i] = 7;
  }
  brisk_status st = brisk_kv_reserve(m->kv, count, seq, pos, tok, slot, copies, &n_copies);
  if (st) return st;
  assert_int_equal(n_copies, 0);
  /* The most blocks held at once: evicted ones wait for the commit. */
  int32_t used = m->n_blocks - brisk_kv_n_free_blocks(m->kv);
  if (used > m->peak) m->peak = used;
  for (int32_t i = 0; i < count; i++) m->storage[slot[i]] = pos[i];
  if (abort) {
    brisk_kv_abort(m->kv, 0, m->len);
    return BRISK_E_INTERNAL;
  }
  brisk_kv_commit(m->kv, 0, m->len);
  m->len += count;
  return BRISK_OK;
}

/* The positions sequence 0 must hold, counted independently: the sink
 * blocks, then a window whose start only moves by whole blocks, and only
 * over positions written before the batch that moved it. */
typedef struct kept {
  int32_t sink_tokens, first; /* positions [0, sink_tokens) and [first, len) */
} kept;

static void kept_advance(kept *k, int32_t bs, int32_t window, int32_t before, int32_t after) {
  if (after <= k->sink_tokens) {
    k->first = after;
    return;
  }
  if (k->first < k->sink_tokens) k->first = k->sink_tokens;
  while (after - k->first - bs >= window && k->first + bs <= before) k->first += bs;
}

static void check_held(const sim *m, const kept *k) {
  int32_t nb;
  const int32_t *table = brisk_kv_block_table(m->kv, 0, &nb);
  int32_t held = brisk_kv_seq_held(m->kv, 0), ev = brisk_kv_seq_evicted(m->kv, 0);
  int32_t n_sink = k->sink_tokens < m->len ? k->sink_tokens : m->len;
  int32_t first = k->first > n_sink ? k->first : n_sink;
  assert_int_equal(brisk_kv_seq_len(m->kv, 0), m->len);
  assert_int_equal(held, n_sink + (m->len - first));
  assert_int_equal(ev, first - n_sink);
  assert_int_equal(ev % m->bs, 0);
  assert_int_equal(nb, (held + m->bs - 1) / m->bs);
  for (int32_t p = 0; p < held; p++) {
    int32_t want = p < n_sink ? p : p + ev;
    assert_int_equal(m->storage[table[p / m->bs] * m->bs + p % m->bs], want);
  }
  /* Nothing else is held. */
  assert_int_equal(brisk_kv_n_free_blocks(m->kv), m->n_blocks - nb);
}

/* One token at a time over 10x the window, in a pool of a fifth of that:
 * the blocks held never pass sinks + window + one block, and the kept
 * positions are exactly the sinks and the newest ones. */
static void test_bounded_generation(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_window_gen");
  for (int round = 0; round < 12; round++) {
    int32_t bs = 1 + (int32_t)(test_rng_u64(&r) % 8);
    int32_t sinks = (int32_t)(test_rng_u64(&r) % 9), window = 1 + (int32_t)(test_rng_u64(&r) % 24);
    int32_t sink_blocks = (sinks + bs - 1) / bs;
    int32_t bound = sink_blocks + (window + bs - 1) / bs + 1;
    sim m;
    sim_init(&m, bound + 1, bs, round % 2 == 0);
    assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, sinks, window), BRISK_OK);
    kept k = {sink_blocks * bs, 0};
    int32_t most = 0, total = sink_blocks * bs + 10 * (window + bs); /* 10x what it holds */
    while (m.len < total) {
      int32_t before = m.len;
      /* Mostly single tokens; now and then a chunk (never past the pool). */
      int32_t count = test_rng_u64(&r) % 4 ? 1 : 1 + (int32_t)(test_rng_u64(&r) % (uint64_t)bs);
      assert_int_equal(feed(&m, count, false), BRISK_OK);
      kept_advance(&k, bs, window, before, m.len);
      check_held(&m, &k);
      int32_t nb;
      brisk_kv_block_table(m.kv, 0, &nb);
      if (nb > most) most = nb;
      if (m.len > sink_blocks * bs + window + 2 * bs)
        assert_true(brisk_kv_seq_held(m.kv, 0) - sink_blocks * bs >= window);
    }
    assert_true(most <= bound);
    assert_true(brisk_kv_seq_evicted(m.kv, 0) > 0);
    assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 0); /* nothing published */
    assert_int_equal(brisk_kv_seq_free(m.kv, 0), BRISK_OK);
    assert_int_equal(brisk_kv_n_free_blocks(m.kv), m.n_blocks);
    sim_free(&m);
  }
}

/* Batches of up to `window` tokens: the blocks held at once (evicted ones
 * included until their batch commits) stay within sinks + 2 windows + 3
 * blocks, the bound brisk.h states, in a pool of just that. */
static void test_bounded_chunks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_window_chunks");
  for (int round = 0; round < 12; round++) {
    int32_t bs = 1 + (int32_t)(test_rng_u64(&r) % 8);
    int32_t sinks = (int32_t)(test_rng_u64(&r) % 9), window = 1 + (int32_t)(test_rng_u64(&r) % 40);
    int32_t sink_tokens = (sinks + bs - 1) / bs * bs;
    int32_t bound = (sink_tokens + 2 * window + 3 * bs + bs - 1) / bs;
    sim m;
    sim_init(&m, bound, bs, false);
    assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, sinks, window), BRISK_OK);
    kept k = {sink_tokens, 0};
    while (m.len < sink_tokens + 10 * (window + bs)) {
      int32_t before = m.len, count = 1 + (int32_t)(test_rng_u64(&r) % (uint64_t)window);
      if (count > 64) count = 64;
      assert_int_equal(feed(&m, count, false), BRISK_OK);
      kept_advance(&k, bs, window, before, m.len);
      check_held(&m, &k);
    }
    assert_true(m.peak <= bound);
    sim_free(&m);
  }
}

/* A batch that evicts and then fails is rolled back exactly: the evicted
 * blocks return to their places, the new ones go. */
static void test_abort_restores(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 16, 4, false);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 4, 8), BRISK_OK);
  kept k = {4, 0};
  for (int32_t i = 0; i < 30; i++) {
    int32_t before = m.len;
    assert_int_equal(feed(&m, 1, false), BRISK_OK);
    kept_advance(&k, 4, 8, before, m.len);
  }
  check_held(&m, &k);
  int32_t ev = brisk_kv_seq_evicted(m.kv, 0), nb0;
  const int32_t *t = brisk_kv_block_table(m.kv, 0, &nb0);
  int32_t table[16];
  memcpy(table, t, (size_t)nb0 * sizeof *t);
  /* 6 tokens evict at least one block. */
  assert_int_equal(feed(&m, 6, true), BRISK_E_INTERNAL);
  assert_int_equal(brisk_kv_seq_evicted(m.kv, 0), ev);
  int32_t nb;
  t = brisk_kv_block_table(m.kv, 0, &nb);
  assert_int_equal(nb, nb0);
  assert_memory_equal(t, table, (size_t)nb * sizeof *t);
  check_held(&m, &k);
  /* The same batch committed. */
  int32_t before = m.len;
  assert_int_equal(feed(&m, 6, false), BRISK_OK);
  kept_advance(&k, 4, 8, before, m.len);
  assert_true(brisk_kv_seq_evicted(m.kv, 0) > ev);
  check_held(&m, &k);
  sim_free(&m);
}

/* What a windowed sequence refuses, and the truncation rules. */
static void test_rules(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 16, 4, true);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, -1, 8), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 4, 0), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 0, -2), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 2, 4, 8), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 2, 8), BRISK_OK);
  int32_t sink_tokens, window;
  assert_true(brisk_kv_seq_windowed(m.kv, 0, &sink_tokens, &window));
  assert_int_equal(sink_tokens, 4); /* 2 rounded up to a block */
  assert_int_equal(window, 8);
  assert_false(brisk_kv_seq_windowed(m.kv, 1, NULL, NULL));
  kept k = {4, 0};
  for (int32_t i = 0; i < 40; i++) {
    int32_t before = m.len;
    assert_int_equal(feed(&m, 1, false), BRISK_OK);
    kept_advance(&k, 4, 8, before, m.len);
  }
  check_held(&m, &k);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 0, 0), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "empty sequence"));
  /* Never shared. */
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 1), BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_kv_seq_fork(m.kv, 1, 0), BRISK_E_UNSUPPORTED);
  /* Truncation: into the evicted positions is refused; after the sinks
   * plus the evicted ones it keeps what is held. */
  int32_t ev = brisk_kv_seq_evicted(m.kv, 0);
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, ev + 3), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "evicted"));
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, 41), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, ev + 6), BRISK_OK);
  m.len = ev + 6;
  k.first = m.len < k.first ? m.len : k.first;
  check_held(&m, &k);
  /* Growing again evicts from there. */
  for (int32_t i = 0; i < 20; i++) {
    int32_t before = m.len;
    assert_int_equal(feed(&m, 1, false), BRISK_OK);
    kept_advance(&k, 4, 8, before, m.len);
    check_held(&m, &k);
  }
  /* Freed, it starts over with its window still set. */
  assert_int_equal(brisk_kv_seq_free(m.kv, 0), BRISK_OK);
  m.len = 0;
  k.first = 0;
  assert_int_equal(brisk_kv_seq_evicted(m.kv, 0), 0);
  assert_true(brisk_kv_seq_windowed(m.kv, 0, NULL, NULL));
  /* A windowed sequence attaches no prefix, even one that is cached. */
  int32_t toks[13] = {0}, reused = -1;
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 1, 0, 0), BRISK_OK);
  int32_t seq[12], pos[12];
  int64_t slot[12];
  brisk_kv_copy copies[12];
  int32_t nc;
  for (int32_t i = 0; i < 12; i++) seq[i] = 1, pos[i] = i;
  assert_int_equal(brisk_kv_reserve(m.kv, 12, seq, pos, toks, slot, copies, &nc), BRISK_OK);
  brisk_kv_commit(m.kv, 1, 0);
  assert_int_equal(brisk_kv_match_prefix(m.kv, 0, toks, 13, &reused), BRISK_OK);
  assert_int_equal(reused, 0);
  sim_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounded_generation),
      cmocka_unit_test(test_bounded_chunks),
      cmocka_unit_test(test_abort_restores),
      cmocka_unit_test(test_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
