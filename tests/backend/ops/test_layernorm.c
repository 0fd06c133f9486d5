/* The encoder operations of the CPU backend (LayerNorm with a bias, exact
 * GELU) against float64 references on fresh random inputs, with and without
 * threads, in place, and their argument checks. */
#include "ops_test.h"

static const int64_t COLS[] = {1, 3, 7, 8, 31, 32, 33, 100, 257, 384, 1000, 4099};
#define N_COLS (sizeof COLS / sizeof *COLS)

static void test_layernorm(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("layernorm");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < N_COLS; ci++) {
      int64_t cols = COLS[ci], rows = rand_int(&r, 1, 9);
      size_t n = (size_t)(rows * cols);
      /* An offset far from zero: a one-pass variance would cancel. */
      float *x = rand_floats(&r, n, test_rng_uniform(&r, 0.01, 10));
      double shift = test_rng_normal(&r) * 20;
      for (size_t i = 0; i < n; i++) x[i] += (float)shift;
      float *w = rand_floats(&r, (size_t)cols, 1.0), *b = rand_floats(&r, (size_t)cols, 1.0);
      float eps = (float)test_rng_uniform(&r, 1e-12, 1e-5);
      double *want = malloc(n * sizeof *want), *want_plain = malloc(n * sizeof *want);
      double *tol = malloc(n * sizeof *tol);
      for (int64_t i = 0; i < rows; i++) {
        const float *xr = x + i * cols;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < cols; j++) mu += xr[j];
        mu /= (double)cols;
        for (int64_t j = 0; j < cols; j++) var += (xr[j] - mu) * (xr[j] - mu);
        double s = 1 / sqrt(var / (double)cols + eps);
        for (int64_t j = 0; j < cols; j++) {
          double z = (xr[j] - mu) * s;
          want_plain[i * cols + j] = z;
          want[i * cols + j] = z * w[j] + b[j];
          /* Three roundings of terms of size |z w| and |b|. */
          tol[i * cols + j] = 4 * 0x1p-24 * (fabs(z * w[j]) + fabs(b[j])) + 1e-30;
        }
      }
      float *y = malloc(n * sizeof *y), *xc = malloc(n * sizeof *xc);
      for (int p = 0; p < P.n; p++) {
        brisk_backend *be = P.be[p];
        assert_int_equal(be->layernorm(be, x, w, b, rows, cols, eps, y), BRISK_OK);
        for (size_t i = 0; i < n; i++)
          if (!(fabs(y[i] - want[i]) <= tol[i]))
            fail_msg("%s layernorm [%lld][%lld] %zu: got %.9g want %.9g", be->name, (long long)rows,
                     (long long)cols, i, (double)y[i], want[i]);
        memcpy(xc, x, n * sizeof *xc); /* in place, no weight nor bias */
        assert_int_equal(be->layernorm(be, xc, NULL, NULL, rows, cols, eps, xc), BRISK_OK);
        ASSERT_CLOSE(xc, want_plain, n, 1e-30, 2 * 0x1p-24, "%s layernorm plain", be->name);
      }
      free(x), free(w), free(b), free(want), free(want_plain), free(tol), free(y), free(xc);
    }
    brisk_backend *be = P.be[0];
    float v = 1;
    assert_int_equal(be->layernorm(be, &v, NULL, NULL, 1, 1, -1.0f, &v), BRISK_E_INVALID_ARGUMENT);
    assert_int_equal(be->layernorm(be, &v, NULL, NULL, 1, 1, NAN, &v), BRISK_E_INVALID_ARGUMENT);
    assert_int_equal(be->layernorm(be, NULL, NULL, NULL, 1, 1, 0, &v), BRISK_E_INVALID_ARGUMENT);
    assert_int_equal(be->layernorm(be, &v, NULL, NULL, -1, 1, 0, &v), BRISK_E_INVALID_ARGUMENT);
    ops_paths_close(&P);
  }
}

static void test_gelu(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gelu");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < N_COLS; ci++) {
      size_t n = (size_t)COLS[ci] * (size_t)rand_int(&r, 1, 5);
      float *x = rand_floats(&r, n, test_rng_uniform(&r, 0.5, 6));
      if (n > 4) x[0] = -9.0f, x[1] = 9.0f, x[2] = -5.5f, x[3] = 1e-6f;
      double *want = malloc(n * sizeof *want);
      /* erfc keeps the relative accuracy of the small negative tail. */
      for (size_t i = 0; i < n; i++) want[i] = 0.5 * x[i] * erfc(-(double)x[i] / sqrt(2.0));
      float *y = malloc(n * sizeof *y);
      for (int p = 0; p < P.n; p++) {
        brisk_backend *be = P.be[p];
        /* z = x * (float)sqrt(1/2) carries up to two half-ulp roundings
         * (the constant's, the product's), which erfc turns into up to
         * 2|z| * |z| ulp of relative error (d ln erfc / dz ~ -2z), then
         * erfcf's own few ulp and the two products. */
        assert_int_equal(be->gelu(be, x, (int64_t)n, y), BRISK_OK);
        for (size_t i = 0; i < n; i++) {
          double z = x[i] / sqrt(2.0), tol = (8 + 4 * z * z) * 0x1p-24 * fabs(want[i]) + 1e-38;
          if (!(fabs(y[i] - want[i]) <= tol))
            fail_msg("%s gelu(%.9g): got %.9g want %.9g", be->name, (double)x[i], (double)y[i],
                     want[i]);
        }
        float *y2 = malloc(n * sizeof *y2); /* in place: the same bits */
        memcpy(y2, x, n * sizeof *y2);
        assert_int_equal(be->gelu(be, y2, (int64_t)n, y2), BRISK_OK);
        assert_memory_equal(y2, y, n * sizeof *y);
        free(y2);
      }
      free(x), free(want), free(y);
    }
    brisk_backend *be = P.be[0];
    assert_int_equal(be->gelu(be, NULL, 4, NULL), BRISK_E_INVALID_ARGUMENT);
    assert_int_equal(be->gelu(be, NULL, 0, NULL), BRISK_OK);
    ops_paths_close(&P);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layernorm), cmocka_unit_test(test_gelu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
