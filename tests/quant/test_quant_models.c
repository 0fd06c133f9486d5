/* The block layouts against real files: ../shared/models/tiny-{f16,q8_0,q4_0}
 * .gguf hold one model's float weights written by gguf-py in three types.
 * Every quantized matrix must decode to its f16 twin within one quantization
 * step, re-quantizing the f16 twin must give nearly the same bytes (the f16
 * rounding of the inputs moves a few values across rounding boundaries; the
 * counts are printed), and a matmul over a file tensor must match float64. */
#include "test_support.h"

#include "backend/cpu/matmul/matmul.h"
#include "core/dtype.h"
#include "core/half.h"
#include "format/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GCC 12's aarch64 vectorizer stops with an internal error (in
 * vect_transform_reduction) on this file's float-to-double reductions. */
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#  pragma GCC optimize("no-tree-vectorize")
#endif

typedef struct files {
  brisk_gguf *f16, *q;
} files;

static bool open_pair(const char *qname, files *f) {
  const char *p16 = test_shared_path("models/tiny-f16.gguf");
  if (!p16) return false;
  assert_int_equal(brisk_gguf_open(p16, &f->f16), BRISK_OK);
  char rel[64];
  snprintf(rel, sizeof rel, "models/tiny-%s.gguf", qname);
  const char *pq = test_shared_path(rel);
  if (!pq) {
    brisk_gguf_close(f->f16);
    return false;
  }
  assert_int_equal(brisk_gguf_open(pq, &f->q), BRISK_OK);
  return true;
}

/* levels: amax / levels is the block's step; tol: allowed error in steps
 * (half a step of rounding, a whole one on q4_0's clamped side, plus fp16
 * rounding of the inputs and of d). */
static void check_file(const char *qname, uint32_t qtype, double levels, double tol) {
  files f;
  if (!open_pair(qname, &f)) {
    SKIP_BECAUSE("../shared/models/tiny-f16.gguf or tiny-%s.gguf not found", qname);
    return;
  }
  int n_checked = 0;
  uint64_t q_bytes = 0, q_differ = 0, blocks = 0, blocks_differ = 0;
  for (int64_t t = 0; t < brisk_gguf_n_tensors(f.q); t++) {
    const brisk_gguf_tensor *tq = brisk_gguf_tensor_at(f.q, t);
    if (tq->type != qtype) continue;
    const brisk_gguf_tensor *t16 = brisk_gguf_find_tensor(f.f16, tq->name);
    assert_non_null(t16);
    assert_int_equal(t16->type, BRISK_DTYPE_F16);
    const int64_t n = (int64_t)(tq->ne[0] * tq->ne[1]);
    assert_true(n == (int64_t)(t16->ne[0] * t16->ne[1]));
    float *deq = malloc((size_t)n * sizeof(float)), *ref = malloc((size_t)n * sizeof(float));
    uint8_t *again = malloc(tq->n_bytes);
    assert_int_equal(brisk_dequantize_row(qtype, tq->data, deq, n), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_F16, t16->data, ref, n), BRISK_OK);
    for (int64_t b = 0; b < n; b += 32) {
      double amax = 0;
      for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(ref[b + j]));
      for (int j = 0; j < 32; j++) {
        if (fabs((double)deq[b + j] - ref[b + j]) > tol * amax / levels + 1e-9) {
          fprintf(stderr, "%s %s[%lld]: %g vs f16 %g (step %g)\n", qname, tq->name,
                  (long long)(b + j), deq[b + j], ref[b + j], amax / levels);
          fail();
        }
      }
    }
    assert_int_equal(brisk_quantize_row(qtype, ref, again, n), BRISK_OK);
    const uint64_t bs = brisk_dtype_get(qtype)->type_size;
    const uint8_t *file = tq->data;
    for (uint64_t b = 0; b < tq->n_bytes; b += bs) {
      bool differ = false;
      for (uint64_t j = 2; j < bs; j++) { /* the levels; bytes 0-1 are d */
        q_differ += again[b + j] != file[b + j];
        differ |= again[b + j] != file[b + j];
      }
      differ |= memcmp(again + b, file + b, 2) != 0;
      blocks_differ += differ;
      q_bytes += bs - 2;
      blocks++;
    }
    free(deq);
    free(ref);
    free(again);
    n_checked++;
  }
  fprintf(stderr,
          "%s: %d tensors; re-quantizing the f16 twins: %llu of %llu blocks differ, "
          "%llu of %llu level bytes\n",
          qname, n_checked, (unsigned long long)blocks_differ, (unsigned long long)blocks,
          (unsigned long long)q_differ, (unsigned long long)q_bytes);
  assert_true(n_checked >= 20);
  assert_true(q_differ <= q_bytes / 50); /* measured about 1%: see the python check */
  brisk_gguf_close(f.f16);
  brisk_gguf_close(f.q);
}

static void test_q8_0_file(void **state) {
  (void)state;
  check_file("q8_0", BRISK_DTYPE_Q8_0, 127, 0.65);
}

static void test_q4_0_file(void **state) {
  (void)state;
  check_file("q4_0", BRISK_DTYPE_Q4_0, 8, 1.02);
}

/* y = x W^T over a file's q4_0 attention matrix, against float64 over its
 * dequantized values; the bound is the activation rounding (8 bits per 32,
 * amax / 254 per element) plus float rounding. */
static void test_matmul_on_file_tensor(void **state) {
  (void)state;
  files f;
  if (!open_pair("q4_0", &f)) {
    SKIP_BECAUSE("../shared/models/tiny-q4_0.gguf not found");
    return;
  }
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(f.q, "blk.1.attn_q.weight");
  assert_non_null(t);
  const int64_t k = (int64_t)t->ne[0], n = (int64_t)t->ne[1], m = 3;
  test_rng rng = test_rng_seeded("quant_models_matmul");
  float *w = malloc((size_t)(n * k) * sizeof(float)), *x = malloc((size_t)(m * k) * sizeof(float));
  float *y = malloc((size_t)(m * n) * sizeof(float));
  assert_int_equal(brisk_dequantize_row(t->type, t->data, w, n * k), BRISK_OK);
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)test_rng_normal(&rng);
  assert_int_equal(brisk_cpu_matmul(NULL, t->type, t->data, n, k, x, m, y, NULL, 0), BRISK_OK);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double ref = 0, bound = 0, mag = 0;
      for (int64_t b = 0; b < k; b += 32) {
        double amax = 0;
        for (int l = 0; l < 32; l++) amax = fmax(amax, fabs(x[i * k + b + l]));
        for (int l = 0; l < 32; l++) {
          const double wv = w[j * k + b + l], xv = x[i * k + b + l];
          ref += wv * xv;
          bound += fabs(wv) * amax / 254;
          mag += fabs(wv * xv);
        }
      }
      bound += 1e-5 * mag; /* float32 sums over a few hundred terms */
      assert_true(fabs((double)y[i * n + j] - ref) <= bound);
    }
  free(w);
  free(x);
  free(y);
  brisk_gguf_close(f.f16);
  brisk_gguf_close(f.q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_q8_0_file),
      cmocka_unit_test(test_q4_0_file),
      cmocka_unit_test(test_matmul_on_file_tensor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
