/* The forward-pass cost model against hand computations for tiny models,
 * and brisk_engine_get_metrics against the per-request statistics and
 * counters of real runs (random-weight models from test_models.h). */
#include "test_models.h"

#include "core/clock.h"
#include "core/dtype.h"
#include "model/cost.h"
#include "model/model.h"
#include "engine/histogram.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static brisk_model *load_spec(const char *name, test_model_spec s) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  test_rng r = test_rng_seeded(name);
  if (test_model_write(path, &s, &r, NULL)) fail_msg("write %s", name);
  brisk_model *m = NULL;
  if (brisk_model_load(path, NULL, &m)) fail_msg("load %s: %s", name, brisk_last_error());
  return m;
}

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

static void expect_eq(double got, double want) {
  if (fabs(got - want) > 1e-12 * fabs(want)) fail_msg("got %.17g, want %.17g", got, want);
}

static brisk_model_cost weights(const brisk_model *m, int64_t n, int64_t n_out) {
  brisk_model_cost c = {0, 0};
  brisk_model_cost_weights(m, n, n_out, &c);
  return c;
}

static brisk_model_cost attention(const brisk_model *m, uint32_t elem, int64_t past, int64_t n) {
  brisk_model_cost c = {0, 0};
  brisk_model_cost_attention(m, elem, past, n, &c);
  return c;
}

/* llama: n_embd 64, 2 layers, 4 heads of 16, 2 KV heads, n_ff 96, 96 tokens.
 * Per layer: wq 64x64, wk 32x64, wv 32x64, wo 64x64, gate and up 96x64,
 * down 64x96 = 30720 elements, plus two norms of 64. */
static void test_cost_llama_by_hand(void **state) {
  (void)state;
  brisk_model *m = load_spec("cost_llama", test_model_default("llama"));
  /* F32: embedding rows 256 B; layers 2 * (30720 + 128) * 4; output 96x64 + norm. */
  brisk_model_cost c = weights(m, 5, 2);
  expect_eq(c.bytes, 5 * 256 + 2 * (30720 + 128) * 4 + (96 * 64 + 64) * 4); /* 272896 */
  expect_eq(c.flops, 2.0 * 5 * 2 * 30720 + 2.0 * 2 * 96 * 64);              /* 638976 */
  c = weights(m, 3, 0); /* a prefill chunk without logits skips the output matrix */
  expect_eq(c.bytes, 3 * 256 + 2 * (30720 + 128) * 4);
  expect_eq(c.flops, 2.0 * 3 * 2 * 30720);
  c = weights(m, 0, 0);
  assert_true(c.bytes == 0 && c.flops == 0);
  /* Attention, F16 KV: K+V of one position in one layer = 2 * 2 * 16 * 2 =
   * 128 B; one attended position costs 4 * 4 * 16 = 256 FLOPs per layer.
   * 3 new tokens after 5 attend to 6 + 7 + 8 = 21 positions; 8 read, 3 written. */
  c = attention(m, 2, 5, 3);
  expect_eq(c.flops, 2.0 * 256 * 21);
  expect_eq(c.bytes, 2.0 * 128 * (8 + 3));
  c = attention(m, 4, 5, 3); /* F32 KV doubles the bytes only */
  expect_eq(c.flops, 2.0 * 256 * 21);
  expect_eq(c.bytes, 2.0 * 256 * (8 + 3));
  c = attention(m, 2, 0, 1);
  expect_eq(c.flops, 2.0 * 256);
  expect_eq(c.bytes, 2.0 * 128 * 2);
  brisk_model_free(m);

  /* Q8_0 matrices: a row of 64 is 2 blocks of 34 B = 68 B, of 96 is 102 B;
   * norms stay F32. Per layer: (64 + 32 + 32 + 64 + 96 + 96) rows of 68 B
   * plus 64 rows of 102 B = 32640 B. FLOPs do not depend on the type. */
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q8_0;
  m = load_spec("cost_llama_q8", s);
  c = weights(m, 5, 2);
  expect_eq(c.bytes, 5 * 68 + 2 * (32640 + 512) + (96 * 68 + 256)); /* 73428 */
  expect_eq(c.flops, 638976);
  brisk_model_free(m);
}

/* mistral: the llama shapes with a 32-position sliding window. */
static void test_cost_sliding_window(void **state) {
  (void)state;
  brisk_model *m = load_spec("cost_mistral", test_model_default("mistral"));
  /* Positions 40..42 each attend to 32; reads start at 9: 34 read + 3 written. */
  brisk_model_cost c = attention(m, 2, 40, 3);
  expect_eq(c.flops, 2.0 * 256 * 96);
  expect_eq(c.bytes, 2.0 * 128 * 37);
  /* Positions 30..33 attend to 31, 32, 32, 32; reads from 0: 34 + 4. */
  c = attention(m, 2, 30, 4);
  expect_eq(c.flops, 2.0 * 256 * 127);
  expect_eq(c.bytes, 2.0 * 128 * 38);
  /* A 40-token prefill: 1 + 2 + ... + 32, then 8 x 32 = 784 attended. */
  c = attention(m, 2, 0, 40);
  expect_eq(c.flops, 2.0 * 256 * 784);
  expect_eq(c.bytes, 2.0 * 128 * 80);
  brisk_model_free(m);
}

/* mixtral: attention as llama (12288 elements a layer), an F32 router 4x64,
 * 4 experts of 3 x 6144 elements, 2 used per token. */
static void test_cost_moe(void **state) {
  (void)state;
  brisk_model *m = load_spec("cost_mixtral", test_model_default("mixtral"));
  /* One token touches 2 experts; three touch all 4. */
  brisk_model_cost c = weights(m, 1, 1);
  double layer = 12288 * 4 + 512 + 256 * 4;
  expect_eq(c.bytes, 256 + 2 * (layer + 2 * 18432 * 4) + (96 * 64 + 64) * 4);
  expect_eq(c.flops, 2 * (2.0 * (12288 + 256) + 2.0 * 2 * 18432) + 2.0 * 96 * 64);
  c = weights(m, 3, 0);
  expect_eq(c.bytes, 3 * 256 + 2 * (layer + 4 * 18432 * 4));
  expect_eq(c.flops, 2 * (2.0 * 3 * (12288 + 256) + 2.0 * 3 * 2 * 18432));
  brisk_model_free(m);
}

/* ---- Engine runs ---- */

typedef struct job {
  int32_t prompt[48];
  int32_t n_prompt, max_tokens;
  uint64_t id;
  int finished;
  brisk_finish_reason reason;
  brisk_request_stats stats; /* read right after its finished event */
} job;

static brisk_engine *make_engine(const brisk_model *m, int32_t kv_tokens, int32_t max_batch,
                                 int32_t chunk, double slo_ttft_ms, double bw, double peak) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_true(p.slo_ttft_ms == 0 && p.slo_tpot_ms == 0 && p.mem_bandwidth_gbs == 0 &&
              p.peak_gflops == 0);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = 4;
  p.max_batch_tokens = max_batch;
  p.max_running = 8;
  p.prefill_chunk = chunk;
  p.slo_ttft_ms = slo_ttft_ms;
  p.slo_tpot_ms = slo_ttft_ms;
  p.mem_bandwidth_gbs = bw;
  p.peak_gflops = peak;
  p.reserve_blocks = 0; /* admission fills the pool: small pools preempt */
  brisk_engine *e = NULL;
  if (brisk_engine_create(m, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

static void submit(brisk_engine *e, job *j) {
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = j->prompt;
  p.n_prompt_tokens = (size_t)j->n_prompt;
  p.max_tokens = j->max_tokens;
  p.stop_at_eog = 0;
  p.user_data = j;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  p.sampler = &sp;
  if (brisk_engine_submit(e, &p, &j->id)) fail_msg("submit: %s", brisk_last_error());
}

static void run(brisk_engine *e, job *jobs, int n) {
  for (int steps = 0;; steps++) {
    int done = 1;
    for (int i = 0; i < n; i++) done &= jobs[i].finished;
    if (done) return;
    assert_true(steps < 100000);
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    brisk_engine_event ev[16];
    size_t got;
    do {
      assert_int_equal(brisk_engine_poll(e, ev, 16, &got), BRISK_OK);
      for (size_t i = 0; i < got; i++) {
        if (!ev[i].finished) continue;
        job *j = ev[i].user_data;
        j->finished = 1;
        j->reason = ev[i].reason;
        j->stats.struct_size = sizeof j->stats;
        assert_int_equal(brisk_engine_request_stats(e, j->id, &j->stats), BRISK_OK);
      }
    } while (got == 16);
  }
}

static void random_jobs(test_rng *r, job *jobs, int n, int32_t max_prompt, int32_t max_out) {
  memset(jobs, 0, (size_t)n * sizeof *jobs);
  for (int i = 0; i < n; i++) {
    jobs[i].n_prompt = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_prompt);
    for (int32_t k = 0; k < jobs[i].n_prompt; k++)
      jobs[i].prompt[k] = (int32_t)(test_rng_u64(r) % 96);
    jobs[i].max_tokens = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_out);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The summary of `which` against the requests' own numbers. */
static void expect_summary(const brisk_latency_summary *s, const job *jobs, int n, size_t field_off,
                           int need_two_tokens) {
  uint64_t v[64];
  size_t k = 0;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    if (need_two_tokens && jobs[i].stats.n_generated_tokens < 2) continue;
    memcpy(&v[k], (const char *)&jobs[i].stats + field_off, sizeof v[k]);
    sum += (double)v[k++];
  }
  assert_int_equal(s->count, k);
  if (k == 0) return;
  qsort(v, k, sizeof *v, cmp_u64);
  assert_int_equal(s->min_ns, v[0]);
  assert_int_equal(s->max_ns, v[k - 1]);
  const double qs[3] = {0.5, 0.9, 0.99};
  const uint64_t got[3] = {s->p50_ns, s->p90_ns, s->p99_ns};
  for (int q = 0; q < 3; q++) {
    size_t rank = (size_t)ceil(qs[q] * (double)k);
    uint64_t want = v[rank < 1 ? 0 : rank - 1];
    assert_true(fabs((double)got[q] - (double)want) <= BRISK_HIST_REL_ERROR * (double)want);
  }
  assert_true(fabs(s->mean_ns - sum / (double)k) <= 1e-9 * (sum / (double)k));
}

static void expect_rate(double rate, double window_s, double count) {
  assert_true(fabs(rate * window_s - count) <= 1e-9 * count);
}

/* Twelve requests through a KV pool small enough to preempt: the metrics
 * agree with the per-request statistics and the engine's counters. */
static void test_engine_consistent(void **state) {
  (void)state;
  brisk_model *m = load_spec("engine_llama", test_model_default("llama"));
  test_rng r = test_rng_seeded("metrics_engine");
  enum { N = 12 };
  job jobs[N];
  random_jobs(&r, jobs, N, 40, 20);
  /* At least 20 + 10 tokens each, so that the 64-token pool always runs out
   * mid-generation (the test wants preemptions in the metrics). */
  for (int i = 0; i < N; i++) {
    for (; jobs[i].n_prompt < 20; jobs[i].n_prompt++)
      jobs[i].prompt[jobs[i].n_prompt] = (int32_t)(test_rng_u64(&r) % 96);
    if (jobs[i].max_tokens < 10) jobs[i].max_tokens = 10;
  }
  brisk_engine *e = make_engine(m, 64, 32, 0, 1e6, 10.0, 20.0);
  uint64_t t0 = brisk_now_ns();
  for (int i = 0; i < N; i++) submit(e, &jobs[i]);
  run(e, jobs, N);
  double wall = (double)(brisk_now_ns() - t0) * 1e-9;

  brisk_engine_metrics mt = {.struct_size = sizeof mt};
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(mt.n_completed, N);
  assert_int_equal(mt.n_aborted, 0);
  expect_summary(&mt.queue, jobs, N, offsetof(brisk_request_stats, queue_ns), 0);
  expect_summary(&mt.ttft, jobs, N, offsetof(brisk_request_stats, ttft_ns), 0);
  expect_summary(&mt.e2e, jobs, N, offsetof(brisk_request_stats, e2e_ns), 0);
  expect_summary(&mt.tpot, jobs, N, offsetof(brisk_request_stats, tpot_ns), 1);

  double out_tokens = 0, all_tokens = 0;
  uint64_t max_e2e = 0;
  for (int i = 0; i < N; i++) {
    const brisk_request_stats *s = &jobs[i].stats;
    assert_int_equal(jobs[i].reason, BRISK_FINISH_LENGTH);
    assert_int_equal(s->n_generated_tokens, jobs[i].max_tokens);
    out_tokens += s->n_generated_tokens;
    all_tokens += s->n_generated_tokens + s->n_prompt_tokens;
    if (s->e2e_ns > max_e2e) max_e2e = s->e2e_ns;
    /* The request's own TPOT is (e2e - ttft) / (generated - 1). */
    if (s->n_generated_tokens >= 2)
      assert_int_equal(s->tpot_ns,
                       (s->e2e_ns - s->ttft_ns) / (uint64_t)(s->n_generated_tokens - 1));
    else
      assert_int_equal(s->tpot_ns, 0);
  }
  /* The window holds every request's lifetime and lies within the wall time. */
  assert_true(mt.window_s > 0 && mt.window_s <= wall);
  assert_true(mt.window_s * 1e9 >= (double)max_e2e * (1 - 1e-12));
  expect_rate(mt.output_tokens_per_s, mt.window_s, out_tokens);
  expect_rate(mt.total_tokens_per_s, mt.window_s, all_tokens);
  expect_rate(mt.requests_per_s, mt.window_s, N);
  assert_int_equal(mt.n_good, N); /* the SLO is 1000 s */
  expect_rate(mt.goodput_requests_per_s, mt.window_s, N);
  assert_true(mt.goodput_fraction == 1.0);

  assert_true(c.n_preemptions > 0);
  assert_int_equal(mt.n_preemptions, c.n_preemptions);
  assert_int_equal(mt.n_busy_steps, c.n_steps);
  assert_true(mt.busy_s > 0 && mt.busy_s <= wall);
  assert_true(mt.kv_utilization >= 0 && mt.kv_utilization <= 1);
  assert_true(mt.kv_utilization_mean > 0 && mt.kv_utilization_mean <= 1);
  assert_true(mt.bytes > 0 && mt.flops > 0);
  expect_eq(mt.achieved_gbs, mt.bytes / mt.busy_s / 1e9);
  expect_eq(mt.achieved_gflops, mt.flops / mt.busy_s / 1e9);
  expect_eq(mt.mbu, mt.achieved_gbs / 10.0);
  expect_eq(mt.mfu, mt.achieved_gflops / 20.0);
  fprintf(stderr,
          "window %.3f s, busy %.3f s; %.0f out tok/s; ttft p50 %.3f ms p99 %.3f ms; tpot p50 "
          "%.3f ms; %.2f GB/s, %.2f GFLOP/s\n",
          mt.window_s, mt.busy_s, mt.output_tokens_per_s, mt.ttft.p50_ns * 1e-6,
          mt.ttft.p99_ns * 1e-6, mt.tpot.p50_ns * 1e-6, mt.achieved_gbs, mt.achieved_gflops);

  /* Reset: an empty window; then one request whose lifetime is the window. */
  assert_int_equal(brisk_engine_reset_metrics(e), BRISK_OK);
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  assert_int_equal(mt.n_completed, 0);
  assert_int_equal(mt.n_busy_steps, 0);
  assert_int_equal(mt.n_preemptions, 0);
  assert_true(mt.window_s == 0 && mt.bytes == 0 && mt.requests_per_s == 0);
  assert_int_equal(mt.ttft.count, 0);
  job one;
  random_jobs(&r, &one, 1, 8, 6);
  submit(e, &one);
  run(e, &one, 1);
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  assert_int_equal(mt.n_completed, 1);
  assert_true(fabs(mt.window_s - (double)one.stats.e2e_ns * 1e-9) <= 1e-12 * mt.window_s);
  assert_int_equal(mt.e2e.p50_ns, one.stats.e2e_ns);
  assert_int_equal(mt.ttft.p99_ns, one.stats.ttft_ns);
  brisk_engine_free(e);
  brisk_model_free(m);
}

/* One request alone: its steps' costs are the model's, summed by hand from
 * the cost functions (prefill chunks of 4, then one token a step). */
static void test_engine_cost_sum(void **state) {
  (void)state;
  brisk_model *m = load_spec("engine_cost_llama", test_model_default("llama"));
  brisk_engine *e = make_engine(m, 128, 32, 4, 0, 0, 0);
  job j;
  memset(&j, 0, sizeof j);
  j.n_prompt = 10;
  for (int32_t k = 0; k < 10; k++) j.prompt[k] = 3 + k;
  j.max_tokens = 5;
  submit(e, &j);
  run(e, &j, 1);
  brisk_model_cost want = {0, 0};
  /* Prefill chunks 4, 4, 2 (the last gives logits), then 4 decode steps. */
  brisk_model_cost_weights(m, 4, 0, &want);
  brisk_model_cost_attention(m, 2, 0, 4, &want);
  brisk_model_cost_weights(m, 4, 0, &want);
  brisk_model_cost_attention(m, 2, 4, 4, &want);
  brisk_model_cost_weights(m, 2, 1, &want);
  brisk_model_cost_attention(m, 2, 8, 2, &want);
  for (int32_t i = 0; i < 4; i++) {
    brisk_model_cost_weights(m, 1, 1, &want);
    brisk_model_cost_attention(m, 2, 10 + i, 1, &want);
  }
  brisk_engine_metrics mt = {.struct_size = sizeof mt};
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  assert_int_equal(mt.n_busy_steps, 7);
  expect_eq(mt.bytes, want.bytes);
  expect_eq(mt.flops, want.flops);
  /* No machine figures given: MBU and MFU read 0. */
  assert_true(mt.mbu == 0 && mt.mfu == 0);
  assert_true(mt.achieved_gbs > 0);
  /* No SLO: the one request is good. */
  assert_int_equal(mt.n_good, 1);
  brisk_engine_free(e);
  brisk_model_free(m);
}

/* An SLO nobody can meet, and a cancelled request counted as aborted. */
static void test_engine_slo_and_abort(void **state) {
  (void)state;
  brisk_model *m = load_spec("engine_slo_llama", test_model_default("llama"));
  brisk_engine *e = make_engine(m, 256, 32, 0, 1e-6, 0, 0); /* 1 ns */
  test_rng r = test_rng_seeded("metrics_slo");
  job jobs[4];
  random_jobs(&r, jobs, 4, 16, 8);
  for (int i = 0; i < 3; i++) submit(e, &jobs[i]);
  run(e, jobs, 3);
  jobs[3].max_tokens = 50;
  submit(e, &jobs[3]);
  assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  brisk_engine_metrics mt = {.struct_size = sizeof mt};
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  double live_window = mt.window_s;
  assert_int_equal(brisk_engine_cancel(e, jobs[3].id), BRISK_OK);
  run(e, &jobs[3], 1);
  assert_int_equal(jobs[3].reason, BRISK_FINISH_CANCELLED);
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  assert_int_equal(mt.n_completed, 3);
  assert_int_equal(mt.n_aborted, 1);
  assert_int_equal(mt.n_good, 0);
  assert_true(mt.goodput_fraction == 0 && mt.goodput_requests_per_s == 0);
  assert_true(mt.requests_per_s > 0);
  /* The window ran to "now" while the request lived, then to its finish. */
  assert_true(mt.window_s >= live_window);
  brisk_engine_free(e);
  brisk_model_free(m);
}

static void test_arguments(void **state) {
  (void)state;
  brisk_model *m = load_spec("args_llama", test_model_default("llama"));
  brisk_engine_params p;
  const double bad[] = {-1.0, NAN, INFINITY};
  for (int field = 0; field < 4; field++)
    for (int k = 0; k < 3; k++) {
      brisk_engine_params_init(&p);
      double *f[4] = {&p.slo_ttft_ms, &p.slo_tpot_ms, &p.mem_bandwidth_gbs, &p.peak_gflops};
      *f[field] = bad[k];
      brisk_engine *e = NULL;
      assert_int_equal(brisk_engine_create(m, &p, &e), BRISK_E_INVALID_ARGUMENT);
      assert_null(e);
      const char *names[4] = {"slo_ttft_ms", "slo_tpot_ms", "mem_bandwidth_gbs", "peak_gflops"};
      assert_non_null(strstr(brisk_last_error(), names[field]));
    }
  /* Params of the size before the new fields: they default to 0. */
  brisk_engine_params_init(&p);
  p.struct_size = offsetof(brisk_engine_params, slo_ttft_ms);
  p.slo_ttft_ms = -5; /* beyond struct_size: not read */
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(m, &p, &e), BRISK_OK);

  brisk_engine_metrics mt = {.struct_size = sizeof mt};
  assert_int_equal(brisk_engine_get_metrics(NULL, &mt), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_get_metrics(e, NULL), BRISK_E_INVALID_ARGUMENT);
  mt.struct_size = sizeof mt - 1;
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_reset_metrics(NULL), BRISK_E_INVALID_ARGUMENT);
  /* Fresh engine: all zero. */
  mt.struct_size = sizeof mt;
  assert_int_equal(brisk_engine_get_metrics(e, &mt), BRISK_OK);
  assert_int_equal(mt.struct_size, sizeof mt);
  assert_true(mt.n_completed == 0 && mt.window_s == 0 && mt.kv_utilization == 0 &&
              mt.ttft.p99_ns == 0 && mt.busy_s == 0);

  /* request_stats for a caller built before tpot_ns: served, tpot_ns untouched. */
  job j;
  memset(&j, 0, sizeof j);
  j.n_prompt = 3;
  j.max_tokens = 4;
  submit(e, &j);
  for (int s = 0; s < 10; s++) assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  brisk_request_stats rs;
  memset(&rs, 0, sizeof rs);
  rs.struct_size = offsetof(brisk_request_stats, tpot_ns);
  rs.tpot_ns = 12345;
  assert_int_equal(brisk_engine_request_stats(e, j.id, &rs), BRISK_OK);
  assert_int_equal(rs.tpot_ns, 12345);
  assert_int_equal(rs.n_generated_tokens, 4);
  assert_true(rs.finished && rs.e2e_ns > 0);
  rs.struct_size = offsetof(brisk_request_stats, tpot_ns) - 1;
  assert_int_equal(brisk_engine_request_stats(e, j.id, &rs), BRISK_E_INVALID_ARGUMENT);
  rs.struct_size = sizeof rs;
  assert_int_equal(brisk_engine_request_stats(e, j.id, &rs), BRISK_OK);
  assert_int_equal(rs.tpot_ns, (rs.e2e_ns - rs.ttft_ns) / 3);
  brisk_engine_free(e);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cost_llama_by_hand), cmocka_unit_test(test_cost_sliding_window),
      cmocka_unit_test(test_cost_moe),           cmocka_unit_test(test_engine_consistent),
      cmocka_unit_test(test_engine_cost_sum),    cmocka_unit_test(test_engine_slo_and_abort),
      cmocka_unit_test(test_arguments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
