/* The 32-element types. Quantizers follow ggml's reference rounding exactly
 * (float32 arithmetic in the same order, truncation where it truncates), so
 * that a row quantized here is byte-identical to llama.cpp's and gguf-py's. */
#include "quant/quant.h"

#include "core/half.h"
#include "quant/blocks.h"

#include <math.h>

/* (int)floor(v) clamped to [0, hi] for v >= 0 as the reference's integer cast
 * does; NaN maps to 0 so a bad input cannot make the cast undefined. */
static inline uint8_t trunc_clamp(float v, int hi) {
  if (!(v > 0)) return 0;
  if (v >= (float)hi) return (uint8_t)hi;
  return (uint8_t)v;
}

/* The signed value of largest magnitude (the first one on ties). */
static float signed_absmax(const float *x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; j++) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

static void min_max(const float *x, int n, float *lo, float *hi) {
  float mn = INFINITY, mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
  *lo = mn;
  *hi = mx;
}

void brisk_quantize_row_q4_0(const float *x, void *y, int64_t n) {
  brisk_block_q4_0 *b = y;
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK) {
    /* The extreme value maps to -8 exactly, using the 16th level. */
    const float d = signed_absmax(x, BRISK_QK) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = brisk_f32_to_f16(d);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      uint8_t lo = trunc_clamp(x[j] * id + 8.5f, 15);
      uint8_t hi = trunc_clamp(x[j + BRISK_QK / 2] * id + 8.5f, 15);
      b[i].qs[j] = (uint8_t)(lo | (hi << 4));
    }
  }
}

void brisk_quantize_row_q4_1(const float *x, void *y, int64_t n) {
  brisk_block_q4_1 *b = y;
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK) {
    float lo, hi;
    min_max(x, BRISK_QK, &lo, &hi);
    const float d = (hi - lo) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = brisk_f32_to_f16(d);
    b[i].m = brisk_f32_to_f16(lo);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      uint8_t q0 = trunc_clamp((x[j] - lo) * id + 0.5f, 15);
      uint8_t q1 = trunc_clamp((x[j + BRISK_QK / 2] - lo) * id + 0.5f, 15);
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

/* Packs 32 five-bit values: low nibbles as q4, 5th bits into qh. */
static void pack_q5(const uint8_t *q, uint8_t qh[4], uint8_t qs[16]) {
  uint32_t h = 0;
  for (int j = 0; j < BRISK_QK / 2; j++) {
    qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + BRISK_QK / 2] & 0xf) << 4));
    h |= (uint32_t)(q[j] >> 4) << j;
    h |= (uint32_t)(q[j + BRISK_QK / 2] >> 4) << (j + BRISK_QK / 2);
  }
  for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

void brisk_quantize_row_q5_0(const float *x, void *y, int64_t n) {
  brisk_block_q5_0 *b = y;
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK) {
    const float d = signed_absmax(x, BRISK_QK) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    uint8_t q[BRISK_QK];
    for (int j = 0; j < BRISK_QK; j++) q[j] = trunc_clamp(x[j] * id + 16.5f, 31);
    b[i].d = brisk_f32_to_f16(d);
    pack_q5(q, b[i].qh, b[i].qs);
  }
}

void brisk_quantize_row_q5_1(const float *x, void *y, int64_t n) {
  brisk_block_q5_1 *b = y;
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK) {
    float lo, hi;
    min_max(x, BRISK_QK, &lo, &hi);
    const float d = (hi - lo) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    uint8_t q[BRISK_QK];
    for (int j = 0; j < BRISK_QK; j++) q[j] = trunc_clamp((x[j] - lo) * id + 0.5f, 31);
    b[i].d = brisk_f32_to_f16(d);
    b[i].m = brisk_f32_to_f16(lo);
    pack_q5(q, b[i].qh, b[i].qs);
  }
}

void brisk_quantize_row_q8_0(const float *x, void *y, int64_t n) {
  brisk_block_q8_0 *b = y;
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK) {
    float amax = 0;
    for (int j = 0; j < BRISK_QK; j++)
      if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = brisk_f32_to_f16(d);
    for (int j = 0; j < BRISK_QK; j++) {
      float v = roundf(x[j] * id);            /* half away from zero, as the reference */
      if (!(v > -127)) v = v == v ? -127 : 0; /* |v| <= 127 for finite x; NaN -> 0 */
      if (v > 127) v = 127;
      b[i].qs[j] = (int8_t)v;
    }
  }
}

void brisk_dequantize_row_q4_0(const void *x, float *y, int64_t n) {
  const brisk_block_q4_0 *b = x;
  for (int64_t i = 0; i < n / BRISK_QK; i++, y += BRISK_QK) {
    const float d = brisk_f16_to_f32(b[i].d);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      y[j] = (float)((b[i].qs[j] & 0xf) - 8) * d;
      y[j + BRISK_QK / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void brisk_dequantize_row_q4_1(const void *x, float *y, int64_t n) {
  const brisk_block_q4_1 *b = x;
  for (int64_t i = 0; i < n / BRISK_QK; i++, y += BRISK_QK) {
    const float d = brisk_f16_to_f32(b[i].d), m = brisk_f16_to_f32(b[i].m);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      y[j] = (float)(b[i].qs[j] & 0xf) * d + m;
      y[j + BRISK_QK / 2] = (float)(b[i].qs[j] >> 4) * d + m;
    }
  }
}

static inline uint32_t qh_bits(const uint8_t qh[4]) {
  return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void brisk_dequantize_row_q5_0(const void *x, float *y, int64_t n) {
  const brisk_block_q5_0 *b = x;
  for (int64_t i = 0; i < n / BRISK_QK; i++, y += BRISK_QK) {
    const float d = brisk_f16_to_f32(b[i].d);
    const uint32_t h = qh_bits(b[i].qh);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      int q0 = (b[i].qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
      int q1 = (b[i].qs[j] >> 4) | (int)((h >> (j + BRISK_QK / 2)) & 1) << 4;
      y[j] = (float)(q0 - 16) * d;
      y[j + BRISK_QK / 2] = (float)(q1 - 16) * d;
    }
  }
}

void brisk_dequantize_row_q5_1(const void *x, float *y, int64_t n) {
  const brisk_block_q5_1 *b = x;
  for (int64_t i = 0; i < n / BRISK_QK; i++, y += BRISK_QK) {
    const float d = brisk_f16_to_f32(b[i].d), m = brisk_f16_to_f32(b[i].m);
    const uint32_t h = qh_bits(b[i].qh);
    for (int j = 0; j < BRISK_QK / 2; j++) {
      int q0 = (b[i].qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
      int q1 = (b[i].qs[j] >> 4) | (int)((h >> (j + BRISK_QK / 2)) & 1) << 4;
      y[j] = (float)q0 * d + m;
      y[j + BRISK_QK / 2] = (float)q1 * d + m;
    }
  }
}

void brisk_dequantize_row_q8_0(const void *x, float *y, int64_t n) {
  const brisk_block_q8_0 *b = x;
  for (int64_t i = 0; i < n / BRISK_QK; i++, y += BRISK_QK) {
    const float d = brisk_f16_to_f32(b[i].d);
    for (int j = 0; j < BRISK_QK; j++) y[j] = (float)b[i].qs[j] * d;
  }
}
