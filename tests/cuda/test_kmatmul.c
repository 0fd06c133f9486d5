/* The matmul kernels (kernels/matmul.cu) through the SIMT emulation, against
 * a float64 product of the dequantized weights and against the CPU backend's
 * matmul, on fresh random inputs: every regrouped type, odd row counts, odd
 * k for the plain types, batches of 1..19 activation rows (several GEMV row
 * groups), tile dequantization at odd row offsets, and the SIMT GEMM.
 *
 * Tolerances (u = 2^-24, A = sum_i |w_i x_i| in float64):
 *  - GEMV: the dequantized weights are exact (lib/quant's values bit for
 *    bit), so the error is the fp32 summation: each lane chains at most
 *    k/32 + 64 fused multiply-adds, then 5 butterfly additions, so
 *    |y - ref| <= (k/32 + 70) u A (the classic gamma_n bound).
 *  - CPU backend: it quantizes x to 8 bits per block (Q8_0 for the 32-element
 *    types, Q8_K for the K types) before an integer dot product, which moves
 *    each x_i by at most one step amax(block)/127, plus its own fp32 sums
 *    (<= k u A): |y - cpu| <= GEMV bound + k u A + sum_i |w_i| step_i.
 *  - SIMT GEMM: one fused multiply-add chain of k per output: (k + 2) u A.
 *  - the prefill route (BF16 tile x BF16 activations): each product moves by
 *    at most 2^-7 + 2^-16 relative from the two roundings, plus the chain.
 *  - tile dequantization and casts: bitwise (brisk_f32_to_f16/bf16 of the
 *    exact values). */
#include "cuda_test.h"

#include "backend/backend.h"
#include "backend/cpu/ops/cpu_backend.h"
#include "core/dtype.h"
#include "core/half.h"
#include "kernels/matmul.h"
#include "kernels/regroup.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t types[] = {
    BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
    BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
    BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K,
};

/* "Device" memory of the emulation: host memory, 64-byte aligned. */
static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  /* Exact sizes, so that the sanitizers see any access past the end. */
  assert_int_equal(posix_memalign(&p, 64, bytes ? bytes : 1), 0);
  return p;
}

static int64_t rand_range(test_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(test_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

typedef struct wcase {
  uint32_t type;
  int64_t n, k;
  uint64_t row_bytes;
  uint8_t *gguf; // [n][row_bytes]
  float *wd;     // [n][k] dequantized
  uint8_t *reg;  // regrouped
} wcase;

static void make_weights(wcase *c, uint32_t type, int64_t n, int64_t k, test_rng *r) {
  c->type = type, c->n = n, c->k = k;
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &c->row_bytes));
  float *w = malloc((size_t)(n * k) * sizeof *w);
  for (int64_t i = 0; i < n * k; i++) w[i] = (float)(test_rng_normal(r) * 0.5);
  c->gguf = malloc((size_t)(n * c->row_bytes));
  c->wd = malloc((size_t)(n * k) * sizeof *c->wd);
  for (int64_t i = 0; i < n; i++) {
    assert_int_equal(brisk_quantize_row(type, w + i * k, c->gguf + i * c->row_bytes, k), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, c->gguf + i * c->row_bytes, c->wd + i * k, k),
                     BRISK_OK);
  }
  free(w);
  const size_t bytes = brisk_kregroup_bytes(type, n, k);
  assert_true(bytes > 0);
  c->reg = dev_alloc(bytes);
  assert_int_equal(brisk_kregroup(type, c->gguf, n, k, c->reg), 0);
}

static void free_weights(wcase *c) { free(c->gguf), free(c->wd), free(c->reg); }

/* Per element of an activation row, the step of the CPU backend's 8-bit
 * quantization of its block (Q8_0 blocks of 32 for the 32-element weight
 * types, Q8_K blocks of 256 for the K types): amax(block) / 127; 0 for float
 * weights, whose activations stay float32. */
static void act_steps(uint32_t type, const float *x, int64_t k, double *step) {
  int64_t blk = 0;
  if (type == BRISK_DTYPE_Q8_0 || type == BRISK_DTYPE_Q4_0 || type == BRISK_DTYPE_Q4_1 ||
      type == BRISK_DTYPE_Q5_0 || type == BRISK_DTYPE_Q5_1)
    blk = 32;
  if (type == BRISK_DTYPE_Q4_K || type == BRISK_DTYPE_Q5_K || type == BRISK_DTYPE_Q6_K) blk = 256;
  for (int64_t b = 0; b < k; b += blk ? blk : k) {
    double amax = 0;
    const int64_t e = blk ? b + blk : k;
    for (int64_t j = b; j < e; j++) amax = fabs(x[j]) > amax ? fabs(x[j]) : amax;
    for (int64_t j = b; j < e; j++) step[j] = blk ? amax / 127 : 0;
  }
}

static void check_gemv(brisk_backend *cpu, const wcase *c, int64_t m, test_rng *r) {
  const int64_t n = c->n, k = c->k;
  float *x = dev_alloc((size_t)(m * k) * sizeof *x);
  float *y = dev_alloc((size_t)(m * n) * sizeof *y), *y1 = dev_alloc((size_t)n * sizeof *y1);
  float *ycpu = malloc((size_t)(m * n) * sizeof *ycpu);
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)test_rng_normal(r);
  ASSERT_LAUNCH(brisk_kmatmul_gemv(c->type, c->reg, n, k, x, m, y, NULL));
  assert_int_equal(cpu->matmul(cpu, c->type, c->gguf, n, k, x, m, ycpu), BRISK_OK);
  const double u = ldexp(1, -24);
  double *step = malloc((size_t)k * sizeof *step);
  for (int64_t row = 0; row < m; row++) {
    act_steps(c->type, x + row * k, k, step);
    for (int64_t col = 0; col < n; col++) {
      const float *xr = x + row * k, *wr = c->wd + col * k;
      double ref = 0, abs = 0, quant = 0;
      for (int64_t i = 0; i < k; i++) {
        ref += (double)wr[i] * xr[i];
        abs += fabs((double)wr[i] * xr[i]);
        quant += fabs((double)wr[i]) * step[i];
      }
      const double got = y[row * n + col], tol = ((double)k / 32 + 70) * u * abs * 1.01 + 1e-30;
      if (!(fabs(got - ref) <= tol))
        fail_msg("%s n=%lld k=%lld m=%lld y[%lld][%lld] = %.9g, float64 %.9g (tol %.3g)",
                 brisk_dtype_name(c->type), (long long)n, (long long)k, (long long)m,
                 (long long)row, (long long)col, got, ref, tol);
      const double tol_cpu = tol + (double)k * u * abs * 1.01 + quant * 1.01;
      if (!(fabs(got - ycpu[row * n + col]) <= tol_cpu))
        fail_msg("%s n=%lld k=%lld m=%lld y[%lld][%lld] = %.9g, cpu %.9g (tol %.3g)",
                 brisk_dtype_name(c->type), (long long)n, (long long)k, (long long)m,
                 (long long)row, (long long)col, got, (double)ycpu[row * n + col], tol_cpu);
    }
  }
  free(step);
  /* A row's result does not depend on the rest of the batch: the last row
   * alone gives the same bits. */
  ASSERT_LAUNCH(brisk_kmatmul_gemv(c->type, c->reg, n, k, x + (m - 1) * k, 1, y1, NULL));
  assert_memory_equal(y1, y + (m - 1) * n, (size_t)n * sizeof *y1);
  free(x), free(y), free(y1), free(ycpu);
}

static void test_gemv_all_types(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmatmul_gemv");
  brisk_backend *cpu;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &cpu), BRISK_OK);
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const int64_t blk = brisk_dtype_get(types[t])->block_size;
    for (int rep = 0; rep < 2; rep++) {
      wcase c;
      const int64_t n = rand_range(&r, 1, 45) | 1;
      const int64_t k =
          blk == 1 ? rand_range(&r, 1, 300) : blk * rand_range(&r, 1, blk == 32 ? 24 : 4);
      make_weights(&c, types[t], n, k, &r);
      const int64_t ms[] = {1, rand_range(&r, 2, 8), rand_range(&r, 9, 19)};
      for (int i = 0; i < 3; i++) check_gemv(cpu, &c, ms[i], &r);
      free_weights(&c);
    }
  }
  brisk_backend_free(cpu);
}

static void test_dequant_tile(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmatmul_dequant_tile");
  const uint32_t outs[] = {BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_BF16};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const int64_t blk = brisk_dtype_get(types[t])->block_size;
    wcase c;
    const int64_t n = rand_range(&r, 3, 40);
    const int64_t k =
        blk == 1 ? rand_range(&r, 1, 200) : blk * rand_range(&r, 1, blk == 32 ? 9 : 3);
    make_weights(&c, types[t], n, k, &r);
    for (int o = 0; o < 3; o++) {
      const int64_t r0 = rand_range(&r, 0, n - 1), nr = rand_range(&r, 1, n - r0);
      const size_t elem = outs[o] == BRISK_DTYPE_F32 ? 4 : 2;
      uint8_t *tile = dev_alloc((size_t)(nr * k) * elem + 64);
      memset(tile, 0x5a, (size_t)(nr * k) * elem + 64);
      ASSERT_LAUNCH(brisk_kdequant_tile(c.type, c.reg, n, k, r0, nr, outs[o], tile, NULL));
      for (int64_t i = 0; i < nr * k; i++) {
        const float v = c.wd[r0 * k + i];
        if (elem == 4) {
          assert_memory_equal(tile + 4 * i, &v, 4);
        } else {
          uint16_t want = outs[o] == BRISK_DTYPE_F16 ? brisk_f32_to_f16(v) : brisk_f32_to_bf16(v),
                   got;
          memcpy(&got, tile + 2 * i, 2);
          if (got != want)
            fail_msg("%s -> %s elem %lld: %04x vs %04x", brisk_dtype_name(c.type),
                     brisk_dtype_name(outs[o]), (long long)i, got, want);
        }
      }
      for (size_t i = (size_t)(nr * k) * elem; i < (size_t)(nr * k) * elem + 64; i++)
        assert_int_equal(tile[i], 0x5a); /* nothing past the tile */
      free(tile);
    }
    free_weights(&c);
  }
}

static void test_cast(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmatmul_cast");
  const int64_t n = rand_range(&r, 1000, 3000);
  float *x = dev_alloc((size_t)n * sizeof *x);
  uint16_t *h = dev_alloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++)
    x[i] =
        i % 97 == 0 ? (float)ldexp(test_rng_normal(&r), -20) : (float)(test_rng_normal(&r) * 1e3);
  x[0] = INFINITY, x[1] = -0.0f, x[2] = 70000.0f, x[3] = NAN;
  ASSERT_LAUNCH(brisk_kcast_f32(BRISK_DTYPE_F16, x, n, h, NULL));
  for (int64_t i = 0; i < n; i++) assert_int_equal(h[i], brisk_f32_to_f16(x[i]));
  ASSERT_LAUNCH(brisk_kcast_f32(BRISK_DTYPE_BF16, x, n, h, NULL));
  for (int64_t i = 0; i < n; i++) assert_int_equal(h[i], brisk_f32_to_bf16(x[i]));
  assert_int_equal(brisk_kcast_f32(BRISK_DTYPE_Q8_0, x, n, h, NULL), 1);
  free(x), free(h);
}

/* Values stored in `type` (F32, F16 or BF16) and their floats. */
static void *rand_matrix(test_rng *r, uint32_t type, int64_t count, float *vals) {
  void *p = dev_alloc((size_t)count * 4);
  for (int64_t i = 0; i < count; i++) {
    const float v = (float)test_rng_normal(r);
    if (type == BRISK_DTYPE_F32) {
      ((float *)p)[i] = vals[i] = v;
    } else if (type == BRISK_DTYPE_F16) {
      ((uint16_t *)p)[i] = brisk_f32_to_f16(v);
      vals[i] = brisk_f16_to_f32(((uint16_t *)p)[i]);
    } else {
      ((uint16_t *)p)[i] = brisk_f32_to_bf16(v);
      vals[i] = brisk_bf16_to_f32(((uint16_t *)p)[i]);
    }
  }
  return p;
}

static void test_simt_gemm(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmatmul_gemm");
  const uint32_t pairs[][2] = {{BRISK_DTYPE_F32, BRISK_DTYPE_F32},
                               {BRISK_DTYPE_F32, BRISK_DTYPE_F16},
                               {BRISK_DTYPE_F32, BRISK_DTYPE_BF16},
                               {BRISK_DTYPE_F16, BRISK_DTYPE_F16},
                               {BRISK_DTYPE_BF16, BRISK_DTYPE_BF16}};
  const double u = ldexp(1, -24);
  for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++) {
    /* Tails in every dimension of the 64 x 64 x 16 tiles. */
    const int64_t m = rand_range(&r, 1, 140), n = rand_range(&r, 1, 140), k = rand_range(&r, 1, 90);
    const int64_t ldc = n + rand_range(&r, 0, 5);
    float *av = malloc((size_t)(m * k) * 4), *bv = malloc((size_t)(n * k) * 4);
    void *a = rand_matrix(&r, pairs[pi][0], m * k, av),
         *b = rand_matrix(&r, pairs[pi][1], n * k, bv);
    float *c = dev_alloc((size_t)(m * ldc) * 4);
    for (int64_t i = 0; i < m * ldc; i++) c[i] = -777.0f;
    ASSERT_LAUNCH(brisk_kgemm(pairs[pi][0], a, pairs[pi][1], b, m, n, k, c, ldc, NULL));
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldc; j++) {
        if (j >= n) {
          assert_true(c[i * ldc + j] == -777.0f);
          continue;
        }
        double ref = 0, abs = 0;
        for (int64_t l = 0; l < k; l++) {
          ref += (double)av[i * k + l] * bv[j * k + l];
          abs += fabs((double)av[i * k + l] * bv[j * k + l]);
        }
        const double tol = (double)(k + 2) * u * abs * 1.01 + 1e-30;
        if (!(fabs(c[i * ldc + j] - ref) <= tol))
          fail_msg("gemm %s x %s m=%lld n=%lld k=%lld c[%lld][%lld] %.9g vs %.9g",
                   brisk_dtype_name(pairs[pi][0]), brisk_dtype_name(pairs[pi][1]), (long long)m,
                   (long long)n, (long long)k, (long long)i, (long long)j, (double)c[i * ldc + j],
                   ref);
      }
    free(av), free(bv), free(a), free(b), free(c);
  }
  float one = 1;
  assert_int_equal(
      brisk_kgemm(BRISK_DTYPE_F16, &one, BRISK_DTYPE_F32, &one, 1, 1, 1, &one, 1, NULL), 1);
}

/* The large-batch route of the host side: W tile-wise to BF16, x to BF16,
 * GEMM per tile into the columns of y; against the CPU backend. */
static void test_prefill_route(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmatmul_prefill_route");
  brisk_backend *cpu;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &cpu), BRISK_OK);
  const double u = ldexp(1, -24), ub = ldexp(1, -7) + ldexp(1, -16);
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const int64_t blk = brisk_dtype_get(types[t])->block_size;
    wcase c;
    const int64_t n = rand_range(&r, 20, 90), m = rand_range(&r, 9, 40);
    const int64_t k =
        blk == 1 ? rand_range(&r, 16, 200) : blk * rand_range(&r, 1, blk == 32 ? 8 : 2);
    make_weights(&c, types[t], n, k, &r);
    float *x = dev_alloc((size_t)(m * k) * 4), *y = dev_alloc((size_t)(m * n) * 4);
    float *ycpu = malloc((size_t)(m * n) * 4);
    uint16_t *xb = dev_alloc((size_t)(m * k) * 2);
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)test_rng_normal(&r);
    ASSERT_LAUNCH(brisk_kcast_f32(BRISK_DTYPE_BF16, x, m * k, xb, NULL));
    const int64_t tile_rows = rand_range(&r, 7, 33);
    uint16_t *tile = dev_alloc((size_t)(tile_rows * k) * 2);
    for (int64_t r0 = 0; r0 < n; r0 += tile_rows) {
      const int64_t nr = n - r0 < tile_rows ? n - r0 : tile_rows;
      assert_int_equal(
          brisk_kdequant_tile(c.type, c.reg, n, k, r0, nr, BRISK_DTYPE_BF16, tile, NULL), 0);
      assert_int_equal(
          brisk_kgemm(BRISK_DTYPE_BF16, xb, BRISK_DTYPE_BF16, tile, m, nr, k, y + r0, n, NULL), 0);
    }
    assert_int_equal(cpu->matmul(cpu, c.type, c.gguf, n, k, x, m, ycpu), BRISK_OK);
    double *step = malloc((size_t)k * sizeof *step);
    for (int64_t i = 0; i < m; i++) {
      act_steps(c.type, x + i * k, k, step);
      for (int64_t j = 0; j < n; j++) {
        double abs = 0, quant = 0;
        for (int64_t l = 0; l < k; l++) {
          abs += fabs((double)x[i * k + l] * c.wd[j * k + l]);
          quant += fabs((double)c.wd[j * k + l]) * step[l];
        }
        const double tol = (ub + (double)(2 * k + 2) * u) * abs * 1.01 + quant * 1.01 + 1e-30;
        if (!(fabs(y[i * n + j] - ycpu[i * n + j]) <= tol))
          fail_msg("%s route y[%lld][%lld] %.9g vs cpu %.9g (tol %.3g)", brisk_dtype_name(c.type),
                   (long long)i, (long long)j, (double)y[i * n + j], (double)ycpu[i * n + j], tol);
      }
    }
    free(step);
    free(x), free(y), free(ycpu), free(xb), free(tile);
    free_weights(&c);
  }
  brisk_backend_free(cpu);
}

static void test_unsupported(void **state) {
  (void)state;
  float x = 1, y = 0;
  uint8_t w[64] = {0};
  assert_false(brisk_kmatmul_supported(BRISK_DTYPE_Q2_K));
  assert_false(brisk_kmatmul_supported(BRISK_DTYPE_Q3_K));
  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    assert_true(brisk_kmatmul_supported(types[t]));
  assert_int_equal(brisk_kmatmul_gemv(BRISK_DTYPE_Q8_1, w, 1, 32, &x, 1, &y, NULL), 1);
  assert_int_equal(brisk_kdequant_tile(BRISK_DTYPE_Q2_K, w, 1, 256, 0, 1, BRISK_DTYPE_F16, w, NULL),
                   1);
  assert_int_equal(brisk_kdequant_tile(BRISK_DTYPE_F32, w, 1, 4, 0, 1, BRISK_DTYPE_Q8_0, w, NULL),
                   1);
  /* More weight rows than a grid holds: refused before any launch. */
  assert_int_equal(brisk_kmatmul_gemv(BRISK_DTYPE_F32, w, (int64_t)1 << 34, 4, &x, 1, &y, NULL), 1);
  /* Quantized weights need 16-byte aligned activations. */
  float xs[40] __attribute__((aligned(16))) = {0};
  assert_int_equal(brisk_kmatmul_gemv(BRISK_DTYPE_Q8_0, w, 1, 32, xs + 1, 1, &y, NULL), 1);
  /* Empty products launch nothing. */
  ASSERT_LAUNCH(brisk_kmatmul_gemv(BRISK_DTYPE_F32, w, 1, 4, &x, 0, &y, NULL));
  assert_true(y == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemv_all_types), cmocka_unit_test(test_dequant_tile),
      cmocka_unit_test(test_cast),           cmocka_unit_test(test_simt_gemm),
      cmocka_unit_test(test_prefill_route),  cmocka_unit_test(test_unsupported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
