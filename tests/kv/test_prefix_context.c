/* brisk_seq_match_prefix on a real context (random-weight llama): decoding
 * the rest after a match gives logits bitwise equal to a full prefill;
 * writes after a match never change other sequences or the cache; errors
 * (KV full, bad arguments, failed allocations) leave everything as it was. */
#include "test_models.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model;
static int32_t n_vocab;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("prefix_context_model");
  if (test_model_load(dir, "llama", &s, &r, &model)) return -1;
  n_vocab = brisk_model_n_vocab(model);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_context *make_ctx(int32_t kv_tokens, int32_t block_size, int prefix_cache) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  assert_int_equal(p.prefix_cache, 1); /* on by default */
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.n_seq_max = 4;
  p.max_batch_tokens = 64;
  p.n_threads = 1;
  p.prefix_cache = prefix_cache;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(model, &p, &c), BRISK_OK);
  return c;
}

/* Decodes tokens[from, to) of seq (at positions from..), in chunks of at
 * most `chunk`; copies the last entry's logits to out if set. */
static brisk_status feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t from,
                         int32_t to, int32_t chunk, float *out) {
  brisk_batch *b = NULL;
  brisk_status st = brisk_batch_create(64, &b);
  if (st) return st;
  for (int32_t at = from; at < to && !st; at += chunk) {
    int32_t end = at + chunk < to ? at + chunk : to;
    brisk_batch_clear(b);
    for (int32_t p = at; p < end; p++) brisk_batch_add(b, tokens[p], p, seq, p == to - 1);
    st = brisk_decode(c, b);
  }
  if (!st && out) {
    const float *l = brisk_get_logits(c, (to - from - 1) % chunk);
    assert_non_null(l);
    memcpy(out, l, (size_t)n_vocab * sizeof *out);
  }
  brisk_batch_free(b);
  return st;
}

/* Logits after all of tokens[0, n), from a fresh context without the cache. */
static void reference(const int32_t *tokens, int32_t n, int32_t block_size, float *out) {
  brisk_context *c = make_ctx(256, block_size, 0);
  assert_int_equal(feed(c, 0, tokens, 0, n, 64, out), BRISK_OK);
  brisk_context_free(c);
}

static void random_tokens(test_rng *r, int32_t *t, int32_t n) {
  for (int32_t i = 0; i < n; i++) t[i] = (int32_t)(test_rng_u64(r) % (uint64_t)n_vocab);
}

static int32_t match(brisk_context *c, int32_t seq, const int32_t *t, int32_t n) {
  int32_t reused = -1;
  assert_int_equal(brisk_seq_match_prefix(c, seq, t, n, &reused), BRISK_OK);
  assert_int_equal(brisk_seq_len(c, seq), reused);
  return reused;
}

static brisk_kv_stats kv_stats(const brisk_context *c) {
  brisk_kv_stats s = {.struct_size = sizeof s};
  assert_int_equal(brisk_context_kv_stats(c, &s), BRISK_OK);
  return s;
}

static void test_match_then_decode_is_bitwise(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("prefix_bitwise");
  const int32_t bs_list[3] = {1, 4, 16};
  for (int k = 0; k < 3; k++) {
    int32_t bs = bs_list[k], t[48];
    random_tokens(&r, t, 48);
    float *want = malloc((size_t)n_vocab * sizeof *want);
    float *got = malloc((size_t)n_vocab * sizeof *got);
    reference(t, 48, bs, want);
    brisk_context *c = make_ctx(256, bs, 1);
    /* Prefill 37 tokens in chunks of 5, then let the sequence go. */
    assert_int_equal(feed(c, 0, t, 0, 37, 5, NULL), BRISK_OK);
    assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
    brisk_kv_stats s = kv_stats(c);
    assert_int_equal(s.n_cached_blocks, 37 / bs);
    assert_int_equal(s.n_free_blocks, s.n_blocks); /* cached blocks count as available */
    int32_t reused = match(c, 1, t, 48);
    assert_int_equal(reused, 37 / bs * bs);
    assert_int_equal(feed(c, 1, t, reused, 48, 7, got), BRISK_OK);
    assert_memory_equal(got, want, (size_t)n_vocab * sizeof *got);
    /* Matching the whole 48 again (at most 47 reused) and decoding the
     * last token alone gives the same logits too. */
    reused = match(c, 2, t, 48);
    assert_int_equal(reused, 47 / bs * bs);
    assert_int_equal(feed(c, 2, t, reused, 48, 64, got), BRISK_OK);
    assert_memory_equal(got, want, (size_t)n_vocab * sizeof *got);
    brisk_context_free(c);
    free(want);
    free(got);
  }
}

/* After a match, one sequence truncates into the shared blocks and writes
 * other tokens; the other holder and a later match still see the original. */
static void test_writes_after_match_are_private(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("prefix_private");
  int32_t bs = 4, t[40], u[40];
  random_tokens(&r, t, 40);
  memcpy(u, t, sizeof u);
  random_tokens(&r, u + 18, 22); /* u shares t's first 18 tokens */
  float *want_t = malloc((size_t)n_vocab * sizeof(float));
  float *want_u = malloc((size_t)n_vocab * sizeof(float));
  float *got = malloc((size_t)n_vocab * sizeof(float));
  reference(t, 40, bs, want_t);
  reference(u, 40, bs, want_u);
  brisk_context *c = make_ctx(256, bs, 1);
  assert_int_equal(feed(c, 0, t, 0, 32, 64, NULL), BRISK_OK);
  assert_int_equal(match(c, 1, t, 40), 32); /* shares all 8 blocks with seq 0 */
  /* Seq 1 becomes u: truncate into block 4 (published, shared) and write. */
  assert_int_equal(brisk_seq_truncate(c, 1, 18), BRISK_OK);
  assert_int_equal(feed(c, 1, u, 18, 40, 64, got), BRISK_OK);
  assert_memory_equal(got, want_u, (size_t)n_vocab * sizeof(float));
  /* Seq 0 and the cache still hold t. */
  assert_int_equal(feed(c, 0, t, 32, 40, 64, got), BRISK_OK);
  assert_memory_equal(got, want_t, (size_t)n_vocab * sizeof(float));
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(match(c, 2, t, 40), 36);
  assert_int_equal(feed(c, 2, t, 36, 40, 64, got), BRISK_OK);
  assert_memory_equal(got, want_t, (size_t)n_vocab * sizeof(float));
  /* And u's own blocks were cached as u's, after t's first 16 tokens. */
  assert_int_equal(brisk_seq_free(c, 1), BRISK_OK);
  assert_int_equal(match(c, 3, u, 40), 36);
  assert_int_equal(feed(c, 3, u, 36, 40, 64, got), BRISK_OK);
  assert_memory_equal(got, want_u, (size_t)n_vocab * sizeof(float));
  /* A fork of a matched sequence writes privately too. */
  assert_int_equal(brisk_seq_free(c, 2), BRISK_OK);
  assert_int_equal(brisk_seq_truncate(c, 3, 30), BRISK_OK);
  assert_int_equal(brisk_seq_fork(c, 3, 0), BRISK_OK);
  assert_int_equal(feed(c, 0, t, 30, 40, 64, NULL), BRISK_OK);
  /* Seq 3 is now the only holder of u's block 7, still published: writing
   * other tokens into it must copy it. */
  assert_int_equal(feed(c, 3, t, 30, 40, 64, NULL), BRISK_OK);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(brisk_seq_free(c, 3), BRISK_OK);
  assert_int_equal(match(c, 1, u, 40), 36);
  assert_int_equal(feed(c, 1, u, 36, 40, 64, got), BRISK_OK);
  assert_memory_equal(got, want_u, (size_t)n_vocab * sizeof(float));
  brisk_context_free(c);
  free(want_t);
  free(want_u);
  free(got);
}

static void test_cache_off_and_errors(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("prefix_errors");
  int32_t t[20];
  random_tokens(&r, t, 20);
  brisk_context *off = make_ctx(64, 4, 0);
  assert_int_equal(feed(off, 0, t, 0, 16, 64, NULL), BRISK_OK);
  assert_int_equal(brisk_seq_free(off, 0), BRISK_OK);
  assert_int_equal(kv_stats(off).n_cached_blocks, 0);
  assert_int_equal(match(off, 1, t, 20), 0);
  brisk_context_free(off);

  /* A pool of 4 blocks: 3 cached, then attached; 2 more do not fit. */
  brisk_context *c = make_ctx(16, 4, 1);
  assert_int_equal(feed(c, 0, t, 0, 12, 64, NULL), BRISK_OK);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(match(c, 1, t, 20), 12);
  brisk_kv_stats before = kv_stats(c);
  assert_int_equal(before.n_free_blocks, 1);
  assert_int_equal(before.n_cached_blocks, 0);
  assert_int_equal(feed(c, 1, t, 12, 20, 64, NULL), BRISK_E_KV_FULL);
  brisk_kv_stats after = kv_stats(c);
  assert_memory_equal(&before, &after, sizeof before);
  assert_int_equal(brisk_seq_len(c, 1), 12);
  /* Argument checks; nothing changes. */
  int32_t reused = 7;
  assert_int_equal(brisk_seq_match_prefix(c, 1, t, 20, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "empty"));
  assert_int_equal(reused, 0);
  assert_int_equal(brisk_seq_match_prefix(c, 4, t, 20, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_match_prefix(NULL, 0, t, 20, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_match_prefix(c, 0, NULL, 20, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_match_prefix(c, 0, t, -1, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_match_prefix(c, 0, t, 20, NULL), BRISK_E_INVALID_ARGUMENT);
  int32_t bad[3] = {1, n_vocab, 2};
  assert_int_equal(brisk_seq_match_prefix(c, 0, bad, 3, &reused), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "token 1"));
  assert_int_equal(brisk_seq_match_prefix(c, 0, NULL, 0, &reused), BRISK_OK);
  assert_int_equal(reused, 0);
  after = kv_stats(c);
  assert_memory_equal(&before, &after, sizeof before);
  /* An older kv_stats struct (without n_cached_blocks) is accepted. */
  brisk_kv_stats old;
  memset(&old, 0xab, sizeof old);
  old.struct_size = (uint32_t)offsetof(brisk_kv_stats, n_cached_blocks);
  assert_int_equal(brisk_context_kv_stats(c, &old), BRISK_OK);
  assert_int_equal(old.n_free_blocks, 1);
  assert_int_equal(old.n_cached_blocks, (int32_t)0xabababab);
  /* So is an even older one, filled up to its size. */
  memset(&old, 0xab, sizeof old);
  old.struct_size = (uint32_t)offsetof(brisk_kv_stats, other_bytes);
  assert_int_equal(brisk_context_kv_stats(c, &old), BRISK_OK);
  assert_int_equal(old.struct_size, offsetof(brisk_kv_stats, other_bytes));
  assert_int_equal(old.n_free_blocks, 1);
  assert_int_equal(old.other_bytes, 0xababababababababull);
  /* A size ending inside a field is no header's. */
  old.struct_size = (uint32_t)offsetof(brisk_kv_stats, other_bytes) + 4;
  assert_int_equal(brisk_context_kv_stats(c, &old), BRISK_E_INVALID_ARGUMENT);
  brisk_context_free(c);
}

/* Every allocation of create, prefill, free, match and decode fails in turn. */
static brisk_status prefill_match_decode(void *arg) {
  const int32_t *t = arg;
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 32;
  p.block_size = 4;
  p.n_seq_max = 2;
  p.max_batch_tokens = 16;
  p.n_threads = 1;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(model, &p, &c);
  if (st) return st;
  if (!(st = feed(c, 0, t, 0, 12, 16, NULL)) && !(st = brisk_seq_free(c, 0))) {
    int32_t reused = -1;
    st = brisk_seq_match_prefix(c, 1, t, 16, &reused);
    if (st) {
      assert_int_equal(brisk_seq_len(c, 1), 0);
      assert_int_equal(kv_stats(c).n_cached_blocks, 3);
    } else {
      assert_int_equal(reused, 12);
      st = feed(c, 1, t, 12, 16, 16, NULL);
      if (st) assert_int_equal(brisk_seq_len(c, 1), 12);
    }
  }
  brisk_context_free(c);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("prefix_alloc");
  int32_t t[16];
  random_tokens(&r, t, 16);
  test_every_allocation_fails(prefill_match_decode, t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_then_decode_is_bitwise),
      cmocka_unit_test(test_writes_after_match_are_private),
      cmocka_unit_test(test_cache_off_and_errors),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
