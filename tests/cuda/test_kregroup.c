/* The regrouped weight layout of kernels/regroup.h against the GGUF blocks:
 * random rows are quantized (lib/quant), regrouped, then every element is
 * read back from the regrouped bytes by an independent reader written from
 * the layout table of regroup.h and compared bit for bit with
 * brisk_dequantize_row; padding must be zero, the inverse must give the GGUF
 * bytes back, and undefined layouts must be refused. */
#include "test_support.h"

#include "core/dtype.h"
#include "core/half.h"
#include "kernels/regroup.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t types[] = {
    BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
    BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
    BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K,
};

/* Element e of row r, read from the regrouped bytes by the table in
 * regroup.h (not by the code under test). */
static float regrouped_elem(uint32_t type, const uint8_t *w, const brisk_kregroup_layout *l,
                            int64_t r, int64_t e) {
  const uint8_t *q = w + r * l->q_stride, *s = w + l->s_offset + r * l->s_stride;
  const uint8_t *d = w + l->d_offset + r * l->d_stride;
  uint16_t h;
  switch (type) {
  case BRISK_DTYPE_F32: {
    float f;
    memcpy(&f, q + 4 * e, 4);
    return f;
  }
  case BRISK_DTYPE_F16: memcpy(&h, q + 2 * e, 2); return brisk_f16_to_f32(h);
  case BRISK_DTYPE_BF16: memcpy(&h, q + 2 * e, 2); return brisk_bf16_to_f32(h);
  case BRISK_DTYPE_Q8_0:
    memcpy(&h, d + 2 * (e / 32), 2);
    return (float)(int8_t)q[e] * brisk_f16_to_f32(h);
  case BRISK_DTYPE_Q4_0:
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_0:
  case BRISK_DTYPE_Q5_1: {
    const int64_t b = e / 32, j = e % 32;
    const bool with_m = type == BRISK_DTYPE_Q4_1 || type == BRISK_DTYPE_Q5_1;
    const bool five = type == BRISK_DTYPE_Q5_0 || type == BRISK_DTYPE_Q5_1;
    uint16_t mh = 0;
    memcpy(&h, d + (with_m ? 4 : 2) * b, 2);
    if (with_m) memcpy(&mh, d + 4 * b + 2, 2);
    const uint8_t byte = q[16 * b + j % 16];
    int v = j < 16 ? byte & 15 : byte >> 4;
    if (five) v |= ((s[4 * b + j / 8] >> (j % 8)) & 1) << 4; /* little-endian 32-bit qh */
    if (with_m) return (float)v * brisk_f16_to_f32(h) + brisk_f16_to_f32(mh);
    return (float)(v - (five ? 16 : 8)) * brisk_f16_to_f32(h);
  }
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K: {
    const int64_t b = e / 256, j = (e % 256) / 32, i = e % 32;
    const uint8_t *rec = s + 16 * b;
    uint16_t dh, mh;
    memcpy(&dh, rec, 2);
    memcpy(&mh, rec + 2, 2);
    uint8_t sc, mn;
    brisk_k4_scale_min(rec + 4, (int)j, &sc, &mn);
    const bool q5 = type == BRISK_DTYPE_Q5_K;
    const uint8_t *qb = q + (q5 ? 160 : 128) * b, byte = qb[32 * (j / 2) + i];
    const int v = (j % 2 ? byte >> 4 : byte & 15) | (q5 ? ((qb[128 + i] >> j) & 1) << 4 : 0);
    return brisk_f16_to_f32(dh) * (float)sc * (float)v - brisk_f16_to_f32(mh) * (float)mn;
  }
  case BRISK_DTYPE_Q6_K: {
    const int64_t b = e / 256, x = e % 256, half = x / 128, sub = (x % 128) / 32, i = x % 32;
    const uint8_t *ql = q + 192 * b, *qh = ql + 128;
    const int lo = (ql[half * 64 + i + 32 * (sub % 2)] >> (4 * (sub / 2))) & 15;
    const int hi = (qh[half * 32 + i] >> (2 * sub)) & 3;
    memcpy(&h, d + 2 * b, 2);
    return brisk_f16_to_f32(h) * (float)(int8_t)s[16 * b + x / 16] * (float)((lo | hi << 4) - 32);
  }
  default: fail(); return 0;
  }
}

static size_t stride_of(const brisk_kregroup_layout *l, int sec) {
  return sec == 0 ? l->q_stride : sec == 1 ? l->s_stride : l->d_stride;
}

static bool zero_between(const uint8_t *p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (p[i]) return false;
  return true;
}

static void check_type(uint32_t type, int64_t n, int64_t k, test_rng *rng) {
  uint64_t row_bytes;
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)k, &row_bytes));
  float *x = malloc((size_t)(n * k) * sizeof *x), *ref = malloc((size_t)k * sizeof *ref);
  uint8_t *gguf = malloc((size_t)(n * row_bytes)), *back = malloc((size_t)(n * row_bytes));
  for (int64_t i = 0; i < n * k; i++) x[i] = (float)test_rng_normal(rng) * (i % 7 == 0 ? 4 : 1);
  for (int64_t r = 0; r < n; r++)
    assert_int_equal(brisk_quantize_row(type, x + r * k, gguf + r * row_bytes, k), BRISK_OK);
  const size_t bytes = brisk_kregroup_bytes(type, n, k);
  brisk_kregroup_layout l = {0};
  assert_true(brisk_kregroup_layout_of(type, n, k, &l));
  assert_int_equal(bytes, l.bytes);
  assert_true(l.q_stride % 16 == 0 && l.s_stride % 16 == 0 && l.d_stride % 16 == 0);
  assert_true(l.s_offset % 16 == 0 && l.d_offset % 16 == 0);
  /* The sections hold exactly the GGUF bytes, plus padding below 16 per row. */
  const size_t payload = l.q_stride ? (size_t)row_bytes : 0;
  assert_true(l.bytes >= (size_t)n * payload && l.bytes < (size_t)n * (payload + 48));
  uint8_t *reg = malloc(bytes);
  memset(reg, 0xa5, bytes); /* padding must be overwritten with zeros */
  assert_int_equal(brisk_kregroup(type, gguf, n, k, reg), 0);
  for (int64_t r = 0; r < n; r++) {
    assert_int_equal(brisk_dequantize_row(type, gguf + r * row_bytes, ref, k), BRISK_OK);
    for (int64_t e = 0; e < k; e++) {
      const float got = regrouped_elem(type, reg, &l, r, e);
      if (memcmp(&got, &ref[e], 4) != 0)
        fail_msg("%s n=%lld k=%lld row %lld elem %lld: %g vs %g", brisk_dtype_name(type),
                 (long long)n, (long long)k, (long long)r, (long long)e, (double)got,
                 (double)ref[e]);
    }
  }
  /* Padding after each row's used bytes in each section. */
  /* Bytes per block in Q, S, D, from the table of regroup.h. */
  size_t per[3] = {0, 0, 0};
  switch (type) {
  case BRISK_DTYPE_Q8_0: per[0] = 32, per[2] = 2; break;
  case BRISK_DTYPE_Q4_0: per[0] = 16, per[2] = 2; break;
  case BRISK_DTYPE_Q4_1: per[0] = 16, per[2] = 4; break;
  case BRISK_DTYPE_Q5_0: per[0] = 16, per[1] = 4, per[2] = 2; break;
  case BRISK_DTYPE_Q5_1: per[0] = 16, per[1] = 4, per[2] = 4; break;
  case BRISK_DTYPE_Q4_K: per[0] = 128, per[1] = 16; break;
  case BRISK_DTYPE_Q5_K: per[0] = 160, per[1] = 16; break;
  case BRISK_DTYPE_Q6_K: per[0] = 192, per[1] = 16, per[2] = 2; break;
  default: per[0] = (size_t)row_bytes / (size_t)k; break; /* plain types */
  }
  const size_t used[3] = {per[0] * (size_t)l.nb, per[1] * (size_t)l.nb, per[2] * (size_t)l.nb};
  for (int sec = 0; sec < 3; sec++)
    assert_int_equal(stride_of(&l, sec), (used[sec] + 15) / 16 * 16);
  const size_t stride[3] = {l.q_stride, l.s_stride, l.d_stride};
  const size_t off[3] = {0, l.s_offset, l.d_offset};
  for (int sec = 0; sec < 3; sec++)
    for (int64_t r = 0; r < n; r++)
      assert_true(zero_between(reg + off[sec] + r * stride[sec], used[sec], stride[sec]));
  memset(back, 0, (size_t)(n * row_bytes));
  assert_int_equal(brisk_kregroup_undo(type, reg, n, k, back), 0);
  assert_memory_equal(back, gguf, (size_t)(n * row_bytes));
  free(x), free(ref), free(gguf), free(back), free(reg);
}

static void test_layout_round_trip(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("kregroup_round_trip");
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const brisk_dtype_info *info = brisk_dtype_get(types[t]);
    const int64_t blk = info->block_size;
    for (int rep = 0; rep < 3; rep++) {
      /* Odd row counts; k of 1..9 blocks (odd element counts for plain types). */
      const int64_t n = 1 + (int64_t)(test_rng_u64(&rng) % 9);
      const int64_t k = blk == 1 ? 1 + (int64_t)(test_rng_u64(&rng) % 300)
                                 : blk * (1 + (int64_t)(test_rng_u64(&rng) % 9));
      check_type(types[t], n, k, &rng);
    }
  }
}

static void test_undefined_layouts(void **state) {
  (void)state;
  uint8_t src[64] = {0}, dst[64];
  /* Types without a layout, k not a multiple of the block, bad sizes. */
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q8_1, 4, 256), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q2_K, 4, 256), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q3_K, 4, 256), 0);
  assert_int_equal(brisk_kregroup_bytes(999, 4, 256), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q8_0, 4, 48), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q4_K, 4, 128), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_F32, -1, 4), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_F32, 4, 0), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_F32, INT64_MAX, INT64_MAX / 2), 0);
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_F32, (int64_t)1 << 40, (int64_t)1 << 40), 0);
  assert_int_equal(brisk_kregroup(BRISK_DTYPE_Q8_1, src, 1, 32, dst), -1);
  assert_int_equal(brisk_kregroup(BRISK_DTYPE_Q8_0, src, 1, 33, dst), -1);
  assert_int_equal(brisk_kregroup(BRISK_DTYPE_F32, NULL, 1, 4, dst), -1);
  assert_int_equal(brisk_kregroup(BRISK_DTYPE_F32, src, 1, 4, NULL), -1);
  assert_int_equal(brisk_kregroup_undo(BRISK_DTYPE_F32, NULL, 1, 4, dst), -1);
  /* n == 0 is an empty matrix: nothing to do, nothing touched. */
  assert_int_equal(brisk_kregroup_bytes(BRISK_DTYPE_Q4_0, 0, 32), 0);
  assert_int_equal(brisk_kregroup(BRISK_DTYPE_Q4_0, NULL, 0, 32, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_round_trip),
      cmocka_unit_test(test_undefined_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
