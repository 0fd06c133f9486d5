/* Tensor parallelism on threads ranks: the logits of every split (TP = 2,
 * 4, 8) are bit for bit those of TP = 1, on random models of every
 * architecture the split handles (GQA with KV heads replicated or not, MoE,
 * tied embeddings, QKV biases, per-head norms, a vocabulary not divisible
 * by TP) and on the shared models; each rank holds only its share of the
 * weights; a rank that fails mid-step makes the step fail on every rank,
 * with none left waiting. */
#include "engine_harness.h"
#include "test_models.h"

#include "core/dtype.h"
#include "core/error.h"
#include "model/model.h"
#include "model/shard.h"

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

static brisk_model *load_tp(const char *path, int tp) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = tp;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, &mp, &m);
  if (st) fail_msg("%s at tp %d: %s", path, tp, brisk_last_error());
  return m;
}

static brisk_context *make_ctx(const brisk_model *m, int n_threads) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 256;
  p.block_size = 8;
  p.n_threads = n_threads;
  p.max_batch_tokens = 32;
  p.n_seq_max = 4;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(m, &p, &c);
  if (st) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* A prompt of n tokens as one batch (logits everywhere), then `steps`
 * single-token decodes of a second sequence forked from the first, each
 * feeding the greedy token: all logits, in order, into out. Returns the
 * floats written. */
static size_t run(brisk_context *c, int32_t n_vocab, int32_t n, int steps, float *out) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  for (int32_t i = 0; i < n; i++) brisk_batch_add(b, (int32_t)((i * 7 + 3) % n_vocab), i, 0, true);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  size_t w = 0;
  for (int32_t i = 0; i < n; i++) {
    memcpy(out + w, brisk_get_logits(c, i), (size_t)n_vocab * sizeof(float));
    w += (size_t)n_vocab;
  }
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_OK);
  for (int s = 0; s < steps; s++) {
    const float *last = out + w - n_vocab;
    int32_t best = 0;
    for (int32_t v = 1; v < n_vocab; v++)
      if (last[v] > last[best]) best = v;
    brisk_batch_clear(b);
    brisk_batch_add(b, best, n + s, 1, true);
    if (brisk_decode(c, b)) fail_msg("decode step %d: %s", s, brisk_last_error());
    memcpy(out + w, brisk_get_logits(c, 0), (size_t)n_vocab * sizeof(float));
    w += (size_t)n_vocab;
  }
  brisk_batch_free(b);
  return w;
}

/* Logits at tp 1 against every other size: memcmp, and the first
 * difference when there is one. */
static void check_grid(const char *path, const int *tps, int n_tps, int32_t n, int steps) {
  brisk_model *m1 = load_tp(path, 1);
  int32_t nv = brisk_model_n_vocab(m1);
  size_t cap = (size_t)(n + steps) * (size_t)nv;
  float *ref = malloc(cap * sizeof(float)), *got = malloc(cap * sizeof(float));
  assert_non_null(ref);
  assert_non_null(got);
  brisk_context *c = make_ctx(m1, 2);
  size_t w = run(c, nv, n, steps, ref);
  brisk_context_free(c);
  brisk_model_free(m1);
  for (int k = 0; k < n_tps; k++) {
    brisk_model *m = load_tp(path, tps[k]);
    c = make_ctx(m, 2);
    assert_int_equal(run(c, nv, n, steps, got), w);
    for (size_t i = 0; i < w; i++)
      if (memcmp(&ref[i], &got[i], sizeof(float)))
        fail_msg("%s: tp %d logit %zu (token %zu, id %zu) is %.9g, tp 1 gives %.9g", path, tps[k],
                 i, i / (size_t)nv, i % (size_t)nv, (double)got[i], (double)ref[i]);
    brisk_context_free(c);
    brisk_model_free(m);
  }
  free(ref);
  free(got);
}

static void write_model(const char *name, const test_model_spec *s, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", dir, name);
  test_rng r = test_rng_seeded(name);
  assert_int_equal(test_model_write(path, s, &r, NULL), BRISK_OK);
}

/* Every architecture, F32 and F16, with shapes that exercise the cuts. */
static void test_grid_random(void **state) {
  (void)state;
  static const char *const archs[] = {"llama", "qwen2", "qwen3", "mistral", "mixtral"};
  static const int tps[] = {2, 4, 8};
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++)
    for (int ty = 0; ty < 2; ty++) {
      test_model_spec s = test_model_default(archs[a]);
      s.weight_type = ty ? BRISK_DTYPE_F16 : BRISK_DTYPE_F32;
      s.n_head = 8;
      s.n_head_kv = 2; /* 4 ranks share... 8 ranks replicate KV heads */
      s.n_vocab = 301; /* not divisible by 2, 4 or 8 */
      s.n_ff = 136;
      s.tied = a % 2 == 0;
      if (s.n_expert) s.n_expert = 6; /* 8 slots: two hold none */
      char name[64], path[256];
      snprintf(name, sizeof name, "%s-%d", archs[a], ty);
      write_model(name, &s, path, sizeof path);
      check_grid(path, tps, 3, 11, 4);
    }
}

/* Query heads that do not fall into whole KV groups at every split (6
 * heads, 3 KV heads: TP 4 gives ranks of 1 and 2 heads across groups, so
 * their KV heads are copied per query head). */
static void test_grid_uneven_heads(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_head = 6;
  s.n_head_kv = 3;
  s.head_dim = 16;
  s.n_embd = 96;
  char path[256];
  write_model("uneven", &s, path, sizeof path);
  static const int tps[] = {2, 4};
  check_grid(path, tps, 2, 9, 3);
}

/* The shared models: GQA F16 with F16 ffn_down (tiny), Q8_0 and Q4_0
 * (block-aligned cuts), and stories260K (tied embeddings, real weights). */
static void test_grid_shared(void **state) {
  (void)state;
  static const char *const files[] = {"models/tiny-f16.gguf", "models/tiny-q8_0.gguf",
                                      "models/tiny-q4_0.gguf", "models/stories260K.gguf"};
  static const int tps[] = {2, 4, 8};
  int ran = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    const char *p = test_shared_path(files[i]);
    if (!p) continue;
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    brisk_model *m = load_tp(path, 1);
    int heads = brisk_model_n_head(m);
    brisk_model_free(m);
    check_grid(path, tps, heads >= 8 ? 3 : heads >= 4 ? 2 : 1, 12, 3);
    ran++;
  }
  if (!ran) SKIP_BECAUSE("the shared models are absent");
}

/* Each rank reads only its share: the split weights divide, the
 * replicated ones (embeddings, norms, router) are counted on every rank. */
static void test_memory_per_rank(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  s.n_head_kv = 8;
  s.n_layer = 4;
  s.n_vocab = 64;
  char path[256];
  write_model("mem", &s, path, sizeof path);
  brisk_model *m1 = load_tp(path, 1);
  uint64_t full = brisk_split_rank_bytes(m1, 0);
  assert_int_equal(full, brisk_model_weight_bytes(m1));
  uint64_t embd = (uint64_t)s.n_vocab * s.n_embd * 4;
  uint64_t norms = (uint64_t)(2 * s.n_layer + 1) * s.n_embd * 4;
  for (int tp = 2; tp <= 8; tp *= 2) {
    brisk_model *m = load_tp(path, tp);
    uint64_t sum = 0;
    for (int r = 0; r < tp; r++) {
      uint64_t b = brisk_split_rank_bytes(m, r);
      /* Replicated: embeddings and norms. Split: everything else, evenly
       * here (8 heads, 8 KV heads, n_ff 96 and the output by rows). */
      uint64_t split = full - embd - norms;
      assert_true(b == embd + norms + split / (uint64_t)tp);
      sum += b;
    }
    assert_int_equal(sum, (uint64_t)tp * (embd + norms) + (full - embd - norms));
    brisk_model_free(m);
  }
  brisk_model_free(m1);
}

/* A follower that fails mid-step: the decode fails on rank 0 (which was in
 * its pass, waiting on the follower's all-reduce), later decodes say the
 * group failed, and freeing the context joins every rank. */
static void test_forced_error(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  char path[256];
  write_model("fail", &s, path, sizeof path);
  for (int tp = 2; tp <= 4; tp *= 2)
    for (int rank = 1; rank < tp; rank++) {
      brisk_model *m = load_tp(path, tp);
      brisk_context *c = make_ctx(m, tp);
      brisk_batch *b = NULL;
      assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
      for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
      assert_int_equal(brisk_decode(c, b), BRISK_OK);
      brisk_context_tp_force_error(c, rank);
      brisk_batch_clear(b);
      brisk_batch_add(b, 5, 4, 0, true);
      brisk_status st = brisk_decode(c, b);
      assert_int_equal(st, BRISK_E_CANCELLED);
      assert_int_equal(brisk_seq_len(c, 0), 4); /* rolled back */
      st = brisk_decode(c, b);
      assert_int_equal(st, BRISK_E_CANCELLED);
      assert_non_null(strstr(brisk_last_error(), "failed earlier"));
      brisk_batch_free(b);
      brisk_context_free(c);
      brisk_model_free(m);
    }
}

/* Sizes and models the split refuses, each with its reason. */
static void test_refusals(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama"); /* 4 heads */
  char path[256];
  write_model("refuse", &s, path, sizeof path);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  brisk_model *m = NULL;
  static const int bad[] = {3, 5, 9, -1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mp.tp_size = bad[i];
    assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_INVALID_ARGUMENT);
    assert_null(m);
  }
  mp.tp_size = 8; /* 4 heads for 8 ranks */
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "heads"));
  assert_null(m);
  /* Q4_K rows are blocks of 256: 64-dim heads cannot be cut in whole
   * blocks, so the model keeps one slot: TP 1 loads (unsplit), TP 2 is
   * refused by name. */
  test_model_spec k = test_model_default("llama");
  k.n_embd = 256;
  k.n_head = 4;
  k.n_head_kv = 4;
  k.head_dim = 64;
  k.n_ff = 256;
  k.weight_type = BRISK_DTYPE_Q4_K;
  write_model("q4k", &k, path, sizeof path);
  mp.tp_size = 1;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  assert_null(m->split);
  brisk_model_free(m);
  m = NULL;
  mp.tp_size = 2;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  if (!strstr(brisk_last_error(), "attention output")) fail_msg("%s", brisk_last_error());
  assert_null(m);
}

/* The engine on TP = 2 and 4 gives TP = 1's tokens for a mixed workload
 * (greedy and seeded sampling, prompts of many lengths, chunked prefill)
 * on a pool a quarter of the demand, so that requests are preempted, in
 * both preemption modes (swap falls back to recomputing under TP). */
static void test_engine(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  s.n_head_kv = 4;
  char path[256];
  write_model("engine", &s, path, sizeof path);
  enum { N = 8 };
  static eh_job base[N], jobs[N];
  test_rng r = test_rng_seeded("tp_engine");
  brisk_model *m1 = load_tp(path, 1);
  int32_t demand = 0;
  for (int i = 0; i < N; i++) {
    eh_random_job(&r, m1, &base[i], 8, 20, i % 2);
    /* 17..24 prompt tokens, 20 out: the demand is over 4 pools of 64. */
    base[i].n_prompt += 16;
    for (int32_t k = 0; k < base[i].n_prompt; k++)
      base[i].prompt[k] = (int32_t)(test_rng_u64(&r) % (uint64_t)s.n_vocab);
    base[i].max_tokens = 20;
    base[i].stop_at_eog = 0;
    demand += base[i].n_prompt + base[i].max_tokens;
  }
  for (int mode = 0; mode < 2; mode++) {
    eh_job ref[N];
    for (int tp = 1; tp <= 4; tp *= 2) {
      brisk_model *m = tp == 1 ? m1 : load_tp(path, tp);
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
      if (tp == 1)
        memcpy(ref, jobs, sizeof ref);
      else
        for (int i = 0; i < N; i++) eh_expect_same(&ref[i], &jobs[i]);
      brisk_engine_free(e);
      if (tp != 1) brisk_model_free(m);
    }
  }
  brisk_model_free(m1);
}

/* The slot matmuls keep batch invariance: a prompt as one batch and token
 * by token give the same last logits, bit for bit. */
static void test_batch_invariance(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  char path[256];
  write_model("inv", &s, path, sizeof path);
  brisk_model *m = load_tp(path, 1);
  int32_t nv = brisk_model_n_vocab(m), n = 12;
  float *a = malloc((size_t)nv * sizeof(float));
  assert_non_null(a);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  brisk_context *c = make_ctx(m, 2);
  for (int32_t i = 0; i < n; i++) brisk_batch_add(b, (i * 5 + 1) % nv, i, 0, i == n - 1);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  memcpy(a, brisk_get_logits(c, n - 1), (size_t)nv * sizeof(float));
  brisk_context_free(c);
  c = make_ctx(m, 2);
  for (int32_t i = 0; i < n; i++) {
    brisk_batch_clear(b);
    brisk_batch_add(b, (i * 5 + 1) % nv, i, 0, 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
  }
  const float *g = brisk_get_logits(c, 0);
  for (int32_t v = 0; v < nv; v++)
    if (memcmp(&a[v], &g[v], sizeof(float)))
      fail_msg("logit %d: %.9g as a batch, %.9g token by token", v, (double)a[v], (double)g[v]);
  brisk_context_free(c);
  brisk_batch_free(b);
  free(a);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid_random),  cmocka_unit_test(test_grid_uneven_heads),
      cmocka_unit_test(test_grid_shared),  cmocka_unit_test(test_memory_per_rank),
      cmocka_unit_test(test_forced_error), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_engine),       cmocka_unit_test(test_batch_invariance),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
