/* Whole models on the CUDA backend against the float64 reference forward
 * (tests/support/ref_forward.c, an implementation that shares nothing with
 * either backend) and against the CPU backend: every architecture, the
 * weight types the device computes with, F16 and F32 caches, prefill and
 * token-by-token decode, several n_gpu_layers splits; plus a device that
 * runs out of memory at load and in a context.
 *
 * On "cudaemu:0" (the SIMT emulation) in the normal suite; on a GPU with
 * BRISK_TEST_DEVICE=cuda:0 (tests/gpu/run.sh). */
#include "cuda_emu.h"
#include "ref_forward.h"
#include "test_models.h"

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

static int setup(void **state) {
  (void)state;
  if (brisk_cuda_emu_register()) return -1;
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

static void write_model(const test_model_spec *s, const char *tag, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", dir, tag);
  test_rng r = test_rng_seeded(tag);
  assert_int_equal(test_model_write(path, s, &r, NULL), BRISK_OK);
}

static brisk_model *load(const char *path, const char *device, int32_t n_gpu_layers) {
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.device = device;
  p.n_gpu_layers = n_gpu_layers;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &p, &m)) fail_msg("load on %s: %s", device, brisk_last_error());
  return m;
}

static brisk_context *make_ctx(const brisk_model *m, brisk_kv_type kv) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = kv;
  p.kv_tokens = 256;
  p.block_size = 16;
  p.n_threads = 2;
  p.max_batch_tokens = 64;
  p.n_seq_max = 4;
  brisk_context *c = NULL;
  if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

static double rel_l2(const float *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* n tokens prefilled as one batch (prefill attention), then 4 more decoded
 * one at a time (split-KV decode attention); every row against the
 * reference, which reads the weights of `host`, the same file loaded on the
 * CPU (the device model's weights are in device layouts). Returns the worst
 * relative L2 error. */
static double worst_vs_reference(const brisk_model *m, const brisk_model *host, brisk_kv_type kv,
                                 const int32_t *toks, int n) {
  brisk_context *c = make_ctx(m, kv);
  const int32_t nv = brisk_model_n_vocab(m);
  ref_model *r = ref_create(host, n + 4);
  double *want = malloc((size_t)nv * sizeof(double)), worst = 0;
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  for (int i = 0; i < n; i++) assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  for (int i = 0; i < n; i++) {
    ref_eval(r, toks[i], want);
    double e = rel_l2(brisk_get_logits(c, i), want, nv);
    if (e > worst) worst = e;
  }
  for (int i = 0; i < 4; i++) {
    int32_t t = toks[i];
    brisk_batch_clear(b);
    assert_int_equal(brisk_batch_add(b, t, n + i, 0, 1), BRISK_OK);
    if (brisk_decode(c, b)) fail_msg("decode step %d: %s", i, brisk_last_error());
    ref_eval(r, t, want);
    double e = rel_l2(brisk_get_logits(c, 0), want, nv);
    if (e > worst) worst = e;
  }
  free(want);
  ref_free(r);
  brisk_batch_free(b);
  brisk_context_free(c);
  return worst;
}

static void random_tokens(test_rng *r, int32_t n_vocab, int32_t *toks, int n) {
  for (int i = 0; i < n; i++) toks[i] = (int32_t)(test_rng_u64(r) % (uint64_t)n_vocab);
}

/* Float32 weights: the device's pass matches the reference to float32
 * rounding, as the CPU's does (the same bounds as tests/forward). */
static void test_architectures(void **state) {
  (void)state;
  const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral"};
  test_rng r = test_rng_seeded("cuda_arch_tokens");
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    test_model_spec s = test_model_default(archs[a]);
    if (!strcmp(archs[a], "mistral")) s.sliding_window = 8;
    char path[256];
    write_model(&s, archs[a], path, sizeof path);
    brisk_model *m = load(path, device_name(), -1), *host = load(path, "cpu", 0);
    int32_t toks[20];
    random_tokens(&r, (int32_t)s.n_vocab, toks, 20);
    double e32 = worst_vs_reference(m, host, BRISK_KV_F32, toks, 20);
    double e16 = worst_vs_reference(m, host, BRISK_KV_F16, toks, 20);
    fprintf(stderr, "%-8s on %s: f32 kv %.2e  f16 kv %.2e\n", archs[a], device_name(), e32, e16);
    assert_true(e32 < 1e-4);
    if (s.n_expert == 0) assert_true(e16 < 2e-3); /* MoE: see tests/forward */
    brisk_model_free(m);
    brisk_model_free(host);
  }
}

/* Quantized weights: the device multiplies exact float activations by the
 * dequantized weights, as the reference does, so it stays within float32
 * rounding of it (the CPU, which rounds activations to 8 bits, is within
 * 3e-2). */
static void test_weight_types(void **state) {
  (void)state;
  const uint32_t types[] = {BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0,
                            BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K,
                            BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  test_rng r = test_rng_seeded("cuda_type_tokens");
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    test_model_spec s = test_model_default("llama");
    s.weight_type = types[t];
    if (brisk_dtype_get(types[t])->block_size == 256) s.n_embd = 256, s.n_ff = 512, s.head_dim = 64;
    char tag[32], path[256];
    snprintf(tag, sizeof tag, "cuda_%s", brisk_dtype_name(types[t]));
    write_model(&s, tag, path, sizeof path);
    brisk_model *m = load(path, device_name(), -1), *host = load(path, "cpu", 0);
    int32_t toks[12];
    random_tokens(&r, (int32_t)s.n_vocab, toks, 12);
    double e = worst_vs_reference(m, host, BRISK_KV_F32, toks, 12);
    fprintf(stderr, "%-5s on %s: %.2e\n", brisk_dtype_name(types[t]), device_name(), e);
    assert_true(e < 1e-3);
    brisk_model_free(m);
    brisk_model_free(host);
  }
}

/* The first layers on the device and the rest on the CPU: within the
 * bounds of the CPU's own pass. */
static void test_splits(void **state) {
  (void)state;
  test_model_spec s = test_model_default("qwen2");
  s.n_layer = 4;
  s.weight_type = BRISK_DTYPE_Q8_0;
  char path[256];
  write_model(&s, "cuda_split", path, sizeof path);
  test_rng r = test_rng_seeded("cuda_split_tokens");
  int32_t toks[10];
  random_tokens(&r, (int32_t)s.n_vocab, toks, 10);
  brisk_model *host = load(path, "cpu", 0);
  const int32_t splits[] = {0, 1, 3, 4};
  for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
    brisk_model *m = load(path, device_name(), splits[i]);
    double e = worst_vs_reference(m, host, BRISK_KV_F16, toks, 10);
    fprintf(stderr, "q8_0 with %d of 4 layers on %s: %.2e\n", (int)splits[i], device_name(), e);
    assert_true(e < 3e-2);
    brisk_model_free(m);
  }
  brisk_model_free(host);
}

/* Out of device memory at load is BRISK_E_OUT_OF_MEMORY with nothing left
 * behind; in a context the same, and the model stays usable. */
static void test_device_memory_limit(void **state) {
  (void)state;
  if (strncmp(device_name(), "cudaemu", 7) != 0) skip();
  test_model_spec s = test_model_default("llama");
  char path[256];
  write_model(&s, "cuda_oom", path, sizeof path);
  const size_t before = brisk_cuda_emu_in_use();
  brisk_cuda_emu_set_limit(before + 20000);
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.device = device_name();
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &p, &m), BRISK_E_OUT_OF_MEMORY);
  assert_null(m);
  assert_int_equal(brisk_cuda_emu_in_use(), before);
  brisk_cuda_emu_set_limit(SIZE_MAX);
  m = load(path, device_name(), -1);
  const size_t with_weights = brisk_cuda_emu_in_use();
  brisk_cuda_emu_set_limit(with_weights + 1000);
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_E_OUT_OF_MEMORY);
  assert_int_equal(brisk_cuda_emu_in_use(), with_weights);
  brisk_cuda_emu_set_limit(SIZE_MAX);
  c = make_ctx(m, BRISK_KV_F16);
  brisk_context_free(c);
  brisk_model_free(m);
  assert_int_equal(brisk_cuda_emu_in_use(), before);
}

/* A prefill of 48 tokens takes the GEMM path (at least 32 rows per matmul,
 * docs/cuda.md): against the float64 reference, to the BF16 rounding of
 * the activations, and against the same prefill with the path off
 * (BRISK_CUDA_GEMM_ROWS=0, every matmul on the GEMV kernels), which it
 * must not equal bit for bit (the path was taken) but must be close to. */
static void test_gemm_prefill(void **state) {
  (void)state;
  const uint32_t types[] = {BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_F16};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    test_model_spec s = test_model_default("llama");
    s.weight_type = types[ti];
    char path[256], tag[64];
    snprintf(tag, sizeof tag, "cuda_gemm_%s", brisk_dtype_name(types[ti]));
    write_model(&s, tag, path, sizeof path);
    test_rng r = test_rng_seeded("cuda_gemm_tokens");
    int32_t toks[48];
    random_tokens(&r, (int32_t)s.n_vocab, toks, 48);
    brisk_model *host = load(path, "cpu", 0), *m = load(path, device_name(), -1);
    double e = worst_vs_reference(m, host, BRISK_KV_F32, toks, 48);
    fprintf(stderr, "%s prefill of 48 on the GEMM path: %.2e\n", brisk_dtype_name(types[ti]), e);
    assert_true(e < 2e-2);
    /* The same batch with and without the path. */
    brisk_context *cg = make_ctx(m, BRISK_KV_F32);
    setenv("BRISK_CUDA_GEMM_ROWS", "0", 1);
    brisk_context *cv = make_ctx(m, BRISK_KV_F32);
    unsetenv("BRISK_CUDA_GEMM_ROWS");
    brisk_batch *b;
    assert_int_equal(brisk_batch_create(48, &b), BRISK_OK);
    for (int i = 0; i < 48; i++) assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), 0);
    assert_int_equal(brisk_decode(cg, b), BRISK_OK);
    assert_int_equal(brisk_decode(cv, b), BRISK_OK);
    const int32_t nv = brisk_model_n_vocab(m);
    double worst = 0;
    bool differ = false;
    double *want = malloc((size_t)nv * sizeof *want);
    for (int i = 0; i < 48; i++) {
      const float *a = brisk_get_logits(cg, i), *v = brisk_get_logits(cv, i);
      differ = differ || memcmp(a, v, (size_t)nv * 4) != 0;
      for (int32_t t = 0; t < nv; t++) want[t] = v[t];
      double d = rel_l2(a, want, nv);
      if (d > worst) worst = d;
    }
    fprintf(stderr, "%s GEMM vs GEMV logits: %.2e\n", brisk_dtype_name(types[ti]), worst);
    assert_true(differ);
    assert_true(worst < 2e-2);
    free(want);
    brisk_batch_free(b);
    brisk_context_free(cg);
    brisk_context_free(cv);
    brisk_model_free(m);
    brisk_model_free(host);
  }
}

/* Decode steps as CUDA graphs (lib/backend/cuda/cuda_graph.c): the same
 * model loaded twice, with graphs off and on (BRISK_CUDA_GRAPHS, read when
 * a context makes its device backend), runs the same steps; every step's logits agree bit for bit
 * (the graph runs the very kernels the eager pass launches). Counted on the emulation: each step is
 * one graph launch; a new batch size (a bucket) or a changed topology in a bucket (two tokens of
 * one sequence after two sequences' decode: the prefill attention kernel instead of the decode one)
 * instantiates a graph, a repeated shape updates its bucket's graph in place;
 * a 40-token step captures the GEMM path (cuBLASLt's twin) too. The
 * page-locked staging is freed with the context. */
typedef struct step {
  int seq, n;
} step;

static void test_graphs(void **state) {
  (void)state;
  if (strncmp(device_name(), "cudaemu", 7) != 0) skip(); /* counts are the emulation's */
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q8_0;
  char path[256];
  write_model(&s, "cuda_graphs", path, sizeof path);
  brisk_model *eager = load(path, device_name(), -1), *graphed = load(path, device_name(), -1);
  setenv("BRISK_CUDA_GRAPHS", "0", 1);
  brisk_context *ce = make_ctx(eager, BRISK_KV_F16);
  setenv("BRISK_CUDA_GRAPHS", "64", 1);
  brisk_context *cg = make_ctx(graphed, BRISK_KV_F16);
  unsetenv("BRISK_CUDA_GRAPHS");
  test_rng r = test_rng_seeded("cuda_graphs_tokens");
  const int32_t nv = brisk_model_n_vocab(eager);
  /* Each step: n tokens of one sequence (seq >= 0), or one token of each
   * of sequences 0 and 1 (seq -1). */
  const step steps[] = {
      {0, 10}, {0, 1},  {0, 1},  {0, 1}, /* prefill, bucket 1 x3 */
      {1, 7},                            /* bucket 7 */
      {-1, 2}, {-1, 2}, {-1, 2},         /* bucket 2 x3 */
      {0, 1},  {0, 1},                   /* bucket 1 again */
      {0, 2},                            /* bucket 2, another topology */
      {1, 40},                           /* bucket 40: the GEMM path inside a graph */
  };
  int pos[2] = {0, 0};
  uint64_t i0, u0, l0, i1, u1, l1;
  brisk_cuda_emu_graph_counts(&i0, &u0, &l0);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  const size_t pinned_before = brisk_cuda_emu_pinned_in_use();
  for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
    brisk_batch_clear(b);
    int n_out = 0;
    if (steps[k].seq < 0) {
      for (int sq = 0; sq < 2; sq++)
        assert_int_equal(
            brisk_batch_add(b, (int32_t)(test_rng_u64(&r) % (uint64_t)nv), pos[sq]++, sq, 1), 0);
      n_out = 2;
    } else {
      for (int t = 0; t < steps[k].n; t++)
        assert_int_equal(brisk_batch_add(b, (int32_t)(test_rng_u64(&r) % (uint64_t)nv),
                                         pos[steps[k].seq]++, steps[k].seq, 1),
                         0);
      n_out = steps[k].n;
    }
    if (brisk_decode(ce, b)) fail_msg("eager step %zu: %s", k, brisk_last_error());
    if (brisk_decode(cg, b)) fail_msg("graph step %zu: %s", k, brisk_last_error());
    for (int o = 0; o < n_out; o++)
      if (memcmp(brisk_get_logits(ce, o), brisk_get_logits(cg, o), (size_t)nv * 4) != 0)
        fail_msg("step %zu row %d: the graph's logits differ from the eager pass", k, o);
  }
  brisk_cuda_emu_graph_counts(&i1, &u1, &l1);
  fprintf(stderr, "graphs: %llu launched, %llu instantiated, %llu updated\n",
          (unsigned long long)(l1 - l0), (unsigned long long)(i1 - i0),
          (unsigned long long)(u1 - u0));
  assert_int_equal(l1 - l0, sizeof steps / sizeof *steps);
  assert_int_equal(i1 - i0, 6); /* buckets 10, 1, 7, 2, 2 re-captured, 40 */
  assert_int_equal(u1 - u0, 6);
  assert_true(brisk_cuda_emu_pinned_in_use() > pinned_before); /* the staging */
  brisk_batch_free(b);
  brisk_context_free(ce);
  brisk_context_free(cg);
  brisk_model_free(eager);
  brisk_model_free(graphed);
  assert_int_equal(brisk_cuda_emu_pinned_in_use(), pinned_before);
}

/* Attention sinks + sliding window on the device (all layers there, and
 * split with the host): over 10x the window, in a pool a fraction of the
 * sequence, every step against the float64 StreamingLLM reference, which
 * rotates keys at attention time (the device rewrites its sink keys). */
static void test_window(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  char path[256];
  write_model(&s, "window", path, sizeof path);
  brisk_model *host = load(path, "cpu", 0);
  test_rng r = test_rng_seeded("cuda_window_tokens");
  enum { SINKS = 4, BS = 4, WINDOW = 8, N = SINKS + 10 * WINDOW };
  int32_t toks[N];
  random_tokens(&r, (int32_t)s.n_vocab, toks, N);
  const int32_t splits[] = {-1, 1};
  for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
    brisk_model *m = load(path, device_name(), splits[k]);
    brisk_context_params p;
    brisk_context_params_init(&p);
    p.kv_type = BRISK_KV_F32;
    p.kv_tokens = SINKS + WINDOW + 3 * BS;
    p.block_size = BS;
    p.n_threads = 2;
    p.max_batch_tokens = 16;
    p.n_seq_max = 1;
    brisk_context *c = NULL;
    if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
    assert_int_equal(brisk_seq_set_window(c, 0, SINKS, WINDOW), BRISK_OK);
    ref_model *ref = ref_create(host, N);
    ref_set_stream(ref, SINKS, WINDOW, BS);
    const int32_t nv = brisk_model_n_vocab(m);
    double *want = malloc((size_t)nv * sizeof *want), worst = 0;
    brisk_batch *b;
    assert_int_equal(brisk_batch_create(1, &b), BRISK_OK);
    for (int32_t i = 0; i < N; i++) {
      brisk_batch_clear(b);
      assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), BRISK_OK);
      if (brisk_decode(c, b)) fail_msg("decode %d: %s", i, brisk_last_error());
      ref_eval(ref, toks[i], want);
      double e = rel_l2(brisk_get_logits(c, 0), want, nv);
      if (e > worst) worst = e;
    }
    fprintf(stderr, "window on %s, n_gpu_layers %d: %d tokens in a %d-token pool, worst %.2e\n",
            device_name(), splits[k], N, p.kv_tokens, worst);
    assert_true(worst < 1e-4);
    free(want);
    ref_free(ref);
    brisk_batch_free(b);
    brisk_context_free(c);
    brisk_model_free(m);
  }
  brisk_model_free(host);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window),
      cmocka_unit_test(test_architectures),
      cmocka_unit_test(test_weight_types),
      cmocka_unit_test(test_splits),
      cmocka_unit_test(test_device_memory_limit),
      cmocka_unit_test(test_graphs),
      cmocka_unit_test(test_gemm_prefill),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
