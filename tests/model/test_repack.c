/* Regrouping weights at load (brisk_model_params.repack): which matrices
 * take a packed layout, that logits are bit for bit those of the weights as
 * stored (mapped, read into memory, tied embeddings, MoE experts, rows not a
 * multiple of 8), and that the model file itself is never written. */
#include "test_models.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "model/load.h"
#include "model/model.h"

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

static brisk_model *load(const char *path, int repack, int use_mmap) {
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.repack = repack;
  p.use_mmap = use_mmap;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, &p, &m);
  if (st) fail_msg("load %s: %s", path, brisk_last_error());
  return m;
}

/* All logits of a 13-token prefill, then of 3 single-token decodes. */
static float *run(const brisk_model *m, const int32_t *toks) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 64;
  cp.n_threads = 2;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  const int32_t nv = brisk_model_n_vocab(m);
  float *out = malloc((size_t)16 * (size_t)nv * sizeof(float));
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(16, &b), BRISK_OK);
  for (int i = 0; i < 13; i++) assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  for (int i = 0; i < 13; i++) memcpy(out + i * nv, brisk_get_logits(c, i), (size_t)nv * 4);
  for (int i = 13; i < 16; i++) {
    brisk_batch_clear(b);
    assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), BRISK_OK);
    if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
    memcpy(out + i * nv, brisk_get_logits(c, 0), (size_t)nv * 4);
  }
  brisk_batch_free(b);
  brisk_context_free(c);
  return out;
}

static unsigned char *file_bytes(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)*n);
  assert_int_equal(fread(buf, 1, (size_t)*n, f), (size_t)*n);
  fclose(f);
  return buf;
}

static void test_repack_gives_same_logits(void **state) {
  (void)state;
  const bool avx2 = brisk_cpu_matmul_uses_avx2();
  if (!avx2)
    fprintf(stderr, "note: no AVX2 here; nothing is regrouped, both runs read as stored\n");
  const uint32_t types[] = {BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1,
                            BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K,
                            BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K, BRISK_DTYPE_F16};
  const char *archs[] = {"llama", "mixtral"};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    for (size_t a = 0; a < 2; a++)
      for (int tied = 0; tied < 2; tied++) {
        test_model_spec s = test_model_default(archs[a]);
        s.weight_type = types[t];
        s.tied = tied;
        s.n_vocab = 101; /* 12 groups of 8 rows and a tail of 5 */
        /* K-types: 256-element rows */
        if (brisk_dtype_get(types[t])->block_size == 256)
          s.n_embd = 256, s.n_ff = 512, s.head_dim = 64;
        char name[64], path[256];
        snprintf(name, sizeof name, "%s_%s_%d", archs[a], brisk_dtype_name(types[t]), tied);
        snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
        test_rng rng = test_rng_seeded(name);
        assert_int_equal(test_model_write(path, &s, &rng, NULL), BRISK_OK);
        long n0, n1;
        unsigned char *before = file_bytes(path, &n0);

        brisk_model *stored = load(path, 0, 1), *mapped = load(path, 1, 1),
                    *read = load(path, 1, 0);
        /* aarch64 packs only the types with NEON packed kernels */
        const bool packs = avx2 && brisk_cpu_pack_type(types[t], 64) != types[t];
        const brisk_model *ms[] = {mapped, read};
        for (int i = 0; i < 2; i++) {
          const brisk_model *m = ms[i];
          const uint32_t want = packs ? types[t] | BRISK_DTYPE_PACKED_R8 : types[t];
          assert_int_equal(m->layers[0].wq.type, want);
          assert_int_equal(m->layers[1].wo.type, want);
          assert_int_equal(m->output.type, want);
          /* The gather table follows the output matrix only when they are one. */
          assert_int_equal(m->token_embd.type, tied ? want : types[t]);
          if (s.n_expert) assert_int_equal(m->layers[1].expert_down[3].type, want);
          assert_int_equal(brisk_model_weight_bytes(m), brisk_model_weight_bytes(stored));
          assert_int_equal(brisk_model_n_params(m), brisk_model_n_params(stored));
        }
        assert_int_equal(stored->layers[0].wq.type, types[t]);

        int32_t toks[16];
        for (int i = 0; i < 16; i++) toks[i] = (int32_t)(test_rng_u64(&rng) % s.n_vocab);
        float *y0 = run(stored, toks), *y1 = run(mapped, toks), *y2 = run(read, toks);
        const size_t bytes = (size_t)16 * s.n_vocab * sizeof(float);
        assert_memory_equal(y0, y1, bytes);
        assert_memory_equal(y0, y2, bytes);
        free(y0);
        free(y1);
        free(y2);
        brisk_model_free(stored);
        brisk_model_free(mapped);
        brisk_model_free(read);

        /* The mapping is private: the file keeps its bytes. */
        unsigned char *after = file_bytes(path, &n1);
        assert_int_equal(n0, n1);
        assert_memory_equal(before, after, (size_t)n0);
        free(before);
        free(after);
      }
}

/* Weights that would not fit the memory budget stay as stored; with room
 * they are packed, and still give the stored layout's logits. */
static void test_repack_budget(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q4_0;
  char path[256];
  snprintf(path, sizeof path, "%s/budget.gguf", dir);
  test_rng rng = test_rng_seeded("budget");
  assert_int_equal(test_model_write(path, &s, &rng, NULL), BRISK_OK);
  brisk_model *stored = load(path, 0, 1), *m = load(path, 0, 1);
  assert_int_equal(brisk_model_repack(m, 1), BRISK_OK); /* one byte: nothing fits */
  assert_int_equal(m->layers[0].wq.type, BRISK_DTYPE_Q4_0);
  assert_int_equal(brisk_model_repack(m, UINT64_MAX), BRISK_OK);
  const bool avx2 = brisk_cpu_matmul_uses_avx2();
  assert_int_equal(m->layers[0].wq.type,
                   avx2 ? BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8 : BRISK_DTYPE_Q4_0);
  assert_int_equal(m->layers[1].ffn_down.type, m->layers[0].wq.type);
  /* A second call finds nothing left to do. */
  assert_int_equal(brisk_model_repack(m, UINT64_MAX), BRISK_OK);
  int32_t toks[16];
  for (int i = 0; i < 16; i++) toks[i] = (int32_t)(test_rng_u64(&rng) % s.n_vocab);
  float *y0 = run(stored, toks), *y1 = run(m, toks);
  assert_memory_equal(y0, y1, (size_t)16 * s.n_vocab * sizeof(float));
  free(y0);
  free(y1);
  /* A mapped file has a budget from the memory available; a read one none. */
  assert_true(brisk_model_repack_budget(m) > 0);
  brisk_model *read = load(path, 0, 0);
  assert_int_equal(brisk_model_repack_budget(read), UINT64_MAX);
  brisk_model_free(read);
  brisk_model_free(stored);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repack_gives_same_logits),
      cmocka_unit_test(test_repack_budget),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
