/* Per-request attention sinks + sliding window (brisk_request_params
 * n_sinks, window) in the engine: each windowed request's tokens equal a
 * context-level windowed sequence fed the same chunks (prompt in chunks of
 * the window, then one token at a time), next to plain requests; a
 * generation of more than 10x the window runs in a pool that holds only
 * the window's bound, with no preemption and a bounded number of blocks
 * held at every step; windowed sequences neither attach nor publish
 * prefix-cache blocks; preempted windowed requests recompute and finish;
 * what a windowed request refuses. */
#include "engine_harness.h"
#include "test_models.h"

#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model; /* llama, random weights */

enum { BS = 4 };

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_window_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* The job's tokens from a context with the same window: the prompt in
 * chunks of min(window, rest) (of the whole prompt without one), then one
 * token at a time, sampled with a sampler of the same params, in a pool of
 * kv_tokens. */
static int32_t reference(const eh_job *j, int32_t *out, int32_t kv_tokens) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = kv_tokens;
  cp.block_size = BS;
  cp.max_batch_tokens = EH_MAX_PROMPT;
  cp.n_seq_max = 1;
  brisk_context *c = NULL;
  brisk_sampler *s = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(model, &cp, &c), BRISK_OK);
  assert_int_equal(brisk_seq_set_window(c, 0, j->extra.n_sinks, j->extra.window), BRISK_OK);
  assert_int_equal(brisk_sampler_create(model, &j->sp, &s), BRISK_OK);
  assert_int_equal(brisk_batch_create(EH_MAX_PROMPT, &b), BRISK_OK);
  int32_t step = j->extra.window > 0 ? j->extra.window : j->n_prompt;
  for (int32_t at = 0; at < j->n_prompt; at += step) {
    int32_t end = at + step < j->n_prompt ? at + step : j->n_prompt;
    brisk_batch_clear(b);
    for (int32_t i = at; i < end; i++) brisk_batch_add(b, j->prompt[i], i, 0, i == j->n_prompt - 1);
    if (brisk_decode(c, b)) fail_msg("reference prefill: %s", brisk_last_error());
  }
  int32_t n = 0, pos = j->n_prompt;
  for (;;) {
    int32_t tok;
    assert_int_equal(brisk_sampler_sample(s, c, brisk_batch_size(b) - 1, &tok), BRISK_OK);
    assert_int_equal(brisk_sampler_accept(s, tok), BRISK_OK);
    out[n++] = tok;
    if (n == j->max_tokens) break;
    brisk_batch_clear(b);
    brisk_batch_add(b, tok, pos++, 0, 1);
    if (brisk_decode(c, b)) fail_msg("reference decode: %s", brisk_last_error());
  }
  brisk_batch_free(b);
  brisk_sampler_free(s);
  brisk_context_free(c);
  return n;
}

static void expect_reference(const eh_job *j, int32_t kv_tokens) {
  int32_t want[EH_MAX_OUT];
  int32_t n = reference(j, want, kv_tokens);
  assert_int_equal(j->n_out[0], n);
  for (int32_t i = 0; i < n; i++)
    if (j->out[0][i] != want[i])
      fail_msg("request %llu (sinks %d, window %d): token %d is %d, the context's %d",
               (unsigned long long)j->id, j->extra.n_sinks, j->extra.window, i, j->out[0][i],
               want[i]);
}

static void make_job(test_rng *r, eh_job *j, int32_t n_prompt, int32_t max_tokens, int32_t n_sinks,
                     int32_t window, int sampled) {
  memset(j, 0, sizeof *j);
  int32_t nv = brisk_model_n_vocab(model);
  j->n_prompt = n_prompt;
  for (int32_t i = 0; i < n_prompt; i++) j->prompt[i] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  j->max_tokens = max_tokens;
  brisk_sampler_params_init(&j->sp);
  j->sp.temperature = sampled ? 0.9f : 0.0f;
  j->sp.seed = test_rng_u64(r);
  brisk_request_params_init(&j->extra);
  j->extra.n_sinks = n_sinks;
  j->extra.window = window;
}

static brisk_engine *engine(int32_t kv_tokens, int32_t max_batch, int32_t reserve_blocks,
                            brisk_preempt_mode mode) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = BS;
  p.max_batch_tokens = max_batch;
  p.max_running = 4;
  p.reserve_blocks = reserve_blocks;
  p.preempt_mode = mode;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

static brisk_engine_counters counters(brisk_engine *e) {
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  return s;
}

/* Windowed requests of several shapes, sampled and greedy, next to a plain
 * one, each equal to its context-level run. The step budget covers every
 * chunk, so each windowed prompt goes in chunks of its window. */
static void test_matches_context(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_window_context");
  const int32_t shapes[][2] = {{4, 8}, {0, 12}, {2, 16}, {0, 0}}; /* sinks, window */
  eh_job jobs[4];
  for (int i = 0; i < 4; i++)
    make_job(&r, &jobs[i], 30 + 7 * i, 150, shapes[i][0], shapes[i][1], i % 2);
  brisk_engine *e = engine(1024, 256, 4, BRISK_PREEMPT_RECOMPUTE);
  for (int i = 0; i < 4; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
  eh_run(e, jobs, 4, 10000);
  assert_int_equal(counters(e).n_preemptions, 0);
  for (int i = 0; i < 4; i++) expect_reference(&jobs[i], 1024);
  brisk_engine_free(e);
}

/* More than 10x the window in a pool of the window's bound: no preemption,
 * at most sinks + window + 3 blocks held after any step, the tokens of a
 * context-level run in a pool of the same size. */
static void test_bounded_pool(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_window_bounded");
  enum { SINKS = 4, WINDOW = 8, PROMPT = 20, OUT = 200 };
  const int32_t pool = SINKS + 2 * WINDOW + 3 * BS; /* 32 tokens, 8 blocks */
  eh_job j;
  make_job(&r, &j, PROMPT, OUT, SINKS, WINDOW, 1);
  assert_true(PROMPT + OUT > 10 * (SINKS + WINDOW) && PROMPT + OUT > 6 * pool);
  brisk_engine *e = engine(pool, 64, 4, BRISK_PREEMPT_RECOMPUTE);
  assert_int_equal(eh_submit(e, &j), BRISK_OK);
  int32_t most = 0;
  for (int steps = 0; !eh_all_finished(&j, 1); steps++) {
    assert_true(steps < 1000);
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
    eh_take_events(e);
    brisk_engine_counters s = counters(e);
    int32_t held = s.n_kv_blocks - s.n_free_kv_blocks;
    if (held > most) most = held;
  }
  fprintf(stderr, "%d tokens through a %d-token pool: at most %d blocks of %d held\n", PROMPT + OUT,
          pool, most, pool / BS);
  assert_true(most <= (SINKS + WINDOW) / BS + 3);
  assert_int_equal(counters(e).n_preemptions, 0);
  assert_int_equal(j.reason[0], BRISK_FINISH_LENGTH);
  expect_reference(&j, pool);
  /* Every block came back. */
  brisk_engine_counters s = counters(e);
  assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
  brisk_engine_free(e);
}

/* A windowed request attaches no cached prefix and publishes nothing: a
 * plain request with its prompt afterwards reuses nothing; a windowed
 * request after a plain one with the same prompt (whose blocks are
 * cached) still computes its own, and both give their references. */
static void test_prefix_cache(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_window_prefix");
  eh_job a, b, c;
  make_job(&r, &a, 40, 30, 4, 8, 0);
  b = a;
  b.extra.n_sinks = b.extra.window = 0;
  c = a;
  brisk_engine *e = engine(1024, 256, 4, BRISK_PREEMPT_RECOMPUTE);
  assert_int_equal(eh_submit(e, &a), BRISK_OK);
  eh_run(e, &a, 1, 1000);
  assert_int_equal(a.stats.n_cached_tokens, 0);
  assert_int_equal(eh_submit(e, &b), BRISK_OK);
  eh_run(e, &b, 1, 1000);
  assert_int_equal(b.stats.n_cached_tokens, 0); /* nothing of a's was published */
  brisk_engine_counters s = counters(e);
  assert_int_equal(s.n_prefix_hit_tokens, 0);
  eh_reset(&c);
  assert_int_equal(eh_submit(e, &c), BRISK_OK); /* b's prompt blocks are cached now */
  eh_run(e, &c, 1, 1000);
  assert_int_equal(c.stats.n_cached_tokens, 0);
  assert_int_equal(counters(e).n_prefix_hit_tokens, 0);
  expect_reference(&a, 1024);
  expect_reference(&b, 1024);
  eh_reset(&b);
  /* The plain prompt again: its own cached blocks are found. */
  assert_int_equal(eh_submit(e, &b), BRISK_OK);
  eh_run(e, &b, 1, 1000);
  assert_true(b.stats.n_cached_tokens >= 36);
  expect_reference(&b, 1024);
  assert_memory_equal(a.out[0], c.out[0], (size_t)a.n_out[0] * sizeof a.out[0][0]);
  brisk_engine_free(e);
}

/* A pool too small for all: windowed and plain requests preempt one
 * another (recompute; swap mode recomputes windowed ones), every request
 * finishes with all its tokens, plain ones equal their references, and
 * the pool is whole at the end. */
static void test_preemption(void **state) {
  (void)state;
  const brisk_preempt_mode modes[] = {BRISK_PREEMPT_RECOMPUTE, BRISK_PREEMPT_SWAP};
  for (int m = 0; m < 2; m++) {
    test_rng r = test_rng_seeded("engine_window_preempt");
    eh_job jobs[4];
    for (int i = 0; i < 4; i++)
      make_job(&r, &jobs[i], 24 + 4 * i, 60, i < 2 ? 4 : 0, i < 2 ? 8 : 0, 0);
    brisk_engine *e = engine(96, 64, 0, modes[m]);
    for (int i = 0; i < 4; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
    eh_run(e, jobs, 4, 20000);
    brisk_engine_counters s = counters(e);
    fprintf(stderr, "preempt mode %d: %llu preemptions, %llu swapped out\n", (int)modes[m],
            (unsigned long long)s.n_preemptions, (unsigned long long)s.n_swapped_out);
    assert_true(s.n_preemptions > 0);
    for (int i = 0; i < 4; i++) {
      assert_int_equal(jobs[i].n_out[0], 60);
      assert_int_equal(jobs[i].reason[0], BRISK_FINISH_LENGTH);
      /* Plain requests, and windowed ones never preempted, are exact. */
      if (jobs[i].extra.window == 0 || jobs[i].stats.n_preemptions == 0)
        expect_reference(&jobs[i], 1024);
    }
    assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
    brisk_engine_free(e);
  }
}

/* What a windowed request refuses, named in the message. */
static void test_refusals(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_window_refusals");
  brisk_engine *e = engine(256, 32, 4, BRISK_PREEMPT_RECOMPUTE);
  eh_job j;
  make_job(&r, &j, 8, 4, 4, 0, 0); /* sinks without a window */
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "window"));
  make_job(&r, &j, 8, 4, -1, 8, 0);
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  make_job(&r, &j, 8, 4, 0, -1, 0);
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  make_job(&r, &j, 8, 4, 40, 8, 0); /* 40 sinks > max_batch_tokens 32 */
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "sinks"));
  make_job(&r, &j, 8, 4, 4, 8, 0);
  j.extra.n = 2;
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  make_job(&r, &j, 8, 4, 4, 8, 0);
  j.extra.spec_n_draft = 2;
  assert_int_equal(eh_submit(e, &j), BRISK_E_INVALID_ARGUMENT);
  /* A valid one still runs. */
  make_job(&r, &j, 8, 4, 4, 8, 0);
  assert_int_equal(eh_submit(e, &j), BRISK_OK);
  eh_run(e, &j, 1, 100);
  expect_reference(&j, 1024);
  brisk_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_context), cmocka_unit_test(test_bounded_pool),
      cmocka_unit_test(test_prefix_cache),    cmocka_unit_test(test_preemption),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
