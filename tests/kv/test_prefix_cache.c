/* The prefix cache in the KV manager, against a simulated block storage in
 * which the K/V of position p is a value determined by the tokens [0, p]
 * (as a real model's is). So a sequence that reads back the right value at
 * every position holds the right blocks, whether it wrote them or attached
 * them from the cache; and a published block's values must never change. */
#include "test_support.h"

#include "core/hash.h"
#include "kv/kv.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NSEQ 5
#define MAXLEN 160

typedef struct sim {
  brisk_kv *kv;
  int32_t bs, n_blocks;
  uint64_t *storage;         /* [n_blocks * bs] simulated K/V per slot */
  uint64_t *snapshot;        /* [n_blocks * bs] values of published blocks when first seen */
  bool *snap_valid;          /* [n_blocks] */
  int32_t tok[NSEQ][MAXLEN]; /* each sequence's tokens */
  int32_t len[NSEQ];
} sim;

/* The K/V value of position p of a sequence of these tokens. */
static uint64_t kv_value(const int32_t *tokens, int32_t p) {
  uint64_t v = 1;
  for (int32_t i = 0; i <= p; i++) v = brisk_hash64(&tokens[i], sizeof tokens[i], v);
  return v;
}

static void sim_init(sim *m, int32_t n_blocks, int32_t bs, bool prefix) {
  memset(m, 0, sizeof *m);
  m->bs = bs;
  m->n_blocks = n_blocks;
  assert_int_equal(brisk_kv_create(n_blocks, bs, NSEQ, prefix, &m->kv), BRISK_OK);
  m->storage = calloc((size_t)n_blocks * (size_t)bs, sizeof *m->storage);
  m->snapshot = calloc((size_t)n_blocks * (size_t)bs, sizeof *m->snapshot);
  m->snap_valid = calloc((size_t)n_blocks, sizeof *m->snap_valid);
}

static void sim_free(sim *m) {
  brisk_kv_free(m->kv);
  free(m->storage);
  free(m->snapshot);
  free(m->snap_valid);
}

/* Every sequence reads back its values; published blocks are unchanged
 * since first seen; free + cached + held == n_blocks. */
static void sim_check(sim *m) {
  int32_t *held = calloc((size_t)m->n_blocks, sizeof *held);
  for (int32_t s = 0; s < NSEQ; s++) {
    assert_int_equal(brisk_kv_seq_len(m->kv, s), m->len[s]);
    int32_t nb;
    const int32_t *table = brisk_kv_block_table(m->kv, s, &nb);
    assert_int_equal(nb, (m->len[s] + m->bs - 1) / m->bs);
    for (int32_t b = 0; b < nb; b++) held[table[b]]++;
    uint64_t v = 1;
    for (int32_t p = 0; p < m->len[s]; p++) {
      v = brisk_hash64(&m->tok[s][p], sizeof(int32_t), v);
      assert_true(m->storage[(size_t)table[p / m->bs] * (size_t)m->bs + (size_t)(p % m->bs)] == v);
    }
  }
  int32_t n_held = 0, n_cached = 0;
  for (int32_t b = 0; b < m->n_blocks; b++) {
    assert_int_equal(brisk_kv_block_ref(m->kv, b), held[b]);
    n_held += held[b] > 0;
    bool pub = brisk_kv_block_is_published(m->kv, b);
    n_cached += pub && held[b] == 0;
    uint64_t *blk = m->storage + (size_t)b * (size_t)m->bs;
    uint64_t *snap = m->snapshot + (size_t)b * (size_t)m->bs;
    if (pub && m->snap_valid[b])
      assert_memory_equal(blk, snap, sizeof *blk * (size_t)m->bs);
    else if (pub)
      memcpy(snap, blk, sizeof *blk * (size_t)m->bs);
    m->snap_valid[b] = pub;
  }
  assert_int_equal(brisk_kv_n_cached_blocks(m->kv), n_cached);
  /* Available to new tokens: everything not held, cached blocks included. */
  assert_int_equal(brisk_kv_n_free_blocks(m->kv), m->n_blocks - n_held);
  free(held);
}

/* Appends tokens[0 .. count) to seq as a decode would: reserve, copy,
 * write, commit. */
static brisk_status sim_append(sim *m, int32_t s, const int32_t *tokens, int32_t count) {
  int32_t seq[MAXLEN], pos[MAXLEN];
  int64_t slot[MAXLEN];
  brisk_kv_copy copies[MAXLEN];
  int32_t n_copies = -1;
  for (int32_t i = 0; i < count; i++) {
    seq[i] = s;
    pos[i] = m->len[s] + i;
  }
  int32_t avail = brisk_kv_n_free_blocks(m->kv);
  brisk_status st = brisk_kv_reserve(m->kv, count, seq, pos, tokens, slot, copies, &n_copies);
  if (st) {
    assert_int_equal(brisk_kv_n_free_blocks(m->kv), avail);
    sim_check(m);
    return st;
  }
  /* Blocks evicted by the reservation may be published again with new
   * contents by the commit below. */
  for (int32_t blk = 0; blk < m->n_blocks; blk++)
    if (!brisk_kv_block_is_published(m->kv, blk)) m->snap_valid[blk] = false;
  for (int32_t c = 0; c < n_copies; c++) {
    assert_false(brisk_kv_block_is_published(m->kv, copies[c].dst));
    memcpy(m->storage + (size_t)copies[c].dst * (size_t)m->bs,
           m->storage + (size_t)copies[c].src * (size_t)m->bs, sizeof(uint64_t) * (size_t)m->bs);
  }
  memcpy(m->tok[s] + m->len[s], tokens, (size_t)count * sizeof *tokens);
  for (int32_t i = 0; i < count; i++) {
    /* Never a write into a published (immutable) block. */
    assert_false(brisk_kv_block_is_published(m->kv, (int32_t)(slot[i] / m->bs)));
    m->storage[slot[i]] = kv_value(m->tok[s], pos[i]);
  }
  int32_t from = m->len[s];
  m->len[s] += count;
  brisk_kv_commit(m->kv, s, from);
  sim_check(m);
  return BRISK_OK;
}

static int32_t sim_match(sim *m, int32_t s, const int32_t *tokens, int32_t n) {
  int32_t reused = -1;
  assert_int_equal(brisk_kv_match_prefix(m->kv, s, tokens, n, &reused), BRISK_OK);
  assert_true(reused >= 0 && reused % m->bs == 0 && (reused == 0 || reused <= n - 1));
  memcpy(m->tok[s], tokens, (size_t)reused * sizeof *tokens);
  m->len[s] = reused;
  sim_check(m);
  return reused;
}

static void sim_free_seq(sim *m, int32_t s) {
  assert_int_equal(brisk_kv_seq_free(m->kv, s), BRISK_OK);
  m->len[s] = 0;
  sim_check(m);
}

static void seq_tokens(int32_t *t, int32_t n, int32_t base) {
  for (int32_t i = 0; i < n; i++) t[i] = base + i;
}

/* Blocks are found by the chain: same tokens at the same positions after
 * the same prefix, whole blocks only, at most n - 1 tokens. */
static void test_hash_chain(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 32, 4, true);
  int32_t a[14];
  seq_tokens(a, 14, 100);
  assert_int_equal(sim_append(&m, 0, a, 14), BRISK_OK); /* 3 full blocks + 2 */
  int32_t nb;
  const int32_t *t0 = brisk_kv_block_table(m.kv, 0, &nb);
  int32_t blocks0[4];
  memcpy(blocks0, t0, sizeof blocks0);
  for (int32_t b = 0; b < 3; b++) assert_true(brisk_kv_block_is_published(m.kv, blocks0[b]));
  assert_false(brisk_kv_block_is_published(m.kv, blocks0[3])); /* partial */
  /* While held: shared, no computation. */
  assert_int_equal(sim_match(&m, 1, a, 14), 12);
  const int32_t *t1 = brisk_kv_block_table(m.kv, 1, &nb);
  assert_memory_equal(t1, blocks0, 3 * sizeof *t1);
  assert_int_equal(brisk_kv_block_ref(m.kv, blocks0[0]), 2);
  sim_free_seq(&m, 1);
  /* At most n - 1 tokens: 12 tokens reuse only 2 blocks. */
  assert_int_equal(sim_match(&m, 1, a, 12), 8);
  sim_free_seq(&m, 1);
  assert_int_equal(sim_match(&m, 1, a, 13), 12);
  sim_free_seq(&m, 1);
  assert_int_equal(sim_match(&m, 1, a, 1), 0);
  /* A different token in block 1 stops the chain there. */
  int32_t b[14];
  memcpy(b, a, sizeof b);
  b[6] = 7;
  assert_int_equal(sim_match(&m, 1, b, 14), 4);
  sim_free_seq(&m, 1);
  /* Block 1's tokens after a different block 0 are a different block. */
  memcpy(b, a, sizeof b);
  b[0] = 7;
  assert_int_equal(sim_match(&m, 1, b, 14), 0);
  /* Equal blocks reached independently both exist; lookups stay right. */
  assert_int_equal(sim_append(&m, 1, a, 14), BRISK_OK);
  sim_free_seq(&m, 0);
  sim_free_seq(&m, 1);
  assert_int_equal(sim_match(&m, 2, a, 14), 12);
  /* Only an empty sequence can match. */
  int32_t reused = 5;
  assert_int_equal(brisk_kv_match_prefix(m.kv, 2, a, 14, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "empty"));
  assert_int_equal(brisk_kv_match_prefix(m.kv, NSEQ, a, 14, &reused), BRISK_E_INVALID_ARGUMENT);
  sim_check(&m);
  sim_free(&m);
}

/* Released published blocks stay cached, a chain's tail first in line for
 * eviction; allocation takes never-used blocks before evicting. */
static void test_lru_eviction(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 8, 2, true);
  int32_t a[5], b[5], c[4];
  seq_tokens(a, 5, 10);
  seq_tokens(b, 5, 20);
  seq_tokens(c, 4, 30);
  assert_int_equal(sim_append(&m, 0, a, 4), BRISK_OK); /* blocks 0, 1 */
  assert_int_equal(sim_append(&m, 1, b, 4), BRISK_OK); /* blocks 2, 3 */
  sim_free_seq(&m, 0);
  sim_free_seq(&m, 1);
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 4);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 8);
  /* 4 never-used blocks go first: nothing is evicted. */
  assert_int_equal(sim_append(&m, 2, c, 4), BRISK_OK);
  assert_int_equal(sim_append(&m, 3, c, 4), BRISK_OK);
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 4);
  /* Now a's blocks go, tail first: a's block 1, then a's block 0. */
  int32_t d[1] = {40};
  assert_int_equal(sim_append(&m, 4, d, 1), BRISK_OK);
  assert_int_equal(sim_match(&m, 0, a, 5), 2);
  sim_free_seq(&m, 0); /* a's block 0 is now the most recently released */
  int32_t e[3] = {41, 42, 43};
  assert_int_equal(sim_append(&m, 4, e, 2), BRISK_OK); /* evicts b's tail block */
  assert_int_equal(sim_match(&m, 0, a, 5), 2);
  sim_free_seq(&m, 0);
  assert_int_equal(sim_match(&m, 1, b, 5), 2);
  sim_free_seq(&m, 1); /* LRU now: a's block 0, b's block 0 */
  /* Attaching revives: a held block is never evicted. */
  assert_int_equal(sim_match(&m, 0, a, 5), 2);
  assert_int_equal(sim_append(&m, 4, e + 2, 1), BRISK_OK);
  assert_int_equal(sim_append(&m, 4, e, 2), BRISK_OK); /* takes b's last cached block */
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 0);
  assert_int_equal(sim_append(&m, 4, e, 1), BRISK_E_KV_FULL);
  assert_int_equal(sim_match(&m, 1, b, 5), 0);
  sim_free(&m);
}

/* Truncating into a published block and writing copies it first; so does
 * writing into a block shared by a fork. The cache keeps the original. */
static void test_published_immutable(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 16, 4, true);
  int32_t a[9], x[3] = {1, 2, 3};
  seq_tokens(a, 9, 50);
  assert_int_equal(sim_append(&m, 0, a, 8), BRISK_OK);
  int32_t nb;
  int32_t last = brisk_kv_block_table(m.kv, 0, &nb)[1];
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, 6), BRISK_OK);
  m.len[0] = 6;
  sim_check(&m);
  assert_true(brisk_kv_block_is_published(m.kv, last)); /* still held, still whole */
  assert_int_equal(sim_append(&m, 0, x, 1), BRISK_OK);  /* sim_append checks no write in it */
  assert_true(brisk_kv_block_table(m.kv, 0, &nb)[1] != last);
  assert_int_equal(brisk_kv_block_ref(m.kv, last), 0);
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 1);
  assert_int_equal(sim_match(&m, 1, a, 9), 8); /* the original is intact */
  /* Fork a partly filled sequence, write both: each copy-on-writes or owns. */
  assert_int_equal(sim_append(&m, 1, x, 2), BRISK_OK);
  assert_int_equal(brisk_kv_seq_fork(m.kv, 1, 2), BRISK_OK);
  m.len[2] = m.len[1];
  memcpy(m.tok[2], m.tok[1], sizeof m.tok[1]);
  sim_check(&m);
  assert_int_equal(sim_append(&m, 2, x, 3), BRISK_OK);
  assert_int_equal(sim_append(&m, 1, a, 3), BRISK_OK);
  /* Block 0 is shared by the truncated original, the match and its fork. */
  assert_int_equal(brisk_kv_block_ref(m.kv, brisk_kv_block_table(m.kv, 1, &nb)[0]), 3);
  sim_free(&m);
}

static void test_cache_off(void **state) {
  (void)state;
  sim m;
  sim_init(&m, 8, 2, false);
  int32_t a[6];
  seq_tokens(a, 6, 1);
  assert_int_equal(sim_append(&m, 0, a, 6), BRISK_OK);
  assert_int_equal(sim_match(&m, 1, a, 6), 0);
  sim_free_seq(&m, 0);
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 0);
  assert_int_equal(sim_match(&m, 1, a, 6), 0);
  sim_free(&m);
}

/* Random appends (drawn from a few shared token streams so that prefixes
 * repeat), matches, forks, truncations and frees, checked after each. */
static void test_random_operations(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_prefix_random");
  int32_t streams[3][MAXLEN], hits = 0;
  for (int round = 0; round < 20; round++) {
    for (int k = 0; k < 3; k++)
      for (int32_t p = 0; p < MAXLEN; p++) streams[k][p] = (int32_t)(test_rng_u64(&r) % 4);
    sim m;
    int32_t bs = 1 + (int32_t)(test_rng_u64(&r) % 6);
    sim_init(&m, 6 + (int32_t)(test_rng_u64(&r) % 40), bs, true);
    for (int op = 0; op < 300; op++) {
      int kind = (int)(test_rng_u64(&r) % 12);
      int32_t a = (int32_t)(test_rng_u64(&r) % NSEQ), b = (int32_t)(test_rng_u64(&r) % NSEQ);
      const int32_t *stream = streams[test_rng_u64(&r) % 3];
      if (kind < 5) {
        int32_t count = 1 + (int32_t)(test_rng_u64(&r) % 8), t[8];
        if (m.len[a] + count >= MAXLEN) continue;
        for (int32_t i = 0; i < count; i++)
          t[i] = test_rng_u64(&r) % 16 ? streams[a % 3][m.len[a] + i] : 9; /* mostly a stream */
        sim_append(&m, a, t, count);
      } else if (kind < 7) {
        if (m.len[a] != 0) continue;
        int32_t n = 1 + (int32_t)(test_rng_u64(&r) % (MAXLEN - 1));
        hits += sim_match(&m, a, stream, n) > 0;
      } else if (kind < 8) {
        if (m.len[b] != 0 || a == b) continue;
        assert_int_equal(brisk_kv_seq_fork(m.kv, a, b), BRISK_OK);
        m.len[b] = m.len[a];
        memcpy(m.tok[b], m.tok[a], sizeof m.tok[a]);
        sim_check(&m);
      } else if (kind < 10) {
        int32_t len = m.len[a] ? (int32_t)(test_rng_u64(&r) % (uint64_t)(m.len[a] + 1)) : 0;
        assert_int_equal(brisk_kv_seq_truncate(m.kv, a, len), BRISK_OK);
        m.len[a] = len;
        sim_check(&m);
      } else {
        sim_free_seq(&m, a);
      }
    }
    sim_free(&m);
  }
  assert_true(hits > 20); /* the streams repeat, so the cache was exercised */
}

static brisk_status create_match_free(void *ctx) {
  (void)ctx;
  brisk_kv *kv = NULL;
  brisk_status st = brisk_kv_create(8, 2, 3, true, &kv);
  if (st) return st;
  int32_t seq[5] = {0, 0, 0, 0, 0}, pos[5] = {0, 1, 2, 3, 4}, tok[5] = {3, 4, 5, 6, 7};
  int64_t slot[5];
  brisk_kv_copy copies[5];
  int32_t nc, reused = -1;
  if (!(st = brisk_kv_reserve(kv, 5, seq, pos, tok, slot, copies, &nc))) {
    brisk_kv_commit(kv, 0, 0);
    st = brisk_kv_match_prefix(kv, 1, tok, 5, &reused);
    if (st) {
      /* Nothing attached on failure. */
      assert_int_equal(brisk_kv_seq_len(kv, 1), 0);
      assert_int_equal(brisk_kv_block_ref(kv, 0), 1);
    } else {
      assert_int_equal(reused, 4);
    }
  }
  brisk_kv_free(kv);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_match_free, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hash_chain),          cmocka_unit_test(test_lru_eviction),
      cmocka_unit_test(test_published_immutable), cmocka_unit_test(test_cache_off),
      cmocka_unit_test(test_random_operations),   cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
