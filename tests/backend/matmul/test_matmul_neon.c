/* The aarch64 NEON kernels of the CPU matmul (mm_neon*.c): level detection
 * and caps, and the kernels of the three builds (plain Advanced SIMD, sdot,
 * and sdot + smmla) against the scalar ones bit for bit (same exact integer
 * block sums, same float steps) for F32, F16, BF16, the 32-element types and
 * the K-types (q4_k, q5_k, q6_k), base and packed, through the
 * driver (GEMV and GEMM with odd activation and weight row counts, tail
 * rows, every thread count), plus each output against a float64 reference
 * of the same (dequantized, quantized-activation) arithmetic. On another architecture
 * the kernel tests skip with a message (the NEON code is not compiled
 * there). */
#include "test_support.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/mm_internal.h"
#include "backend/cpu/matmul/pack.h"
#include "backend/cpu/ops/cpu_backend.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t types[] = {
    BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
    BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
    BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K,
};
#define N_TYPES (sizeof types / sizeof *types)

static bool is_k(uint32_t type) {
  return type == BRISK_DTYPE_Q4_K || type == BRISK_DTYPE_Q5_K || type == BRISK_DTYPE_Q6_K;
}

#define NEED_NEON()                                                                                \
  do {                                                                                             \
    if (!brisk_isa_is_neon(brisk_cpu_isa_level()))                                                 \
      SKIP_BECAUSE("NEON kernels not run: this machine (or BRISK_CPU_ISA=%s) gives level %s",      \
                   getenv("BRISK_CPU_ISA") ? getenv("BRISK_CPU_ISA") : "unset",                    \
                   brisk_isa_name(brisk_cpu_isa_level()));                                         \
  } while (0)

/* Level names, caps across families, and what an aarch64 build detects. */
static void test_levels(void **state) {
  (void)state;
  assert_string_equal(brisk_isa_name(BRISK_ISA_NEON), "neon");
  assert_string_equal(brisk_isa_name(BRISK_ISA_NEON_DOTPROD), "dotprod");
  assert_string_equal(brisk_isa_name(BRISK_ISA_NEON_I8MM), "i8mm");
  for (int d = BRISK_ISA_NEON; d <= BRISK_ISA_NEON_I8MM; d++) {
    const brisk_isa_level l = (brisk_isa_level)d;
    assert_true(brisk_isa_is_neon(l));
    assert_int_equal(brisk_isa_capped(l, NULL), l);
    assert_int_equal(brisk_isa_capped(l, "scalar"), BRISK_ISA_SCALAR);
    assert_int_equal(brisk_isa_capped(l, "neon"), BRISK_ISA_NEON);
    assert_int_equal(brisk_isa_capped(l, "dotprod"),
                     l < BRISK_ISA_NEON_DOTPROD ? l : BRISK_ISA_NEON_DOTPROD);
    assert_int_equal(brisk_isa_capped(l, "i8mm"), l);
    /* the other family's names say nothing here, nor ours on x86 */
    assert_int_equal(brisk_isa_capped(l, "avx2"), l);
    assert_int_equal(brisk_isa_capped(BRISK_ISA_AVX512, "dotprod"), BRISK_ISA_AVX512);
  }
  assert_false(brisk_isa_is_neon(BRISK_ISA_AVX512));
  const brisk_cpu_features *f = brisk_cpu();
  fprintf(stderr, "cpu: neon %d dotprod %d i8mm %d; detected %s, level %s\n", f->neon, f->dotprod,
          f->i8mm, brisk_isa_name(brisk_cpu_isa_detected()), brisk_isa_name(brisk_cpu_isa_level()));
#if defined(__aarch64__)
  assert_true(f->neon);
  assert_int_equal(brisk_cpu_isa_detected(), f->i8mm && f->dotprod ? BRISK_ISA_NEON_I8MM
                                             : f->dotprod          ? BRISK_ISA_NEON_DOTPROD
                                                                   : BRISK_ISA_NEON);
  const brisk_isa_level levels[] = {BRISK_ISA_NEON, BRISK_ISA_NEON_DOTPROD, BRISK_ISA_NEON_I8MM};
  for (size_t t = 0; t < N_TYPES; t++)
    for (size_t l = 0; l < sizeof levels / sizeof *levels; l++) {
      assert_non_null(brisk_mm_neon_tile(types[t], levels[l]));
      if (brisk_dtype_get(types[t])->quantized)
        assert_non_null(brisk_mm_neon_tile(types[t] | BRISK_DTYPE_PACKED_R8, levels[l]));
    }
  /* smmla kernels at I8MM only, for q8_0 and q4_0 */
  assert_ptr_not_equal(brisk_mm_neon_tile(BRISK_DTYPE_Q8_0, BRISK_ISA_NEON_I8MM),
                       brisk_mm_neon_tile(BRISK_DTYPE_Q8_0, BRISK_ISA_NEON_DOTPROD));
  assert_ptr_not_equal(
      brisk_mm_neon_tile(BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8, BRISK_ISA_NEON_I8MM),
      brisk_mm_neon_tile(BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8, BRISK_ISA_NEON_DOTPROD));
  /* The x86 backends do not exist here; AUTO names the NEON level. */
  brisk_backend *be = NULL;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AVX2, &be), BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be), BRISK_OK);
  char name[32];
  snprintf(name, sizeof name, "cpu-%s", brisk_isa_name(brisk_cpu_isa_level()));
  assert_string_equal(be->name, name);
  brisk_backend_free(be);
  /* Packing follows the kernels: every quantized type with a packed layout
   * has NEON kernels for it, so it packs. */
  if (brisk_isa_is_neon(brisk_cpu_isa_level())) {
    assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_0, 64),
                     BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8);
    assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_K, 64),
                     BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8);
  }
#else
  assert_false(f->neon || f->dotprod || f->i8mm);
  assert_null(brisk_mm_neon_tile(BRISK_DTYPE_F32, BRISK_ISA_NEON));
#endif
}

/* n rows of k elements of `type` (quantizer output of random normals with a
 * random scale per row, or for raw quantized data random level bytes with
 * finite fp16 scales: every level, q8_0's -128 too). */
static uint8_t *make_w(test_rng *rng, uint32_t type, int64_t n, int64_t k, bool raw) {
  uint64_t rb;
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &rb));
  const brisk_dtype_info *info = brisk_dtype_get(type);
  uint8_t *w = malloc((size_t)rb * (size_t)n + 1);
  float *row = malloc((size_t)k * sizeof(float));
  for (int64_t j = 0; j < n; j++) {
    uint8_t *wr = w + (size_t)j * rb;
    const double scale = test_rng_uniform(rng, 0.01, 1.0);
    for (int64_t l = 0; l < k; l++) row[l] = (float)(scale * test_rng_normal(rng));
    if (raw && is_k(type)) { /* random levels, scales and mins; finite d (and dmin) */
      for (uint64_t b = 0; b < rb; b++) wr[b] = (uint8_t)test_rng_u64(rng);
      const size_t d_at = type == BRISK_DTYPE_Q6_K ? offsetof(brisk_block_q6_k, d) : 0;
      const int nf = type == BRISK_DTYPE_Q6_K ? 1 : 2; /* d, dmin */
      for (int64_t blk = 0; blk < k / BRISK_QK_K; blk++)
        for (int f = 0; f < nf; f++) {
          const uint16_t h = brisk_f32_to_f16((float)test_rng_uniform(rng, -1, 1));
          memcpy(wr + (size_t)blk * info->type_size + d_at + 2 * (size_t)f, &h, 2);
        }
    } else if (raw && info->quantized) {
      for (uint64_t b = 0; b < rb; b++) wr[b] = (uint8_t)test_rng_u64(rng);
      const int nf = type == BRISK_DTYPE_Q4_1 || type == BRISK_DTYPE_Q5_1 ? 2 : 1;
      for (int64_t blk = 0; blk < k / 32; blk++)
        for (int f = 0; f < nf; f++) {
          const uint16_t h = brisk_f32_to_f16((float)test_rng_uniform(rng, -1, 1));
          memcpy(wr + (size_t)blk * info->type_size + 2 * (size_t)f, &h, 2);
        }
    } else {
      assert_int_equal(brisk_quantize_row(type, row, wr, k), BRISK_OK);
    }
  }
  free(row);
  return w;
}

/* The activation rows as the kernels see them, in float64: for the
 * quantized types the 8-bit levels times the block scale
 * (brisk_mm_quantize_q8_scalar, or Q8_K super-blocks for the K-types), else
 * as given. */
static double *ref_x(uint32_t base, const float *x, int64_t m, int64_t k) {
  double *xd = malloc((size_t)(m * k) * sizeof(double));
  brisk_mm_q8 *xq = malloc((size_t)(k / 32 + 1) * sizeof *xq);
  brisk_block_q8_k *xk = malloc((size_t)(k / BRISK_QK_K + 1) * sizeof *xk);
  const bool q = brisk_dtype_get(base)->quantized, kq = is_k(base);
  for (int64_t r = 0; r < m; r++) {
    if (kq)
      brisk_quantize_row_q8_k(x + r * k, xk, k);
    else if (q)
      brisk_mm_quantize_q8_scalar(x + r * k, xq, k);
    for (int64_t i = 0; i < k; i++)
      xd[r * k + i] = kq  ? (double)xk[i / BRISK_QK_K].d * xk[i / BRISK_QK_K].qs[i % BRISK_QK_K]
                      : q ? (double)xq[i / 32].d * xq[i / 32].qs[i % 32]
                          : (double)x[r * k + i];
  }
  free(xk);
  free(xq);
  return xd;
}

/* One output of the float64 reference (dequantized weights), and the sum of
 * the products' magnitudes for the error bound. */
static double ref_dot(const float *wrow, const double *x, int64_t k, double *mag) {
  double s = 0, a = 0;
  for (int64_t i = 0; i < k; i++) {
    s += (double)wrow[i] * x[i];
    a += fabs((double)wrow[i] * x[i]);
  }
  *mag = a;
  return s;
}

/* The driver at `level` against the scalar level on the same weights (base
 * and packed) and activations: the same bits, for GEMV (m <= 4) and GEMM,
 * n with a tail of rows outside the packed groups, 1 and 2 threads. */
static void driver_matches_scalar(brisk_isa_level level) {
  test_rng rng = test_rng_seeded(level == BRISK_ISA_NEON           ? "matmul_neon"
                                 : level == BRISK_ISA_NEON_DOTPROD ? "matmul_neon_dot"
                                                                   : "matmul_neon_i8mm");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(2, &pool), BRISK_OK);
  /* Small sizes (the suite also runs emulated): one block, and 9 blocks
   * with odd float k (K-types: one and two super-blocks); a whole group and
   * groups plus a tail (an odd weight row); GEMV with one, an odd number
   * and pairs of activation rows, and GEMM (tiles of 4 and a single row). */
  const int64_t ks[] = {32, 264};
  const int64_t ns[] = {8, 37};
  const int64_t ms[] = {1, 3, 4, 9};
  for (size_t t = 0; t < N_TYPES; t++)
    for (int packed = 0; packed < 2; packed++) {
      const uint32_t base = types[t];
      const bool quant = brisk_dtype_get(base)->quantized;
      if (packed && !quant) continue;
      const uint32_t type = packed ? base | BRISK_DTYPE_PACKED_R8 : base;
      fprintf(stderr, "%s at %s\n", brisk_dtype_name(type), brisk_isa_name(level));
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int64_t blk = is_k(base) ? BRISK_QK_K : 32;
        const int64_t k =
            quant ? (ks[ki] + blk - 1) / blk * blk : ks[ki] + (int64_t)ki; /* odd k too */
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
          for (int raw = 0; raw < 2; raw++) {
            const int64_t n = ns[ni];
            uint8_t *w = make_w(&rng, base, n, k, raw);
            uint64_t rb;
            assert_true(brisk_dtype_row_bytes(base, (uint64_t)k, &rb));
            float *wd = malloc((size_t)(n * k) * sizeof(float));
            for (int64_t j = 0; j < n; j++)
              assert_int_equal(brisk_dequantize_row(base, w + (size_t)j * rb, wd + j * k, k),
                               BRISK_OK);
            if (packed) assert_int_equal(brisk_cpu_pack(type, w, n, k), BRISK_OK);
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
              const int64_t m = ms[mi];
              float *x = malloc((size_t)(m * k) * sizeof(float));
              for (int64_t i = 0; i < m * k; i++) x[i] = (float)test_rng_normal(&rng);
              float *want = malloc((size_t)(m * n) * sizeof(float));
              float *got = malloc((size_t)(m * n) * sizeof(float));
              assert_int_equal(
                  brisk_cpu_matmul_at(NULL, BRISK_ISA_SCALAR, type, w, n, k, x, m, want, NULL, 0),
                  BRISK_OK);
              for (int th = 0; th < 2; th++) {
                memset(got, 0xff, (size_t)(m * n) * sizeof(float));
                assert_int_equal(
                    brisk_cpu_matmul_at(th ? pool : NULL, level, type, w, n, k, x, m, got, NULL, 0),
                    BRISK_OK);
                if (memcmp(got, want, (size_t)(m * n) * sizeof(float)) != 0) {
                  for (int64_t i = 0; i < m * n; i++)
                    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                      fprintf(stderr,
                              "%s (%s) k %lld n %lld m %lld raw %d threads %d: y[%lld] = %.9g, "
                              "scalar %.9g\n",
                              brisk_dtype_name(type), brisk_isa_name(level), (long long)k,
                              (long long)n, (long long)m, raw, th + 1, (long long)i, got[i],
                              want[i]);
                      break;
                    }
                  fail();
                }
              }
              /* Against float64: float rounding of the sums only. */
              double *xd = ref_x(base, x, m, k);
              for (int64_t r = 0; r < m; r++)
                for (int64_t c = 0; c < n; c++) {
                  double mag;
                  const double ref = ref_dot(wd + c * k, xd + r * k, k, &mag);
                  const double err = fabs((double)got[r * n + c] - ref);
                  if (!(err <= 1e-5 * mag + 1e-30)) {
                    fprintf(stderr, "%s k %lld: y = %.9g, float64 %.9g (|w||x| %.3g)\n",
                            brisk_dtype_name(type), (long long)k, got[r * n + c], ref, mag);
                    fail();
                  }
                }
              free(xd);
              free(x);
              free(want);
              free(got);
            }
            free(wd);
            free(w);
          }
      }
    }
  brisk_threadpool_free(pool);
}

static void test_neon_matches_scalar(void **state) {
  (void)state;
  NEED_NEON();
  driver_matches_scalar(BRISK_ISA_NEON);
}

static void test_dotprod_matches_scalar(void **state) {
  (void)state;
  NEED_NEON();
  if (brisk_cpu_isa_level() < BRISK_ISA_NEON_DOTPROD)
    SKIP_BECAUSE("sdot kernels not run: the CPU (or BRISK_CPU_ISA) gives level %s",
                 brisk_isa_name(brisk_cpu_isa_level()));
  driver_matches_scalar(BRISK_ISA_NEON_DOTPROD);
}

static void test_i8mm_matches_scalar(void **state) {
  (void)state;
  NEED_NEON();
  if (brisk_cpu_isa_level() < BRISK_ISA_NEON_I8MM)
    SKIP_BECAUSE("smmla kernels not run: the CPU (or BRISK_CPU_ISA) gives level %s",
                 brisk_isa_name(brisk_cpu_isa_level()));
  driver_matches_scalar(BRISK_ISA_NEON_I8MM);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_neon_matches_scalar),
      cmocka_unit_test(test_dotprod_matches_scalar),
      cmocka_unit_test(test_i8mm_matches_scalar),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
