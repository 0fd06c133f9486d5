/* argmax, top-k and MoE routing against simple references, including ties
 * (lowest index first) and NaN (after every number). */
#include "ops_test.h"

/* Reference order: value descending, then index ascending; NaN last. */
static const float *g_x;
static int ref_cmp(const void *a, const void *b) {
  int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  float x = g_x[i], y = g_x[j];
  if (isnan(x) != isnan(y)) return isnan(x) ? 1 : -1;
  if (!isnan(x) && x != y) return x > y ? -1 : 1;
  return i < j ? -1 : 1;
}

static int32_t *ref_order(const float *x, int32_t n) {
  int32_t *idx = malloc(n * sizeof *idx);
  for (int32_t i = 0; i < n; i++) idx[i] = i;
  g_x = x;
  qsort(idx, n, sizeof *idx, ref_cmp);
  return idx;
}

/* Rows drawn from a few distinct values force many ties; some hold NaN. */
static float *tie_rows(test_rng *r, int64_t rows, int64_t cols, bool with_nan) {
  float *x = malloc((size_t)(rows * cols) * sizeof *x);
  for (int64_t i = 0; i < rows * cols; i++) {
    int kind = rand_int(r, 0, 9);
    x[i] = kind < 4 ? (float)rand_int(r, -3, 3) : (float)test_rng_normal(r);
    if (with_nan && kind == 9) x[i] = NAN;
  }
  return x;
}

static void test_argmax_top_k(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("argmax_top_k");
  const int64_t cols_list[] = {1, 2, 7, 33, 500, 32000, 128256};
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
      int64_t cols = cols_list[ci], rows = cols > 1000 ? 3 : rand_int(&r, 1, 9);
      float *x = tie_rows(&r, rows, cols, ci % 2 == 1);
      if (cols > 3) x[cols - 1] = NAN, x[1] = INFINITY, x[2] = INFINITY; /* tie at the top */
      int32_t k = (int32_t)(cols < 50 ? rand_int(&r, 1, (int)cols) : rand_int(&r, 1, 64));
      int32_t *ids = malloc((size_t)(rows * k) * sizeof *ids), am[16];
      float *vals = malloc((size_t)(rows * k) * sizeof *vals);
      for (int b = 0; b < P.n; b++) {
        brisk_backend *be = P.be[b];
        assert_int_equal(be->argmax(be, x, rows, cols, am), BRISK_OK);
        assert_int_equal(be->top_k(be, x, rows, cols, k, ids, vals), BRISK_OK);
        for (int64_t i = 0; i < rows; i++) {
          int32_t *want = ref_order(x + i * cols, (int32_t)cols);
          assert_int_equal(am[i], want[0]);
          for (int32_t j = 0; j < k; j++) {
            assert_int_equal(ids[i * k + j], want[j]);
            assert_memory_equal(&vals[i * k + j], &x[i * cols + want[j]], sizeof(float));
          }
          free(want);
        }
        assert_int_equal(be->top_k(be, x, rows, cols, k, ids, NULL), BRISK_OK); /* no values */
      }
      free(x), free(ids), free(vals);
    }
    ops_paths_close(&P);
  }
}

static void test_argmax_top_k_edges(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  const float nans[3] = {NAN, NAN, NAN};
  int32_t id = -1, ids[3];
  assert_int_equal(be->argmax(be, nans, 1, 3, &id), BRISK_OK);
  assert_int_equal(id, 0);
  const float x[5] = {2, 5, -1, 5, 5};
  assert_int_equal(be->argmax(be, x, 1, 5, &id), BRISK_OK);
  assert_int_equal(id, 1);
  assert_int_equal(be->top_k(be, x, 1, 5, 3, ids, NULL), BRISK_OK);
  assert_int_equal(ids[0], 1), assert_int_equal(ids[1], 3), assert_int_equal(ids[2], 4);
  assert_int_equal(be->top_k(be, x, 1, 5, 0, ids, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->top_k(be, x, 1, 5, 6, ids, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->argmax(be, x, 1, 0, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->argmax(be, x, 1, (int64_t)INT32_MAX + 1, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->argmax(be, NULL, 1, 5, &id), BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

/* Mixtral routing: softmax over all experts, the top k, renormalized. */
static void test_moe_route(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("moe_route");
  const int32_t experts[] = {1, 2, 8, 60, 64, 128};
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ei = 0; ei < sizeof experts / sizeof *experts; ei++) {
      int32_t ne = experts[ei], nt = rand_int(&r, 1, 300);
      int32_t k = rand_int(&r, 1, ne < 8 ? ne : 8);
      float *logits = tie_rows(&r, nt, ne, false);
      for (int i = 0; i < nt * ne; i++) logits[i] *= 2;
      int32_t *ids = malloc((size_t)nt * k * sizeof *ids);
      float *w = malloc((size_t)nt * k * sizeof *w);
      double *want = malloc((size_t)nt * k * sizeof *want);
      for (int renorm = 0; renorm <= 1; renorm++) {
        for (int b = 0; b < P.n; b++) {
          brisk_backend *be = P.be[b];
          assert_int_equal(be->moe_route(be, logits, nt, ne, k, renorm, ids, w), BRISK_OK);
          for (int32_t t = 0; t < nt; t++) {
            const float *x = logits + (size_t)t * ne;
            double m = -INFINITY, z = 0, zk = 0;
            for (int32_t e = 0; e < ne; e++) m = fmax(m, x[e]);
            for (int32_t e = 0; e < ne; e++) z += exp(x[e] - m);
            int32_t *order = ref_order(x, ne);
            for (int32_t j = 0; j < k; j++) zk += exp(x[order[j]] - m) / z;
            for (int32_t j = 0; j < k; j++) {
              assert_int_equal(ids[t * k + j], order[j]);
              double p = exp(x[order[j]] - m) / z;
              want[t * k + j] = renorm ? p / zk : p;
            }
            free(order);
          }
          /* Computed in float64 and rounded once. */
          ASSERT_CLOSE(w, want, (size_t)nt * k, 0, 1e-6, "%s moe_route %d experts k %d", be->name,
                       ne, k);
        }
      }
      free(logits), free(ids), free(w), free(want);
    }
    ops_paths_close(&P);
  }
  ops_paths P = ops_paths_open(0);
  float l[4] = {1, 2, 3, 4};
  int32_t ids[4];
  float w[4];
  assert_int_equal(P.be[0]->moe_route(P.be[0], l, 1, 4, 5, true, ids, w), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(P.be[0]->moe_route(P.be[0], l, 1, 0, 1, true, ids, w), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(P.be[0]->moe_route(P.be[0], l, 1, 4, 2, true, ids, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_argmax_top_k),
      cmocka_unit_test(test_argmax_top_k_edges),
      cmocka_unit_test(test_moe_route),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
