/* Reference quantizers: quantize -> dequantize error against the float64
 * original for every type (per-element bounds where the format gives one,
 * relative RMS bounds for all), hand-built blocks that pin the bit layouts,
 * and argument errors. The layouts are also cross-checked against gguf-py in
 * check_gguf_py.py. */
#include "test_support.h"

#include "core/dtype.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GCC 12's aarch64 vectorizer stops with an internal error (in
 * vect_transform_reduction) on this file's float-to-double reductions. */
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#  pragma GCC optimize("no-tree-vectorize")
#endif

static const uint32_t quantizable[] = {
    BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
    BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
    BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K, BRISK_DTYPE_Q8_K,
};
#define N_QUANTIZABLE (sizeof quantizable / sizeof *quantizable)

/* Relative RMS error bound over normal data, per type, with the reason:
 * a uniform rounding error of one step s has RMS s / sqrt(12), and a normal
 * block of 32 has amax ~ 2.1 sigma (256: ~2.9 sigma). */
static double rms_bound(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_F32: return 0;       /* a copy */
  case BRISK_DTYPE_F16: return 3e-4;    /* 11-bit significand: 2^-11 / sqrt(3) */
  case BRISK_DTYPE_BF16: return 2.5e-3; /* 8-bit significand: 2^-8 / sqrt(3) */
  case BRISK_DTYPE_Q8_0: return 6e-3;   /* s = amax/127 ~ 0.017 sigma -> 0.005 */
  case BRISK_DTYPE_Q8_K: return 8e-3;   /* s = amax/127 over 256 ~ 0.023 sigma -> 0.0066 */
  case BRISK_DTYPE_Q4_0: return 0.13;   /* s = amax/8 ~ 0.26 sigma -> 0.076, plus clamp side */
  case BRISK_DTYPE_Q5_0: return 0.065;  /* s = amax/16 -> 0.038, plus clamp side */
  case BRISK_DTYPE_Q4_1: return 0.085;  /* s = range/15 ~ 0.28 sigma -> 0.08 */
  case BRISK_DTYPE_Q5_1: return 0.042;  /* s = range/31 -> 0.039 */
  case BRISK_DTYPE_Q4_K: return 0.085;  /* as q4_1 with fitted scales, 6-bit scale error */
  case BRISK_DTYPE_Q5_K: return 0.042;  /* as q5_1 likewise */
  case BRISK_DTYPE_Q6_K: return 0.022;  /* 16-element blocks, s ~ amax/32 ~ 0.055 sigma */
  default: return 0;
  }
}

/* How far fp16 storage moves v (relative 2^-11, or absolute for subnormals). */
static double f16_error(double v) {
  return fabs((double)brisk_f16_to_f32(brisk_f32_to_f16((float)v)) - v);
}

/* Per-element bound for the 32-element types, from the block's own data:
 * half a step of rounding (a whole step on the clamped side of the symmetric
 * types), plus what fp16 storage of the scale (times the largest level) and
 * of the min moves. */
static double element_bound(uint32_t type, const float *x, int j) {
  const float *b = x + (j / 32) * 32;
  double amax = 0, lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < 32; i++) {
    amax = fmax(amax, fabs(b[i]));
    lo = fmin(lo, b[i]);
    hi = fmax(hi, b[i]);
  }
  const double slack = 1.001; /* float32 arithmetic in the quantizer */
  switch (type) {
  case BRISK_DTYPE_Q8_0: return (0.5 * amax / 127 + 127 * f16_error(amax / 127)) * slack;
  case BRISK_DTYPE_Q4_0: return (amax / 8 + 8 * f16_error(amax / 8)) * slack;
  case BRISK_DTYPE_Q5_0: return (amax / 16 + 16 * f16_error(amax / 16)) * slack;
  case BRISK_DTYPE_Q4_1:
    return (0.5 * (hi - lo) / 15 + 15 * f16_error((hi - lo) / 15) + f16_error(lo)) * slack;
  case BRISK_DTYPE_Q5_1:
    return (0.5 * (hi - lo) / 31 + 31 * f16_error((hi - lo) / 31) + f16_error(lo)) * slack;
  default: return INFINITY;
  }
}

static void fill_normal(test_rng *rng, float *x, int64_t n, int block) {
  for (int64_t b = 0; b < n; b += block) {
    /* Each block gets its own magnitude, as real weights have. */
    double scale = pow(10.0, test_rng_uniform(rng, -3, 1));
    for (int64_t i = b; i < b + block && i < n; i++) x[i] = (float)(scale * test_rng_normal(rng));
  }
}

static void test_roundtrip_error(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("quant_roundtrip_error");
  for (size_t t = 0; t < N_QUANTIZABLE; t++) {
    const uint32_t type = quantizable[t];
    const brisk_dtype_info *info = brisk_dtype_get(type);
    const int block = info->block_size == 1 ? 32 : (int)info->block_size;
    const int64_t n = (int64_t)block * 37; /* odd number of blocks */
    uint64_t bytes;
    assert_true(brisk_dtype_row_bytes(type, (uint64_t)n, &bytes));
    float *x = malloc((size_t)n * sizeof *x), *back = malloc((size_t)n * sizeof *back);
    void *q = malloc(bytes);
    double err2 = 0, ref2 = 0;
    for (int rep = 0; rep < 20; rep++) {
      fill_normal(&rng, x, n, block);
      assert_int_equal(brisk_quantize_row(type, x, q, n), BRISK_OK);
      assert_int_equal(brisk_dequantize_row(type, q, back, n), BRISK_OK);
      for (int64_t i = 0; i < n; i++) {
        double e = (double)back[i] - (double)x[i];
        if (fabs(e) > element_bound(type, x, (int)i)) {
          fprintf(stderr, "%s: element %lld: %.9g -> %.9g\n", info->name, (long long)i, x[i],
                  back[i]);
          fail();
        }
      }
      /* RMS per block, normalised by the block's own RMS, averaged. */
      for (int64_t b = 0; b < n; b += block) {
        double e = 0, r = 0;
        for (int64_t i = b; i < b + block; i++) {
          e += ((double)back[i] - x[i]) * ((double)back[i] - x[i]);
          r += (double)x[i] * x[i];
        }
        err2 += e / r;
        ref2 += 1;
      }
    }
    double rel = sqrt(err2 / ref2);
    fprintf(stderr, "%-5s relative RMS error %.5f (bound %.5f)\n", info->name, rel,
            rms_bound(type));
    assert_true(rel <= rms_bound(type));
    if (type == BRISK_DTYPE_F32) assert_true(rel == 0);
    free(x);
    free(back);
    free(q);
  }
}

/* Zero, constant, one-sign and huge-range blocks all come back sensibly;
 * NaN and infinity inputs only need to be memory-safe. */
static void test_special_blocks(void **state) {
  (void)state;
  const int64_t n = 256;
  float x[256], back[256];
  uint8_t q[1024];
  for (size_t t = 0; t < N_QUANTIZABLE; t++) {
    const uint32_t type = quantizable[t];
    const char *name = brisk_dtype_name(type);
    for (int i = 0; i < n; i++) x[i] = 0;
    assert_int_equal(brisk_quantize_row(type, x, q, n), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, q, back, n), BRISK_OK);
    for (int i = 0; i < n; i++) assert_true(back[i] == 0);

    for (int i = 0; i < n; i++) x[i] = 0.75f; /* a constant block */
    assert_int_equal(brisk_quantize_row(type, x, q, n), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, q, back, n), BRISK_OK);
    for (int i = 0; i < n; i++) {
      if (fabsf(back[i] - 0.75f) > 0.75f * 0.01f) {
        fprintf(stderr, "%s: constant 0.75 -> %g at %d\n", name, back[i], i);
        fail();
      }
    }

    for (int i = 0; i < n; i++) x[i] = (float)(i % 7) + 1; /* all positive, 1..7 */
    assert_int_equal(brisk_quantize_row(type, x, q, n), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, q, back, n), BRISK_OK);
    for (int i = 0; i < n; i++) assert_true(fabsf(back[i] - x[i]) <= 7.0f / 8 + 1e-3f);

    x[5] = NAN;
    x[77] = INFINITY;
    x[200] = -INFINITY;
    assert_int_equal(brisk_quantize_row(type, x, q, n), BRISK_OK);
    assert_int_equal(brisk_dequantize_row(type, q, back, n), BRISK_OK);
  }
}

/* Hand-built blocks pin the bit positions independently of the quantizers. */
static void test_layout_q4_0_q5_0_q8_0(void **state) {
  (void)state;
  brisk_block_q4_0 b4;
  b4.d = brisk_f32_to_f16(0.5f);
  for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | (15 - j) << 4);
  float y[32];
  brisk_dequantize_row_q4_0(&b4, y, 32);
  for (int j = 0; j < 16; j++) {
    assert_true(y[j] == (float)(j - 8) * 0.5f);           /* low nibble of byte j */
    assert_true(y[j + 16] == (float)(15 - j - 8) * 0.5f); /* high nibble of byte j */
  }

  brisk_block_q5_0 b5;
  b5.d = brisk_f32_to_f16(0.25f);
  const uint32_t qh = 0x80000001u | 1u << 16; /* elements 0, 16 and 31 get bit 4 */
  memcpy(b5.qh, &qh, 4);                      /* little-endian, as in the file */
  for (int j = 0; j < 16; j++) b5.qs[j] = (uint8_t)(3 | 5 << 4);
  brisk_dequantize_row_q5_0(&b5, y, 32);
  for (int j = 0; j < 32; j++) {
    int q = (j < 16 ? 3 : 5) + ((j == 0 || j == 16 || j == 31) ? 16 : 0);
    assert_true(y[j] == (float)(q - 16) * 0.25f);
  }

  /* q8_0: the largest magnitude maps to +-127 and d = amax / 127. */
  float x[32];
  for (int j = 0; j < 32; j++) x[j] = (float)(j - 10) * 0.1f;
  brisk_block_q8_0 b8;
  brisk_quantize_row_q8_0(x, &b8, 32);
  const float d = x[31] / 127;
  assert_int_equal(b8.qs[31], 127);
  assert_int_equal(b8.d, brisk_f32_to_f16(d));
  assert_int_equal(b8.qs[0], (int)roundf(x[0] * (1.0f / d))); /* -1.0 -> -60.48 -> -60 */
  assert_int_equal(b8.qs[0], -60);
}

static void test_layout_q4_0_sign_of_scale(void **state) {
  (void)state;
  /* The extreme value takes level 0 (q - 8 = -8): d has the opposite sign. */
  float x[32];
  for (int j = 0; j < 32; j++) x[j] = (float)j / 31;
  brisk_block_q4_0 b;
  brisk_quantize_row_q4_0(x, &b, 32);
  assert_true(brisk_f16_to_f32(b.d) == brisk_f16_to_f32(brisk_f32_to_f16(-1.0f / 8)));
  assert_int_equal(b.qs[15] >> 4, 0); /* element 31 = 1.0 */
  assert_int_equal(b.qs[0] & 0xf, 8); /* element 0 = 0.0 */
}

static void test_layout_k4_scales(void **state) {
  (void)state;
  /* Build the 12 bytes from 8 (scale, min) pairs by the documented rule. */
  const uint8_t sc[8] = {1, 22, 63, 40, 17, 50, 33, 63}, mn[8] = {63, 0, 5, 48, 31, 16, 62, 9};
  uint8_t s[12];
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
    s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
  for (int j = 0; j < 8; j++) {
    uint8_t a, b;
    brisk_k4_scale_min(s, j, &a, &b);
    assert_int_equal(a, sc[j]);
    assert_int_equal(b, mn[j]);
  }
  /* And through the dequantizer: sub-block j = d * sc[j] * q - dmin * mn[j]. */
  brisk_block_q4_k b;
  b.d = brisk_f32_to_f16(0.5f);
  b.dmin = brisk_f32_to_f16(0.25f);
  memcpy(b.scales, s, 12);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) b.qs[32 * c + l] = (uint8_t)((l % 16) | ((l + c) % 16) << 4);
  float y[256];
  brisk_dequantize_row_q4_k(&b, y, 256);
  for (int j = 0; j < 8; j++)
    for (int l = 0; l < 32; l++) {
      int q = j % 2 ? (l + j / 2) % 16 : l % 16;
      assert_true(y[32 * j + l] == 0.5f * (float)sc[j] * (float)q - 0.25f * (float)mn[j]);
    }
}

static void test_layout_q6_k(void **state) {
  (void)state;
  /* Element e's 6 bits as the format documents, with distinct values. */
  brisk_block_q6_k b;
  memset(&b, 0, sizeof b);
  b.d = brisk_f32_to_f16(1.0f);
  for (int i = 0; i < 16; i++) b.scales[i] = (int8_t)(i - 8 ? i - 8 : 1);
  int want[256];
  for (int e = 0; e < 256; e++) {
    int q = (e * 37 + 11) % 64;
    want[e] = q - 32;
    int half = e / 128, s = (e % 128) / 32, l = e % 32;
    b.ql[64 * half + l + 32 * (s % 2)] |= (uint8_t)((q & 15) << (4 * (s / 2)));
    b.qh[32 * half + l] |= (uint8_t)((q >> 4) << (2 * s));
  }
  float y[256];
  brisk_dequantize_row_q6_k(&b, y, 256);
  for (int e = 0; e < 256; e++) assert_true(y[e] == (float)b.scales[e / 16] * (float)want[e]);
}

static void test_q8_k(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("quant_q8_k");
  float x[512];
  for (int i = 0; i < 512; i++) x[i] = (float)test_rng_normal(&rng);
  brisk_block_q8_k b[2];
  brisk_quantize_row_q8_k(x, b, 512);
  for (int k = 0; k < 2; k++) {
    float amax = 0;
    for (int i = 0; i < 256; i++) amax = fmaxf(amax, fabsf(x[256 * k + i]));
    assert_true(b[k].d == amax / 127);
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) {
        int q = b[k].qs[16 * g + l];
        assert_true(q >= -127 && q <= 127);
        assert_true(fabs(q * (double)b[k].d - x[256 * k + 16 * g + l]) <= b[k].d * 0.5001);
        sum += q;
      }
      assert_int_equal(b[k].bsums[g], sum);
    }
  }
}

static void test_errors(void **state) {
  (void)state;
  float x[64] = {0}, y[64];
  uint8_t q[256];
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q2_K, x, q, 256), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q2_k"));
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q3_K, x, q, 256), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q3_k"));
  assert_int_equal(brisk_quantize_row(99, x, q, 32), BRISK_E_UNSUPPORTED);
  assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_I32, q, y, 4), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "i32"));
  assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_COUNT, q, y, 4), BRISK_E_UNSUPPORTED);

  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q4_0, x, q, 48), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "48"));
  assert_non_null(strstr(brisk_last_error(), "32"));
  assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_Q6_K, q, y, 64), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q8_0, x, q, -32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q8_0, NULL, q, 32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_Q8_0, q, NULL, 32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q8_0, x, q, INT64_MAX - 31),
                   BRISK_E_INVALID_ARGUMENT);
  /* n = 0 does nothing, even with NULL pointers. */
  assert_int_equal(brisk_quantize_row(BRISK_DTYPE_Q4_K, NULL, NULL, 0), BRISK_OK);
  assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_Q2_K, NULL, NULL, 0), BRISK_OK);

  assert_true(brisk_quant_can_dequantize(BRISK_DTYPE_Q2_K));
  assert_false(brisk_quant_can_quantize(BRISK_DTYPE_Q2_K));
  assert_false(brisk_quant_can_dequantize(BRISK_DTYPE_Q8_1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_error),
      cmocka_unit_test(test_special_blocks),
      cmocka_unit_test(test_layout_q4_0_q5_0_q8_0),
      cmocka_unit_test(test_layout_q4_0_sign_of_scale),
      cmocka_unit_test(test_layout_k4_scales),
      cmocka_unit_test(test_layout_q6_k),
      cmocka_unit_test(test_q8_k),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
