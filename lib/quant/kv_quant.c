/* Reference quantized KV rows (kv_quant.h). */
#include "quant/kv_quant.h"

#include "core/half.h"

#include <math.h>
#include <string.h>

const char *brisk_kvq_name(uint32_t dtype) {
  return dtype == BRISK_KVQ_DTYPE_Q8 ? "q8_0" : dtype == BRISK_KVQ_DTYPE_FP8 ? "fp8_e4m3" : NULL;
}

uint8_t brisk_kvq_f32_to_e4m3(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint8_t sign = (uint8_t)((bits >> 31) << 7);
  float a = fabsf(x);
  if (!(a < 448.0f)) return (uint8_t)(sign | 0x7e); /* saturate; NaN too */
  if (a < 0.015625f) /* below 2^-6: subnormal steps of 2^-9 (8 is the smallest normal) */
    return (uint8_t)(sign | (uint8_t)rintf(a * 512.0f));
  int32_t e = (int32_t)((bits >> 23) & 0xff) - 127; /* -6 .. 8 */
  uint32_t m = bits & 0x7fffff, keep = m >> 20, rest = m & 0xfffff;
  if (rest > 0x80000 || (rest == 0x80000 && (keep & 1))) keep++;
  if (keep == 8) keep = 0, e++;
  uint32_t code = ((uint32_t)(e + 7) << 3) | keep;
  return (uint8_t)(sign | (code > 0x7e ? 0x7e : code));
}

float brisk_kvq_e4m3_to_f32(uint8_t c) {
  int32_t e = (c >> 3) & 15, m = c & 7;
  float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  return (c & 0x80) ? -v : v;
}

/* The orthonormal Walsh-Hadamard transform of x[n], n a power of two <= 64:
 * butterflies in a fixed order, then one multiply (exact for n = 1, 4, 16,
 * 64), the same float steps on every backend. */
static void fwht(float *x, int32_t n) {
  for (int32_t h = 1; h < n; h *= 2)
    for (int32_t i = 0; i < n; i += 2 * h)
      for (int32_t j = i; j < i + h; j++) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b, x[j + h] = a - b;
      }
  const float s = brisk_kvq_rotation_scale(n);
  for (int32_t i = 0; i < n; i++) x[i] *= s;
}

void brisk_kvq_rotate(float *x, int32_t head_dim) {
  for (int32_t i0 = 0; i0 < head_dim; i0 += BRISK_KVQ_GROUP) {
    const int32_t len = head_dim - i0 < BRISK_KVQ_GROUP ? head_dim - i0 : BRISK_KVQ_GROUP;
    const int32_t n = brisk_kvq_rotation_block(len);
    for (int32_t b = 0; b < len; b += n) fwht(x + i0 + b, n);
  }
}

void brisk_kvq_quantize_row(uint32_t dtype, const float *in, uint8_t *row, int32_t head_dim) {
  const int32_t ng = brisk_kvq_n_groups(head_dim);
  const float qmax = dtype == BRISK_KVQ_DTYPE_Q8 ? 127.0f : 448.0f;
  uint8_t *q = row + 2 * ng;
  for (int32_t g = 0; g < ng; g++) {
    int32_t i0 = g * BRISK_KVQ_GROUP, i1 = i0 + BRISK_KVQ_GROUP;
    if (i1 > head_dim) i1 = head_dim;
    /* The group rotated, x[i - i0]. */
    float x[BRISK_KVQ_GROUP];
    memcpy(x, in + i0, (size_t)(i1 - i0) * sizeof *x);
    brisk_kvq_rotate(x, i1 - i0);
    float amax = 0;
    for (int32_t i = i0; i < i1; i++) amax = fmaxf(amax, fabsf(x[i - i0]));
    float d = amax / qmax;
    uint16_t dh = brisk_f32_to_f16(d > 65504.0f ? 65504.0f : d);
    memcpy(row + 2 * g, &dh, 2);
    float s = brisk_f16_to_f32(dh);
    for (int32_t i = i0; i < i1; i++) {
      if (s == 0) {
        q[i] = 0;
      } else if (dtype == BRISK_KVQ_DTYPE_Q8) {
        float r = rintf(x[i - i0] / s);
        q[i] = (uint8_t)(int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int32_t)r);
      } else {
        q[i] = brisk_kvq_f32_to_e4m3(x[i - i0] / s);
      }
    }
  }
}

void brisk_kvq_dequantize_row(uint32_t dtype, const uint8_t *row, float *x, int32_t head_dim) {
  brisk_kvq_dequantize_row_rotated(dtype, row, x, head_dim);
  brisk_kvq_rotate(x, head_dim);
}

void brisk_kvq_dequantize_row_rotated(uint32_t dtype, const uint8_t *row, float *x,
                                      int32_t head_dim) {
  const int32_t ng = brisk_kvq_n_groups(head_dim);
  const uint8_t *q = row + 2 * ng;
  for (int32_t g = 0; g < ng; g++) {
    uint16_t dh;
    memcpy(&dh, row + 2 * g, 2);
    float s = brisk_f16_to_f32(dh);
    int32_t i0 = g * BRISK_KVQ_GROUP, i1 = i0 + BRISK_KVQ_GROUP;
    if (i1 > head_dim) i1 = head_dim;
    for (int32_t i = i0; i < i1; i++)
      x[i] = s * (dtype == BRISK_KVQ_DTYPE_Q8 ? (float)(int8_t)q[i] : brisk_kvq_e4m3_to_f32(q[i]));
  }
}

void brisk_kvq_quantize_query(const float *x, int8_t *q, float *d, int32_t head_dim) {
  for (int32_t b = 0; b < brisk_kvq_n_qblocks(head_dim); b++) {
    int32_t i0 = b * BRISK_KVQ_QBLOCK, i1 = i0 + BRISK_KVQ_QBLOCK;
    if (i1 > head_dim) i1 = head_dim;
    float amax = 0;
    for (int32_t i = i0; i < i1; i++)
      amax = fabsf(x[i]) > amax || x[i] != x[i] ? fabsf(x[i]) : amax;
    const float s = amax / 127.0f;
    d[b] = s;
    for (int32_t i = i0; i < i1; i++) {
      /* Written so that NaN (x or s) lands on 0 before the conversion. */
      float r = s > 0 && s <= 3.0e38f ? rintf(x[i] / s) : 0.0f;
      q[i] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r == r ? (int32_t)r : 0);
    }
  }
}
