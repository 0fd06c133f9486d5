/* kernels/select.cu against the CPU backend: argmax, top-k and MoE routing
 * on rows with many ties, NaNs, all-NaN rows and signed zeros. Ids and values
 * are compared bitwise: the order is total, so the selection is unique. */
#include "cuda_test.h"

#include "kernels/select.h"

/* Values from a small set (ties), with NaN, -0 and +0 sprinkled in; an
 * all-NaN row when nan_row. */
static float *tie_floats(test_rng *r, size_t n, bool nan_row) {
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) {
    uint64_t u = test_rng_u64(r) % 100;
    x[i] = nan_row || u < 5 ? NAN : u < 8 ? -0.0f : u < 11 ? 0.0f : (float)((int)(u % 23) - 11) / 4;
  }
  return x;
}

static void test_argmax(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_argmax");
  brisk_backend *cpu = cpu_reference();
  const int64_t cols_list[] = {1, 2, 31, 33, 255, 256, 2047, 2048, 16385};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
    const int64_t cols = cols_list[ci], rows = rand_int(&r, 1, 6);
    float *x = ci % 2 ? tie_floats(&r, (size_t)(rows * cols), false)
                      : rand_floats(&r, (size_t)(rows * cols), 1.0);
    if (rows > 1) /* an all-NaN row: index 0 */
      for (int64_t j = 0; j < cols; j++) x[cols + j] = NAN;
    int32_t *want = malloc((size_t)rows * sizeof *want), *got = malloc((size_t)rows * sizeof *got);
    assert_int_equal(cpu->argmax(cpu, x, rows, cols, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_kargmax(x, rows, cols, got, NULL));
    assert_memory_equal(got, want, (size_t)rows * sizeof *got);
    free(x), free(want), free(got);
  }
  brisk_backend_free(cpu);
}

static void test_top_k(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_top_k");
  brisk_backend *cpu = cpu_reference();
  const int64_t cols_list[] = {1, 5, 40, 64, 100, 257, 3000, 20000};
  const int32_t ks[] = {1, 2, 5, 40, 64};
  for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
      const int64_t cols = cols_list[ci];
      const int32_t k = ks[ki] < cols ? ks[ki] : (int32_t)cols;
      /* Long rows with the smallest and largest k only: the k merge rounds
       * dominate the emulation's time. */
      if (cols >= 3000 && ki != 0 && ki != sizeof ks / sizeof *ks - 1) continue;
      const int64_t rows = rand_int(&r, 1, cols >= 3000 ? 2 : 3);
      const size_t n = (size_t)(rows * cols), nk = (size_t)(rows * k);
      float *x = (ci + ki) % 2 ? tie_floats(&r, n, false) : rand_floats(&r, n, 1.0);
      if (rows > 1)
        for (int64_t j = 0; j < cols; j++) x[cols + j] = NAN;
      int32_t *want = malloc(nk * sizeof *want), *got = malloc(nk * sizeof *got);
      float *wv = malloc(nk * sizeof *wv), *gv = malloc(nk * sizeof *gv);
      assert_int_equal(cpu->top_k(cpu, x, rows, cols, k, want, wv), BRISK_OK);
      ASSERT_LAUNCH(brisk_ktop_k(x, rows, cols, k, got, gv, NULL));
      if (memcmp(got, want, nk * sizeof *got) != 0) {
        fprintf(stderr, "top_k [%lld][%lld] k %d: ids differ\n", (long long)rows, (long long)cols,
                k);
        fail();
      }
      ASSERT_BITS_EQUAL(gv, wv, nk, "top_k values");
      ASSERT_LAUNCH(brisk_ktop_k(x, rows, cols, k, got, NULL, NULL)); /* no values */
      assert_memory_equal(got, want, nk * sizeof *got);
      free(x), free(want), free(got), free(wv), free(gv);
    }
  int32_t id;
  float x = 1;
  assert_int_not_equal(brisk_ktop_k(&x, 1, 100, BRISK_KTOP_K_MAX + 1, &id, NULL, NULL), 0);
  brisk_backend_free(cpu);
}

static void test_moe_route(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_moe_route");
  brisk_backend *cpu = cpu_reference();
  const int32_t experts[] = {1, 2, 8, 60, 128};
  for (size_t ei = 0; ei < sizeof experts / sizeof *experts; ei++)
    for (int renorm = 0; renorm <= 1; renorm++) {
      const int32_t ne = experts[ei], k = rand_int(&r, 1, ne < 8 ? ne : 8);
      const int32_t nt = rand_int(&r, 1, 9);
      const size_t n = (size_t)nt * ne, nk = (size_t)nt * k;
      float *x = ei % 2 ? tie_floats(&r, n, false) : rand_floats(&r, n, 3.0);
      for (size_t i = 0; i < n; i++)
        if (isnan(x[i])) x[i] = 1.5f; /* routing logits are finite */
      int32_t *want = malloc(nk * sizeof *want), *got = malloc(nk * sizeof *got);
      float *ww = malloc(nk * sizeof *ww), *gw = malloc(nk * sizeof *gw);
      assert_int_equal(cpu->moe_route(cpu, x, nt, ne, k, renorm, want, ww), BRISK_OK);
      ASSERT_LAUNCH(brisk_kmoe_route(x, nt, ne, k, renorm, got, gw, NULL));
      assert_memory_equal(got, want, nk * sizeof *got);
      /* The same float64 sums in the same order; the device's double exp
       * is within 1 ulp (float64), so the float weights differ by at most
       * one rounding step. */
      ASSERT_CLOSE(gw, ww, nk, 0, 0x1p-23, "moe_route experts %d k %d renorm %d", ne, k, renorm);
      free(x), free(want), free(got), free(ww), free(gw);
    }
  float x = 0;
  int32_t id;
  assert_int_not_equal(brisk_kmoe_route(&x, 1, 100, BRISK_KTOP_K_MAX + 1, true, &id, &x, NULL), 0);
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_argmax), cmocka_unit_test(test_top_k),
                                     cmocka_unit_test(test_moe_route)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
