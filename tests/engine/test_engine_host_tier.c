/* The engine with the prefix cache's host tier: requests sharing one of
 * four prefixes that together are twice the KV pool, served one after
 * another: with the tier every repeated prefix is reused whole (from the
 * pool or copied back from host memory), without it most are recomputed;
 * the tokens are those of an engine without a prefix cache either way, and
 * with everything submitted at once and swap preemption too. The metrics
 * show the tier's bytes, blocks, hits, misses and evictions. */
#include "engine_harness.h"
#include "test_models.h"

#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_host_tier_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

enum { G = 4, SHARED = 32, N = 16, POOL = 64 };

static brisk_engine *make_engine(int prefix_cache, uint64_t host_bytes, brisk_preempt_mode mode) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_int_equal(p.prefix_host_bytes, 0); /* off by default */
  p.n_threads = 1;
  p.kv_tokens = POOL;
  p.block_size = 4;
  p.max_batch_tokens = 48;
  p.max_running = 4;
  p.prefill_chunk = 16;
  p.prefix_cache = prefix_cache;
  p.prefix_host_bytes = host_bytes;
  p.preempt_mode = mode;
  p.reserve_blocks = 0;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

/* Job i: prefix group[i]'s 32 tokens, then 1..8 of its own; 1..8 tokens
 * out, odd ones sampled. */
static void make_jobs(test_rng *r, eh_job *jobs, int32_t *group) {
  const int32_t nv = brisk_model_n_vocab(model);
  int32_t prefix[G][SHARED];
  for (int g = 0; g < G; g++)
    for (int32_t k = 0; k < SHARED; k++) prefix[g][k] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  for (int i = 0; i < N; i++) {
    eh_job *j = &jobs[i];
    eh_random_job(r, model, j, 8, 8, i % 2);
    group[i] = (int32_t)(test_rng_u64(r) % G);
    memmove(j->prompt + SHARED, j->prompt, (size_t)j->n_prompt * sizeof *j->prompt);
    memcpy(j->prompt, prefix[group[i]], sizeof prefix[0]);
    j->n_prompt += SHARED;
  }
}

static brisk_engine_metrics metrics(brisk_engine *e) {
  brisk_engine_metrics m = {.struct_size = sizeof m};
  assert_int_equal(brisk_engine_get_metrics(e, &m), BRISK_OK);
  return m;
}

/* One request at a time. */
static void run_one_by_one(brisk_engine *e, eh_job *jobs) {
  for (int i = 0; i < N; i++) {
    assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
    eh_run(e, &jobs[i], 1, 10000);
  }
}

static void test_prefixes_twice_the_pool(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_host_tier");
  eh_job base[N], off[N], pool[N], host[N];
  int32_t group[N];
  make_jobs(&r, base, group);
  memcpy(off, base, sizeof base);
  memcpy(pool, base, sizeof base);
  memcpy(host, base, sizeof base);
  brisk_engine *e_off = make_engine(0, 0, BRISK_PREEMPT_RECOMPUTE);
  brisk_engine *e_pool = make_engine(1, 0, BRISK_PREEMPT_RECOMPUTE);
  brisk_engine *e_host = make_engine(1, 16u << 20, BRISK_PREEMPT_RECOMPUTE);
  run_one_by_one(e_off, off);
  run_one_by_one(e_pool, pool);
  run_one_by_one(e_host, host);
  int seen[G] = {0}, repeats = 0, pool_short = 0;
  uint64_t hits_host = 0, hits_pool = 0;
  for (int i = 0; i < N; i++) {
    eh_expect_same(&host[i], &off[i]);
    eh_expect_same(&pool[i], &off[i]);
    /* With the tier a repeated prefix is always reused whole. */
    assert_int_equal(host[i].stats.n_cached_tokens, seen[group[i]] ? SHARED : 0);
    assert_true(pool[i].stats.n_cached_tokens <= host[i].stats.n_cached_tokens);
    pool_short += pool[i].stats.n_cached_tokens < host[i].stats.n_cached_tokens;
    repeats += seen[group[i]];
    seen[group[i]] = 1;
    hits_host += (uint64_t)host[i].stats.n_cached_tokens;
    hits_pool += (uint64_t)pool[i].stats.n_cached_tokens;
  }
  assert_true(repeats > 0 && pool_short > 0 && hits_pool < hits_host);
  brisk_engine_metrics mh = metrics(e_host), mp = metrics(e_pool);
  assert_int_equal(mh.n_prefix_hit_tokens, hits_host);
  assert_true(mh.n_host_tier_hits > 0 && mh.n_host_tier_hits * 4 <= hits_host);
  assert_true(mh.n_host_tier_blocks > 0 && mh.host_tier_bytes > mh.host_tier_index_bytes);
  assert_true(mh.host_tier_bytes <= 16u << 20 && mh.n_host_tier_evictions == 0);
  assert_true(mh.n_host_tier_misses > 0); /* first occurrences */
  assert_true(mp.n_host_tier_hits == 0 && mp.host_tier_bytes == 0 && mp.n_host_tier_blocks == 0);
  /* The window's counters restart; what the tier holds does not. */
  assert_int_equal(brisk_engine_reset_metrics(e_host), BRISK_OK);
  brisk_engine_metrics m0 = metrics(e_host);
  assert_true(m0.n_host_tier_hits == 0 && m0.n_host_tier_misses == 0);
  assert_true(m0.host_tier_bytes == mh.host_tier_bytes);
  brisk_engine_free(e_off);
  brisk_engine_free(e_pool);
  brisk_engine_free(e_host);
}

/* Everything at once in the same pool (oversubscribed: preemption), by
 * recompute and by swap, with a tier too small for every prefix: the same
 * tokens. */
static void test_oversubscribed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_host_tier_busy");
  eh_job base[N], off[N], jobs[N];
  int32_t group[N];
  make_jobs(&r, base, group);
  memcpy(off, base, sizeof base);
  brisk_engine *e_off = make_engine(0, 0, BRISK_PREEMPT_RECOMPUTE);
  for (int i = 0; i < N; i++) assert_int_equal(eh_submit(e_off, &off[i]), BRISK_OK);
  eh_run(e_off, off, N, 100000);
  /* A tier of about 12 blocks: it evicts as it goes. */
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = POOL;
  cp.block_size = 4;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(model, &cp, &c), BRISK_OK);
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  brisk_context_free(c);
  const uint64_t budget = 12 * (ks.bytes_per_block + 64);
  uint64_t evictions = 0;
  for (int mode = 0; mode < 2; mode++) {
    memcpy(jobs, base, sizeof base);
    brisk_engine *e = make_engine(1, budget, mode ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE);
    for (int i = 0; i < N; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
    eh_run(e, jobs, N, 100000);
    for (int i = 0; i < N; i++) eh_expect_same(&jobs[i], &off[i]);
    brisk_engine_metrics m = metrics(e);
    assert_true(m.host_tier_bytes <= budget && m.n_host_tier_blocks <= 12);
    evictions += m.n_host_tier_evictions;
    brisk_engine_free(e);
  }
  assert_true(evictions > 0);
  brisk_engine_free(e_off);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefixes_twice_the_pool),
      cmocka_unit_test(test_oversubscribed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
