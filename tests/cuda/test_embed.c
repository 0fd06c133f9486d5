/* kernels/embed.cu: the activation-column gather against its float64
 * reference; the embedding against the CPU backend's embed for every table type the
 * device reads, bitwise (the same dequantization arithmetic, one rounding per
 * operation): tables quantized from random rows, half of them with the
 * quantized bytes (everything but the f16 scales) randomized so every bit
 * pattern of nibbles, high bits and packed 6-bit scales occurs. */
#include "cuda_test.h"

#include "core/dtype.h"
#include "kernels/embed.h"
#include "quant/quant.h"

/* Byte range of a block's f16 fields, kept when randomizing. */
static void f16_fields(uint32_t type, uint32_t *lo, uint32_t *hi) {
  switch (type) {
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_1:
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K: *lo = 0, *hi = 4; return;
  case BRISK_DTYPE_Q6_K: *lo = 208, *hi = 210; return;
  default: *lo = 0, *hi = 2; return;
  }
}

static void test_embed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_embed");
  brisk_backend *cpu = cpu_reference();
  const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
                            BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    const uint32_t type = types[ti];
    const brisk_dtype_info *info = brisk_dtype_get(type);
    for (int iter = 0; iter < 3; iter++) {
      const int64_t n_embd = (int64_t)info->block_size * rand_int(&r, 1, iter == 2 ? 12 : 3) +
                             (info->block_size == 1 ? rand_int(&r, 0, 300) : 0);
      const int64_t n_vocab = rand_int(&r, 1, 50);
      uint64_t row_bytes;
      assert_true(brisk_dtype_row_bytes(type, (uint64_t)n_embd, &row_bytes));
      unsigned char *table = malloc((size_t)(row_bytes * n_vocab));
      float *src = rand_floats(&r, (size_t)n_embd, test_rng_uniform(&r, 0.01, 5));
      for (int64_t v = 0; v < n_vocab; v++) {
        for (int64_t i = 0; i < n_embd; i++) src[i] = (float)test_rng_normal(&r);
        unsigned char *row = table + v * row_bytes;
        assert_int_equal(brisk_quantize_row(type, src, row, n_embd), BRISK_OK);
        if (info->quantized && v % 2) {
          uint32_t lo, hi;
          f16_fields(type, &lo, &hi);
          for (uint64_t b = 0; b < row_bytes; b++)
            if (b % info->type_size < lo || b % info->type_size >= hi)
              row[b] = (unsigned char)test_rng_u64(&r);
        }
      }
      const int32_t n_tokens = rand_int(&r, 1, 20);
      int32_t *tokens = malloc((size_t)n_tokens * sizeof *tokens);
      for (int32_t t = 0; t < n_tokens; t++) tokens[t] = rand_int(&r, 0, (int)n_vocab - 1);
      const size_t n = (size_t)(n_tokens * n_embd);
      float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
      assert_int_equal(cpu->embed(cpu, type, table, n_vocab, n_embd, tokens, n_tokens, want),
                       BRISK_OK);
      ASSERT_LAUNCH(brisk_kembed(type, table, n_vocab, n_embd, tokens, n_tokens, got, NULL));
      ASSERT_BITS_EQUAL(got, want, n, "embed %s [%lld][%lld]", info->name, (long long)n_vocab,
                        (long long)n_embd);
      free(table), free(src), free(tokens), free(want), free(got);
    }
  }
  float x = 0;
  int32_t tok = 0;
  assert_int_not_equal(brisk_kembed(BRISK_DTYPE_Q2_K, &x, 1, 256, &tok, 1, &x, NULL), 0);
  brisk_backend_free(cpu);
}

/* brisk_kgather_cols (GPTQ act-order) against the float64 reference
 * x[r][cols[j]], exactly: permutations and gathers with repeats, widths
 * across several blocks of threads. */
static void test_gather_cols(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_gather_cols");
  for (int iter = 0; iter < 8; iter++) {
    const int64_t n_cols = rand_int(&r, 1, 1100), rows = rand_int(&r, 1, 7);
    const bool perm = iter % 2 == 0;
    const int64_t n_out = perm ? n_cols : rand_int(&r, 1, 700);
    int32_t *cols = malloc((size_t)n_out * sizeof *cols);
    for (int64_t j = 0; j < n_out; j++)
      cols[j] = perm ? (int32_t)j : (int32_t)(test_rng_u64(&r) % (uint64_t)n_cols);
    for (int64_t j = n_out - 1; perm && j > 0; j--) { /* Fisher-Yates */
      int64_t i = (int64_t)(test_rng_u64(&r) % (uint64_t)(j + 1));
      int32_t t = cols[j];
      cols[j] = cols[i];
      cols[i] = t;
    }
    float *x = rand_floats(&r, (size_t)(rows * n_cols), 3);
    const size_t n = (size_t)(rows * n_out);
    float *got = malloc(n * sizeof *got);
    ASSERT_LAUNCH(brisk_kgather_cols(x, rows, n_cols, cols, n_out, got, NULL));
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < n_out; j++)
        if ((double)got[i * n_out + j] != (double)x[i * n_cols + cols[j]])
          fail_msg("gather_cols [%lld][%lld] -> %lld: out[%lld][%lld] = %.9g, want %.9g",
                   (long long)rows, (long long)n_cols, (long long)n_out, (long long)i, (long long)j,
                   (double)got[i * n_out + j], (double)x[i * n_cols + cols[j]]);
    free(cols), free(x), free(got);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_embed),
                                     cmocka_unit_test(test_gather_cols)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
