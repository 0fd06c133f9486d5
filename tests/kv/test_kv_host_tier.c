/* The prefix cache's host tier in the KV manager, over a simulated block
 * storage whose "K/V" of a slot is a hash of every token up to it (what a
 * model computes: a function of the prefix), so a block holds the right
 * data exactly when it was computed or copied for that prefix. Blocks the
 * pool evicts go to the tier and move back on a match into reused blocks
 * (their storage overwritten in between), bit for bit; equal blocks
 * computed independently are stored once; the budget holds (index
 * included) with least recently used entries evicted; failed host
 * allocations and failed copies only drop blocks, leaking nothing and
 * failing no call. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/hash.h"
#include "kv/host_tier.h"
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

enum { BS = 4, MAXT = 96 };

typedef struct sim {
  brisk_kv *kv;
  int32_t n_blocks;
  uint64_t *storage; /* [n_blocks][BS] the simulated K/V of each slot */
  int fail_download, fail_upload;
  int n_downloads, n_uploads;
} sim;

static size_t block_bytes(void) { return BS * sizeof(uint64_t); }

static brisk_status download(void *user, int32_t block, void *host) {
  sim *s = user;
  assert_true(block >= 0 && block < s->n_blocks);
  s->n_downloads++;
  if (s->fail_download) return BRISK_E_INTERNAL;
  memcpy(host, s->storage + (size_t)block * BS, block_bytes());
  return BRISK_OK;
}

static brisk_status upload(void *user, int32_t block, const void *host) {
  sim *s = user;
  assert_true(block >= 0 && block < s->n_blocks);
  s->n_uploads++;
  if (s->fail_upload) return BRISK_E_INTERNAL;
  memcpy(s->storage + (size_t)block * BS, host, block_bytes());
  return BRISK_OK;
}

static void sim_init(sim *s, int32_t n_blocks, uint64_t budget) {
  memset(s, 0, sizeof *s);
  s->n_blocks = n_blocks;
  assert_int_equal(brisk_kv_create(n_blocks, BS, 4, true, &s->kv), BRISK_OK);
  s->storage = calloc((size_t)n_blocks * BS, sizeof *s->storage);
  const brisk_kv_host_io io = {download, upload, s};
  brisk_kv_set_host_tier(s->kv, budget, block_bytes(), &io);
}

static void sim_free(sim *s) {
  brisk_kv_free(s->kv);
  free(s->storage);
}

/* The value a model would write at position p of tokens: a function of the
 * whole prefix tokens[0 .. p]. */
static uint64_t kv_value(const int32_t *tokens, int32_t p) {
  return brisk_hash64(tokens, (size_t)(p + 1) * sizeof *tokens, 0x5eed);
}

/* Decodes tokens[from, to) into seq (one batch) and commits. */
static brisk_status feed(sim *s, int32_t seq, const int32_t *tokens, int32_t from, int32_t to) {
  int32_t sq[MAXT], pos[MAXT];
  int64_t slot[MAXT];
  brisk_kv_copy copies[4];
  int32_t n = to - from, n_copies = 0;
  for (int32_t i = 0; i < n; i++) {
    sq[i] = seq;
    pos[i] = from + i;
  }
  brisk_status st = brisk_kv_reserve(s->kv, n, sq, pos, tokens + from, slot, copies, &n_copies);
  if (st) return st;
  for (int32_t c = 0; c < n_copies; c++)
    memcpy(s->storage + (size_t)copies[c].dst * BS, s->storage + (size_t)copies[c].src * BS,
           block_bytes());
  for (int32_t i = 0; i < n; i++) s->storage[slot[i]] = kv_value(tokens, from + i);
  brisk_kv_commit(s->kv, seq, from);
  return BRISK_OK;
}

/* seq holds exactly the K/V of tokens[0, its length). */
static void check_seq(const sim *s, int32_t seq, const int32_t *tokens) {
  int32_t nb, len = brisk_kv_seq_len(s->kv, seq);
  const int32_t *table = brisk_kv_block_table(s->kv, seq, &nb);
  for (int32_t p = 0; p < len; p++)
    assert_true(s->storage[(size_t)table[p / BS] * BS + (size_t)(p % BS)] == kv_value(tokens, p));
}

static int32_t match(sim *s, int32_t seq, const int32_t *tokens, int32_t n) {
  int32_t reused = -1;
  assert_int_equal(brisk_kv_match_prefix(s->kv, seq, tokens, n, &reused), BRISK_OK);
  assert_int_equal(brisk_kv_seq_len(s->kv, seq), reused);
  check_seq(s, seq, tokens);
  return reused;
}

static void random_tokens(test_rng *r, int32_t *t, int32_t n) {
  for (int32_t i = 0; i < n; i++) t[i] = (int32_t)(test_rng_u64(r) % 1000);
}

static const brisk_host_tier *tier(const sim *s) { return brisk_kv_host_tier(s->kv); }

/* The tier's accounting: every entry's bytes plus the table, and the index
 * (records, token ids, table) a part of it. */
static void check_bytes(const sim *s) {
  const brisk_host_tier *t = tier(s);
  assert_true(t->used == t->n_blocks * t->entry_bytes + (uint64_t)t->n_buckets * sizeof(void *));
  assert_true(t->used <= t->budget);
  uint64_t index = brisk_host_tier_index_bytes(t);
  assert_true(index == t->used - t->n_blocks * t->data_bytes);
  assert_true(t->n_blocks == 0 || index >= t->n_blocks * BS * sizeof(int32_t));
}

static void test_spill_and_restore(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_spill");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 8, 1u << 20);
  /* A: 6 full blocks, cached once released. */
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(brisk_kv_n_cached_blocks(s.kv), 6);
  assert_true(tier(&s)->n_blocks == 0);
  /* B takes the whole pool: A's blocks are evicted, copied to the tier,
   * and overwritten. */
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK);
  assert_true(tier(&s)->n_blocks == 6 && tier(&s)->n_stored == 6);
  assert_int_equal(s.n_downloads, 6);
  check_bytes(&s);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  /* A comes back whole from the tier, into blocks B's data was in; each
   * restore evicts one of B's cached blocks (its tail first) into the
   * room the restored one left in the tier. */
  assert_int_equal(match(&s, 2, a, 25), 24);
  assert_true(tier(&s)->n_hits == 6 && tier(&s)->n_misses == 0);
  assert_true(tier(&s)->n_blocks == 6 && tier(&s)->n_stored == 12);
  assert_int_equal(s.n_uploads, 6);
  check_bytes(&s);
  /* Restored blocks are published: the tail of A decodes after them (B's
   * block 1 leaves the pool for it), and another sequence shares them from
   * the pool without copying. */
  assert_int_equal(feed(&s, 2, a, 24, 26), BRISK_OK);
  check_seq(&s, 2, a);
  assert_true(tier(&s)->n_blocks == 7);
  assert_int_equal(match(&s, 3, a, 25), 24);
  assert_int_equal(s.n_uploads, 6);
  assert_int_equal(brisk_kv_block_ref(s.kv, brisk_kv_block_table(s.kv, 3, &(int32_t){0})[0]), 2);
  assert_int_equal(brisk_kv_seq_free(s.kv, 3), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 2), BRISK_OK);
  /* Now B: its block 0 from the pool, 7 from the tier (the first into the
   * free block, the others into A's, which go back to the tier). */
  assert_int_equal(match(&s, 0, b, 33), 32);
  assert_true(tier(&s)->n_hits == 13 && tier(&s)->n_blocks == 6);
  assert_int_equal(s.n_downloads, 19);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(match(&s, 1, a, 25), 24);
  assert_true(tier(&s)->n_hits == 19);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  /* A prefix nobody computed misses both (one miss: the match stops). */
  int32_t c[MAXT];
  random_tokens(&r, c, MAXT);
  assert_int_equal(match(&s, 1, c, 20), 0);
  assert_true(tier(&s)->n_misses == 1);
  check_bytes(&s);
  sim_free(&s);
}

static void test_pool_full_ends_match(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_full");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 8, 1u << 20);
  assert_int_equal(feed(&s, 0, a, 0, 32), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(feed(&s, 1, b, 0, 20), BRISK_OK); /* 5 blocks held, 5 of A evicted */
  assert_true(tier(&s)->n_blocks == 5);
  /* A's head (3 blocks) is in the pool; its tail in the tier, but 0 blocks
   * are available once the head is attached. */
  assert_int_equal(match(&s, 2, a, 33), 12);
  assert_true(tier(&s)->n_hits == 0);
  assert_int_equal(brisk_kv_seq_free(s.kv, 2), BRISK_OK);
  /* With B gone there is room: all of A. */
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  assert_int_equal(match(&s, 2, a, 33), 32);
  assert_true(tier(&s)->n_hits == 5);
  sim_free(&s);
}

static void test_dedup_of_independent_copies(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_dedup");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 12, 1u << 20);
  /* Two sequences compute the same 4 blocks independently (no match): the
   * pool publishes one of each. */
  assert_int_equal(feed(&s, 0, a, 0, 16), BRISK_OK);
  assert_int_equal(feed(&s, 1, a, 0, 16), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  assert_int_equal(brisk_kv_n_cached_blocks(s.kv), 4);
  /* Evict everything: one copy per chain position reaches the tier. */
  assert_int_equal(feed(&s, 2, b, 0, 48), BRISK_OK);
  assert_true(tier(&s)->n_blocks == 4 && tier(&s)->n_stored == 4);
  assert_int_equal(brisk_kv_seq_free(s.kv, 2), BRISK_OK);
  /* A 9-token prompt takes back A's first 2 blocks; blocks 2 and 3 are
   * then computed again, in the pool, while the tier still holds them. */
  assert_int_equal(match(&s, 0, a, 9), 8);
  assert_int_equal(feed(&s, 0, a, 8, 16), BRISK_OK);
  check_seq(&s, 0, a);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_true(tier(&s)->n_blocks == 2 + 4); /* A's 2 and 3, and 4 of B's made room */
  /* Evicted again, A's blocks 0 and 1 are copied out; 2 and 3 are not: the
   * tier keeps its one copy each. */
  int32_t o[MAXT];
  random_tokens(&r, o, MAXT);
  uint64_t stored = tier(&s)->n_stored;
  int downloads = s.n_downloads;
  assert_int_equal(feed(&s, 1, o, 0, 48), BRISK_OK);
  assert_true(tier(&s)->n_dedup == 2);
  assert_int_equal(s.n_downloads - downloads, (int)(tier(&s)->n_stored - stored));
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  /* All of A comes back, each block from its one copy. */
  uint64_t hits = tier(&s)->n_hits;
  assert_int_equal(match(&s, 2, a, 17), 16);
  assert_true(tier(&s)->n_hits - hits == 4);
  check_bytes(&s);
  sim_free(&s);
}

static void test_budget_lru(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_budget");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 8, 1); /* learn the sizes */
  size_t entry = tier(&s)->entry_bytes;
  assert_true(entry > block_bytes() + BS * sizeof(int32_t));
  sim_free(&s);
  /* Room for 3 entries and the first hash table (64 buckets). */
  const uint64_t budget = 3 * entry + 64 * sizeof(void *);
  sim_init(&s, 8, budget);
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK); /* 6 evicted, tail first */
  assert_true(tier(&s)->n_blocks == 3 && tier(&s)->n_evictions == 3);
  assert_true(tier(&s)->used == budget);
  check_bytes(&s);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  /* The tier kept the most recently evicted: A's first 3 blocks (a chain's
   * tail leaves the pool first). They come back; block 4 misses. */
  assert_int_equal(match(&s, 2, a, 25), 12);
  assert_true(tier(&s)->n_hits == 3 && tier(&s)->n_misses == 1);
  check_bytes(&s);
  sim_free(&s);
  /* A budget below one entry keeps nothing and fails nothing. */
  sim_init(&s, 8, entry - 1);
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK);
  assert_true(tier(&s)->n_blocks == 0 && tier(&s)->n_dropped == 6 && tier(&s)->used == 0);
  assert_int_equal(s.n_downloads, 0);
  sim_free(&s);
}

static void test_failed_copies_drop(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_copies");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 8, 1u << 20);
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  s.fail_download = 1;
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK); /* the batch goes on */
  assert_true(tier(&s)->n_blocks == 0 && tier(&s)->n_dropped == 6 && tier(&s)->used > 0);
  s.fail_download = 0;
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  assert_int_equal(match(&s, 2, a, 25), 0);
  assert_int_equal(brisk_kv_seq_free(s.kv, 2), BRISK_OK);
  /* Now A is computed again and stored; a failed upload ends the match,
   * gives the block back to the pool and the copy back to the tier. */
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  assert_true(tier(&s)->n_blocks >= 6);
  s.fail_upload = 1;
  int32_t free_before = brisk_kv_n_free_blocks(s.kv);
  assert_int_equal(match(&s, 2, a, 25), 0);
  assert_int_equal(brisk_kv_n_free_blocks(s.kv), free_before);
  s.fail_upload = 0;
  assert_int_equal(match(&s, 2, a, 25), 24);
  sim_free(&s);
}

/* Every host allocation fails in turn while the pool evicts: the batch
 * always succeeds, the tier keeps what it could, nothing leaks. */
static void test_allocation_failures_drop(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_oom");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  uint64_t dropped = 0;
  for (uint64_t n = 1; n < 12; n++) {
    uint64_t live = brisk_alloc_live_count();
    sim s;
    sim_init(&s, 8, 1u << 20);
    assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
    assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
    /* The table of seq 1 grows before anything changes: that one may fail
     * as before (all or nothing); the tier's allocations come later. */
    assert_int_equal(feed(&s, 1, b, 0, 4), BRISK_OK);
    brisk_alloc_fail_at(n, 0);
    brisk_status st = feed(&s, 1, b, 4, 32);
    brisk_alloc_fail_at(0, 0);
    assert_true(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
    if (st) assert_int_equal(feed(&s, 1, b, 4, 32), BRISK_OK);
    check_seq(&s, 1, b);
    const brisk_host_tier *t = tier(&s);
    assert_true(t->n_blocks == t->n_stored && t->n_stored + t->n_dropped == 6);
    dropped += t->n_dropped;
    check_bytes(&s);
    assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
    int32_t reused = match(&s, 2, a, 25);
    assert_true(reused % BS == 0 && reused <= 24);
    sim_free(&s);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
  assert_true(dropped > 0); /* some runs did fail a host allocation */
}

static void test_off(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_host_off");
  int32_t a[MAXT], b[MAXT];
  random_tokens(&r, a, MAXT);
  random_tokens(&r, b, MAXT);
  sim s;
  sim_init(&s, 8, 0);
  assert_false(brisk_host_tier_on(tier(&s)));
  assert_int_equal(feed(&s, 0, a, 0, 24), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 0), BRISK_OK);
  assert_int_equal(feed(&s, 1, b, 0, 32), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(s.kv, 1), BRISK_OK);
  assert_int_equal(match(&s, 2, a, 25), 0);
  assert_true(tier(&s)->used == 0 && tier(&s)->n_misses == 0);
  assert_int_equal(s.n_downloads + s.n_uploads, 0);
  sim_free(&s);
  /* Without the prefix cache there is nothing to keep. */
  brisk_kv *kv = NULL;
  assert_int_equal(brisk_kv_create(8, BS, 2, false, &kv), BRISK_OK);
  const brisk_kv_host_io io = {download, upload, NULL};
  brisk_kv_set_host_tier(kv, 1u << 20, block_bytes(), &io);
  assert_false(brisk_host_tier_on(brisk_kv_host_tier(kv)));
  brisk_kv_free(kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spill_and_restore),
      cmocka_unit_test(test_pool_full_ends_match),
      cmocka_unit_test(test_dedup_of_independent_copies),
      cmocka_unit_test(test_budget_lru),
      cmocka_unit_test(test_failed_copies_drop),
      cmocka_unit_test(test_allocation_failures_drop),
      cmocka_unit_test(test_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
