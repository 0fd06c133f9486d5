/* kernels/kv.cu against the CPU backend: KV writes (F16, F32, INT8 and FP8 caches,
 * padding slots skipped, odd head sizes) and block copies with chains, both
 * bitwise (the same single rounding, or plain copies). */
#include "cuda_test.h"

#include "core/dtype.h"
#include "kernels/kv.h"
#include "quant/kv_quant.h"

static const uint32_t kv_dtypes[] = {BRISK_DTYPE_F16, BRISK_DTYPE_F32, BRISK_KVQ_DTYPE_Q8,
                                     BRISK_KVQ_DTYPE_FP8};

static void *cache_alloc(const brisk_kv_layout *kv, size_t *bytes, test_rng *r) {
  *bytes = (size_t)kv->n_blocks * kv->n_kv_heads * kv->block_size *
           brisk_kvq_row_bytes(kv->dtype, kv->head_dim);
  unsigned char *c = malloc(*bytes);
  assert_non_null(c);
  for (size_t i = 0; i < *bytes; i++) c[i] = (unsigned char)test_rng_u64(r);
  return c;
}

static void test_kv_write(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_kv_write");
  brisk_backend *cpu = cpu_reference();
  for (int iter = 0; iter < 16; iter++) {
    brisk_kv_layout kv = {kv_dtypes[iter % 4], rand_int(&r, 1, 9), rand_int(&r, 1, 4),
                          rand_int(&r, 1, 17), rand_int(&r, 1, 130)};
    const int32_t n_slots = kv.n_blocks * kv.block_size;
    const int32_t n_tokens = rand_int(&r, 1, n_slots < 40 ? n_slots : 40);
    const size_t row = (size_t)kv.n_kv_heads * kv.head_dim;
    float *k = rand_floats(&r, n_tokens * row, 2.0), *v = rand_floats(&r, n_tokens * row, 30.0);
    if (n_tokens * row > 2) k[0] = 70000.0f, k[1] = 1e-6f; /* F16 overflow, subnormal */
    if (iter % 4 >= 2 && n_tokens * row > 130) {           /* quantized: a zero group, a huge one */
      for (size_t i = 0; i < row && i < 64; i++) v[i] = 0;
      for (size_t i = 64; i < row && i < 130; i++) v[i] *= 1e7f;
    }
    /* Distinct slots from a shuffled range, some tokens padding (-1). */
    int64_t *perm = malloc((size_t)n_slots * sizeof *perm),
            *slots = malloc(n_tokens * sizeof *slots);
    for (int32_t i = 0; i < n_slots; i++) perm[i] = i;
    for (int32_t i = n_slots - 1; i > 0; i--) {
      int32_t j = rand_int(&r, 0, i);
      int64_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    for (int32_t t = 0; t < n_tokens; t++) slots[t] = rand_int(&r, 0, 4) == 0 ? -1 : perm[t];
    size_t bytes;
    void *kc = cache_alloc(&kv, &bytes, &r), *vc = cache_alloc(&kv, &bytes, &r);
    void *kw = malloc(bytes), *vw = malloc(bytes);
    memcpy(kw, kc, bytes), memcpy(vw, vc, bytes);
    assert_int_equal(cpu->kv_write(cpu, &kv, kw, vw, k, v, slots, n_tokens), BRISK_OK);
    ASSERT_LAUNCH(brisk_kkv_write(kv.dtype, kv.n_kv_heads, kv.block_size, kv.head_dim, kc, vc, k, v,
                                  slots, n_tokens, NULL));
    assert_memory_equal(kc, kw, bytes);
    assert_memory_equal(vc, vw, bytes);
    free(k), free(v), free(perm), free(slots), free(kc), free(vc), free(kw), free(vw);
  }
  /* A cache type the kernels do not write: refused with a message. */
  int st = brisk_kkv_write(BRISK_DTYPE_Q8_0, 1, 1, 1, NULL, NULL, NULL, NULL, NULL, 1, NULL);
  assert_int_not_equal(st, 0);
  assert_true(strlen(brisk_kerror_string(st)) > 0);
  brisk_backend_free(cpu);
}

static void test_kv_copy_blocks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_kv_copy_blocks");
  brisk_backend *cpu = cpu_reference();
  for (int iter = 0; iter < 16; iter++) {
    brisk_kv_layout kv = {kv_dtypes[iter % 4], rand_int(&r, 2, 12), rand_int(&r, 1, 3),
                          rand_int(&r, 1, 16), rand_int(&r, 1, 70)};
    size_t bytes;
    void *c = cache_alloc(&kv, &bytes, &r), *w = malloc(bytes);
    memcpy(w, c, bytes);
    const int32_t n_pairs = rand_int(&r, 1, 10);
    int32_t *pairs = malloc(2 * (size_t)n_pairs * sizeof *pairs);
    for (int32_t i = 0; i < n_pairs; i++) {
      /* Every other pair continues a chain from the previous destination. */
      pairs[2 * i] = i > 0 && i % 2 ? pairs[2 * i - 1] : rand_int(&r, 0, kv.n_blocks - 1);
      do pairs[2 * i + 1] = rand_int(&r, 0, kv.n_blocks - 1);
      while (pairs[2 * i + 1] == pairs[2 * i]);
    }
    assert_int_equal(cpu->kv_copy_blocks(cpu, &kv, w, pairs, n_pairs), BRISK_OK);
    ASSERT_LAUNCH(brisk_kkv_copy_blocks(kv.dtype, kv.n_kv_heads, kv.block_size, kv.head_dim, c,
                                        pairs, n_pairs, NULL));
    assert_memory_equal(c, w, bytes);
    free(c), free(w), free(pairs);
  }
  int32_t pair[2] = {0, 1};
  assert_int_not_equal(brisk_kkv_copy_blocks(BRISK_DTYPE_BF16, 1, 1, 1, NULL, pair, 1, NULL), 0);
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_kv_write),
                                     cmocka_unit_test(test_kv_copy_blocks)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
