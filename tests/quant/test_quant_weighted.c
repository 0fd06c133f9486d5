/* Importance-weighted quantization: on fresh random rows with heavy-tailed
 * column importance, the importance-weighted squared error of the weighted
 * quantizers (computed in float64 from the dequantized blocks) is well below
 * the plain quantizers'; their plain RMS error stays within the format's
 * reach; uniform importance costs nothing; no importance is the plain
 * quantizer byte for byte; argument errors as brisk_quantize_row's. */
#include "test_support.h"

#include "core/dtype.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 1024
#define ROWS 24

static const uint32_t types[] = {BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0,
                                 BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K,
                                 BRISK_DTYPE_Q6_K};

/* sum imp * (x - y)^2 and sum (x - y)^2 over a row, float64. */
static void errors(const float *x, const float *y, const float *imp, double *ew, double *e) {
  for (int i = 0; i < N; i++) {
    double r = (double)x[i] - y[i];
    *ew += (imp ? imp[i] : 1.0) * r * r;
    *e += r * r;
  }
}

static void test_weighted_beats_plain(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("quant_weighted");
  float *x = malloc(N * sizeof *x), *imp = malloc(N * sizeof *imp), *y = malloc(N * sizeof *y);
  float *ones = malloc(N * sizeof *ones);
  unsigned char *q = malloc(N * 2), *q2 = malloc(N * 2);
  for (int i = 0; i < N; i++) ones[i] = 1.0f;
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const uint32_t ty = types[t];
    assert_true(brisk_quant_uses_importance(ty));
    double ew_plain = 0, ew_w = 0, e_plain = 0, e_w = 0, e_ones = 0, sx = 0, dummy = 0;
    for (int row = 0; row < ROWS; row++) {
      /* Activations whose columns differ by orders of magnitude, as real
       * ones do (a few outlier channels dominate). */
      for (int i = 0; i < N; i++) {
        x[i] = (float)test_rng_normal(&r);
        imp[i] = (float)exp(2.5 * test_rng_normal(&r));
        sx += (double)x[i] * x[i];
      }
      assert_int_equal(brisk_quantize_row(ty, x, q, N), BRISK_OK);
      assert_int_equal(brisk_dequantize_row(ty, q, y, N), BRISK_OK);
      errors(x, y, imp, &ew_plain, &e_plain);
      /* No importance: the plain quantizer exactly. */
      uint64_t bytes;
      assert_true(brisk_dtype_row_bytes(ty, N, &bytes));
      assert_int_equal(brisk_quantize_row_weighted(ty, x, q2, N, NULL), BRISK_OK);
      assert_memory_equal(q, q2, bytes);
      assert_int_equal(brisk_quantize_row_weighted(ty, x, q2, N, imp), BRISK_OK);
      assert_int_equal(brisk_dequantize_row(ty, q2, y, N), BRISK_OK);
      errors(x, y, imp, &ew_w, &e_w);
      assert_int_equal(brisk_quantize_row_weighted(ty, x, q2, N, ones), BRISK_OK);
      assert_int_equal(brisk_dequantize_row(ty, q2, y, N), BRISK_OK);
      errors(x, y, NULL, &dummy, &e_ones);
    }
    const char *name = brisk_dtype_name(ty);
    print_message("%s: weighted error %.3g -> %.3g (%.0f %%), plain RMS %.4f -> %.4f, uniform "
                  "importance RMS %.4f\n",
                  name, ew_plain, ew_w, 100 * ew_w / ew_plain, sqrt(e_plain / sx), sqrt(e_w / sx),
                  sqrt(e_ones / sx));
    /* The objective improves clearly ... */
    assert_true(ew_w < 0.85 * ew_plain);
    /* ... without giving up the format's plain accuracy wholesale ... */
    assert_true(e_w < 2.0 * e_plain);
    /* ... and a flat importance is no worse than the plain search (the
     * 32-element reference quantizers do no search: the weighted one beats
     * them). */
    assert_true(e_ones < 1.02 * e_plain);
  }
  assert_false(brisk_quant_uses_importance(BRISK_DTYPE_Q8_0));
  assert_false(brisk_quant_uses_importance(BRISK_DTYPE_F16));
  /* Types without a weighted search ignore the importance. */
  assert_int_equal(brisk_quantize_row_weighted(BRISK_DTYPE_Q8_0, x, q, N, imp), BRISK_OK);
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q8_0, x, q2, N), BRISK_OK);
  assert_memory_equal(q, q2, N / 32 * 34);
  /* Argument errors as brisk_quantize_row's. */
  assert_int_equal(brisk_quantize_row_weighted(BRISK_DTYPE_Q4_K, x, q, 100, imp),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_quantize_row_weighted(BRISK_DTYPE_Q4_K, NULL, q, 256, imp),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_quantize_row_weighted(BRISK_DTYPE_Q2_K, x, q, 256, imp),
                   BRISK_E_UNSUPPORTED);
  free(x);
  free(imp);
  free(y);
  free(ones);
  free(q);
  free(q2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_weighted_beats_plain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
