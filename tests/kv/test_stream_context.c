/* brisk_seq_set_window on a real context (random-weight llama, F32
 * weights): until its first eviction a windowed sequence's logits are
 * bitwise those of a plain one; over 10x the window, in a KV pool a
 * fraction of the sequence, its blocks stay bounded and every step's logits
 * match a float64 StreamingLLM reference that keeps keys before RoPE and
 * rotates them by their index within the cache at attention time (so the
 * sink rewrites are checked against the other way of doing it); a failed
 * batch that evicted is rolled back to the same bits; what a windowed
 * sequence refuses. */
#include "ref_forward.h"
#include "test_models.h"

#include <math.h>
#include <stdbool.h>
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
  test_rng r = test_rng_seeded("stream_context_model");
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

static int abort_now;
static int abort_cb(void *user) {
  (void)user;
  return abort_now;
}

static brisk_context *make_ctx(brisk_kv_type kv, int32_t kv_tokens, int32_t block_size) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = kv;
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.n_seq_max = 4;
  p.max_batch_tokens = 32;
  p.n_threads = 1;
  p.abort_callback = abort_cb;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(model, &p, &c), BRISK_OK);
  return c;
}

/* Decodes tokens[from, to) of seq at positions from.. in one batch; the
 * last entry's logits into out (when set). */
static brisk_status feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t from,
                         int32_t to, float *out) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t p = from; p < to; p++) brisk_batch_add(b, tokens[p], p, seq, p == to - 1);
  brisk_status st = brisk_decode(c, b);
  if (!st && out) memcpy(out, brisk_get_logits(c, to - from - 1), (size_t)n_vocab * sizeof *out);
  brisk_batch_free(b);
  return st;
}

static int32_t held_blocks(const brisk_context *c) {
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  return ks.n_blocks - ks.n_free_blocks;
}

static double rel_l2(const float *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* Bitwise equal to a plain sequence until the first eviction, for every
 * KV type; evictions then start. */
static void test_equal_before_eviction(void **state) {
  (void)state;
  const brisk_kv_type types[] = {BRISK_KV_F32, BRISK_KV_F16, BRISK_KV_Q8_0, BRISK_KV_FP8_E4M3};
  test_rng r = test_rng_seeded("stream_equal");
  enum { BS = 4, SINKS = 3, WINDOW = 10, N = 40 };
  int32_t toks[N];
  for (int32_t i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  float *a = malloc((size_t)n_vocab * sizeof *a), *b = malloc((size_t)n_vocab * sizeof *b);
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    brisk_context *c = make_ctx(types[t], 256, BS);
    assert_int_equal(brisk_seq_set_window(c, 0, SINKS, WINDOW), BRISK_OK);
    /* A prompt of 6, then one token at a time. */
    assert_int_equal(feed(c, 0, toks, 0, 6, a), BRISK_OK);
    assert_int_equal(feed(c, 1, toks, 0, 6, b), BRISK_OK);
    assert_memory_equal(a, b, (size_t)n_vocab * sizeof *a);
    int32_t first_eviction = 0;
    for (int32_t p = 6; p < N; p++) {
      assert_int_equal(feed(c, 0, toks, p, p + 1, a), BRISK_OK);
      assert_int_equal(feed(c, 1, toks, p, p + 1, b), BRISK_OK);
      assert_int_equal(brisk_seq_len(c, 0), p + 1);
      /* The sinks round up to 4; the first eviction comes when the window
       * holds a block more than WINDOW: at length 4 + 10 + 4 = 18. Before
       * it, bitwise equal; at it, the evicted block is missed. */
      bool same = !memcmp(a, b, (size_t)n_vocab * sizeof *a);
      if (p + 1 < 4 + WINDOW + BS) assert_true(same);
      if (!same && !first_eviction) first_eviction = p + 1;
    }
    assert_int_equal(first_eviction, 4 + WINDOW + BS);
    brisk_context_free(c);
  }
  free(a);
  free(b);
}

/* 10x the window, in a pool far smaller than the sequence: bounded blocks,
 * and every step matches the float64 StreamingLLM reference. */
static void test_long_generation_vs_reference(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("stream_reference");
  const int32_t shapes[][3] = {{4, 4, 16}, {2, 8, 12}, {0, 4, 8}}; /* sinks, block, window */
  for (size_t v = 0; v < sizeof shapes / sizeof *shapes; v++) {
    int32_t sinks = shapes[v][0], bs = shapes[v][1], window = shapes[v][2];
    int32_t sink_tokens = (sinks + bs - 1) / bs * bs, n = sink_tokens + 10 * window;
    int32_t pool = sink_tokens + window + 3 * bs; /* tokens; the sequence is ~10x that */
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    for (int32_t i = 0; i < n; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
    brisk_context *c = make_ctx(BRISK_KV_F32, pool, bs);
    assert_int_equal(brisk_seq_set_window(c, 0, sinks, window), BRISK_OK);
    ref_model *ref = ref_create(model, n);
    ref_set_stream(ref, sink_tokens, window, bs);
    float *got = malloc((size_t)n_vocab * sizeof *got);
    double *want = malloc((size_t)n_vocab * sizeof *want), worst = 0;
    int32_t most = 0;
    for (int32_t p = 0; p < n; p++) {
      assert_int_equal(feed(c, 0, toks, p, p + 1, got), BRISK_OK);
      ref_eval(ref, toks[p], want);
      double e = rel_l2(got, want, n_vocab);
      if (e > worst) worst = e;
      int32_t h = held_blocks(c);
      if (h > most) most = h;
    }
    fprintf(stderr,
            "sinks %d block %d window %d: %d tokens in a %d-token pool, at most %d blocks, "
            "worst rel. L2 vs reference %.2e\n",
            sinks, bs, window, n, pool, most, worst);
    assert_true(most <= sink_tokens / bs + (window + bs - 1) / bs + 1);
    assert_true(worst < 1e-4);
    ref_free(ref);
    free(got);
    free(want);
    free(toks);
    brisk_context_free(c);
  }
}

/* Prompt chunks that evict, and a batch that evicts and then fails (the
 * host's abort): the failed one leaves the sequence as it was, so the same
 * batch again gives the logits of a run that never failed. */
static void test_chunks_and_rollback(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("stream_rollback");
  enum { N = 64 };
  int32_t toks[N];
  for (int32_t i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  float *a = malloc((size_t)n_vocab * sizeof *a), *b = malloc((size_t)n_vocab * sizeof *b);
  brisk_context *c = make_ctx(BRISK_KV_F16, 128, 4);
  assert_int_equal(brisk_seq_set_window(c, 0, 4, 8), BRISK_OK);
  assert_int_equal(brisk_seq_set_window(c, 1, 4, 8), BRISK_OK);
  for (int32_t at = 0; at < N - 6; at += 6) {
    int32_t free_before = held_blocks(c);
    abort_now = 1;
    assert_int_equal(feed(c, 0, toks, at, at + 6, a), BRISK_E_CANCELLED);
    abort_now = 0;
    assert_int_equal(held_blocks(c), free_before);
    assert_int_equal(brisk_seq_len(c, 0), at);
    assert_int_equal(feed(c, 0, toks, at, at + 6, a), BRISK_OK);
    assert_int_equal(feed(c, 1, toks, at, at + 6, b), BRISK_OK);
    assert_memory_equal(a, b, (size_t)n_vocab * sizeof *a);
  }
  free(a);
  free(b);
  brisk_context_free(c);
}

/* What a windowed sequence refuses. */
static void test_refusals(void **state) {
  (void)state;
  brisk_context *c = make_ctx(BRISK_KV_F32, 128, 4);
  int32_t toks[40] = {0};
  for (int32_t i = 0; i < 40; i++) toks[i] = i % n_vocab;
  assert_int_equal(brisk_seq_set_window(NULL, 0, 4, 8), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_set_window(c, 9, 4, 8), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_set_window(c, 0, 4, 0), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_set_window(c, 0, 40, 8), BRISK_E_INVALID_ARGUMENT); /* > batch */
  assert_non_null(strstr(brisk_last_error(), "batch size"));
  assert_int_equal(brisk_seq_set_window(c, 0, 4, 8), BRISK_OK);
  /* One batch never evicts its own tokens: 30 at once hold 30. */
  assert_int_equal(feed(c, 0, toks, 0, 30, NULL), BRISK_OK);
  assert_int_equal(held_blocks(c), 8);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  for (int32_t p = 0; p < 30; p += 2) assert_int_equal(feed(c, 0, toks, p, p + 2, NULL), BRISK_OK);
  assert_true(held_blocks(c) <= 1 + 3);
  assert_int_equal(brisk_seq_set_window(c, 0, 0, 0), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_E_UNSUPPORTED);
  size_t nb = 0;
  assert_int_equal(brisk_seq_export(c, 0, NULL, 0, &nb), BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_seq_truncate(c, 0, 6), BRISK_E_INVALID_ARGUMENT); /* evicted */
  /* Freed and fed again from the start: bitwise a plain sequence again. */
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  float *a = malloc((size_t)n_vocab * sizeof *a), *b = malloc((size_t)n_vocab * sizeof *b);
  assert_int_equal(feed(c, 0, toks, 0, 12, a), BRISK_OK);
  assert_int_equal(feed(c, 1, toks, 0, 12, b), BRISK_OK);
  assert_memory_equal(a, b, (size_t)n_vocab * sizeof *a);
  /* Off again once empty. */
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(brisk_seq_set_window(c, 0, 0, 0), BRISK_OK);
  assert_int_equal(brisk_seq_fork(c, 1, 0), BRISK_OK);
  free(a);
  free(b);
  brisk_context_free(c);
}

static brisk_status set_and_feed(void *user) {
  (void)user;
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 64;
  p.block_size = 4;
  p.n_seq_max = 2;
  p.max_batch_tokens = 16;
  p.n_threads = 1;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(model, &p, &c);
  if (st) return st;
  int32_t toks[40];
  for (int32_t i = 0; i < 40; i++) toks[i] = i % n_vocab;
  st = brisk_seq_set_window(c, 0, 4, 8);
  brisk_batch *b = NULL;
  if (!st) st = brisk_batch_create(8, &b);
  for (int32_t at = 0; !st && at < 40; at += 5) {
    brisk_batch_clear(b);
    for (int32_t q = at; q < at + 5; q++) brisk_batch_add(b, toks[q], q, 0, q == at + 4);
    st = brisk_decode(c, b);
  }
  brisk_batch_free(b);
  brisk_context_free(c);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(set_and_feed, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_equal_before_eviction),
      cmocka_unit_test(test_long_generation_vs_reference),
      cmocka_unit_test(test_chunks_and_rollback),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
