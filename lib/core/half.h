/* IEEE binary16 and bfloat16 <-> float32, bit-exact, round-to-nearest-even.
 * Scalar and portable; the CPU backend has F16C paths for arrays. */
#ifndef BRISK_CORE_HALF_H
#define BRISK_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t brisk_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float brisk_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Exact: every binary16 value is a float32 value. NaN payloads are kept. */
static inline float brisk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return brisk_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return brisk_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return brisk_bits_f32(sign);
  /* Subnormal: value is man * 2^-24; normalize into float32. */
  int shift = __builtin_clz(man) - 21; /* leading zeros within 10 bits, +1 */
  man = (man << shift) & 0x3ff;
  return brisk_bits_f32(sign | ((uint32_t)(113 - shift) << 23) | (man << 13));
}

/* Rounds to nearest even; overflow gives infinity; NaN stays a quiet NaN. */
static inline uint16_t brisk_f32_to_f16(float f) {
  uint32_t u = brisk_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) /* inf or NaN */
    return sign | 0x7c00 | (abs > 0x7f800000u ? (uint16_t)(0x200 | ((abs >> 13) & 0x3ff)) : 0);
  if (abs >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
  if (abs < 0x38800000u) {                      /* below 2^-14: subnormal or zero */
    if (abs < 0x33000000u) return sign;          /* below 2^-25: rounds to 0 */
    uint32_t exp = abs >> 23;
    uint32_t man = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exp; /* 14..24: value = man * 2^(exp-150) -> units 2^-24 */
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
  }
  uint32_t r = abs - 0x38000000u; /* rebias exponent 127 -> 15, in place */
  uint32_t q = r >> 13;
  uint32_t rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
  return sign | (uint16_t)q;
}

static inline float brisk_bf16_to_f32(uint16_t h) { return brisk_bits_f32((uint32_t)h << 16); }

/* Rounds to nearest even; NaN stays a quiet NaN. */
static inline uint16_t brisk_f32_to_bf16(float f) {
  uint32_t u = brisk_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

void brisk_f16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void brisk_f32_to_f16_array(const float *src, uint16_t *dst, size_t n);
void brisk_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void brisk_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);

#endif
