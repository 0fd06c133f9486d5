/* The communicators' tree-sum kernel (kernels/comm.cu) against
 * brisk_comm_tree_sum (lib/parallel/comm.c), bit for bit, for every group
 * size up to 40 and the largest, 256, on fresh random values of mixed
 * magnitude (where the order of additions shows in the bits). */
#include "cuda_test.h"

#include "kernels/comm.h"
#include "parallel/comm.h"

static void test_tree_sum(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kcomm");
  const int64_t n = 300;
  int sizes[42];
  for (int i = 0; i < 40; i++) sizes[i] = i + 1;
  sizes[40] = 129;
  sizes[41] = 256;
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    const int size = sizes[s];
    float *parts = malloc((size_t)size * (size_t)n * sizeof *parts);
    float *out = malloc((size_t)n * sizeof *out), *want = malloc((size_t)n * sizeof *want);
    float *col = malloc((size_t)size * sizeof *col);
    for (int64_t i = 0; i < size * n; i++)
      parts[i] = (float)(test_rng_uniform(&r, -1, 1) * pow(10.0, test_rng_uniform(&r, -3, 3)));
    ASSERT_LAUNCH(brisk_kcomm_tree_sum(parts, size, n, out, NULL));
    for (int64_t i = 0; i < n; i++) {
      for (int q = 0; q < size; q++) col[q] = parts[(int64_t)q * n + i];
      want[i] = brisk_comm_tree_sum(col, size);
    }
    ASSERT_BITS_EQUAL(out, want, n, "tree sum of %d ranks", size);
    free(parts);
    free(out);
    free(want);
    free(col);
  }
  float x = 1;
  assert_int_equal(brisk_kcomm_tree_sum(&x, 0, 1, &x, NULL), 1);
  assert_int_equal(brisk_kcomm_tree_sum(&x, 257, 1, &x, NULL), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_tree_sum)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
