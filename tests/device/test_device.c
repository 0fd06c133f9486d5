/* Devices: enumeration, device names and the no-device status, and a model
 * split over two backends. The split runs on a test device ("testdev"): the
 * CPU backend's operations over separate buffers that the caller may not
 * touch (host_memory false, so every transfer stages), with weights copied
 * into them at load as a GPU backend does. Its logits must be bit for bit
 * the CPU's for every split point, since both run the same kernels in the
 * same order. */
#include "test_models.h"

#include "backend/cpu/ops/cpu_backend.h"
#include "backend/device.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* ---- the test device ------------------------------------------------------ */

static int n_live_buffers; /* the test device's buffers not freed yet */
static int n_weight_copies;

static brisk_status td_alloc(brisk_backend *be, size_t bytes, void **out) {
  brisk_backend *cpu = be->ctx;
  brisk_status st = cpu->buffer_alloc(cpu, bytes, out);
  if (!st) n_live_buffers++;
  return st;
}

static void td_free(brisk_backend *be, void *p) {
  brisk_backend *cpu = be->ctx;
  if (p) n_live_buffers--;
  cpu->buffer_free(cpu, p);
}

static void td_destroy(brisk_backend *be) {
  brisk_backend_free(be->ctx);
  free(be);
}

static brisk_status td_plan(brisk_backend *be, uint32_t type, int64_t rows, int64_t cols,
                            bool matrix, brisk_weight_plan *plan) {
  (void)be;
  (void)matrix;
  const brisk_dtype_info *t = brisk_dtype_get(type);
  if (!t) return brisk_error(BRISK_E_UNSUPPORTED, "testdev: type %u", type);
  size_t row = (size_t)(cols / t->block_size) * t->type_size;
  *plan = (brisk_weight_plan){BRISK_WEIGHT_COPY, type, row * (size_t)rows};
  return BRISK_OK;
}

static brisk_status td_prepare(brisk_backend *be, const brisk_weight_plan *plan, uint32_t type,
                               int64_t rows, int64_t cols, void *src, void **out) {
  (void)type;
  (void)rows;
  (void)cols;
  brisk_status st = td_alloc(be, plan->bytes, out);
  if (st) return st;
  memcpy(*out, src, plan->bytes);
  n_weight_copies++;
  return BRISK_OK;
}

static size_t td_workspace(const brisk_backend *be) {
  const brisk_backend *cpu = be->ctx;
  return cpu->workspace_bytes(cpu);
}

/* Each op runs on the wrapped CPU backend: its table's functions take the
 * CPU backend as their first argument, so the wrapper forwards through
 * these. */
#define FWD(name, ...) ((brisk_backend *)be->ctx)->name((brisk_backend *)be->ctx, __VA_ARGS__)
static brisk_status td_upload(brisk_backend *be, void *d, const void *s, size_t n) {
  return FWD(upload, d, s, n);
}
static brisk_status td_download(brisk_backend *be, void *d, const void *s, size_t n) {
  return FWD(download, d, s, n);
}
static brisk_status td_sync(brisk_backend *be) {
  brisk_backend *cpu = be->ctx;
  return cpu->synchronize(cpu);
}
static brisk_status td_matmul(brisk_backend *be, uint32_t t, const void *w, int64_t n, int64_t k,
                              const float *x, int64_t m, float *y) {
  return FWD(matmul, t, w, n, k, x, m, y);
}
static brisk_status td_embed(brisk_backend *be, uint32_t t, const void *tab, int64_t nv, int64_t ne,
                             const int32_t *tok, int32_t nt, float *out) {
  return FWD(embed, t, tab, nv, ne, tok, nt, out);
}
static brisk_status td_rmsnorm(brisk_backend *be, const float *x, const float *w, int64_t r,
                               int64_t c, float eps, float *out) {
  return FWD(rmsnorm, x, w, r, c, eps, out);
}
static brisk_status td_rope(brisk_backend *be, float *x, int32_t n, int64_t stride, int32_t nh,
                            int32_t hd, const int32_t *pos, const brisk_rope_params *p) {
  return FWD(rope, x, n, stride, nh, hd, pos, p);
}
static brisk_status td_glu(brisk_backend *be, brisk_glu_kind k, const float *g, const float *u,
                           int64_t n, float *out) {
  return FWD(glu, k, g, u, n, out);
}
static brisk_status td_add(brisk_backend *be, const float *a, const float *b, int64_t r, int64_t c,
                           bool bc, float *out) {
  return FWD(add, a, b, r, c, bc, out);
}
static brisk_status td_scale(brisk_backend *be, const float *x, int64_t n, float s, float *out) {
  return FWD(scale, x, n, s, out);
}
static brisk_status td_softmax(brisk_backend *be, const float *x, int64_t r, int64_t c, float s,
                               float *out) {
  return FWD(softmax, x, r, c, s, out);
}
static brisk_status td_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *kc, void *vc,
                                const float *k, const float *v, const int64_t *slots, int32_t n) {
  return FWD(kv_write, kv, kc, vc, k, v, slots, n);
}
static brisk_status td_kv_copy(brisk_backend *be, const brisk_kv_layout *kv, void *c,
                               const int32_t *pairs, int32_t n) {
  return FWD(kv_copy_blocks, kv, c, pairs, n);
}
static brisk_status td_attention(brisk_backend *be, const brisk_kv_layout *kv, const void *kc,
                                 const void *vc, const float *q, const brisk_attn_batch *b,
                                 const brisk_attn_params *p, float *out) {
  return FWD(attention, kv, kc, vc, q, b, p, out);
}
static brisk_status td_moe(brisk_backend *be, const float *l, int32_t n, int32_t ne, int32_t k,
                           bool renorm, int32_t *ids, float *w) {
  return FWD(moe_route, l, n, ne, k, renorm, ids, w);
}
static brisk_status td_argmax(brisk_backend *be, const float *x, int64_t r, int64_t c,
                              int32_t *ids) {
  return FWD(argmax, x, r, c, ids);
}
static brisk_status td_top_k(brisk_backend *be, const float *x, int64_t r, int64_t c, int32_t k,
                             int32_t *ids, float *vals) {
  return FWD(top_k, x, r, c, k, ids, vals);
}

static brisk_status td_count(const brisk_device_provider *p, int32_t *n) {
  (void)p;
  *n = 1;
  return BRISK_OK;
}

static brisk_status td_info(const brisk_device_provider *p, int32_t index,
                            brisk_device_props *out) {
  (void)p;
  out->kind = BRISK_DEVICE_CUDA;
  out->index = index;
  snprintf(out->id, sizeof out->id, "testdev:%d", (int)index);
  snprintf(out->name, sizeof out->name, "test device");
  out->total_memory = 1u << 30;
  out->free_memory = 1u << 29;
  out->compute_major = 9;
  return BRISK_OK;
}

static brisk_status td_create(const brisk_device_provider *p, int32_t index, brisk_threadpool *pool,
                              brisk_backend **out) {
  (void)p;
  (void)index;
  brisk_backend *cpu = NULL;
  brisk_status st = brisk_backend_cpu_create(pool, BRISK_CPU_ISA_AUTO, &cpu);
  if (st) return st;
  brisk_backend *be = calloc(1, sizeof *be);
  if (!be) {
    brisk_backend_free(cpu);
    return brisk_error_oom();
  }
  *be = (brisk_backend){
      .name = "testdev:0",
      .ctx = cpu,
      .host_memory = false,
      .destroy = td_destroy,
      .buffer_alloc = td_alloc,
      .buffer_free = td_free,
      .upload = td_upload,
      .download = td_download,
      .synchronize = td_sync,
      .workspace_bytes = td_workspace,
      .weight_plan = td_plan,
      .weight_prepare = td_prepare,
      .matmul = td_matmul,
      .embed = td_embed,
      .rmsnorm = td_rmsnorm,
      .rope = td_rope,
      .glu = td_glu,
      .add = td_add,
      .scale = td_scale,
      .softmax = td_softmax,
      .kv_write = td_kv_write,
      .kv_copy_blocks = td_kv_copy,
      .attention = td_attention,
      .moe_route = td_moe,
      .argmax = td_argmax,
      .top_k = td_top_k,
  };
  *out = be;
  return BRISK_OK;
}

static const brisk_device_provider testdev = {
    .kind_name = "testdev",
    .kind = BRISK_DEVICE_CUDA,
    .count = td_count,
    .info = td_info,
    .create = td_create,
};

/* ---- enumeration and names ------------------------------------------------- */

static void test_cpu_is_device_zero(void **state) {
  (void)state;
  int32_t n = brisk_device_count();
  assert_true(n >= 1);
  brisk_device_props p;
  memset(&p, 0xab, sizeof p);
  p.struct_size = sizeof p;
  assert_int_equal(brisk_device_info(0, &p), BRISK_OK);
  assert_int_equal(p.kind, BRISK_DEVICE_CPU);
  assert_int_equal(p.index, 0);
  assert_string_equal(p.id, "cpu");
  assert_true(strlen(p.name) > 0 && strlen(p.name) < sizeof p.name);
  assert_true(p.total_memory > 0);
  assert_true(p.free_memory <= p.total_memory);
  assert_int_equal(p.compute_major, 0);
  assert_int_equal(brisk_device_info(n, &p), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_device_info(-1, &p), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_device_info(0, NULL), BRISK_E_INVALID_ARGUMENT);
  /* An older, smaller struct (up to `id`) is written up to its size. */
  unsigned char buf[sizeof p + 16];
  memset(buf, 0x5a, sizeof buf);
  brisk_device_props *small = (brisk_device_props *)(void *)buf;
  size_t oldest = offsetof(brisk_device_props, id) + sizeof small->id;
  small->struct_size = (uint32_t)oldest;
  assert_int_equal(brisk_device_info(0, small), BRISK_OK);
  assert_string_equal(small->id, "cpu");
  for (size_t i = oldest; i < sizeof buf; i++) assert_int_equal(buf[i], 0x5a);
  /* One that ends inside a field is refused. */
  small->struct_size = (uint32_t)oldest - 1;
  assert_int_equal(brisk_device_info(0, small), BRISK_E_INVALID_ARGUMENT);
}

static void test_names(void **state) {
  (void)state;
  assert_int_equal(brisk_device_check("cpu"), BRISK_OK);
  assert_int_equal(brisk_device_check(""), BRISK_OK);
  assert_int_equal(brisk_device_check(NULL), BRISK_E_INVALID_ARGUMENT);
  const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda:99999999999",
                       ":0",  "cpux"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(brisk_device_check(bad[i]), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), bad[i]));
  }
  assert_int_equal(brisk_device_check("cpu:1"), BRISK_E_NO_DEVICE);
}

/* This machine has no GPU: a CUDA device is BRISK_E_NO_DEVICE, and the
 * message says why (no plugin, no driver, or no device). */
static void test_no_cuda_device(void **state) {
  (void)state;
  if (getenv("BRISK_TEST_HAVE_GPU")) skip();
  assert_int_equal(brisk_device_check("cuda:0"), BRISK_E_NO_DEVICE);
  const char *why = brisk_last_error();
  assert_non_null(why);
  if (!why) return; /* for the compiler: assert_non_null does not return */
  assert_true(strstr(why, "plugin") || strstr(why, "driver") || strstr(why, "device"));
  printf("cuda:0 -> %s\n", why);
  /* With the plugin built (CI when nvcc is found) it loads, and the answer
   * is the CUDA runtime's: no driver, or no device, never a missing file. */
  if (getenv("BRISK_TEST_PLUGIN_BUILT")) assert_non_null(strstr(why, "CUDA driver"));
  assert_int_equal(brisk_device_check("cuda"), BRISK_E_NO_DEVICE);
  /* A load naming it fails before reading the file, and leaks nothing. */
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.device = "cuda:0";
  brisk_model *m = (brisk_model *)(uintptr_t)1;
  assert_int_equal(brisk_model_load("/nonexistent.gguf", &mp, &m), BRISK_E_NO_DEVICE);
  assert_ptr_equal(m, (brisk_model *)(uintptr_t)1);
  mp.device = "tpu:0";
  assert_int_equal(brisk_model_load("/nonexistent.gguf", &mp, &m), BRISK_E_INVALID_ARGUMENT);
  mp.device = NULL;
  mp.n_gpu_layers = -2;
  assert_int_equal(brisk_model_load("/nonexistent.gguf", &mp, &m), BRISK_E_INVALID_ARGUMENT);
  /* The plugin was looked for: the search directory is fixed now. */
  assert_int_equal(brisk_set_plugin_dir("/tmp"), BRISK_E_INVALID_STATE);
}

/* ---- a model split over the host and the test device ------------------- */

typedef struct split_fixture {
  char dir[64];
  char path[128];
} split_fixture;

static int split_setup(void **state) {
  static split_fixture fx;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(fx.dir, sizeof fx.dir, "%s", d);
  *state = &fx;
  return 0;
}

static int split_teardown(void **state) {
  split_fixture *fx = *state;
  test_tmpdir_remove(fx->dir);
  return 0;
}

enum { N_PROMPT = 11, N_STEPS = 4, N_ALL = N_PROMPT + N_STEPS };

/* Logits of an 11-token prefill (every row) and 4 single-token decodes on
 * a second sequence forked from the first (copy-on-write across devices). */
static float *run(const char *path, const char *device, int32_t n_gpu_layers, int repack) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.device = device;
  mp.n_gpu_layers = n_gpu_layers;
  mp.repack = repack;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &mp, &m)) fail_msg("load on %s: %s", device, brisk_last_error());
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 64;
  cp.block_size = 4;
  cp.n_threads = 2;
  brisk_context *c = NULL;
  if (brisk_context_create(m, &cp, &c)) fail_msg("context: %s", brisk_last_error());
  const int32_t nv = brisk_model_n_vocab(m);
  float *out = malloc((size_t)N_ALL * (size_t)nv * sizeof(float));
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(N_PROMPT, &b), BRISK_OK);
  for (int i = 0; i < N_PROMPT; i++)
    assert_int_equal(brisk_batch_add(b, (i * 37 + 5) % nv, i, 0, 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  for (int i = 0; i < N_PROMPT; i++)
    memcpy(out + (size_t)i * nv, brisk_get_logits(c, i), (size_t)nv * sizeof(float));
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_OK);
  for (int s = 0; s < N_STEPS; s++) {
    brisk_batch_clear(b);
    assert_int_equal(brisk_batch_add(b, (s * 11 + 3) % nv, N_PROMPT + s, 1, 1), BRISK_OK);
    if (brisk_decode(c, b)) fail_msg("decode step %d: %s", s, brisk_last_error());
    memcpy(out + (size_t)(N_PROMPT + s) * nv, brisk_get_logits(c, 0), (size_t)nv * sizeof(float));
  }
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  assert_true(ks.other_bytes > 0);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  return out;
}

static void check_splits(void **state, const char *arch, uint32_t type, bool tied) {
  split_fixture *fx = *state;
  test_model_spec spec = test_model_default(arch);
  spec.weight_type = type;
  spec.tied = tied;
  spec.n_layer = 3;
  snprintf(fx->path, sizeof fx->path, "%s/%s-%u.gguf", fx->dir, arch, type);
  test_rng rng = test_rng_seeded(arch);
  assert_int_equal(test_model_write(fx->path, &spec, &rng, NULL), BRISK_OK);
  const int32_t nv = (int32_t)spec.n_vocab;
  float *ref = run(fx->path, "cpu", -1, 1);
  /* 0 layers (all on the host, the device unused), some, all, all + output. */
  const int32_t splits[] = {0, 1, 2, 3, -1};
  for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
    n_weight_copies = 0;
    float *got = run(fx->path, "testdev:0", splits[i], 1);
    /* Host layers run the CPU's fixed-slot split of wo / ffn_down
     * (model/shard.h), bit for bit; device layers keep whole wo / ffn_down
     * (one sum instead of eight), so with any layer there the logits agree
     * to float rounding only. */
    for (size_t j = 0; j < (size_t)N_ALL * (size_t)nv; j++)
      if (splits[i] == 0 ? memcmp(&got[j], &ref[j], sizeof(float)) != 0
                         : fabsf(got[j] - ref[j]) > 1e-4f * (1.0f + fabsf(ref[j])))
        fail_msg("%s type %u, %d device layers: logit %zu is %.9g, the CPU's %.9g", arch, type,
                 (int)splits[i], j, (double)got[j], (double)ref[j]);
    assert_int_equal(n_live_buffers, 0); /* weights, KV, activations all freed */
    if (splits[i] != 0)
      assert_true(n_weight_copies > 0);
    else
      assert_int_equal(n_weight_copies, 0);
    free(got);
  }
  free(ref);
}

static void test_split_llama_f32(void **state) {
  check_splits(state, "llama", BRISK_DTYPE_F32, false);
}
static void test_split_llama_q8_0_tied(void **state) {
  check_splits(state, "llama", BRISK_DTYPE_Q8_0, true);
}
static void test_split_qwen2_q4_0(void **state) {
  check_splits(state, "qwen2", BRISK_DTYPE_Q4_0, false);
}
static void test_split_qwen3_f16(void **state) {
  check_splits(state, "qwen3", BRISK_DTYPE_F16, false);
}
static void test_split_mixtral_f32(void **state) {
  check_splits(state, "mixtral", BRISK_DTYPE_F32, false);
}

/* The device count includes registered devices; an index past them is
 * BRISK_E_NO_DEVICE naming how many there are. */
static void test_registered_device(void **state) {
  (void)state;
  int32_t n = brisk_device_count();
  bool found = false;
  for (int32_t i = 0; i < n; i++) {
    brisk_device_props p = {.struct_size = sizeof p};
    assert_int_equal(brisk_device_info(i, &p), BRISK_OK);
    if (strcmp(p.id, "testdev:0") == 0) found = true;
  }
  assert_true(found);
  assert_int_equal(brisk_device_check("testdev:0"), BRISK_OK);
  assert_int_equal(brisk_device_check("testdev:1"), BRISK_E_NO_DEVICE);
  assert_non_null(strstr(brisk_last_error(), "1 testdev device"));
  assert_int_equal(brisk_device_register(&testdev), BRISK_E_INVALID_STATE);
}

int main(void) {
  if (brisk_device_register(&testdev)) {
    fprintf(stderr, "register: %s\n", brisk_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_is_device_zero),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_no_cuda_device),
      cmocka_unit_test(test_registered_device),
      cmocka_unit_test_setup_teardown(test_split_llama_f32, split_setup, split_teardown),
      cmocka_unit_test_setup_teardown(test_split_llama_q8_0_tied, split_setup, split_teardown),
      cmocka_unit_test_setup_teardown(test_split_qwen2_q4_0, split_setup, split_teardown),
      cmocka_unit_test_setup_teardown(test_split_qwen3_f16, split_setup, split_teardown),
      cmocka_unit_test_setup_teardown(test_split_mixtral_f32, split_setup, split_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
