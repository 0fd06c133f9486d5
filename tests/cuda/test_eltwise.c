/* kernels/eltwise.cu (glu, add, scale) and kernels/softmax.cu against the
 * CPU backend on fresh random inputs: odd lengths and tails, in place. */
#include "cuda_test.h"

#include "kernels/eltwise.h"
#include "kernels/softmax.h"

#define ULP 0x1p-24

static void test_glu(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_glu");
  brisk_backend *cpu = cpu_reference();
  const int64_t sizes[] = {1, 5, 255, 256, 257, 1000, 11008, 70001};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    const int64_t n = sizes[si];
    float *g = rand_floats(&r, (size_t)n, 4.0), *u = rand_floats(&r, (size_t)n, 1.0);
    if (n > 4) g[0] = -95.0f, g[1] = 95.0f, g[2] = -20.0f, g[3] = 1e-4f;
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    double *tol = malloc((size_t)n * sizeof *tol);
    for (int kind = 0; kind <= 1; kind++) {
      assert_int_equal(cpu->glu(cpu, (brisk_glu_kind)kind, g, u, n, want), BRISK_OK);
      ASSERT_LAUNCH(brisk_kglu(kind, g, u, n, got, NULL));
      for (int64_t i = 0; i < n; i++) {
        /* Each side is within (8 + 4|z|) ulp of the exact value (the CPU
         * test's bound: z's rounding carries into exp(-z), then exp's own 2
         * ulp, a division, a product), so they differ by at most twice that;
         * 1e-35 absolute for the CPU's exp saturating at e^88.3. */
        double z = kind ? 1.5957691216057308 * (g[i] + 0.044715 * g[i] * g[i] * g[i]) : g[i];
        tol[i] = 2 * (8 + 4 * fabs(z)) * ULP * fabs(want[i]) + 1e-35;
      }
      ASSERT_WITHIN(got, want, tol, n, "glu kind %d n %lld", kind, (long long)n);
    }
    /* In place over the gate. */
    assert_int_equal(cpu->glu(cpu, BRISK_GLU_SWIGLU, g, u, n, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_kglu(BRISK_KGLU_SWIGLU, g, u, n, g, NULL));
    for (int64_t i = 0; i < n; i++)
      tol[i] = 2 * (8 + 4 * fabs(u[i] == 0 ? 0 : want[i] / u[i])) * ULP * fabs(want[i]) + 1e-35;
    ASSERT_WITHIN(g, want, tol, n, "glu in place n %lld", (long long)n);
    free(g), free(u), free(want), free(got), free(tol);
  }
  brisk_backend_free(cpu);
}

static void test_add_scale(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_add_scale");
  brisk_backend *cpu = cpu_reference();
  const int64_t cols_list[] = {1, 7, 256, 257, 1000, 4099};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
    const int64_t cols = cols_list[ci], rows = rand_int(&r, 1, 9);
    const size_t n = (size_t)(rows * cols);
    float *a = rand_floats(&r, n, 3.0), *b = rand_floats(&r, n, 3.0);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    /* One rounding per element on both sides: bitwise equal. */
    for (int bc = 0; bc <= 1; bc++) {
      assert_int_equal(cpu->add(cpu, a, b, rows, cols, bc, want), BRISK_OK);
      ASSERT_LAUNCH(brisk_kadd(a, b, rows, cols, bc, got, NULL));
      ASSERT_BITS_EQUAL(got, want, n, "add [%lld][%lld] broadcast %d", (long long)rows,
                        (long long)cols, bc);
    }
    float s = (float)test_rng_normal(&r);
    assert_int_equal(cpu->scale(cpu, a, (int64_t)n, s, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_kscale(a, (int64_t)n, s, got, NULL));
    ASSERT_BITS_EQUAL(got, want, n, "scale %lld", (long long)n);
    /* softcap against float64: tanhf differs by ulps between libm and the
     * device, so a tolerance of a few ulps of the cap. */
    float cap = (float)(1.0 + 20.0 * fabs(test_rng_normal(&r)));
    ASSERT_LAUNCH(brisk_ksoftcap(a, (int64_t)n, cap, got, NULL));
    for (size_t i = 0; i < n; i++) {
      double w = cap * tanh((double)a[i] / cap);
      if (fabs(got[i] - w) > 8 * 0x1p-24 * fabs(w) + 1e-30)
        fail_msg("softcap %g: [%zu] = %.9g, want %.9g", (double)cap, i, (double)got[i], w);
    }
    /* sigmoid_gate against float64: expf differs by ulps. */
    ASSERT_LAUNCH(brisk_ksigmoid_gate(a, b, rows, cols, got, NULL));
    for (size_t i = 0; i < n; i++) {
      double w = a[i] / (1 + exp(-(double)b[i / (size_t)cols]));
      if (fabs(got[i] - w) > 8 * 0x1p-24 * fabs(w) + 1e-30)
        fail_msg("sigmoid_gate: [%zu] = %.9g, want %.9g", i, (double)got[i], w);
    }
    /* In place: out = a. */
    assert_int_equal(cpu->add(cpu, a, b, rows, cols, true, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_kadd(a, b, rows, cols, true, a, NULL));
    ASSERT_BITS_EQUAL(a, want, n, "add in place");
    free(a), free(b), free(want), free(got);
  }
  brisk_backend_free(cpu);
}

static void test_softmax(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_softmax");
  brisk_backend *cpu = cpu_reference();
  const int64_t cols_list[] = {1, 2, 31, 33, 128, 1000, 1024, 8191, 32003};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
    const int64_t cols = cols_list[ci], rows = rand_int(&r, 1, 4);
    const size_t n = (size_t)(rows * cols);
    float *x = rand_floats(&r, n, test_rng_uniform(&r, 0.1, 8));
    float scale = (float)test_rng_uniform(&r, 0.05, 2);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    double *tol = malloc(n * sizeof *tol);
    assert_int_equal(cpu->softmax(cpu, x, rows, cols, scale, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_ksoftmax(x, rows, cols, scale, got, NULL));
    const double per_thread = cols >= 8192   ? cols / 1024.0
                              : cols >= 1024 ? cols / 256.0
                              : cols >= 128  ? cols / 64.0
                                             : cols / 32.0;
    for (int64_t i = 0; i < rows; i++) {
      float m = -INFINITY;
      for (int64_t j = 0; j < cols; j++) m = fmaxf(m, x[i * cols + j] * scale);
      for (int64_t j = 0; j < cols; j++) {
        /* exp's argument x s - m: the kernel rounds x s and the difference,
         * the CPU's AVX2 path rounds once, so the arguments differ by up to
         * ulp(|x s|) + ulp(|x s - m|), which is that relative error in e;
         * exp 2 ulp each; the kernel's float sum (per-thread run plus 10
         * tree levels) vs the CPU's double sum; reciprocal and product.
         * Absolute 2^-126: the CPU's AVX2 exp flushes results below 2^-126
         * to 0, and an output is at most its exp (the sum is >= 1). */
        double xs = (double)x[i * cols + j] * scale, arg = fabs(xs - m);
        xs = fabs(xs);
        tol[i * cols + j] =
            (2 * xs + 2 * arg + 10 + per_thread + 10) * ULP * want[i * cols + j] + 0x1p-126;
      }
    }
    ASSERT_WITHIN(got, want, tol, n, "softmax [%lld][%lld]", (long long)rows, (long long)cols);
    ASSERT_LAUNCH(brisk_ksoftmax(x, rows, cols, scale, x, NULL)); /* in place */
    ASSERT_WITHIN(x, want, tol, n, "softmax in place");
    free(x), free(want), free(got), free(tol);
  }
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_glu), cmocka_unit_test(test_add_scale),
                                     cmocka_unit_test(test_softmax)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
