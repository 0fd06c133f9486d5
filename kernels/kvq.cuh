/* Quantized KV rows on the device, the same numbers as lib/quant/kv_quant.c:
 * a row of head_dim values is ceil(head_dim / 64) F16 scales followed by
 * head_dim bytes, INT8 (x = s q) or FP8 E4M3 (x = s e4m3(q)); each group's
 * scale is its largest |x| over 127 or 448 rounded to F16 (capped at
 * 65504), values x / s rounded to nearest even. IEEE division and rintf are
 * exactly rounded on the device, so the bytes equal the CPU's. Rows hold
 * R x, R the per-group Walsh-Hadamard rotation of kv_quant.h (blocks of
 * the largest power of two dividing the group's length, each butterfly
 * a + b / a - b, then one multiply): attention rotates the query and its
 * output by the same R (kvq_rotate), with the CPU's float steps. */
#ifndef BRISK_KERNELS_KVQ_CUH
#define BRISK_KERNELS_KVQ_CUH

#include "simt.h"

#define KVQ_DTYPE_Q8 0x1000u
#define KVQ_DTYPE_FP8 0x1001u
#define KVQ_GROUP 64

__device__ __forceinline__ int kvq_n_groups(int hd) { return (hd + KVQ_GROUP - 1) / KVQ_GROUP; }
__device__ __forceinline__ int64_t kvq_row_bytes(int hd) { return 2 * kvq_n_groups(hd) + hd; }

__device__ __forceinline__ unsigned char kvq_f32_to_e4m3(float x) {
  const unsigned bits = __float_as_uint(x);
  const unsigned sign = (bits >> 31) << 7;
  const float a = fabsf(x);
  if (!(a < 448.0f)) return (unsigned char)(sign | 0x7eu);
  if (a < 0.015625f) return (unsigned char)(sign | (unsigned)rintf(a * 512.0f));
  int e = (int)((bits >> 23) & 0xffu) - 127;
  unsigned m = bits & 0x7fffffu, keep = m >> 20, rest = m & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) keep++;
  if (keep == 8u) keep = 0u, e++;
  unsigned code = ((unsigned)(e + 7) << 3) | keep;
  return (unsigned char)(sign | (code > 0x7eu ? 0x7eu : code));
}

/* E4M3 bits shifted into a float's exponent and mantissa read as the value
 * times 2^-120, subnormals included; 2^120 restores it exactly. */
__device__ __forceinline__ float kvq_e4m3_to_f32(unsigned c) {
  const float v = __uint_as_float((c & 0x7fu) << 20) * 0x1p120f;
  return (c & 0x80u) ? -v : v;
}

__device__ __forceinline__ float kvq_scale(const unsigned char *row, int g) {
  __half h;
  const uint16_t u = (uint16_t)(row[2 * g] | (row[2 * g + 1] << 8));
  memcpy(&h, &u, 2);
  return __half2float(h);
}

/* Element i of a quantized row. */
__device__ __forceinline__ float kvq_value(uint32_t dtype, const unsigned char *row, int hd,
                                           int i) {
  const float s = kvq_scale(row, i / KVQ_GROUP);
  const unsigned char q = row[2 * kvq_n_groups(hd) + i];
  return s * (dtype == KVQ_DTYPE_Q8 ? (float)(signed char)q : kvq_e4m3_to_f32(q));
}

__device__ __forceinline__ float kvq_rotation_scale(int n) {
  return n == 1    ? 1.0f
         : n == 2  ? 0.70710678118654752f
         : n == 4  ? 0.5f
         : n == 8  ? 0.35355339059327376f
         : n == 16 ? 0.25f
         : n == 32 ? 0.17677669529663688f
                   : 0.125f;
}

/* In place: x[hd] (contiguous) to R x, as brisk_kvq_rotate. */
__device__ __forceinline__ void kvq_rotate(float *x, int hd) {
  for (int i0 = 0; i0 < hd; i0 += KVQ_GROUP) {
    const int len = hd - i0 < KVQ_GROUP ? hd - i0 : KVQ_GROUP, n = len & -len;
    const float s = kvq_rotation_scale(n);
    for (int b = i0; b < i0 + len; b += n) {
      for (int h = 1; h < n; h *= 2)
        for (int i = b; i < b + n; i += 2 * h)
          for (int j = i; j < i + h; j++) {
            const float a = x[j], c = x[j + h];
            x[j] = __fadd_rn(a, c), x[j + h] = __fsub_rn(a, c);
          }
      for (int i = b; i < b + n; i++) x[i] = __fmul_rn(x[i], s);
    }
  }
}

/* Quantizes group g of in[hd] into row (its scale and its values). */
__device__ __forceinline__ void kvq_quantize_group(uint32_t dtype, const float *in, int hd, int g,
                                                   unsigned char *row) {
  const int i0 = g * KVQ_GROUP, i1 = i0 + KVQ_GROUP < hd ? i0 + KVQ_GROUP : hd;
  float x[KVQ_GROUP]; /* the group rotated, x[i - i0] */
  for (int i = i0; i < i1; i++) x[i - i0] = in[i];
  kvq_rotate(x, i1 - i0);
  const float qmax = dtype == KVQ_DTYPE_Q8 ? 127.0f : 448.0f;
  float amax = 0.0f;
  for (int i = i0; i < i1; i++) amax = fmaxf(amax, fabsf(x[i - i0]));
  const float d = amax / qmax;
  const __half dh = __float2half_rn(d > 65504.0f ? 65504.0f : d);
  uint16_t u;
  memcpy(&u, &dh, 2);
  row[2 * g] = (unsigned char)(u & 0xffu), row[2 * g + 1] = (unsigned char)(u >> 8);
  const float s = __half2float(dh);
  unsigned char *q = row + 2 * kvq_n_groups(hd);
  for (int i = i0; i < i1; i++) {
    if (s == 0.0f) {
      q[i] = 0;
    } else if (dtype == KVQ_DTYPE_Q8) {
      const float r = rintf(x[i - i0] / s);
      q[i] = (unsigned char)(signed char)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    } else {
      q[i] = kvq_f32_to_e4m3(x[i - i0] / s);
    }
  }
}

#endif
