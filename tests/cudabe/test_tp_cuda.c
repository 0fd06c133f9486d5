/* Tensor parallelism on CUDA devices: a model loaded for a CUDA device with
 * tp_size N runs N ranks, rank r's shard in device r's memory, the
 * row-parallel all-reduces and the logits gather over an NCCL group of the
 * devices (lib/parallel/comm_nccl.c).
 *
 * In the normal suite the devices are "cudaemu:0".."cudaemu:3" (the SIMT
 * emulation, tests/cudabe/cuda_emu.c) and NCCL is its emulation
 * (nccl_emu.c). Checked: the logits of TP = 1, 2 and 4 on the devices are
 * bit for bit the same (the fixed 8-slot tree, docs/parallelism.md); they
 * agree with the CPU's (TP = 1 and TP = 2 threads ranks) within the CUDA
 * backend's tolerance (float32 summation order; 8-bit activations on the
 * CPU for quantized weights); each device holds its shard only; a rank that
 * fails mid-step makes every rank return; a device out of memory on one
 * rank, at load or in a context, is BRISK_E_OUT_OF_MEMORY with nothing
 * left on any device or the host.
 *
 * On GPUs, BRISK_TEST_DEVICE=cuda:0 (tests/gpu/run.sh) runs the grid up to
 * the number of GPUs there are. */
#include "cuda_emu.h"
#include "engine_harness.h"
#include "test_models.h"

#include "context/swap.h"
#include "core/alloc.h"
#include "core/dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static const char *device_name(void) {
  const char *d = getenv("BRISK_TEST_DEVICE");
  return d && *d ? d : "cudaemu:0";
}

static bool emulated(void) { return strncmp(device_name(), "cudaemu", 7) == 0; }

/* The largest TP size (1, 2 or 4) the devices allow. */
static int max_tp(void) {
  if (emulated()) return 4;
  int32_t gpus = brisk_device_count() - 1; /* device 0 is the CPU */
  return gpus >= 4 ? 4 : gpus >= 2 ? 2 : 1;
}

static int setup(void **state) {
  (void)state;
  if (brisk_cuda_emu_register()) return -1;
  brisk_cuda_emu_set_device_count(4);
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

static void write_model(const char *name, const test_model_spec *s, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", dir, name);
  test_rng r = test_rng_seeded(name);
  assert_int_equal(test_model_write(path, s, &r, NULL), BRISK_OK);
}

static brisk_status try_load(const char *path, const char *device, int tp, int32_t n_gpu_layers,
                             brisk_model **m) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.device = device;
  mp.tp_size = tp;
  mp.n_gpu_layers = n_gpu_layers;
  *m = NULL;
  return brisk_model_load(path, &mp, m);
}

static brisk_model *load(const char *path, const char *device, int tp) {
  brisk_model *m = NULL;
  if (try_load(path, device, tp, -1, &m))
    fail_msg("%s on %s at tp %d: %s", path, device, tp, brisk_last_error());
  return m;
}

static void ctx_params(brisk_context_params *p) {
  brisk_context_params_init(p);
  p->kv_type = BRISK_KV_F32;
  p->kv_tokens = 256;
  p->block_size = 8;
  p->n_threads = 4;
  p->max_batch_tokens = 32;
  p->n_seq_max = 4;
}

static brisk_context *make_ctx(const brisk_model *m) {
  brisk_context_params p;
  ctx_params(&p);
  brisk_context *c = NULL;
  if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* A prompt of n tokens as one batch (logits everywhere), then `steps`
 * single-token decodes of a second sequence forked from the first, each
 * feeding the greedy token (fed[s] instead when fed is set; the tokens fed
 * into took[] when set): all logits, in order, into out. Returns the
 * floats written. */
static size_t run(brisk_context *c, int32_t n_vocab, int32_t n, int steps, float *out,
                  const int32_t *fed, int32_t *took) {
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
    if (fed) best = fed[s];
    if (took) took[s] = best;
    brisk_batch_clear(b);
    brisk_batch_add(b, best, n + s, 1, true);
    if (brisk_decode(c, b)) fail_msg("decode step %d: %s", s, brisk_last_error());
    memcpy(out + w, brisk_get_logits(c, 0), (size_t)n_vocab * sizeof(float));
    w += (size_t)n_vocab;
  }
  brisk_batch_free(b);
  return w;
}

/* The worst row's relative L2 difference of got against want. */
static double worst_rel_l2(const float *got, const float *want, size_t n_rows, int32_t nv) {
  double worst = 0;
  for (size_t r = 0; r < n_rows; r++) {
    double num = 0, den = 0;
    for (int32_t v = 0; v < nv; v++) {
      double a = got[r * (size_t)nv + (size_t)v], b = want[r * (size_t)nv + (size_t)v];
      num += (a - b) * (a - b);
      den += b * b;
    }
    double e = sqrt(num / (den > 0 ? den : 1));
    if (e > worst) worst = e;
  }
  return worst;
}

/* One model: TP = 1, 2, 4 on the devices bit for bit (each feeding its own
 * greedy tokens, which are therefore the same); the CPU's TP = 1 and TP = 2
 * runs (bitwise equal to each other, tests/parallel), fed the device's
 * tokens, within tol (tol 0: not compared). */
static void check_model(const char *path, double tol) {
  enum { N = 11, STEPS = 4 };
  brisk_model *m1 = load(path, device_name(), 1);
  const int32_t nv = brisk_model_n_vocab(m1);
  const size_t cap = (size_t)(N + STEPS) * (size_t)nv;
  float *ref = malloc(cap * sizeof(float)), *got = malloc(cap * sizeof(float));
  assert_non_null(ref);
  assert_non_null(got);
  brisk_context *c = make_ctx(m1);
  int32_t greedy[STEPS];
  const size_t w = run(c, nv, N, STEPS, ref, NULL, greedy);
  brisk_context_free(c);
  brisk_model_free(m1);
  for (int tp = 2; tp <= max_tp(); tp *= 2) {
    brisk_model *m = load(path, device_name(), tp);
    c = make_ctx(m);
    assert_int_equal(run(c, nv, N, STEPS, got, NULL, NULL), w);
    for (size_t i = 0; i < w; i++)
      if (memcmp(&ref[i], &got[i], sizeof(float)))
        fail_msg("%s: tp %d on %s: logit %zu (row %zu, id %zu) is %.9g, tp 1 gives %.9g", path, tp,
                 device_name(), i, i / (size_t)nv, i % (size_t)nv, (double)got[i], (double)ref[i]);
    brisk_context_free(c);
    brisk_model_free(m);
  }
  for (int tp = 1; tp <= 2 && tol > 0; tp++) {
    brisk_model *m = load(path, "cpu", tp);
    c = make_ctx(m);
    assert_int_equal(run(c, nv, N, STEPS, got, greedy, NULL), w);
    double e = worst_rel_l2(got, ref, w / (size_t)nv, nv);
    fprintf(stderr, "%s: tp 1/2/%d on %s bitwise equal; cpu tp %d within %.2e\n",
            strrchr(path, '/') + 1, max_tp(), device_name(), tp, e);
    assert_true(e < tol);
    brisk_context_free(c);
    brisk_model_free(m);
  }
  free(ref);
  free(got);
}

/* Random models with the cuts that matter: GQA whose KV heads are split at
 * TP 2 and replicated at TP 4, QKV biases (qwen2), per-head norms (qwen3),
 * MoE with experts over the 8 slots (two slots empty), tied embeddings, a
 * vocabulary of 301 (not divisible by 2 or 4: the gather's uneven rows);
 * float32 weights (the device and the CPU agree to float32 summation
 * order) and Q8_0 ones (the CPU rounds activations to 8 bits: 3e-2). MoE
 * with Q8_0 is compared across TP sizes only: the CPU's 8-bit activations
 * can flip a router's top-k choice near a tie, which no tolerance bounds
 * (its F32 run is compared with the CPU). */
static void test_grid(void **state) {
  (void)state;
  if (max_tp() < 2) skip();
  static const char *const archs[] = {"llama", "qwen2", "qwen3", "mixtral"};
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++)
    for (int ty = 0; ty < 2; ty++) {
      test_model_spec s = test_model_default(archs[a]);
      s.weight_type = ty ? BRISK_DTYPE_Q8_0 : BRISK_DTYPE_F32;
      s.n_head = 8;
      s.n_head_kv = 2;
      s.head_dim = 32;
      s.n_embd = 128;
      s.n_ff = 256;
      s.n_vocab = 301;
      s.tied = a % 2 == 0;
      if (s.n_expert) s.n_expert = 6;
      char name[64], path[256];
      snprintf(name, sizeof name, "tpcuda-%s-%s", archs[a], ty ? "q8_0" : "f32");
      write_model(name, &s, path, sizeof path);
      check_model(path, !ty ? 1e-4 : s.n_expert ? 0 : 3e-2);
    }
}

/* Query heads that straddle KV groups at TP 4 (6 heads over 3 KV heads:
 * ranks of 1 and 2 heads, their KV heads copied per query head). */
static void test_uneven_heads(void **state) {
  (void)state;
  if (max_tp() < 2) skip();
  test_model_spec s = test_model_default("llama");
  s.n_head = 6;
  s.n_head_kv = 3;
  s.head_dim = 16;
  s.n_embd = 96;
  char path[256];
  write_model("tpcuda-uneven", &s, path, sizeof path);
  check_model(path, 1e-4);
}

/* Each device holds its rank's shard: the split weights divided by TP
 * (the norms, a few KiB, on every rank; the embeddings on the host). */
static void test_memory_per_device(void **state) {
  (void)state;
  if (!emulated()) skip(); /* counts are the emulation's */
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  s.n_head_kv = 8;
  s.n_layer = 4;
  s.head_dim = 32;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_vocab = 512;
  char path[256];
  write_model("tpcuda-mem", &s, path, sizeof path);
  size_t base[4];
  for (int d = 0; d < 4; d++) base[d] = brisk_cuda_emu_device_in_use(d);
  brisk_model *m1 = load(path, device_name(), 1);
  const size_t whole = brisk_cuda_emu_device_in_use(0) - base[0];
  brisk_model_free(m1);
  for (int tp = 2; tp <= 4; tp *= 2) {
    brisk_model *m = load(path, device_name(), tp);
    for (int d = 0; d < 4; d++) {
      size_t used = brisk_cuda_emu_device_in_use(d) - base[d];
      fprintf(stderr, "tp %d: device %d holds %zu of the %zu bytes one device holds at tp 1\n", tp,
              d, used, whole);
      if (d >= tp) {
        assert_int_equal(used, 0);
      } else {
        assert_true(used * (size_t)tp <= whole + whole / 10);
        assert_true(used * (size_t)tp >= whole - whole / 10);
      }
    }
    brisk_model_free(m);
    for (int d = 0; d < 4; d++) assert_int_equal(brisk_cuda_emu_device_in_use(d), base[d]);
  }
}

/* A rank that fails mid-step (forced, once it has the step: the others are
 * in their pass, waiting in an NCCL all-reduce; rank 0 once it has sent
 * the step): every rank returns, the decode fails with BRISK_E_CANCELLED
 * (rank 0's own error when it is rank 0) and is rolled back, later decodes
 * say the group failed, freeing the context joins the ranks and gives back
 * every device byte it held. */
static void test_forced_error(void **state) {
  (void)state;
  if (max_tp() < 2) skip();
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  char path[256];
  write_model("tpcuda-fail", &s, path, sizeof path);
  for (int tp = 2; tp <= max_tp(); tp *= 2)
    for (int rank = 0; rank < tp; rank++) {
      brisk_model *m = load(path, device_name(), tp);
      size_t placed[4];
      for (int d = 0; d < 4; d++) placed[d] = brisk_cuda_emu_device_in_use(d);
      brisk_context *c = make_ctx(m);
      brisk_batch *b = NULL;
      assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
      for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
      assert_int_equal(brisk_decode(c, b), BRISK_OK);
      brisk_context_tp_force_error(c, rank);
      brisk_batch_clear(b);
      brisk_batch_add(b, 5, 4, 0, true);
      brisk_status st = brisk_decode(c, b);
      assert_int_equal(st, rank == 0 ? BRISK_E_INTERNAL : BRISK_E_CANCELLED);
      assert_int_equal(brisk_seq_len(c, 0), 4); /* rolled back */
      st = brisk_decode(c, b);
      assert_int_equal(st, BRISK_E_CANCELLED);
      assert_non_null(strstr(brisk_last_error(), "failed earlier"));
      brisk_batch_free(b);
      brisk_context_free(c);
      if (emulated())
        for (int d = 0; d < 4; d++) assert_int_equal(brisk_cuda_emu_device_in_use(d), placed[d]);
      brisk_model_free(m);
    }
}

/* Device memory running out on one rank: at load (rank 1's shard does not
 * fit its device) and in a context (rank 1's KV storage or activations do
 * not): BRISK_E_OUT_OF_MEMORY with a message, nothing left on any device
 * nor on the host, and the model (for the context) still usable. */
static void test_device_oom(void **state) {
  (void)state;
  if (!emulated()) skip(); /* the limits are the emulation's */
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  char path[256];
  write_model("tpcuda-oom", &s, path, sizeof path);
  size_t base[4];
  for (int d = 0; d < 4; d++) base[d] = brisk_cuda_emu_device_in_use(d);
  const uint64_t host_before = brisk_memory_allocated();
  brisk_cuda_emu_set_device_limit(1, base[1] + 4096);
  brisk_model *m = NULL;
  assert_int_equal(try_load(path, device_name(), 2, -1, &m), BRISK_E_OUT_OF_MEMORY);
  assert_null(m);
  fprintf(stderr, "load, device 1 full: %s\n", brisk_last_error());
  for (int d = 0; d < 4; d++) assert_int_equal(brisk_cuda_emu_device_in_use(d), base[d]);
  assert_int_equal(brisk_memory_allocated(), host_before);
  brisk_cuda_emu_set_device_limit(1, SIZE_MAX);
  m = load(path, device_name(), 2);
  size_t placed[4];
  for (int d = 0; d < 4; d++) placed[d] = brisk_cuda_emu_device_in_use(d);
  const uint64_t host_model = brisk_memory_allocated();
  brisk_cuda_emu_set_device_limit(1, placed[1] + 2048);
  brisk_context_params p;
  ctx_params(&p);
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_OUT_OF_MEMORY);
  assert_null(c);
  fprintf(stderr, "context, device 1 full: %s\n", brisk_last_error());
  for (int d = 0; d < 4; d++) assert_int_equal(brisk_cuda_emu_device_in_use(d), placed[d]);
  assert_int_equal(brisk_memory_allocated(), host_model);
  brisk_cuda_emu_set_device_limit(1, SIZE_MAX);
  c = make_ctx(m);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  for (int d = 0; d < 4; d++) assert_int_equal(brisk_cuda_emu_device_in_use(d), base[d]);
  assert_int_equal(brisk_memory_allocated(), host_before);
}

/* The engine unchanged on top: a mixed workload (greedy and seeded
 * sampling, prompts of 17..24 tokens) that needs 4 pools' worth of KV, so
 * that requests are preempted (and recomputed: TP refuses swap), gives the
 * same tokens on TP 2 and 4 devices as on one. */
static void test_engine(void **state) {
  (void)state;
  if (max_tp() < 2) skip();
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  s.n_head_kv = 4;
  char path[256];
  write_model("tpcuda-engine", &s, path, sizeof path);
  enum { N = 8 };
  static eh_job base[N], jobs[N], ref[N];
  test_rng r = test_rng_seeded("tpcuda_engine");
  brisk_model *m1 = load(path, device_name(), 1);
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
  for (int tp = 1; tp <= max_tp(); tp *= 2) {
    brisk_model *m = tp == 1 ? m1 : load(path, device_name(), tp);
    brisk_engine_params p;
    brisk_engine_params_init(&p);
    p.n_threads = 4;
    assert_true(demand >= 4 * 64);
    p.kv_tokens = 64;
    p.block_size = 4;
    p.max_batch_tokens = 16;
    p.max_running = N;
    p.reserve_blocks = 0;
    p.preempt_mode = BRISK_PREEMPT_RECOMPUTE;
    brisk_engine *e = NULL;
    if (brisk_engine_create(m, &p, &e)) fail_msg("engine: %s", brisk_last_error());
    memcpy(jobs, base, sizeof jobs);
    for (int i = 0; i < N; i++) assert_int_equal(eh_submit(e, &jobs[i]), BRISK_OK);
    eh_run(e, jobs, N, 100000);
    brisk_engine_counters c = {.struct_size = sizeof c};
    assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
    assert_true(c.n_preemptions > 0);
    assert_int_equal(c.n_finished, N);
    fprintf(stderr, "engine on %d device(s): %d requests, %llu preemptions\n", tp, N,
            (unsigned long long)c.n_preemptions);
    if (tp == 1)
      memcpy(ref, jobs, sizeof ref);
    else
      for (int i = 0; i < N; i++) eh_expect_same(&ref[i], &jobs[i]);
    brisk_engine_free(e);
    if (tp != 1) brisk_model_free(m);
  }
  brisk_model_free(m1);
}

/* What the device split refuses, each with its reason: more ranks than
 * devices, and layers left on the host. */
static void test_refusals(void **state) {
  (void)state;
  if (!emulated()) skip();
  test_model_spec s = test_model_default("llama");
  s.n_head = 8;
  char path[256];
  write_model("tpcuda-refuse", &s, path, sizeof path);
  brisk_model *m = NULL;
  brisk_cuda_emu_set_device_count(2);
  assert_int_equal(try_load(path, device_name(), 4, -1, &m), BRISK_E_NO_DEVICE);
  fprintf(stderr, "tp 4 over 2 devices: %s\n", brisk_last_error());
  assert_non_null(strstr(brisk_last_error(), "cudaemu:2"));
  assert_int_equal(try_load(path, "cudaemu:1", 2, -1, &m), BRISK_E_NO_DEVICE);
  brisk_cuda_emu_set_device_count(4);
  assert_int_equal(try_load(path, device_name(), 2, 1, &m), BRISK_E_UNSUPPORTED);
  fprintf(stderr, "tp 2 with 1 layer on the devices: %s\n", brisk_last_error());
  assert_non_null(strstr(brisk_last_error(), "n_gpu_layers"));
  assert_null(m);
  /* Starting at another device: ranks on cudaemu:2 and cudaemu:3. */
  size_t base2 = brisk_cuda_emu_device_in_use(2), base0 = brisk_cuda_emu_device_in_use(0);
  m = load(path, "cudaemu:2", 2);
  assert_true(brisk_cuda_emu_device_in_use(2) > base2);
  assert_int_equal(brisk_cuda_emu_device_in_use(0), base0);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid),
      cmocka_unit_test(test_uneven_heads),
      cmocka_unit_test(test_memory_per_device),
      cmocka_unit_test(test_forced_error),
      cmocka_unit_test(test_device_oom),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_engine),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
