/* deepseek2 (multi-head latent attention) through the context and the
 * engine: the paged cache holds one latent row per token (kv_lora_rank +
 * rope values: brisk_kv_stats says so, far below per-head K/V), a prompt fed
 * in one batch or token by token gives the same logits, a quantized KV cache
 * is refused with a message, a snapshot restores bitwise, every allocation
 * of a load and a decode fails cleanly, and the engine's
 * prefix cache, recompute preemption and swap-to-host preemption give
 * exactly the tokens of an uncontended run without a prefix cache. */
#include "engine_harness.h"
#include "test_models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model;
static test_model_spec spec;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  spec = test_model_default("deepseek2");
  spec.n_layer = 3; /* a dense layer, then two MoE ones */
  test_rng r = test_rng_seeded("engine_mla_model");
  return test_model_load(dir, "deepseek2", &spec, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_context *make_context(brisk_kv_type type) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = 128;
  cp.block_size = 4;
  cp.kv_type = type;
  cp.max_batch_tokens = 64;
  brisk_context *c = NULL;
  if (brisk_context_create(model, &cp, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

static void test_latent_cache(void **state) {
  (void)state;
  assert_string_equal(brisk_model_architecture(model), "deepseek2");
  for (int t = 0; t < 2; t++) {
    brisk_kv_type type = t ? BRISK_KV_F32 : BRISK_KV_F16;
    brisk_context *c = make_context(type);
    brisk_kv_stats s = {.struct_size = sizeof s};
    assert_int_equal(brisk_context_kv_stats(c, &s), BRISK_OK);
    const uint64_t elt = t ? 4 : 2;
    const uint64_t latent = (uint64_t)spec.n_layer * (spec.kv_lora_rank + spec.rope_dim) * elt;
    const uint64_t expanded = (uint64_t)spec.n_layer * spec.n_head *
                              (spec.head_dim + spec.v_head_dim) * elt; /* per-head K and V */
    assert_int_equal(s.bytes_per_token, latent);
    assert_true(s.bytes_per_token * 3 < expanded);
    brisk_context_free(c);
  }
  /* The latent cache has no quantized form yet. */
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_type = BRISK_KV_Q8_0;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(model, &cp, &c), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "latent"));
  /* Nor is it split over tensor-parallel ranks yet. */
  char path[128];
  snprintf(path, sizeof path, "%s/deepseek2.gguf", dir);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = 2;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "deepseek2"));
}

/* Last-position logits after feeding tokens[0, n) in batches of `step`. */
static void logits_of(const int32_t *tokens, int32_t n, int32_t step, float *out) {
  brisk_context *c = make_context(BRISK_KV_F32);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  int32_t last = 0; /* the batch index of token n - 1 in the last batch */
  for (int32_t i0 = 0; i0 < n; i0 += step) {
    brisk_batch_clear(b);
    for (int32_t i = i0; i < n && i < i0 + step; i++)
      assert_int_equal(brisk_batch_add(b, tokens[i], i, 0, i == n - 1), BRISK_OK);
    if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
    last = n - 1 - i0;
  }
  const float *logits = brisk_get_logits(c, last);
  assert_non_null(logits);
  memcpy(out, logits, spec.n_vocab * sizeof *out);
  brisk_batch_free(b);
  brisk_context_free(c);
}

static void test_batch_vs_incremental(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_mla_tokens");
  int32_t tokens[40];
  for (int i = 0; i < 40; i++) tokens[i] = 3 + (int32_t)(test_rng_u64(&r) % (spec.n_vocab - 3));
  float *a = malloc(spec.n_vocab * sizeof *a), *b = malloc(spec.n_vocab * sizeof *b);
  logits_of(tokens, 40, 40, a);
  logits_of(tokens, 40, 1, b);
  double worst = 0, mx = 0;
  for (uint32_t i = 0; i < spec.n_vocab; i++) {
    worst = fmax(worst, fabs((double)a[i] - b[i]));
    mx = fmax(mx, fabs((double)a[i]));
  }
  /* The same arithmetic per token; only matmul blocking differs by batch. */
  if (worst > 1e-5 * (1 + mx)) fail_msg("batch vs incremental: %.3g (max %.3g)", worst, mx);
  free(a);
  free(b);
}

/* A sequence's latent rows exported and imported into a fresh context:
 * the next logits are bitwise the original's (the snapshot carries the
 * two halves of every latent row like any K/V pair). */
static void test_snapshot(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_mla_snapshot");
  int32_t tokens[23];
  for (int i = 0; i < 23; i++) tokens[i] = 3 + (int32_t)(test_rng_u64(&r) % (spec.n_vocab - 3));
  brisk_context *a = make_context(BRISK_KV_F16), *b = make_context(BRISK_KV_F16);
  brisk_batch *bt = NULL;
  assert_int_equal(brisk_batch_create(64, &bt), BRISK_OK);
  for (int32_t i = 0; i < 22; i++) assert_int_equal(brisk_batch_add(bt, tokens[i], i, 0, 0), 0);
  assert_int_equal(brisk_decode(a, bt), BRISK_OK);
  size_t n = 0;
  assert_int_equal(brisk_seq_export(a, 0, NULL, 0, &n), BRISK_E_BUFFER_TOO_SMALL);
  void *snap = malloc(n);
  assert_int_equal(brisk_seq_export(a, 0, snap, n, &n), BRISK_OK);
  assert_int_equal(brisk_seq_import(b, 0, snap, n), BRISK_OK);
  float *la = malloc(spec.n_vocab * sizeof *la), *lb = malloc(spec.n_vocab * sizeof *lb);
  brisk_context *ctx[2] = {a, b};
  float *out[2] = {la, lb};
  for (int k = 0; k < 2; k++) {
    brisk_batch_clear(bt);
    assert_int_equal(brisk_batch_add(bt, tokens[22], 22, 0, 1), BRISK_OK);
    assert_int_equal(brisk_decode(ctx[k], bt), BRISK_OK);
    memcpy(out[k], brisk_get_logits(ctx[k], 0), spec.n_vocab * sizeof(float));
  }
  assert_memory_equal(la, lb, spec.n_vocab * sizeof *la);
  free(la), free(lb), free(snap);
  brisk_batch_free(bt);
  brisk_context_free(a);
  brisk_context_free(b);
}

/* Loading the model, and a context decoding a few tokens on it: every
 * allocation may fail, each failure is BRISK_E_OUT_OF_MEMORY and leaks
 * nothing (kv_b's float32 copy, the latent pools, the MLA buffers). */
static brisk_status load_and_decode(void *ctx) {
  (void)ctx;
  char path[128];
  snprintf(path, sizeof path, "%s/deepseek2.gguf", dir);
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, NULL, &m);
  if (st) return st;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = 16;
  cp.block_size = 4;
  cp.max_batch_tokens = 8;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  if (!(st = brisk_context_create(m, &cp, &c)) && !(st = brisk_batch_create(8, &b))) {
    for (int32_t i = 0; i < 6 && !st; i++) st = brisk_batch_add(b, 3 + i, i, 0, i == 5);
    if (!st) st = brisk_decode(c, b);
  }
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  assert_true(test_every_allocation_fails(load_and_decode, NULL) > 10);
}

enum { N = 8 };

static brisk_engine *make_engine(int32_t kv_tokens, int prefix_cache, brisk_preempt_mode mode) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = 4;
  p.max_batch_tokens = 32;
  p.max_running = N;
  p.prefill_chunk = 16;
  p.prefix_cache = prefix_cache;
  p.reserve_blocks = 0;
  p.preempt_mode = mode;
  p.swap_bytes = mode == BRISK_PREEMPT_SWAP ? UINT64_MAX : 0;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

/* The first job alone (its prefix blocks are then published), then the
 * rest together. */
static brisk_engine_counters run_jobs(brisk_engine *e, eh_job *jobs) {
  assert_int_equal(eh_submit(e, &jobs[0]), BRISK_OK);
  eh_run(e, jobs, 1, 10000);
  for (int i = 1; i < N; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
  eh_run(e, jobs, N, 10000);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  brisk_engine_free(e);
  return c;
}

static void test_engine_prefix_and_preemption(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_mla_jobs");
  eh_job base[N], runs[3][N];
  int32_t shared[20];
  for (int i = 0; i < 20; i++) shared[i] = 3 + (int32_t)(test_rng_u64(&r) % (spec.n_vocab - 3));
  int32_t demand = 0;
  for (int i = 0; i < N; i++) {
    eh_random_job(&r, model, &base[i], 12, 20, i % 2);
    /* Half the prompts start with the shared prefix. */
    if (i % 2 == 0) {
      memmove(base[i].prompt + 20, base[i].prompt, (size_t)base[i].n_prompt * sizeof(int32_t));
      memcpy(base[i].prompt, shared, sizeof shared);
      base[i].n_prompt += 20;
    }
    base[i].max_tokens = 20;
    base[i].stop_at_eog = 0;
    demand += base[i].n_prompt + base[i].max_tokens;
  }
  for (int k = 0; k < 3; k++) memcpy(runs[k], base, sizeof base);
  brisk_engine_counters c0 = run_jobs(make_engine(1024, 0, BRISK_PREEMPT_RECOMPUTE), base);
  assert_int_equal(c0.n_preemptions, 0);
  /* The prefix cache on, room for all. */
  brisk_engine_counters c1 = run_jobs(make_engine(1024, 1, BRISK_PREEMPT_RECOMPUTE), runs[0]);
  /* A quarter of the demand: recompute, then swap to host. */
  const int32_t pool = demand / 4;
  brisk_engine_counters c2 = run_jobs(make_engine(pool, 1, BRISK_PREEMPT_RECOMPUTE), runs[1]);
  brisk_engine_counters c3 = run_jobs(make_engine(pool, 0, BRISK_PREEMPT_SWAP), runs[2]);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N; i++) eh_expect_same(&base[i], &runs[k][i]);
  fprintf(stderr,
          "deepseek2: prefix hits %llu tokens; pool %d of demand %d: recompute %llu "
          "preemptions, swap %llu out / %llu in\n",
          (unsigned long long)c1.n_prefix_hit_tokens, pool, demand,
          (unsigned long long)c2.n_preemptions, (unsigned long long)c3.n_swapped_out,
          (unsigned long long)c3.n_swapped_in);
  assert_true(c1.n_prefix_hit_tokens > 0);
  assert_true(c2.n_preemptions > 0);
  assert_true(c3.n_swapped_out > 0);
  assert_int_equal(c3.n_swapped_in, c3.n_swapped_out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_latent_cache),
      cmocka_unit_test(test_batch_vs_incremental),
      cmocka_unit_test(test_snapshot),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_engine_prefix_and_preemption),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
