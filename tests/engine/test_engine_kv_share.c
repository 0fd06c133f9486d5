/* The engine on a model with cross-layer KV sharing (a random-weight llama
 * whose last 2 of 4 layers read layer 1's K/V): requests sharing a prefix
 * reuse cached blocks, completions fork copy-on-write, and a pool too
 * small for all preempts by recompute and by swap; every completion's
 * tokens equal a context-level run of its prompt with the same sampler. */
#include "engine_harness.h"
#include "test_models.h"

#include "model/model.h"

#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model;

enum { BS = 4, SHARED = 24 };

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  s.n_layer = 4;
  s.shared_kv_layers = 2;
  test_rng r = test_rng_seeded("engine_kv_share_model");
  if (test_model_load(dir, "llama_shared", &s, &r, &model)) return -1;
  return model->layers[3].kv_source == 1 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* Completion c of job j on a context: the prompt in one batch, then one
 * token at a time, with the engine's sampler for it (seed + c). */
static void expect_reference(const eh_job *j, int32_t c) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = 512;
  cp.block_size = BS;
  cp.max_batch_tokens = EH_MAX_PROMPT;
  cp.n_seq_max = 1;
  brisk_context *ctx = NULL;
  brisk_sampler *s = NULL;
  brisk_batch *b = NULL;
  brisk_sampler_params sp = j->sp;
  sp.seed += (uint64_t)c;
  assert_int_equal(brisk_context_create(model, &cp, &ctx), BRISK_OK);
  assert_int_equal(brisk_sampler_create(model, &sp, &s), BRISK_OK);
  assert_int_equal(brisk_batch_create(EH_MAX_PROMPT, &b), BRISK_OK);
  for (int32_t i = 0; i < j->n_prompt; i++)
    brisk_batch_add(b, j->prompt[i], i, 0, i == j->n_prompt - 1);
  int32_t pos = j->n_prompt;
  for (int32_t n = 0; n < j->max_tokens; n++) {
    if (brisk_decode(ctx, b)) fail_msg("reference decode: %s", brisk_last_error());
    int32_t tok;
    assert_int_equal(brisk_sampler_sample(s, ctx, brisk_batch_size(b) - 1, &tok), BRISK_OK);
    assert_int_equal(brisk_sampler_accept(s, tok), BRISK_OK);
    assert_true(n < j->n_out[c]);
    if (j->out[c][n] != tok)
      fail_msg("request %llu completion %d: token %d is %d, the context's %d",
               (unsigned long long)j->id, c, n, j->out[c][n], tok);
    brisk_batch_clear(b);
    brisk_batch_add(b, tok, pos++, 0, 1);
  }
  assert_int_equal(j->n_out[c], j->max_tokens);
  brisk_batch_free(b);
  brisk_sampler_free(s);
  brisk_context_free(ctx);
}

/* Jobs whose prompts start with the same SHARED tokens; odd ones sample,
 * and job 1 has two completions. */
static void make_jobs(test_rng *r, eh_job *jobs, int n, int32_t max_out) {
  int32_t nv = brisk_model_n_vocab(model), shared[SHARED];
  for (int32_t k = 0; k < SHARED; k++) shared[k] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  for (int i = 0; i < n; i++) {
    eh_job *j = &jobs[i];
    memset(j, 0, sizeof *j);
    memcpy(j->prompt, shared, sizeof shared);
    j->n_prompt = SHARED + 1 + (int32_t)(test_rng_u64(r) % 12);
    for (int32_t k = SHARED; k < j->n_prompt; k++)
      j->prompt[k] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
    j->max_tokens = max_out;
    brisk_sampler_params_init(&j->sp);
    j->sp.temperature = i % 2 ? 0.9f : 0.0f;
    j->sp.seed = test_rng_u64(r);
    brisk_request_params_init(&j->extra);
    j->extra.n = i == 1 ? 2 : 1;
  }
}

static brisk_engine *engine(int32_t kv_tokens, int32_t reserve_blocks, brisk_preempt_mode mode) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = BS;
  p.max_batch_tokens = 48;
  p.max_running = 4;
  p.prefill_chunk = 16;
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

static void expect_all(const eh_job *jobs, int n) {
  for (int i = 0; i < n; i++)
    for (int32_t c = 0; c < (jobs[i].extra.n > 1 ? jobs[i].extra.n : 1); c++)
      expect_reference(&jobs[i], c);
}

/* A warm-up request publishes the shared prefix; the next wave reuses it. */
static void test_prefix_cache(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_kv_share_prefix");
  eh_job jobs[4];
  make_jobs(&r, jobs, 4, 12);
  brisk_engine *e = engine(512, 4, BRISK_PREEMPT_RECOMPUTE);
  assert_int_equal(eh_submit(e, &jobs[0]), BRISK_OK);
  eh_run(e, jobs, 1, 1000);
  for (int i = 1; i < 4; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
  eh_run(e, jobs, 4, 1000);
  for (int i = 1; i < 4; i++) assert_true(jobs[i].stats.n_cached_tokens >= SHARED);
  assert_true(counters(e).n_prefix_hit_tokens >= 3 * SHARED);
  expect_all(jobs, 4);
  brisk_engine_free(e);
}

/* A pool of 80 tokens for four requests of up to 76: preemption by
 * recompute and by swap (whose host copies hold the layers with K/V). */
static void test_preemption(void **state) {
  (void)state;
  const brisk_preempt_mode modes[] = {BRISK_PREEMPT_RECOMPUTE, BRISK_PREEMPT_SWAP};
  for (int m = 0; m < 2; m++) {
    test_rng r = test_rng_seeded("engine_kv_share_preempt");
    eh_job jobs[4];
    make_jobs(&r, jobs, 4, 40);
    brisk_engine *e = engine(80, 0, modes[m]);
    for (int i = 0; i < 4; i++)
      if (eh_submit(e, &jobs[i])) fail_msg("submit %d: %s", i, brisk_last_error());
    eh_run(e, jobs, 4, 20000);
    brisk_engine_counters s = counters(e);
    fprintf(stderr, "preempt mode %d: %llu preemptions, %llu swapped out\n", (int)modes[m],
            (unsigned long long)s.n_preemptions, (unsigned long long)s.n_swapped_out);
    assert_true(s.n_preemptions > 0);
    if (modes[m] == BRISK_PREEMPT_SWAP) assert_true(s.n_swapped_out > 0);
    expect_all(jobs, 4);
    brisk_engine_free(e);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefix_cache),
      cmocka_unit_test(test_preemption),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
