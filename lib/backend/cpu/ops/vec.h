/* Small vector helpers for the CPU operations. The AVX2 ones are compiled
 * for AVX2 + FMA + F16C by function attribute (no global -mavx2), so they may
 * only be called from functions with the same BRISK_AVX2 attribute, and only
 * after the run-time check (brisk_cpu_ctx.avx2). */
#ifndef BRISK_BACKEND_CPU_OPS_VEC_H
#define BRISK_BACKEND_CPU_OPS_VEC_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#  define BRISK_HAVE_AVX2_KERNELS 1
#  include <immintrin.h>
#  define BRISK_AVX2 __attribute__((target("avx2,fma,f16c")))

BRISK_AVX2 static inline float brisk_avx2_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

BRISK_AVX2 static inline float brisk_avx2_hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* e^x to about 2 ulp. Inputs below ln(2^-126) give 0 (no subnormals); inputs
 * above 88.3 give e^88.3 ~ 2.2e38 (finite: callers use it under a max
 * shift or in a denominator); NaN stays NaN. Cody-Waite reduction
 * x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial, whose
 * truncation error (r^8/8! < 6e-9) is below float rounding. */
BRISK_AVX2 static inline __m256 brisk_avx2_exp(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3f), lo = _mm256_set1_ps(-87.33654475f);
  /* Operand order keeps NaN: min/max return the second operand on NaN. */
  x = _mm256_min_ps(hi, x);
  __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* Eight halves from p (unaligned). */
BRISK_AVX2 static inline __m256 brisk_avx2_load_f16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* AVX-512 F (+ the AVX2 set): for backends at BRISK_ISA_AVX512 only
 * (brisk_cpu_ctx.avx512). */
#  define BRISK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/* brisk_avx2_exp on 16 lanes: the same reduction, polynomial and limits. */
BRISK_AVX512 static inline __m512 brisk_avx512_exp(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3f), lo = _mm512_set1_ps(-87.33654475f);
  x = _mm512_min_ps(hi, x); /* NaN: the second operand, so NaN stays */
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps((__mmask16)~underflow, p, _mm512_castsi512_ps(e));
}

#endif /* x86-64 */

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
/* Advanced SIMD is part of every AArch64 CPU: no attribute, no run-time
 * check beyond the backend's level (brisk_cpu_ctx.neon). */
#  define BRISK_HAVE_NEON_KERNELS 1
#  include <arm_neon.h>

/* e^x as brisk_avx2_exp (same reduction, polynomial and limits, same fused
 * steps), 4 lanes. */
static inline float32x4_t brisk_neon_exp(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.33654475f);
  /* NaN compares false, so it stays NaN (as the AVX2 operand order does). */
  x = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.3f)), vdupq_n_f32(88.3f), x);
  const uint32x4_t underflow = vcltq_f32(x, lo);
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.0f / 5040);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t v = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), underflow));
}

/* Lane sum in a fixed order: (l0 + l1) + (l2 + l3). */
static inline float brisk_neon_hsum(float32x4_t v) {
  return (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 1)) +
         (vgetq_lane_f32(v, 2) + vgetq_lane_f32(v, 3));
}
#endif /* aarch64 */

#endif
