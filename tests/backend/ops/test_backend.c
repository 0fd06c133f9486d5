/* The CPU backend's table: creation (kernel path choice, allocation
 * failure), buffers, and matmul through the table with float and quantized
 * weights against a float64 product of the dequantized weights. */
#include "ops_test.h"

#include <string.h>

#include "core/alloc.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "backend/cpu/matmul/matmul.h"
#include "quant/quant.h"

static void test_create_paths(void **state) {
  (void)state;
  brisk_backend *be = NULL;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be), BRISK_OK);
  const brisk_cpu_features *f = brisk_cpu();
  bool avx2 = f->avx2 && f->fma && f->f16c;
#if !defined(__x86_64__)
  avx2 = false;
#endif
  /* AUTO: the best level allowed (BRISK_CPU_ISA may cap it). */
  const brisk_isa_level level = brisk_cpu_isa_level();
  char want[32];
  snprintf(want, sizeof want, "cpu-%s",
           brisk_isa_name(avx2 || brisk_isa_is_neon(level) ? level : BRISK_ISA_SCALAR));
  assert_string_equal(be->name, want);
  assert_int_equal(be->synchronize(be), BRISK_OK);
  brisk_backend_free(be);
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_SCALAR, &be), BRISK_OK);
  assert_string_equal(be->name, "cpu-scalar");
  brisk_backend_free(be);
  be = NULL;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AVX2, &be),
                   avx2 ? BRISK_OK : BRISK_E_UNSUPPORTED);
  brisk_backend_free(be);
  assert_int_equal(brisk_backend_cpu_create(NULL, (brisk_cpu_isa)42, &be),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  brisk_backend_free(NULL);
}

static brisk_status create_and_free(void *ctx) {
  (void)ctx;
  brisk_backend *be = NULL;
  brisk_status st = brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be);
  brisk_backend_free(be);
  return st;
}

static void test_create_out_of_memory(void **state) {
  (void)state;
  assert_true(test_every_allocation_fails(create_and_free, NULL) >= 1);
}

static void test_buffers(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  void *buf = NULL;
  assert_int_equal(be->buffer_alloc(be, 1000, &buf), BRISK_OK);
  assert_int_equal((uintptr_t)buf % 64, 0);
  char src[1000], dst[1000];
  for (int i = 0; i < 1000; i++) src[i] = (char)(i * 7);
  assert_int_equal(be->upload(be, buf, src, 1000), BRISK_OK);
  assert_int_equal(be->download(be, dst, buf, 1000), BRISK_OK);
  assert_memory_equal(src, dst, 1000);
  assert_int_equal(be->upload(be, NULL, src, 10), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->upload(be, buf, src, 0), BRISK_OK);
  be->buffer_free(be, buf);
  be->buffer_free(be, NULL);
  assert_int_equal(be->buffer_alloc(be, 0, &buf), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->buffer_alloc(be, SIZE_MAX - 8, &buf), BRISK_E_OUT_OF_MEMORY);
  ops_paths_close(&P);
}

/* W [n][k] of `type` from random floats, and its decoded values. */
static void *make_weight(test_rng *r, uint32_t type, int64_t n, int64_t k, double *decoded) {
  uint64_t row_bytes;
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &row_bytes));
  uint8_t *w = malloc((size_t)(row_bytes * n));
  float *row = malloc(k * sizeof *row), *back = malloc(k * sizeof *back);
  for (int64_t j = 0; j < n; j++) {
    for (int64_t i = 0; i < k; i++) row[i] = (float)(test_rng_normal(r) * 0.5);
    assert_int_equal(brisk_quantize_row(type, row, w + j * row_bytes, k), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, w + j * row_bytes, back, k), BRISK_OK);
    for (int64_t i = 0; i < k; i++) decoded[j * k + i] = back[i];
  }
  free(row), free(back);
  return w;
}

static void test_matmul(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("matmul_table");
  const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q6_K};
  ops_paths P = ops_paths_open(2);
  brisk_backend *be = P.be[P.n - 1];
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    uint32_t type = types[ti];
    int64_t bsz = brisk_dtype_get(type)->block_size;
    int64_t k = bsz * rand_int(&r, 1, bsz == 1 ? 300 : 3), n = rand_int(&r, 1, 70);
    int64_t m = rand_int(&r, 1, 9);
    double *wd = malloc((size_t)(n * k) * sizeof *wd);
    void *w = make_weight(&r, type, n, k, wd);
    float *x = rand_floats(&r, (size_t)(m * k), 1), *y = malloc((size_t)(m * n) * sizeof *y);
    assert_int_equal(be->matmul(be, type, w, n, k, x, m, y), BRISK_OK);
    /* Quantized weights need x quantized into the backend's kept workspace. */
    if (brisk_dtype_get(type)->quantized) assert_true(brisk_backend_cpu_workspace_bytes(be) > 0);
    double xmax = 0;
    for (int64_t i = 0; i < m * k; i++) xmax = fmax(xmax, fabs(x[i]));
    for (int64_t a = 0; a < m; a++) {
      for (int64_t j = 0; j < n; j++) {
        double want = 0, abs_sum = 0, w_sum = 0;
        for (int64_t i = 0; i < k; i++) {
          want += x[a * k + i] * wd[j * k + i];
          abs_sum += fabs(x[a * k + i] * wd[j * k + i]);
          w_sum += fabs(wd[j * k + i]);
        }
        /* Float weights: float accumulation (1e-5 of sum |x w|). Other
         * types may quantize x to 8 bits per block (error <= max|x| / 254
         * per element), so allow max|x| / 127 per unit of |w|. */
        double tol = 1e-5 * abs_sum + (type == BRISK_DTYPE_F32 ? 0 : xmax / 127 * w_sum);
        if (!(fabs(y[a * n + j] - want) <= tol)) {
          fprintf(stderr, "matmul %s [%lld][%lld] x [%lld]: y[%lld][%lld] = %g, want %g (tol %g)\n",
                  brisk_dtype_name(type), (long long)n, (long long)k, (long long)m, (long long)a,
                  (long long)j, y[a * n + j], want, tol);
          fail();
        }
      }
    }
    free(wd), free(w), free(x), free(y);
  }
  assert_int_equal(be->matmul(be, BRISK_DTYPE_Q8_0, NULL, 4, 33, NULL, 1, NULL),
                   BRISK_E_INVALID_ARGUMENT); /* 33 is not a multiple of 32 */
  assert_int_equal(be->matmul(be, BRISK_DTYPE_F32, NULL, -1, 4, NULL, 1, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

/* The workspace is allocated on first need; its failure is clean. */
typedef struct mm_ctx {
  void *w;
  float *x, *y;
} mm_ctx;

static brisk_status matmul_fresh(void *p) {
  mm_ctx *c = p;
  brisk_backend *be = NULL;
  brisk_status st = brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be);
  if (st != BRISK_OK) return st;
  st = be->matmul(be, BRISK_DTYPE_Q8_0, c->w, 8, 64, c->x, 4, c->y);
  brisk_backend_free(be);
  return st;
}

/* The backend's ISA choice reaches the matmul: a SCALAR backend gives the
 * scalar kernels' bits, an AVX2 one the AVX2 kernels' bits. */
static void test_matmul_follows_isa(void **state) {
  (void)state;
  if (brisk_cpu_isa_level() < BRISK_ISA_AVX2 || brisk_isa_is_neon(brisk_cpu_isa_level()))
    SKIP_BECAUSE("no AVX2 on this machine (or BRISK_CPU_ISA=scalar): only the scalar kernels run "
                 "(the NEON kernels give the scalar bits: backend_matmul_neon)");
  test_rng r = test_rng_seeded("matmul_isa");
  enum { N = 37, K = 96, M = 3 };
  float w[N * K], x[M * K], want[2][M * N], got[M * N];
  for (int i = 0; i < N * K; i++) w[i] = (float)test_rng_normal(&r);
  for (int i = 0; i < M * K; i++) x[i] = (float)test_rng_normal(&r);
  unsigned char wq[N * (K / 32) * 34]; /* Q8_0: 34 bytes per 32 values */
  for (int row = 0; row < N; row++)
    assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q8_0, w + row * K, wq + row * (K / 32) * 34, K),
                     BRISK_OK);
  for (int avx = 0; avx < 2; avx++)
    assert_int_equal(
        brisk_cpu_matmul_ex(NULL, avx, BRISK_DTYPE_Q8_0, wq, N, K, x, M, want[avx], NULL, 0),
        BRISK_OK);
  /* The two kernel sets sum in different orders, so their bits differ. */
  assert_true(memcmp(want[0], want[1], sizeof got) != 0);
  const brisk_cpu_isa isas[2] = {BRISK_CPU_ISA_SCALAR, BRISK_CPU_ISA_AVX2};
  for (int avx = 0; avx < 2; avx++) {
    brisk_backend *be = NULL;
    assert_int_equal(brisk_backend_cpu_create(NULL, isas[avx], &be), BRISK_OK);
    assert_int_equal(be->matmul(be, BRISK_DTYPE_Q8_0, wq, N, K, x, M, got), BRISK_OK);
    assert_memory_equal(got, want[avx], sizeof got);
    brisk_backend_free(be);
  }
}

static void test_matmul_out_of_memory(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("matmul_oom");
  double wd[8 * 64];
  mm_ctx c = {make_weight(&r, BRISK_DTYPE_Q8_0, 8, 64, wd), rand_floats(&r, 4 * 64, 1),
              malloc(4 * 8 * sizeof(float))};
  test_every_allocation_fails(matmul_fresh, &c);
  free(c.w), free(c.x), free(c.y);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_paths),
      cmocka_unit_test(test_create_out_of_memory),
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_matmul_out_of_memory),
      cmocka_unit_test(test_matmul_follows_isa),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
