/* kernels/rmsnorm.cu against the CPU backend's rmsnorm: odd and aligned row
 * lengths (scalar and float4 paths), with and without weight, in place. */
#include "cuda_test.h"

#include "kernels/rmsnorm.h"

static void test_rmsnorm(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_rmsnorm");
  brisk_backend *cpu = cpu_reference();
  const int64_t cols_list[] = {1, 3, 4, 31, 32, 100, 255, 256, 257, 1000, 1024, 2049, 4096, 4099};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
    const int64_t cols = cols_list[ci], rows = rand_int(&r, 1, 7);
    const size_t n = (size_t)(rows * cols);
    /* One spare float in front: offset 1 breaks 16-byte alignment, so both
     * the float4 and the scalar kernels run. */
    float *x = rand_floats(&r, n + 1, test_rng_uniform(&r, 0.01, 10));
    float *w = rand_floats(&r, (size_t)cols + 1, 1.0);
    float *want = malloc(n * sizeof *want), *got = malloc((n + 1) * sizeof *got);
    float eps = (float)test_rng_uniform(&r, 1e-6, 1e-4);
    for (int offset = 0; offset <= 1; offset++) {
      for (int weighted = 0; weighted <= 1; weighted++) {
        const float *xs = x + offset, *ws = weighted ? w + offset : NULL;
        assert_int_equal(cpu->rmsnorm(cpu, xs, ws, rows, cols, eps, want), BRISK_OK);
        ASSERT_LAUNCH(brisk_krmsnorm(xs, ws, rows, cols, eps, got + offset, NULL));
        /* The kernel sums squares in float: at most ~17 terms per thread
         * here, then 10 tree levels, so ss is off by <= 27 ulp (1.6e-6) and
         * the scale by half that; with the three final roundings ~1.1e-6.
         * The CPU backend is within 2e-6 of float64 (its own test). */
        ASSERT_CLOSE(got + offset, want, n, 0, 4e-6, "rmsnorm [%lld][%lld] offset %d weight %d",
                     (long long)rows, (long long)cols, offset, weighted);
      }
    }
    /* In place. */
    memcpy(got, x, (n + 1) * sizeof *got);
    assert_int_equal(cpu->rmsnorm(cpu, x, w, rows, cols, eps, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_krmsnorm(got, w, rows, cols, eps, got, NULL));
    ASSERT_CLOSE(got, want, n, 0, 4e-6, "rmsnorm in place [%lld][%lld]", (long long)rows,
                 (long long)cols);
    free(x), free(w), free(want), free(got);
  }
  /* No rows: nothing to launch. */
  assert_int_equal(brisk_krmsnorm(NULL, NULL, 0, 8, 1e-5f, NULL, NULL), 0);
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rmsnorm)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
