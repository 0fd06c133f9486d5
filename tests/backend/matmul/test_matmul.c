/* brisk_cpu_matmul against a float64 reference: every weight type (and the
 * packed _R8 layouts of the 32-element types and of q4_k, q5_k, q6_k), many
 * shapes (GEMV and GEMM paths, odd n, odd block counts), scalar and AVX2
 * kernels; bitwise identical results across thread counts, batch sizes and
 * workspace placement; argument errors and allocation failures. */
#include "test_support.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/mm_internal.h"
#include "backend/cpu/matmul/pack.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t weight_types[] = {
    BRISK_DTYPE_F32,
    BRISK_DTYPE_F16,
    BRISK_DTYPE_BF16,
    BRISK_DTYPE_Q8_0,
    BRISK_DTYPE_Q4_0,
    BRISK_DTYPE_Q4_1,
    BRISK_DTYPE_Q5_0,
    BRISK_DTYPE_Q5_1,
    BRISK_DTYPE_Q4_K,
    BRISK_DTYPE_Q5_K,
    BRISK_DTYPE_Q6_K,
    BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8,
};
#define R8_Q8_0 (BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8)
#define R8_Q4_0 (BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8)
#define R8_Q4_1 (BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8)
#define R8_Q5_0 (BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8)
#define R8_Q5_1 (BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8)
#define R8_Q4_K (BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8)
#define R8_Q5_K (BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8)
#define R8_Q6_K (BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8)

/* A weight type's block geometry (a packed id's base type). */
static const brisk_dtype_info *info_of(uint32_t type) {
  return brisk_dtype_get(brisk_dtype_base(type));
}

/* Packs w in place when `type` is a packed id (n < 8: nothing moves). */
static void pack_if(uint32_t type, uint8_t *q, int64_t n, int64_t k) {
  if (brisk_dtype_is_packed(type)) assert_int_equal(brisk_cpu_pack(type, q, n, k), BRISK_OK);
}
#define N_TYPES (sizeof weight_types / sizeof *weight_types)

/* A weight matrix in its type, and its reference dequantization (rows in
 * their natural order for packed types). */
typedef struct weights {
  uint32_t type;
  int64_t n, k;
  uint64_t row_bytes;
  uint8_t *q; /* [n][row_bytes] */
  float *deq; /* [n][k] what the reference dequantizer reads from q */
} weights;

static weights make_weights(test_rng *rng, uint32_t type, int64_t n, int64_t k) {
  weights w = {.type = type, .n = n, .k = k};
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &w.row_bytes));
  w.q = malloc((size_t)(w.row_bytes * (uint64_t)n) + 1);
  w.deq = malloc((size_t)(n * k) * sizeof(float) + 1);
  float *row = malloc((size_t)k * sizeof(float) + 1);
  for (int64_t j = 0; j < n; j++) {
    double scale = test_rng_uniform(rng, 0.01, 1.0); /* rows of different magnitude */
    for (int64_t l = 0; l < k; l++) row[l] = (float)(scale * test_rng_normal(rng));
    const uint32_t base = brisk_dtype_base(type);
    assert_int_equal(brisk_quantize_row(base, row, w.q + j * w.row_bytes, k), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(base, w.q + j * w.row_bytes, w.deq + j * k, k), BRISK_OK);
  }
  pack_if(type, w.q, n, k);
  free(row);
  return w;
}

static void free_weights(weights *w) {
  free(w->q);
  free(w->deq);
}

static float *make_x(test_rng *rng, int64_t m, int64_t k) {
  float *x = malloc((size_t)(m * k) * sizeof(float) + 1);
  for (int64_t i = 0; i < m; i++) {
    double scale = pow(10.0, test_rng_uniform(rng, -2, 1));
    for (int64_t l = 0; l < k; l++) x[i * k + l] = (float)(scale * test_rng_normal(rng));
  }
  return x;
}

/* Activation quantization block of a weight type (0: x used as floats). */
static int act_block(uint32_t type) {
  switch (brisk_mm_act_format(type)) {
  case BRISK_MM_ACT_Q8: return 32;
  case BRISK_MM_ACT_Q8K: return 256;
  default: return 0;
  }
}

/* Checks y against the float64 reference with a per-output bound:
 *  - activation rounding to 8 bits: |xq - x| <= amax(block) / 254, so the
 *    error is at most sum |W| * amax / 254 (quantized types only);
 *  - float32 rounding: one rounding per 8-lane step or block plus the final
 *    sums, relative to sum |W| |x|; 8x for quantized types because their
 *    level sums and min terms can each be several times |W x| before they
 *    cancel.
 * Returns the largest error / bound seen. */
static double check_against_reference(const weights *w, const float *x, int64_t m, const float *y,
                                      const char *what) {
  const int ab = act_block(w->type);
  const int64_t n = w->n, k = w->k;
  double worst = 0;
  double *h = malloc((size_t)k * sizeof(double) + 1); /* per-element activation error bound */
  for (int64_t i = 0; i < m; i++) {
    const float *xr = x + i * k;
    for (int64_t b = 0; ab && b < k; b += ab) {
      double amax = 0;
      for (int64_t l = b; l < b + ab; l++) amax = fmax(amax, fabs(xr[l]));
      for (int64_t l = b; l < b + ab; l++) h[l] = amax / 254 * (1 + 1e-6);
    }
    for (int64_t j = 0; j < n; j++) {
      const float *wr = w->deq + j * k;
      double ref = 0, mag = 0, act_err = 0;
      for (int64_t l = 0; l < k; l++) {
        ref += (double)wr[l] * xr[l];
        mag += fabs((double)wr[l]) * (fabs(xr[l]) + (ab ? h[l] : 0));
        if (ab) act_err += fabs((double)wr[l]) * h[l];
      }
      double steps = (double)(ab ? k / ab : k / 8) + 16;
      /* F16, BF16 at the AVX-512 level: one chain per block of KC
       * (mm_avx512_half.c). */
      if (w->type == BRISK_DTYPE_F16 || w->type == BRISK_DTYPE_BF16)
        steps = fmax(steps, (double)(k < BRISK_MM_HALF_KC ? k : BRISK_MM_HALF_KC) +
                                (double)(k / BRISK_MM_HALF_KC) + 16);
      const double bound = act_err + (ab ? 8 : 1) * steps * FLT_EPSILON * mag + 1e-30;
      const double err = fabs((double)y[i * n + j] - ref);
      if (!(err <= bound)) {
        fprintf(stderr,
                "%s %s m=%lld n=%lld k=%lld: y[%lld][%lld] = %.9g, reference %.9g, "
                "error %.3g > bound %.3g\n",
                what, brisk_dtype_name(w->type), (long long)m, (long long)n, (long long)k,
                (long long)i, (long long)j, y[i * n + j], ref, err, bound);
        fail();
      }
      if (err / bound > worst) worst = err / bound;
    }
  }
  free(h);
  return worst;
}

static void matmul_ok(brisk_threadpool *pool, const weights *w, const float *x, int64_t m,
                      float *y) {
  brisk_status st = brisk_cpu_matmul(pool, w->type, w->q, w->n, w->k, x, m, y, NULL, 0);
  if (st != BRISK_OK) fprintf(stderr, "matmul: %s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
}

/* The x86 AVX2 kernels (on aarch64 the NEON ones run as the top level). */
static bool have_avx2(void) {
  brisk_cpu_matmul_force_scalar(false);
  return brisk_cpu_matmul_uses_avx2() && !brisk_isa_is_neon(brisk_cpu_matmul_isa());
}

/* Every type x shape x kernel set (scalar, AVX2, and the machine's top
 * level when higher) against the reference; also AVX2 vs scalar. */
static void test_against_reference(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_against_reference");
  const int64_t ms[] = {1, 2, 3, 7, 16, 33, 64};
  const int64_t ns[] = {1, 5, 64, 67};
  const int nk = 4;
  const bool avx2 = have_avx2();
  const brisk_isa_level top = brisk_cpu_matmul_isa(); /* above AVX2: that level runs too */
  if (!avx2) fprintf(stderr, "note: no AVX2 on this machine; only the scalar kernels run\n");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(2, &pool), BRISK_OK);
  for (size_t t = 0; t < N_TYPES; t++) {
    const uint32_t type = weight_types[t];
    const int64_t bs = info_of(type)->block_size;
    /* one block, two, three, five (odd counts); float types: odd lengths too */
    const int64_t ks[4] = {bs == 1 ? 7 : bs, bs == 1 ? 64 : 2 * bs, bs == 1 ? 67 : 3 * bs,
                           bs == 1 ? 203 : 5 * bs};
    double worst[3] = {0, 0, 0};
    int64_t n_differ = 0; /* outputs where the two kernel sets round differently */
    for (int ki = 0; ki < nk; ki++) {
      for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        weights w = make_weights(&rng, type, ns[ni], ks[ki]);
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
          const int64_t m = ms[mi];
          if (ki == nk - 1 && m != 1 && m != 3 && m != 33) continue; /* keep the run short */
          float *x = make_x(&rng, m, w.k);
          float *ys = malloc((size_t)(m * w.n) * sizeof(float));
          float *yv = malloc((size_t)(m * w.n) * sizeof(float));
          brisk_cpu_matmul_force_scalar(true);
          matmul_ok(pool, &w, x, m, ys);
          worst[0] = fmax(worst[0], check_against_reference(&w, x, m, ys, "scalar"));
          if (avx2) {
            brisk_cpu_matmul_set_isa(BRISK_ISA_AVX2);
            matmul_ok(pool, &w, x, m, yv);
            worst[1] = fmax(worst[1], check_against_reference(&w, x, m, yv, "avx2"));
            for (int64_t i = 0; i < m * w.n; i++) n_differ += ys[i] != yv[i];
          }
          if (top > BRISK_ISA_AVX2) { /* AVX-VNNI / AVX-512 where the CPU has them */
            brisk_cpu_matmul_force_scalar(false);
            matmul_ok(pool, &w, x, m, yv);
            worst[2] = fmax(worst[2], check_against_reference(&w, x, m, yv, brisk_isa_name(top)));
          }
          free(x);
          free(ys);
          free(yv);
        }
        free_weights(&w);
      }
    }
    fprintf(stderr,
            "%-7s worst error / bound: scalar %.3f, avx2 %.3f, %s %.3f; %lld outputs differ "
            "(scalar / avx2)\n",
            brisk_dtype_name(type), worst[0], worst[1], brisk_isa_name(top), worst[2],
            (long long)n_differ);
    /* Both kernel sets really ran: their summation orders differ somewhere. */
    if (avx2) assert_true(n_differ > 0);
  }
  brisk_cpu_matmul_force_scalar(false);
  brisk_threadpool_free(pool);
}

/* Offsets of the fp16 scale fields in each type's block. */
static int f16_fields(uint32_t type, int off[2]) {
  switch (type) {
  case BRISK_DTYPE_Q8_0:
  case BRISK_DTYPE_Q4_0:
  case BRISK_DTYPE_Q5_0: off[0] = 0; return 1;
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_1:
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K: off[0] = 0, off[1] = 2; return 2;
  case BRISK_DTYPE_Q6_K: off[0] = 208; return 1;
  default: return 0;
  }
}

/* Weights as any file may hold them: random block bytes (every level and
 * scale pattern, q8_0's -128 included) with finite fp16 scales. Catches
 * 16-bit saturation and sign handling that quantizer output never hits. */
static void test_random_blocks(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_random_blocks");
  const bool avx2 = have_avx2();
  for (size_t t = 3; t < N_TYPES; t++) { /* the quantized types */
    const uint32_t type = weight_types[t];
    const brisk_dtype_info *info = info_of(type);
    const uint32_t base = brisk_dtype_base(type);
    const int64_t n = 9, k = 3 * (int64_t)info->block_size, m = 5;
    weights w = make_weights(&rng, type, n, k);
    for (uint64_t b = 0; b < w.row_bytes * (uint64_t)n; b++) w.q[b] = (uint8_t)test_rng_u64(&rng);
    int off[2];
    const int nf = f16_fields(base, off);
    for (int64_t blk = 0; blk < (int64_t)(w.row_bytes * (uint64_t)n / info->type_size); blk++)
      for (int f = 0; f < nf; f++) {
        uint16_t h = brisk_f32_to_f16((float)test_rng_uniform(&rng, -1, 1));
        memcpy(w.q + (size_t)blk * info->type_size + (size_t)off[f], &h, 2);
      }
    if (base == BRISK_DTYPE_Q8_0) /* the level no quantizer writes */
      for (int64_t blk = 0; blk < n * 3; blk++) memset(w.q + blk * 34 + 2, 0x80, 16);
    for (int64_t j = 0; j < n; j++)
      assert_int_equal(brisk_dequantize_row(base, w.q + j * w.row_bytes, w.deq + j * k, k),
                       BRISK_OK);
    pack_if(type, w.q, n, k);
    float *x = make_x(&rng, m, k);
    float y[9 * 5];
    for (int scalar = 1; scalar >= (avx2 ? 0 : 1); scalar--) {
      brisk_cpu_matmul_force_scalar(scalar);
      matmul_ok(NULL, &w, x, m, y);
      check_against_reference(&w, x, m, y, scalar ? "scalar" : "avx2");
    }
    brisk_cpu_matmul_force_scalar(false);
    free(x);
    free_weights(&w);
  }
}

/* Extreme levels with activations at +-127: the largest int16 partial sums
 * the 32-element kernels form (q4_x sum 16 products of 15 x 127 in int16, q5_x 8 of 31 x 127,
 * q8_0 pairs of 128 x 127; the packed kernels the same: a row's int16 lane
 * sums 8 maddubs pairs of q4_x, 4 of q5_x), with the sign of x matching or
 * opposing the weights, on the GEMV and GEMM paths, in packed groups and a
 * short last group of rows. */
static void test_extreme_levels(void **state) {
  (void)state;
  static const uint32_t types[] = {
      BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
      R8_Q8_0,          R8_Q4_0,          R8_Q4_1,          R8_Q5_0,          R8_Q5_1};
  const bool avx2 = have_avx2();
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const uint32_t type = types[t], base = brisk_dtype_base(type);
    const int64_t n = 11, k = 96;
    weights w = {.type = type, .n = n, .k = k};
    assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &w.row_bytes));
    const size_t bs = info_of(type)->type_size;
    const bool has_min = base == BRISK_DTYPE_Q4_1 || base == BRISK_DTYPE_Q5_1;
    const size_t qo = has_min ? 4 : 2; /* the levels (and q5_x's fifth bits) from here */
    w.q = malloc((size_t)(w.row_bytes * (uint64_t)n));
    w.deq = malloc((size_t)(n * k) * sizeof(float));
    for (int64_t j = 0; j < n; j++)
      for (int64_t b = 0; b < k / 32; b++) {
        uint8_t *blk = w.q + (size_t)j * w.row_bytes + (size_t)b * bs;
        const uint16_t d = brisk_f32_to_f16(j % 3 == 0 ? 1.0f : 0.5f);
        memcpy(blk, &d, 2);
        if (has_min) {
          const uint16_t mn = brisk_f32_to_f16(j % 2 ? -0.25f : 3.0f);
          memcpy(blk + 2, &mn, 2);
        }
        /* q8_0: 127 or -128; q4_x: levels 15 or 0; q5_x: 31 or 0 */
        const bool high = (j + b) % 2 == 0;
        memset(blk + qo, base == BRISK_DTYPE_Q8_0 ? (high ? 0x7f : 0x80) : (high ? 0xff : 0x00),
               bs - qo);
        if (j == n - 1 || j == 5) blk[qo] ^= 0x0f; /* one mixed element (packed row 5 too) */
      }
    for (int64_t j = 0; j < n; j++)
      assert_int_equal(brisk_dequantize_row(base, w.q + j * w.row_bytes, w.deq + j * k, k),
                       BRISK_OK);
    pack_if(type, w.q, n, k);
    const int64_t m = 6;
    float *x = malloc((size_t)(m * k) * sizeof(float));
    for (int64_t i = 0; i < m; i++)
      for (int64_t l = 0; l < k; l++) /* every element quantizes to +-127 */
        x[i * k + l] = (i % 2 ? -1.0f : 1.0f) * (i >= 3 && (l / 32) % 2 ? -2.0f : 2.0f);
    float y[6 * 11];
    for (int scalar = 1; scalar >= (avx2 ? 0 : 1); scalar--) {
      brisk_cpu_matmul_force_scalar(scalar);
      for (int64_t mm = 1; mm <= m; mm += m - 1) { /* GEMV (1 row) and GEMM (6 rows) */
        matmul_ok(NULL, &w, x, mm, y);
        check_against_reference(&w, x, mm, y, scalar ? "scalar" : "avx2");
      }
    }
    brisk_cpu_matmul_force_scalar(false);
    free(x);
    free_weights(&w);
  }
}

/* The K-types at their extremes, activations at +-127: q4_k / q5_k levels
 * 15 / 31 with scales and mins 63, q6_k levels 63 and 0 (-32 after the offset) with
 * scales 127 and -128: the largest maddubs pairs (2 x 63 x 127) and madd sums
 * the K kernels form. Base and packed layouts, GEMV and GEMM, a short last
 * group; packed equals base bit for bit. */
static void test_extreme_k_levels(void **state) {
  (void)state;
  static const uint32_t types[] = {BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  const bool avx2 = have_avx2();
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const uint32_t base = types[t], packed = base | BRISK_DTYPE_PACKED_R8;
    const int64_t n = 11, k = 512, m = 6;
    weights w = {.type = base, .n = n, .k = k};
    assert_true(brisk_dtype_row_bytes(base, (uint64_t)k, &w.row_bytes));
    const size_t bs = info_of(base)->type_size, bytes = (size_t)(w.row_bytes * (uint64_t)n);
    w.q = malloc(bytes);
    w.deq = malloc((size_t)(n * k) * sizeof(float));
    for (int64_t j = 0; j < n; j++)
      for (int64_t b = 0; b < k / 256; b++) {
        uint8_t *blk = w.q + (size_t)j * w.row_bytes + (size_t)b * bs;
        const bool high = (j + b) % 2 == 0;
        const uint16_t d = brisk_f32_to_f16(j % 3 == 0 ? 1.0f : 0.5f);
        if (base != BRISK_DTYPE_Q6_K) {
          const uint16_t dmin = brisk_f32_to_f16(j % 2 ? -0.25f : 3.0f);
          memcpy(blk, &d, 2);
          memcpy(blk + 2, &dmin, 2);
          memset(blk + 4, 0xff, 12); /* every scale and min 63 */
          /* levels 15 / 31 or 0 (q5_k: the fifth bits too) */
          memset(blk + 16, high ? 0xff : 0x00, bs - 16);
        } else {
          memset(blk, high ? 0xff : 0x00, 192);       /* levels 63 or 0 */
          memset(blk + 192, j % 2 ? 0x80 : 0x7f, 16); /* scales -128 or 127 */
          memcpy(blk + 208, &d, 2);
        }
        if (j == n - 1) blk[20] ^= 0x0f; /* one mixed element */
      }
    for (int64_t j = 0; j < n; j++)
      assert_int_equal(brisk_dequantize_row(base, w.q + j * w.row_bytes, w.deq + j * k, k),
                       BRISK_OK);
    uint8_t *p = malloc(bytes);
    memcpy(p, w.q, bytes);
    assert_int_equal(brisk_cpu_pack(packed, p, n, k), BRISK_OK);
    weights wp = w;
    wp.type = packed;
    wp.q = p;
    float *x = malloc((size_t)(m * k) * sizeof(float));
    for (int64_t i = 0; i < m; i++)
      for (int64_t l = 0; l < k; l++) /* every element quantizes to +-127 */
        x[i * k + l] = (i % 2 ? -1.0f : 1.0f) * (i >= 3 && (l / 32) % 2 ? -2.0f : 2.0f);
    float y[6 * 11], yp[6 * 11];
    for (int scalar = 1; scalar >= (avx2 ? 0 : 1); scalar--) {
      brisk_cpu_matmul_force_scalar(scalar);
      for (int64_t mm = 1; mm <= m; mm += m - 1) { /* GEMV (1 row) and GEMM (6 rows) */
        matmul_ok(NULL, &w, x, mm, y);
        check_against_reference(&w, x, mm, y, scalar ? "scalar" : "avx2");
        matmul_ok(NULL, &wp, x, mm, yp);
        check_against_reference(&wp, x, mm, yp, scalar ? "scalar" : "avx2");
        assert_memory_equal(y, yp, (size_t)(mm * n) * sizeof(float));
      }
    }
    brisk_cpu_matmul_force_scalar(false);
    free(x);
    free(p);
    free_weights(&w);
  }
}

/* The AVX2 activation quantizers write exactly the scalar ones' bytes. */
static void test_activation_quantizers_agree(void **state) {
  (void)state;
  if (!have_avx2()) SKIP_BECAUSE("no AVX2 on this machine");
  test_rng rng = test_rng_seeded("matmul_act_quant");
  const brisk_mm_act acts[] = {BRISK_MM_ACT_Q8, BRISK_MM_ACT_Q8K};
  for (size_t a = 0; a < 2; a++) {
    const int64_t k = 256 * 7;
    const size_t bytes = brisk_mm_act_row_bytes(acts[a], k);
    uint8_t *qa = malloc(bytes), *qb = malloc(bytes);
    for (int rep = 0; rep < 50; rep++) {
      float *x = make_x(&rng, 1, k);
      if (rep % 5 == 0)
        for (int l = 0; l < 32; l++) x[l] = 0; /* a zero block */
      if (rep % 7 == 0)
        for (int l = 0; l < 64; l++) x[l] = (float)(l % 5 - 2) * 0.5f; /* exact .5 ties */
      brisk_mm_scalar_act(acts[a])(x, qa, k);
      brisk_mm_avx2_act(acts[a])(x, qb, k);
      assert_memory_equal(qa, qb, bytes);
      free(x);
    }
    free(qa);
    free(qb);
  }
}

/* Same output bits for 1..4 threads, and for each row alone vs in a batch. */
static void test_deterministic(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_deterministic");
  brisk_threadpool *pools[4];
  for (int p = 0; p < 4; p++) assert_int_equal(brisk_threadpool_create(p + 1, &pools[p]), BRISK_OK);
  for (int scalar = 0; scalar < 2; scalar++) {
    if (!scalar && !have_avx2()) continue;
    brisk_cpu_matmul_force_scalar(scalar);
    for (size_t t = 0; t < N_TYPES; t++) {
      const uint32_t type = weight_types[t];
      const int64_t bs = info_of(type)->block_size;
      const int64_t k = bs == 1 ? 101 : 3 * bs, n = 67, m = 37;
      weights w = make_weights(&rng, type, n, k);
      float *x = make_x(&rng, m, k);
      float *y0 = malloc((size_t)(m * n) * sizeof(float));
      float *y1 = malloc((size_t)(m * n) * sizeof(float));
      matmul_ok(pools[0], &w, x, m, y0);
      for (int p = 1; p < 4; p++) {
        memset(y1, 0xff, (size_t)(m * n) * sizeof(float));
        matmul_ok(pools[p], &w, x, m, y1);
        assert_memory_equal(y0, y1, (size_t)(m * n) * sizeof(float));
      }
      /* Batch invariance: rows alone (GEMV path), and in batches of 2, 3, 5. */
      const int64_t sizes[] = {1, 2, 3, 5};
      for (size_t s = 0; s < 4; s++) {
        for (int64_t i = 0; i + sizes[s] <= m; i += sizes[s] + 3) {
          matmul_ok(pools[1], &w, x + i * k, sizes[s], y1);
          assert_memory_equal(y0 + i * n, y1, (size_t)(sizes[s] * n) * sizeof(float));
        }
      }
      /* Choosing the scalar kernels per call equals forcing them globally. */
      assert_int_equal(brisk_cpu_matmul_ex(pools[2], false, type, w.q, n, k, x, m, y1, NULL, 0),
                       BRISK_OK);
      if (scalar) assert_memory_equal(y0, y1, (size_t)(m * n) * sizeof(float));
      /* GEMV with a single thread and with four: the same. */
      for (int p = 0; p < 4; p++) {
        matmul_ok(pools[p], &w, x + 5 * k, 1, y1);
        assert_memory_equal(y0 + 5 * n, y1, (size_t)n * sizeof(float));
      }
      free_weights(&w);
      free(x);
      free(y0);
      free(y1);
    }
  }
  brisk_cpu_matmul_force_scalar(false);
  for (int p = 0; p < 4; p++) brisk_threadpool_free(pools[p]);
}

/* Larger GEMM shapes cross several tiles in both directions; weights at an
 * odd address (quantized blocks are read unaligned) and a caller workspace at
 * an odd address give the same bits. */
static void test_tiles_and_placement(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_tiles");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(3, &pool), BRISK_OK);
  const uint32_t types[] = {BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q6_K, BRISK_DTYPE_F16,
                            R8_Q4_0,          R8_Q5_1,          R8_Q4_K};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const uint32_t type = types[t];
    const int64_t k = 2048, n = 150, m = 120; /* several tiles both ways at k = 2048 */
    weights w = make_weights(&rng, type, n, k);
    float *x = make_x(&rng, m, k);
    float *y0 = malloc((size_t)(m * n) * sizeof(float));
    float *y1 = malloc((size_t)(m * n) * sizeof(float));
    matmul_ok(pool, &w, x, m, y0);
    check_against_reference(&w, x, m, y0, "tiles");

    const size_t need = brisk_cpu_matmul_workspace_size(type, k, m, 3);
    assert_true(need != SIZE_MAX);
    uint8_t *ws = malloc(need + 1);
    uint8_t *wq = w.q;
    if (info_of(type)->quantized) { /* shift the weights to an odd address */
      wq = malloc((size_t)(w.row_bytes * (uint64_t)n) + 1);
      memcpy(wq + 1, w.q, (size_t)(w.row_bytes * (uint64_t)n));
      wq += 1;
    }
    assert_int_equal(brisk_cpu_matmul(pool, type, wq, n, k, x, m, y1, ws + 1, need), BRISK_OK);
    assert_memory_equal(y0, y1, (size_t)(m * n) * sizeof(float));
    if (wq != w.q) free(wq - 1);
    free(ws);
    free_weights(&w);
    free(x);
    free(y0);
    free(y1);
  }
  brisk_threadpool_free(pool);
}

static void test_errors(void **state) {
  (void)state;
  float x[512], y[16];
  uint8_t w[4096];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 512; i++) x[i] = 1;
  for (int i = 0; i < 16; i++) y[i] = 42;

  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q2_K, w, 1, 256, x, 1, y, NULL, 0),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q2_k"));
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q3_K, w, 1, 256, x, 1, y, NULL, 0),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q3_k"));
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_I32, w, 1, 4, x, 1, y, NULL, 0),
                   BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_cpu_matmul(NULL, 1000, w, 1, 4, x, 1, y, NULL, 0), BRISK_E_UNSUPPORTED);

  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q4_0, w, 1, 48, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "48"));
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q4_K, w, 1, 128, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w, -1, 4, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w, 1, -4, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w, 1, 4, x, -1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, NULL, 1, 4, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w, 1, 4, NULL, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w, 1, 4, x, 1, NULL, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_F32, w + 1, 1, 4, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT); /* misaligned float weights */
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, w, INT64_MAX / 8, 64, x, 1, y, NULL, 0),
                   BRISK_E_INVALID_ARGUMENT); /* n * row bytes overflows */
  assert_int_equal(
      brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, w, 1, INT64_MAX / 32 * 32, x, 1, y, NULL, 0),
      BRISK_E_INVALID_ARGUMENT);

  /* A workspace below the need is refused, naming both sizes. */
  const size_t need = brisk_cpu_matmul_workspace_size(BRISK_DTYPE_Q8_0, 64, 2, 1);
  assert_true(need > 0 && need != SIZE_MAX);
  uint8_t ws[1024];
  assert_true(need <= sizeof ws);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, w, 3, 64, x, 2, y, ws, need - 1),
                   BRISK_E_BUFFER_TOO_SMALL);
  char want[32];
  snprintf(want, sizeof want, "%zu", need);
  assert_non_null(strstr(brisk_last_error(), want));
  for (int i = 0; i < 16; i++) assert_true(y[i] == 42); /* untouched on error */

  assert_int_equal(brisk_cpu_matmul_workspace_size(BRISK_DTYPE_F32, 64, 2, 1), 0);
  assert_int_equal(brisk_cpu_matmul_workspace_size(BRISK_DTYPE_Q2_K, 256, 2, 1), SIZE_MAX);
  assert_int_equal(brisk_cpu_matmul_workspace_size(BRISK_DTYPE_Q8_0, 48, 2, 1), SIZE_MAX);
  assert_int_equal(brisk_cpu_matmul_workspace_size(BRISK_DTYPE_Q8_0, 64, 2, 0), SIZE_MAX);
  assert_int_equal(brisk_cpu_matmul_workspace_size(BRISK_DTYPE_Q8_0, 64, INT64_MAX, 1), SIZE_MAX);

  /* Empty products: m or n zero do nothing; k zero gives zeros. */
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, NULL, 0, 64, NULL, 5, NULL, NULL, 0),
                   BRISK_OK);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, NULL, 4, 64, NULL, 0, NULL, NULL, 0),
                   BRISK_OK);
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q8_0, NULL, 4, 0, NULL, 3, y, NULL, 0),
                   BRISK_OK);
  for (int i = 0; i < 12; i++) assert_true(y[i] == 0);
  assert_true(y[12] == 42);
}

/* Packing moves bytes only: each row reads back as it was, and the packed
 * kernels give the base layout's results bit for bit (scalar and AVX2, GEMV
 * and GEMM, whole groups and a short tail, 1 and 3 threads). */
static void test_packed_layout(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_packed");
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(3, &pool), BRISK_OK);
  const uint32_t packed[] = {R8_Q8_0, R8_Q4_0, R8_Q4_1, R8_Q5_0,
                             R8_Q5_1, R8_Q4_K, R8_Q5_K, R8_Q6_K};
  const int64_t ns[] = {8, 9, 16, 23, 67}, ms[] = {1, 2, 4, 5, 9, 40};
  for (size_t t = 0; t < sizeof packed / sizeof *packed; t++) {
    const uint32_t type = packed[t], base = brisk_dtype_base(type);
    const int64_t bs = info_of(type)->block_size;
    const int64_t ks[] = {bs, 3 * bs, 1024}; /* 1, 3 and 4 or 32 blocks */
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int64_t n = ns[ni], k = ks[ki];
        weights w = make_weights(&rng, base, n, k);
        const size_t bytes = (size_t)(w.row_bytes * (uint64_t)n);
        uint8_t *p = malloc(bytes), *row = malloc((size_t)w.row_bytes);
        float *rowf = malloc((size_t)k * sizeof(float)); /* [k] */
        memcpy(p, w.q, bytes);
        assert_int_equal(brisk_cpu_pack(type, p, n, k), BRISK_OK);
        assert_true(memcmp(p, w.q, bytes) != 0); /* the bytes really moved */
        for (int64_t r = 0; r < n; r++) {
          brisk_cpu_packed_row(type, p, n, k, r, row);
          assert_memory_equal(row, w.q + (size_t)r * w.row_bytes, (size_t)w.row_bytes);
          /* As floats: the stored row's dequantization, tail rows too. */
          assert_int_equal(brisk_cpu_packed_row_f32(type, p, n, k, r, rowf), BRISK_OK);
          assert_memory_equal(rowf, w.deq + r * k, (size_t)k * sizeof(float));
        }
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
          const int64_t m = ms[mi];
          float *x = make_x(&rng, m, k);
          float *y0 = malloc((size_t)(m * n) * sizeof(float));
          float *y1 = malloc((size_t)(m * n) * sizeof(float));
          for (int scalar = 0; scalar < 2; scalar++) {
            if (!scalar && !have_avx2()) continue;
            brisk_cpu_matmul_force_scalar(scalar);
            assert_int_equal(brisk_cpu_matmul(pool, base, w.q, n, k, x, m, y0, NULL, 0), BRISK_OK);
            assert_int_equal(
                brisk_cpu_matmul(scalar ? NULL : pool, type, p, n, k, x, m, y1, NULL, 0), BRISK_OK);
            assert_memory_equal(y0, y1, (size_t)(m * n) * sizeof(float));
          }
          brisk_cpu_matmul_force_scalar(false);
          free(x);
          free(y0);
          free(y1);
        }
        free(p);
        free(rowf);
        free(row);
        free_weights(&w);
      }
  }
  brisk_threadpool_free(pool);

  /* Fewer than 8 rows: nothing to regroup. */
  uint8_t small[3 * 34], copy[3 * 34];
  for (size_t i = 0; i < sizeof small; i++) small[i] = copy[i] = (uint8_t)(i * 7);
  assert_int_equal(brisk_cpu_pack(R8_Q8_0, small, 3, 32), BRISK_OK);
  assert_memory_equal(small, copy, sizeof small);
  /* Only packed ids with a layout; sizes checked. */
  assert_int_equal(brisk_cpu_pack(BRISK_DTYPE_Q8_0, small, 3, 32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_pack(BRISK_DTYPE_Q2_K | BRISK_DTYPE_PACKED_R8, small, 8, 256),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_pack(R8_Q4_K, small, 8, 32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_pack(R8_Q4_0, small, 8, 48), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_pack(R8_Q4_0, small, -1, 32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_cpu_pack(R8_Q4_0, NULL, 8, 32), BRISK_E_INVALID_ARGUMENT);
  /* The matmul refuses packed ids it has no kernel for. */
  float x[256] = {0}, y[8];
  assert_int_equal(brisk_cpu_matmul(NULL, BRISK_DTYPE_Q2_K | BRISK_DTYPE_PACKED_R8, small, 8, 256,
                                    x, 1, y, NULL, 0),
                   BRISK_E_UNSUPPORTED);

  /* Which weights the model loader packs: the 32-element types and the
   * K-types with 8 rows or more, where the AVX2 kernels run, or on aarch64
   * the NEON ones (which cover every packed layout). */
  const bool simd = have_avx2() || brisk_isa_is_neon(brisk_cpu_isa_level());
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q8_0, 8), simd ? R8_Q8_0 : BRISK_DTYPE_Q8_0);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_0, 4096), simd ? R8_Q4_0 : BRISK_DTYPE_Q4_0);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_1, 4096), simd ? R8_Q4_1 : BRISK_DTYPE_Q4_1);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q5_0, 16), simd ? R8_Q5_0 : BRISK_DTYPE_Q5_0);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q5_1, 4096), simd ? R8_Q5_1 : BRISK_DTYPE_Q5_1);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q5_1, 7), BRISK_DTYPE_Q5_1);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_0, 7), BRISK_DTYPE_Q4_0);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_F16, 4096), BRISK_DTYPE_F16);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q6_K, 4096), simd ? R8_Q6_K : BRISK_DTYPE_Q6_K);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q4_K, 8), simd ? R8_Q4_K : BRISK_DTYPE_Q4_K);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q5_K, 4096), simd ? R8_Q5_K : BRISK_DTYPE_Q5_K);
  assert_int_equal(brisk_cpu_pack_type(BRISK_DTYPE_Q5_K, 7), BRISK_DTYPE_Q5_K);
  assert_string_equal(brisk_dtype_name(R8_Q4_K), "q4_k_r8");
  assert_string_equal(brisk_dtype_name(R8_Q5_K), "q5_k_r8");
  assert_string_equal(brisk_dtype_name(R8_Q6_K), "q6_k_r8");
  assert_string_equal(brisk_dtype_name(R8_Q4_0), "q4_0_r8");
  assert_string_equal(brisk_dtype_name(R8_Q8_0), "q8_0_r8");
  assert_string_equal(brisk_dtype_name(R8_Q4_1), "q4_1_r8");
  assert_string_equal(brisk_dtype_name(R8_Q5_0), "q5_0_r8");
  assert_string_equal(brisk_dtype_name(R8_Q5_1), "q5_1_r8");
  for (size_t t = 0; t < sizeof packed / sizeof *packed; t++) {
    assert_true(brisk_cpu_pack_known(packed[t]));
    assert_null(brisk_dtype_get(packed[t])); /* never a file type */
  }
  assert_false(brisk_cpu_pack_known(BRISK_DTYPE_Q4_1));
}

/* The group-block bytes of q4_1_r8 and q5_1_r8 are where pack.h says: the
 * kernels rely on them, the tests above only on the round trip. */
static void test_packed_bytes(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_packed_bytes");
  uint8_t w[8 * 2 * 24], lv[8][64]; /* 8 rows x 2 blocks of q5_1 / q4_1; [row][element] levels */
  for (int five = 0; five < 2; five++) {
    const size_t bs = five ? 24 : 20, qo = five ? 8 : 4;
    for (int j = 0; j < 8; j++)
      for (int i = 0; i < 2; i++) {
        uint8_t *blk = w + (size_t)j * 2 * bs + (size_t)i * bs;
        for (size_t b = 0; b < qo; b++) blk[b] = (uint8_t)test_rng_u64(&rng); /* d, m, qh */
        for (int e = 0; e < 32; e++) lv[j][32 * i + e] = (uint8_t)(test_rng_u64(&rng) % 32);
        if (five) memset(blk + 4, 0, 4);
        for (int e = 0; e < 16; e++) {
          const uint8_t lo = lv[j][32 * i + e], hi = lv[j][32 * i + 16 + e];
          if (!five) lv[j][32 * i + e] = lo & 15, lv[j][32 * i + 16 + e] = hi & 15;
          blk[qo + (size_t)e] = (uint8_t)((lo & 15) | (hi & 15) << 4);
          if (five) {
            blk[4 + e / 8] |= (uint8_t)((lo >> 4) << (e % 8));
            blk[6 + e / 8] |= (uint8_t)((hi >> 4) << (e % 8));
          }
        }
      }
    uint8_t p[sizeof w];
    memcpy(p, w, sizeof p);
    const uint32_t type = five ? R8_Q5_1 : R8_Q4_1;
    assert_int_equal(brisk_cpu_pack(type, p, 8, 64), BRISK_OK);
    for (int i = 0; i < 2; i++) {
      const uint8_t *gb = p + (size_t)i * 8 * bs;
      const size_t co = five ? 64 : 32; /* the chunks */
      for (int j = 0; j < 8; j++) {
        const uint8_t *blk = w + (size_t)j * 2 * bs + (size_t)i * bs;
        assert_memory_equal(gb + 2 * j, blk, 2);          /* d[8] */
        assert_memory_equal(gb + 16 + 2 * j, blk + 2, 2); /* m[8] */
        for (int c = 0; c < 4; c++)
          for (int b = 0; b < 4; b++) {
            const uint8_t lo = lv[j][32 * i + 4 * c + b], hi = lv[j][32 * i + 16 + 4 * c + b];
            const uint8_t got = gb[co + 32 * (size_t)c + 4 * (size_t)j + (size_t)b];
            if (five) {
              assert_int_equal(got, lo | (hi & 7) << 5);
              assert_int_equal((gb[32 + 4 * j + b] >> (2 * c)) & 3, hi >> 3);
            } else {
              assert_int_equal(got, lo | hi << 4);
            }
          }
      }
    }
  }
}

typedef struct oom_ctx {
  weights w;
  float *x, *y;
  int64_t m;
} oom_ctx;

static brisk_status oom_op(void *p) {
  oom_ctx *c = p;
  return brisk_cpu_matmul(NULL, c->w.type, c->w.q, c->w.n, c->w.k, c->x, c->m, c->y, NULL, 0);
}

/* Without a caller workspace the call allocates one: failing it is an
 * out-of-memory status with nothing leaked. */
static void test_allocation_failure(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("matmul_oom");
  oom_ctx c = {.w = make_weights(&rng, BRISK_DTYPE_Q4_K, 9, 512), .m = 6};
  c.x = make_x(&rng, c.m, 512);
  c.y = malloc((size_t)(c.m * 9) * sizeof(float));
  assert_int_equal(test_every_allocation_fails(oom_op, &c), 1);
  free_weights(&c.w);
  free(c.x);
  free(c.y);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_reference),
      cmocka_unit_test(test_random_blocks),
      cmocka_unit_test(test_activation_quantizers_agree),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_tiles_and_placement),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_allocation_failure),
      cmocka_unit_test(test_extreme_levels),
      cmocka_unit_test(test_extreme_k_levels),
      cmocka_unit_test(test_packed_layout),
      cmocka_unit_test(test_packed_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
