/* K-type dequantizers. Each spells out where element e (0..255) of a
 * super-block keeps its bits, which is the layout's definition. */
#include "quant/quant.h"

#include "core/half.h"
#include "quant/blocks.h"

void brisk_dequantize_row_q2_k(const void *x, float *y, int64_t n) {
  const brisk_block_q2_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = brisk_f16_to_f32(b[i].d), dmin = brisk_f16_to_f32(b[i].dmin);
    for (int e = 0; e < BRISK_QK_K; e++) {
      /* 128-element halves; each byte holds 4 elements 32 apart. */
      int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
      int q = (b[i].qs[half * 32 + l] >> shift) & 3;
      uint8_t s = b[i].scales[e / 16];
      y[e] = d * (float)(s & 0xf) * (float)q - dmin * (float)(s >> 4);
    }
  }
}

/* The 16 signed 6-bit scales of a q3_k super-block: low 4 bits in bytes 0..7
 * (sub-block i < 8 in the low nibble of byte i, i >= 8 in the high nibble of
 * byte i - 8), top 2 bits in bytes 8..11 (byte 8 + i % 4, bits 2 * (i / 4)). */
static int q3_k_scale(const uint8_t *scales, int i) {
  int lo = (scales[i % 8] >> (4 * (i / 8))) & 0xf;
  int hi = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | hi << 4) - 32;
}

void brisk_dequantize_row_q3_k(const void *x, float *y, int64_t n) {
  const brisk_block_q3_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = brisk_f16_to_f32(b[i].d);
    for (int e = 0; e < BRISK_QK_K; e++) {
      int half = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
      int lo = (b[i].qs[half * 32 + l] >> shift) & 3;
      /* The high bit set means "no -4 offset". */
      int hbit = (b[i].hmask[l] >> (e / 32)) & 1;
      int q = lo - (hbit ? 0 : 4);
      y[e] = d * (float)q3_k_scale(b[i].scales, e / 16) * (float)q;
    }
  }
}

void brisk_dequantize_row_q4_k(const void *x, float *y, int64_t n) {
  const brisk_block_q4_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = brisk_f16_to_f32(b[i].d), dmin = brisk_f16_to_f32(b[i].dmin);
    for (int j = 0; j < 8; j++) {
      uint8_t sc, mn;
      brisk_k4_scale_min(b[i].scales, j, &sc, &mn);
      const float dl = d * (float)sc, ml = dmin * (float)mn;
      /* Sub-blocks 2c and 2c+1 share 32 bytes: low nibbles, high nibbles. */
      const uint8_t *q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) y[32 * j + l] = dl * (float)((q[l] >> shift) & 0xf) - ml;
    }
  }
}

void brisk_dequantize_row_q5_k(const void *x, float *y, int64_t n) {
  const brisk_block_q5_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = brisk_f16_to_f32(b[i].d), dmin = brisk_f16_to_f32(b[i].dmin);
    for (int j = 0; j < 8; j++) {
      uint8_t sc, mn;
      brisk_k4_scale_min(b[i].scales, j, &sc, &mn);
      const float dl = d * (float)sc, ml = dmin * (float)mn;
      const uint8_t *q = b[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) {
        /* Bit j of qh[l] is the 5th bit of element l of sub-block j. */
        int v = ((q[l] >> shift) & 0xf) | ((b[i].qh[l] >> j) & 1) << 4;
        y[32 * j + l] = dl * (float)v - ml;
      }
    }
  }
}

void brisk_dequantize_row_q6_k(const void *x, float *y, int64_t n) {
  const brisk_block_q6_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = brisk_f16_to_f32(b[i].d);
    for (int e = 0; e < BRISK_QK_K; e++) {
      /* Per 128-element half: 64 ql bytes hold element s*32+l's low nibble at
       * byte l + 32*(s%2), nibble s/2; 32 qh bytes its top 2 bits at bits 2s. */
      int half = e / 128, s = (e % 128) / 32, l = e % 32;
      int lo = (b[i].ql[half * 64 + l + 32 * (s % 2)] >> (4 * (s / 2))) & 0xf;
      int hi = (b[i].qh[half * 32 + l] >> (2 * s)) & 3;
      y[e] = d * (float)b[i].scales[e / 16] * (float)((lo | hi << 4) - 32);
    }
  }
}

void brisk_dequantize_row_q8_k(const void *x, float *y, int64_t n) {
  const brisk_block_q8_k *b = x;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, y += BRISK_QK_K) {
    const float d = b[i].d;
    for (int e = 0; e < BRISK_QK_K; e++) y[e] = d * (float)b[i].qs[e];
  }
}
