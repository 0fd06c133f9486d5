/* kernels/layernorm.cu (layernorm, gelu) against float64 references on
 * fresh random inputs: odd and model-sized rows, with and without weight and
 * bias, in place. */
#include "cuda_test.h"

#include "kernels/layernorm.h"

static void test_layernorm(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_layernorm");
  const int64_t cols_list[] = {1, 3, 31, 32, 100, 255, 384, 1000, 1024, 4099};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
    const int64_t cols = cols_list[ci], rows = rand_int(&r, 1, 7);
    const size_t n = (size_t)(rows * cols);
    float *x = rand_floats(&r, n, test_rng_uniform(&r, 0.01, 10));
    const double shift = test_rng_normal(&r) * 5;
    for (size_t i = 0; i < n; i++) x[i] += (float)shift;
    float *w = rand_floats(&r, (size_t)cols, 1.0), *b = rand_floats(&r, (size_t)cols, 1.0);
    float *got = malloc(n * sizeof *got);
    const float eps = (float)test_rng_uniform(&r, 1e-12, 1e-5);
    for (int affine = 0; affine <= 1; affine++) {
      ASSERT_LAUNCH(
          brisk_klayernorm(x, affine ? w : NULL, affine ? b : NULL, rows, cols, eps, got, NULL));
      for (int64_t i = 0; i < rows; i++) {
        const float *xr = x + i * cols;
        double mu = 0, var = 0, amax = 0;
        for (int64_t j = 0; j < cols; j++) mu += xr[j], amax = fmax(amax, fabs(xr[j]));
        mu /= (double)cols;
        for (int64_t j = 0; j < cols; j++) var += (xr[j] - mu) * (xr[j] - mu);
        const double sd = sqrt(var / (double)cols + eps);
        for (int64_t j = 0; j < cols; j++) {
          const double z = (xr[j] - mu) / sd;
          const double want = affine ? z * w[j] + b[j] : z;
          /* Float sums of up to ~35 terms per thread and a tree: the mean
           * is off by ~64 ulp of max|x|, which shifts z by that over sd;
           * the variance by ~64 ulp; then the final roundings. */
          const double ez = 64 * 0x1p-24 * amax / sd + 64 * 0x1p-24 * fabs(z);
          const double tol = (affine ? ez * fabs(w[j]) + 4 * 0x1p-24 * fabs(b[j]) : ez) +
                             4 * 0x1p-24 * fabs(want) + 1e-30;
          const double g = got[i * cols + j];
          if (!(fabs(g - want) <= tol))
            fail_msg("layernorm [%lld][%lld] affine %d at %lld,%lld: got %.9g want %.9g",
                     (long long)rows, (long long)cols, affine, (long long)i, (long long)j, g, want);
        }
      }
    }
    /* In place equals out of place. */
    ASSERT_LAUNCH(brisk_klayernorm(x, w, b, rows, cols, eps, got, NULL));
    ASSERT_LAUNCH(brisk_klayernorm(x, w, b, rows, cols, eps, x, NULL));
    ASSERT_BITS_EQUAL(x, got, n, "layernorm in place [%lld][%lld]", (long long)rows,
                      (long long)cols);
    free(x), free(w), free(b), free(got);
  }
  assert_int_equal(brisk_klayernorm(NULL, NULL, NULL, 0, 8, 1e-5f, NULL, NULL), 0);
}

static void test_gelu(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_gelu");
  const int64_t sizes[] = {1, 5, 255, 256, 257, 1536, 70001};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    const int64_t n = sizes[si];
    float *x = rand_floats(&r, (size_t)n, 3.0), *got = malloc((size_t)n * sizeof *got);
    if (n > 4) x[0] = -9.0f, x[1] = 9.0f, x[2] = -5.5f, x[3] = 1e-6f;
    ASSERT_LAUNCH(brisk_kgelu(x, n, got, NULL));
    for (int64_t i = 0; i < n; i++) {
      const double z = x[i] / sqrt(2.0), want = 0.5 * x[i] * erfc(-z);
      /* As the CPU test: the argument's two roundings, amplified by 2|z|
       * in erfc's tail (4 z^2 ulp), and the device's erfcf (<= 5 ulp). */
      const double tol = (10 + 4 * z * z) * 0x1p-24 * fabs(want) + 1e-38;
      if (!(fabs(got[i] - want) <= tol))
        fail_msg("gelu(%.9g) n %lld: got %.9g want %.9g", (double)x[i], (long long)n,
                 (double)got[i], want);
    }
    ASSERT_LAUNCH(brisk_kgelu(x, n, x, NULL)); /* in place */
    ASSERT_BITS_EQUAL(x, got, (size_t)n, "gelu in place n %lld", (long long)n);
    free(x), free(got);
  }
  assert_int_equal(brisk_kgelu(NULL, 0, NULL, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layernorm), cmocka_unit_test(test_gelu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
