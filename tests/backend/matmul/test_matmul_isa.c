/* The kernel levels of the CPU matmul (core/cpu.h): feature detection and
 * the BRISK_CPU_ISA / set_isa caps; the AVX-VNNI kernels (the packed
 * layouts) against the AVX2 ones bit for bit; and the AVX-512 VNNI kernels (the packed
 * layouts of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k) against
 * the AVX2 ones (bit for bit: same exact integer block sums, same float
 * steps) and against a float64 reference, tile by tile and through the
 * driver; the float-weight kernels against the reference and across the
 * GEMV / GEMM paths. On a machine without AVX-512 F/BW/VL/VNNI (or whose OS does not
 * save the ZMM state) the AVX-512 tests skip with a message; the kernels
 * are still compiled. */
#include "test_support.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/mm_internal.h"
#include "backend/cpu/matmul/pack.h"
#include "backend/cpu/ops/cpu_backend.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t r8_types[] = {
    BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0,
    BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K,
};
#define N_R8 (sizeof r8_types / sizeof *r8_types)

static bool have_avx512(void) {
  return brisk_cpu_isa_level() >= BRISK_ISA_AVX512 && !brisk_isa_is_neon(brisk_cpu_isa_level());
}

#define NEED_AVX512()                                                                              \
  do {                                                                                             \
    if (!have_avx512())                                                                            \
      SKIP_BECAUSE("AVX-512 kernels not run: this machine (or BRISK_CPU_ISA=%s) gives level %s",   \
                   getenv("BRISK_CPU_ISA") ? getenv("BRISK_CPU_ISA") : "unset",                    \
                   brisk_isa_name(brisk_cpu_isa_level()));                                         \
  } while (0)

/* Detection is consistent, the caps order as documented. */
static void test_levels(void **state) {
  (void)state;
  const brisk_cpu_features *f = brisk_cpu();
  const brisk_isa_level det = brisk_cpu_isa_detected();
  brisk_isa_level want = BRISK_ISA_SCALAR;
  if (f->avx2 && f->fma && f->f16c) want = f->avxvnni ? BRISK_ISA_AVXVNNI : BRISK_ISA_AVX2;
  if (want && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) want = BRISK_ISA_AVX512;
  if (f->neon) want = brisk_cpu_isa_detected(); /* aarch64: backend_matmul_neon checks it */
  assert_int_equal(det, want);
  /* AVX-512 subsets imply the foundation (each needs the ZMM state). */
  if (f->avx512bw || f->avx512vl || f->avx512vnni || f->avx512bf16) assert_true(f->avx512f);
  if (f->avx512f || f->avxvnni) assert_true(f->avx2);
  fprintf(stderr,
          "cpu: avx2 %d fma %d f16c %d avxvnni %d avx512f %d bw %d vl %d vnni %d bf16 %d; "
          "detected %s, level %s\n",
          f->avx2, f->fma, f->f16c, f->avxvnni, f->avx512f, f->avx512bw, f->avx512vl, f->avx512vnni,
          f->avx512bf16, brisk_isa_name(det), brisk_isa_name(brisk_cpu_isa_level()));
  /* BRISK_CPU_ISA's rule: the lower of the two; unknown strings ignored. */
  for (int d = BRISK_ISA_SCALAR; d <= BRISK_ISA_AVX512; d++) {
    const brisk_isa_level l = (brisk_isa_level)d;
    assert_int_equal(brisk_isa_capped(l, NULL), l);
    assert_int_equal(brisk_isa_capped(l, ""), l);
    assert_int_equal(brisk_isa_capped(l, "AVX512x"), l);
    assert_int_equal(brisk_isa_capped(l, "scalar"), BRISK_ISA_SCALAR);
    assert_int_equal(brisk_isa_capped(l, "avx2"), l < BRISK_ISA_AVX2 ? l : BRISK_ISA_AVX2);
    assert_int_equal(brisk_isa_capped(l, "avxvnni"), l < BRISK_ISA_AVXVNNI ? l : BRISK_ISA_AVXVNNI);
    assert_int_equal(brisk_isa_capped(l, "avx512"), l);
  }
  assert_int_equal(brisk_cpu_isa_level(), brisk_isa_capped(det, getenv("BRISK_CPU_ISA")));
  assert_string_equal(brisk_isa_name(BRISK_ISA_AVX512), "avx512");
  assert_string_equal(brisk_isa_name(BRISK_ISA_AVXVNNI), "avxvnni");
  /* The matmul hooks cap, never raise. */
  const brisk_isa_level top = brisk_cpu_matmul_isa();
  assert_true(top <= brisk_cpu_isa_level());
  for (int c = BRISK_ISA_SCALAR; c <= BRISK_ISA_AVX512 && !brisk_isa_is_neon(top); c++) {
    brisk_cpu_matmul_set_isa((brisk_isa_level)c);
    assert_int_equal(brisk_cpu_matmul_isa(), c < (int)top ? c : (int)top);
  }
  brisk_cpu_matmul_force_scalar(true);
  assert_int_equal(brisk_cpu_matmul_isa(), BRISK_ISA_SCALAR);
  assert_false(brisk_cpu_matmul_uses_avx2());
  brisk_cpu_matmul_force_scalar(false);
  assert_int_equal(brisk_cpu_matmul_isa(), top);
  /* The backend: AVX512 exactly where the level allows it. */
  brisk_backend *be = NULL;
  const brisk_status st = brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AVX512, &be);
  assert_int_equal(st, det == BRISK_ISA_AVX512 ? BRISK_OK : BRISK_E_UNSUPPORTED);
  if (st == BRISK_OK) assert_string_equal(be->name, "cpu-avx512");
  brisk_backend_free(be);
  be = NULL;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be), BRISK_OK);
  char name[32];
  snprintf(name, sizeof name, "cpu-%s", brisk_isa_name(brisk_cpu_isa_level()));
  assert_string_equal(be->name, name);
  brisk_backend_free(be);
  /* Every packed 32-element type has an AVX-512 kernel in an x86-64 build. */
#if defined(__x86_64__) && defined(__GNUC__)
  for (size_t t = 0; t < N_R8; t++)
    assert_non_null(brisk_mm_avx512_tile(r8_types[t] | BRISK_DTYPE_PACKED_R8));
#endif
}

/* n rows of k elements of `base`, packed: quantizer output or (raw) random
 * bytes with finite fp16 scales, which reach every level (q8_0's -128 too). */
static uint8_t *make_packed(test_rng *rng, uint32_t base, int64_t n, int64_t k, bool raw,
                            float *deq) {
  uint64_t rb;
  assert_true(brisk_dtype_row_bytes(base, (uint64_t)k, &rb));
  const brisk_dtype_info *info = brisk_dtype_get(base);
  uint8_t *q = malloc((size_t)rb * (size_t)n);
  float *row = malloc((size_t)k * sizeof(float));
  for (int64_t j = 0; j < n; j++) {
    uint8_t *qr = q + (size_t)j * rb;
    if (raw) {
      for (uint64_t b = 0; b < rb; b++) qr[b] = (uint8_t)test_rng_u64(rng);
      /* the fp16 fields: d (and m / dmin) at 0 (and 2), q6_k's d at 208 */
      const int nf = base == BRISK_DTYPE_Q8_0 || base == BRISK_DTYPE_Q4_0 ||
                             base == BRISK_DTYPE_Q5_0 || base == BRISK_DTYPE_Q6_K
                         ? 1
                         : 2;
      const size_t at = base == BRISK_DTYPE_Q6_K ? 208 : 0;
      for (int64_t blk = 0; blk < k / (int64_t)info->block_size; blk++)
        for (int f = 0; f < nf; f++) {
          const uint16_t h = brisk_f32_to_f16((float)test_rng_uniform(rng, -1, 1));
          memcpy(qr + (size_t)blk * info->type_size + at + 2 * (size_t)f, &h, 2);
        }
    } else {
      const double scale = test_rng_uniform(rng, 0.01, 1.0);
      for (int64_t l = 0; l < k; l++) row[l] = (float)(scale * test_rng_normal(rng));
      assert_int_equal(brisk_quantize_row(base, row, qr, k), BRISK_OK);
    }
    if (deq) assert_int_equal(brisk_dequantize_row(base, qr, deq + j * k, k), BRISK_OK);
  }
  assert_int_equal(brisk_cpu_pack(base | BRISK_DTYPE_PACKED_R8, q, n, k), BRISK_OK);
  free(row);
  return q;
}

static float *make_x(test_rng *rng, int64_t m, int64_t k, bool extreme) {
  float *x = malloc((size_t)(m * k) * sizeof(float));
  for (int64_t i = 0; i < m; i++) {
    const double scale = pow(10.0, test_rng_uniform(rng, -2, 1));
    for (int64_t l = 0; l < k; l++) /* extreme: every element quantizes to +-127 */
      x[i * k + l] =
          extreme ? (test_rng_u64(rng) & 1 ? 2.0f : -2.0f) : (float)(scale * test_rng_normal(rng));
  }
  return x;
}

/* Each tile shape of the packed kernels (G = 1..4 groups against one row,
 * one or two groups against 1..4 rows; with and without the GEMV
 * prefetch), called directly: the AVX-512 kernel writes the AVX2 kernel's
 * bits. */
static void tiles_match_avx2(bool vnni) {
  test_rng rng = test_rng_seeded("matmul_isa_tiles");
  for (size_t t = 0; t < N_R8; t++) {
    const uint32_t type = r8_types[t] | BRISK_DTYPE_PACKED_R8;
    const int64_t bs = brisk_dtype_get(r8_types[t])->block_size;
    const int64_t ks[] = {bs, 2 * bs, 3 * bs, 2048}; /* 1, 2, 3 and 64 or 8 blocks */
    const brisk_mm_act act = brisk_mm_act_format(type);
    const brisk_mm_tile_fn f2 = brisk_mm_avx2_tile(type);
    const brisk_mm_tile_fn f5 = vnni ? brisk_mm_avxvnni_tile(type) : brisk_mm_avx512_tile(type);
    assert_non_null(f2);
    assert_non_null(f5);
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (int raw = 0; raw < 2; raw++)
        for (int extreme = 0; extreme < 2; extreme++) {
          const int64_t k = ks[ki], n = 32, m = 4;
          uint64_t rb;
          assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &rb));
          uint8_t *w = make_packed(&rng, r8_types[t], n, k, raw, NULL);
          float *x = make_x(&rng, m, k, extreme);
          const size_t xs = brisk_mm_act_row_bytes(act, k);
          uint8_t *xq = malloc(xs * (size_t)m);
          for (int64_t r = 0; r < m; r++) brisk_mm_scalar_act(act)(x + r * k, xq + r * xs, k);
          /* G = 1..4 x R = 1 (both kernels), G = 1 x R = 2..4 (both), G = 2 x R = 2..4
           * (AVX-512 only: against the AVX2 kernel's G = 1 tiles, one group at a time) */
          for (int shape = 0; shape < (vnni ? 7 : 10); shape++)
            for (int pf = 0; pf < 2; pf++) {
              const int nw = shape < 4 ? 8 * (shape + 1) : shape < 7 ? 8 : 16;
              const int nx = shape < 4 ? 1 : shape < 7 ? shape - 2 : shape - 5;
              float y2[4 * 32], y5[4 * 32];
              memset(y2, 0, sizeof y2);
              memset(y5, 0xff, sizeof y5);
              brisk_mm_tile tile = {.k = k,
                                    .w = w,
                                    .w_stride = (size_t)rb,
                                    .x = xq,
                                    .x_stride = xs,
                                    .y_stride = 32,
                                    .prefetch = pf};
              tile.y = y2;
              const int step = nx == 1 ? nw : 8; /* AVX2: G = 1 when R > 1 */
              for (int g0 = 0; g0 < nw; g0 += step) {
                tile.w = w + (size_t)g0 * (size_t)rb;
                tile.y = y2 + g0;
                f2(&tile, step, nx);
              }
              tile.w = w;
              tile.y = y5;
              f5(&tile, nw, nx);
              for (int r = 0; r < nx; r++)
                if (memcmp(y2 + 32 * r, y5 + 32 * r, (size_t)nw * sizeof(float)) != 0) {
                  fprintf(stderr, "%s k=%lld raw=%d extreme=%d n_w=%d n_x=%d: row %d differs\n",
                          brisk_dtype_name(type), (long long)k, raw, extreme, nw, nx, r);
                  fail();
                }
            }
          free(xq);
          free(x);
          free(w);
        }
  }
}

static void test_tiles_match_avx2(void **state) {
  (void)state;
  NEED_AVX512();
  tiles_match_avx2(false);
}

/* The AVX-VNNI kernels the same way (AVX2 tile shapes), and through the
 * driver at the AVXVNNI level against AVX2, GEMV and GEMM. */
static void test_vnni_matches_avx2(void **state) {
  (void)state;
  if (!brisk_cpu()->avxvnni || brisk_cpu_isa_level() < BRISK_ISA_AVXVNNI)
    SKIP_BECAUSE("AVX-VNNI kernels not run: this machine (or BRISK_CPU_ISA) gives level %s%s",
                 brisk_isa_name(brisk_cpu_isa_level()),
                 brisk_cpu()->avxvnni ? "" : ", no AVX-VNNI");
  tiles_match_avx2(true);
  test_rng rng = test_rng_seeded("matmul_isa_vnni_driver");
  for (size_t t = 0; t < N_R8; t++) {
    const uint32_t type = r8_types[t] | BRISK_DTYPE_PACKED_R8;
    const int64_t n = 67, k = 512, m = 9;
    uint8_t *w = make_packed(&rng, r8_types[t], n, k, t % 2 == 1, NULL);
    float *x = make_x(&rng, m, k, false);
    float y2[9 * 67], yv[9 * 67];
    for (int64_t mm = 1; mm <= m; mm += m - 1) {
      brisk_cpu_matmul_set_isa(BRISK_ISA_AVX2);
      assert_int_equal(brisk_cpu_matmul(NULL, type, w, n, k, x, mm, y2, NULL, 0), BRISK_OK);
      brisk_cpu_matmul_set_isa(BRISK_ISA_AVXVNNI);
      assert_int_equal(brisk_cpu_matmul(NULL, type, w, n, k, x, mm, yv, NULL, 0), BRISK_OK);
      assert_memory_equal(y2, yv, (size_t)(mm * n) * sizeof(float));
    }
    free(x);
    free(w);
  }
  brisk_cpu_matmul_force_scalar(false);
}

/* Through the driver at both levels (GEMV and GEMM, whole groups and a short
 * tail, 1 and 3 threads): the same bits, and within the float64 bound of
 * test_matmul.c (activation rounding plus float32 steps). */
static void test_driver_matches_avx2(void **state) {
  (void)state;
  NEED_AVX512();
  test_rng rng = test_rng_seeded("matmul_isa_driver");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(3, &pool), BRISK_OK);
  const int64_t ns[] = {8, 23, 67, 136}, ms[] = {1, 3, 4, 5, 40};
  const int64_t k = 1024;
  for (size_t t = 0; t < N_R8; t++) {
    const uint32_t base = r8_types[t], type = base | BRISK_DTYPE_PACKED_R8;
    const int64_t ab = brisk_mm_act_format(base) == BRISK_MM_ACT_Q8K ? 256 : 32;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
      const int64_t n = ns[ni];
      float *deq = malloc((size_t)(n * k) * sizeof(float));
      uint8_t *w = make_packed(&rng, base, n, k, ni % 2 == 1, deq);
      for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
        const int64_t m = ms[mi];
        float *x = make_x(&rng, m, k, mi == 2);
        float *y2 = malloc((size_t)(m * n) * sizeof(float));
        float *y5 = malloc((size_t)(m * n) * sizeof(float));
        brisk_cpu_matmul_set_isa(BRISK_ISA_AVX2);
        assert_int_equal(brisk_cpu_matmul(pool, type, w, n, k, x, m, y2, NULL, 0), BRISK_OK);
        brisk_cpu_matmul_set_isa(BRISK_ISA_AVX512);
        assert_int_equal(brisk_cpu_matmul_isa(), BRISK_ISA_AVX512);
        assert_int_equal(brisk_cpu_matmul(mi % 2 ? pool : NULL, type, w, n, k, x, m, y5, NULL, 0),
                         BRISK_OK);
        assert_memory_equal(y2, y5, (size_t)(m * n) * sizeof(float));
        for (int64_t i = 0; i < m; i++) {
          const float *xr = x + i * k;
          for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0, aerr = 0;
            for (int64_t b = 0; b < k; b += ab) {
              double amax = 0;
              for (int64_t l = b; l < b + ab; l++) amax = fmax(amax, fabs(xr[l]));
              for (int64_t l = b; l < b + ab; l++) {
                const double wv = deq[j * k + l];
                ref += wv * xr[l];
                mag += fabs(wv) * (fabs(xr[l]) + amax / 254);
                aerr += fabs(wv) * amax / 254 * (1 + 1e-6);
              }
            }
            const double bound = aerr + 8 * (double)(k / ab + 16) * FLT_EPSILON * mag + 1e-30;
            if (!(fabs(y5[i * n + j] - ref) <= bound)) {
              fprintf(stderr, "%s n=%lld m=%lld y[%lld][%lld] = %.9g, reference %.9g\n",
                      brisk_dtype_name(type), (long long)n, (long long)m, (long long)i,
                      (long long)j, y5[i * n + j], ref);
              fail();
            }
          }
        }
        free(x);
        free(y2);
        free(y5);
      }
      free(w);
      free(deq);
    }
  }
  brisk_cpu_matmul_force_scalar(false);
  brisk_threadpool_free(pool);
}

/* The float-weight kernels at the AVX-512 level: within the float64 bound
 * (one float32 rounding per step, relative to sum |w| |x|), the GEMM
 * (chunked, m > 4) and GEMV (m <= 4) paths bit for bit the same on every
 * row, across thread counts, with k % 16 >= 8 (the half step), odd k (the
 * remainder) and k past the GEMM's 512-element chunks; and not the AVX2
 * kernels' bits everywhere (they sum in another order). F16 and BF16 run
 * their own kernels (mm_avx512_half.c): n = 67 leaves a panel of 3 rows and a GEMV
 * group of 3, k = 101 and 1031 a block and a 32-element step cut short,
 * m = 37 a micro-kernel call of 1 row. */
static void test_float_kernels(void **state) {
  (void)state;
  NEED_AVX512();
  test_rng rng = test_rng_seeded("matmul_isa_float");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(3, &pool), BRISK_OK);
  static const uint32_t types[] = {BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_BF16};
  const int64_t ks[] = {8, 24, 101, 520, 1031, 1048}, ns[] = {1, 5, 67};
  const int64_t m = 37;
  for (size_t t = 0; t < 3; t++) {
    const uint32_t type = types[t];
    const size_t es = brisk_dtype_get(type)->type_size;
    int64_t n_differ = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int64_t k = ks[ki], n = ns[ni];
        uint8_t *w = malloc((size_t)(n * k) * es);
        float *deq = malloc((size_t)(n * k) * sizeof(float));
        float *row = malloc((size_t)k * sizeof(float));
        for (int64_t j = 0; j < n; j++) {
          for (int64_t l = 0; l < k; l++) row[l] = (float)test_rng_normal(&rng);
          assert_int_equal(brisk_quantize_row(type, row, w + (size_t)(j * k) * es, k), BRISK_OK);
          assert_int_equal(brisk_dequantize_row(type, w + (size_t)(j * k) * es, deq + j * k, k),
                           BRISK_OK);
        }
        float *x = make_x(&rng, m, k, false);
        float *y = malloc((size_t)(m * n) * sizeof(float));
        float *y1 = malloc((size_t)(m * n) * sizeof(float));
        brisk_cpu_matmul_set_isa(BRISK_ISA_AVX512);
        assert_int_equal(brisk_cpu_matmul(pool, type, w, n, k, x, m, y, NULL, 0), BRISK_OK);
        assert_int_equal(brisk_cpu_matmul(NULL, type, w, n, k, x, m, y1, NULL, 0), BRISK_OK);
        assert_memory_equal(y, y1, (size_t)(m * n) * sizeof(float));
        for (int64_t i = 0; i + 4 <= m; i += 7) /* GEMV: 1 row, then 4 */
          for (int64_t rows = 1; rows <= 4; rows += 3) {
            assert_int_equal(brisk_cpu_matmul(pool, type, w, n, k, x + i * k, rows, y1, NULL, 0),
                             BRISK_OK);
            assert_memory_equal(y + i * n, y1, (size_t)(rows * n) * sizeof(float));
          }
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int64_t l = 0; l < k; l++) {
              ref += (double)deq[j * k + l] * x[i * k + l];
              mag += fabs((double)deq[j * k + l] * x[i * k + l]);
            }
            /* F16, BF16: serial chains over blocks of KC (mm_avx512_half.c). */
            const int64_t steps =
                type != BRISK_DTYPE_F32
                    ? (k < BRISK_MM_HALF_KC ? k : BRISK_MM_HALF_KC) + k / BRISK_MM_HALF_KC + 16
                    : k / 8 + 16;
            const double bound = (double)steps * FLT_EPSILON * mag + 1e-30;
            if (!(fabs(y[i * n + j] - ref) <= bound)) {
              fprintf(stderr, "%s k=%lld n=%lld: y[%lld][%lld] = %.9g, reference %.9g\n",
                      brisk_dtype_name(type), (long long)k, (long long)n, (long long)i,
                      (long long)j, y[i * n + j], ref);
              fail();
            }
          }
        brisk_cpu_matmul_set_isa(BRISK_ISA_AVX2);
        assert_int_equal(brisk_cpu_matmul(pool, type, w, n, k, x, m, y1, NULL, 0), BRISK_OK);
        for (int64_t i = 0; i < m * n; i++) n_differ += y[i] != y1[i];
        free(w);
        free(deq);
        free(row);
        free(x);
        free(y);
        free(y1);
      }
    fprintf(stderr, "%s: %lld outputs differ from the AVX2 kernels' (summation order)\n",
            brisk_dtype_name(type), (long long)n_differ);
    assert_true(n_differ > 0);
  }
  brisk_cpu_matmul_force_scalar(false);
  brisk_threadpool_free(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_tiles_match_avx2),
      cmocka_unit_test(test_vnni_matches_avx2),
      cmocka_unit_test(test_driver_matches_avx2),
      cmocka_unit_test(test_float_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
