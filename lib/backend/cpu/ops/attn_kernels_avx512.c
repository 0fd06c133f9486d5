/* AVX-512 F kernels for paged attention (see attn_kernels.h), for backends
 * at BRISK_ISA_AVX512: the AVX2 kernels' schemes on 16 lanes. They agree
 * with the scalar kernels to rounding (tests/backend: attention against
 * float64, every kernel path). */
#include "backend/cpu/ops/attn_kernels.h"

#include "backend/cpu/ops/vec.h"
#include "core/half.h"

#include <stddef.h>

#ifdef BRISK_HAVE_AVX2_KERNELS

/* One key at a time, four accumulators over the head dimension, the last
 * hd % 16 elements in one masked step. */
BRISK_AVX512 static void scores_avx512(const float *q, const float *k, int32_t n, int32_t hd,
                                       float *sc) {
  const __mmask16 tail = (__mmask16)((1u << (hd % 16)) - 1);
  for (int32_t c = 0; c < n; c++) {
    const float *kc = k + (int64_t)c * hd;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int32_t i = 0;
    for (; i + 64 <= hd; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(kc + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), _mm512_loadu_ps(kc + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 32), _mm512_loadu_ps(kc + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 48), _mm512_loadu_ps(kc + i + 48), a3);
    }
    for (; i + 16 <= hd; i += 16)
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(kc + i), a0);
    if (tail)
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + i), _mm512_maskz_loadu_ps(tail, kc + i),
                           a1);
    sc[c] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
}

BRISK_AVX512 static void exp_shift_avx512(float *sc, int32_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  for (int32_t c = 0; c < n; c += 16)
    _mm512_storeu_ps(sc + c, brisk_avx512_exp(_mm512_sub_ps(_mm512_loadu_ps(sc + c), vm)));
}

/* Output slices outermost, keys inside, four slices at once; per element
 * the keys are added in order. */
BRISK_AVX512 static void accumulate_avx512(float *acc, const float *p, const float *v, int32_t n,
                                           int32_t hd) {
  int32_t i = 0;
  for (; i + 64 <= hd; i += 64) {
    __m512 a0 = _mm512_loadu_ps(acc + i), a1 = _mm512_loadu_ps(acc + i + 16);
    __m512 a2 = _mm512_loadu_ps(acc + i + 32), a3 = _mm512_loadu_ps(acc + i + 48);
    for (int32_t c = 0; c < n; c++) {
      const float *vc = v + (int64_t)c * hd + i;
      const __m512 pc = _mm512_set1_ps(p[c]);
      a0 = _mm512_fmadd_ps(pc, _mm512_loadu_ps(vc), a0);
      a1 = _mm512_fmadd_ps(pc, _mm512_loadu_ps(vc + 16), a1);
      a2 = _mm512_fmadd_ps(pc, _mm512_loadu_ps(vc + 32), a2);
      a3 = _mm512_fmadd_ps(pc, _mm512_loadu_ps(vc + 48), a3);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i < hd; i += 16) {
    const __mmask16 mk = hd - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - i)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(mk, acc + i);
    for (int32_t c = 0; c < n; c++)
      a = _mm512_fmadd_ps(_mm512_set1_ps(p[c]), _mm512_maskz_loadu_ps(mk, v + (int64_t)c * hd + i),
                          a);
    _mm512_mask_storeu_ps(acc + i, mk, a);
  }
}

BRISK_AVX512 static void scale_avx512(float *x, float s, int32_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  for (; i < n; i++) x[i] *= s;
}

BRISK_AVX512 static void f16_to_f32_avx512(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
  for (; i < n; i++) dst[i] = brisk_f16_to_f32(src[i]);
}

/* Sixteen halves widened (exact); masked lanes read as 0. */
BRISK_AVX512 static inline __m512 load_f16x16(const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

BRISK_AVX512 static inline __m512 load_f16x16_masked(__mmask16 m, const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* scores_avx512 and accumulate_avx512 reading F16 rows in place: the same
 * operations in the same order on the exactly widened values. */
BRISK_AVX512 static void scores_f16_avx512(const float *q, const uint16_t *k, int32_t n, int32_t hd,
                                           float *sc) {
  const __mmask16 tail = (__mmask16)((1u << (hd % 16)) - 1);
  for (int32_t c = 0; c < n; c++) {
    const uint16_t *kc = k + (int64_t)c * hd;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int32_t i = 0;
    for (; i + 64 <= hd; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load_f16x16(kc + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), load_f16x16(kc + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 32), load_f16x16(kc + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 48), load_f16x16(kc + i + 48), a3);
    }
    for (; i + 16 <= hd; i += 16)
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load_f16x16(kc + i), a0);
    if (tail)
      a1 =
          _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + i), load_f16x16_masked(tail, kc + i), a1);
    sc[c] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
}

BRISK_AVX512 static void accumulate_f16_avx512(float *acc, const float *p, const uint16_t *v,
                                               int32_t n, int32_t hd) {
  int32_t i = 0;
  for (; i + 64 <= hd; i += 64) {
    __m512 a0 = _mm512_loadu_ps(acc + i), a1 = _mm512_loadu_ps(acc + i + 16);
    __m512 a2 = _mm512_loadu_ps(acc + i + 32), a3 = _mm512_loadu_ps(acc + i + 48);
    for (int32_t c = 0; c < n; c++) {
      const uint16_t *vc = v + (int64_t)c * hd + i;
      const __m512 pc = _mm512_set1_ps(p[c]);
      a0 = _mm512_fmadd_ps(pc, load_f16x16(vc), a0);
      a1 = _mm512_fmadd_ps(pc, load_f16x16(vc + 16), a1);
      a2 = _mm512_fmadd_ps(pc, load_f16x16(vc + 32), a2);
      a3 = _mm512_fmadd_ps(pc, load_f16x16(vc + 48), a3);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i < hd; i += 16) {
    const __mmask16 mk = hd - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - i)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(mk, acc + i);
    for (int32_t c = 0; c < n; c++)
      a = _mm512_fmadd_ps(_mm512_set1_ps(p[c]), load_f16x16_masked(mk, v + (int64_t)c * hd + i), a);
    _mm512_mask_storeu_ps(acc + i, mk, a);
  }
}

/* INT8 scores by the EVEX vpdpbusd (AVX-512 VNNI, part of the level). */
static const brisk_attn_kernels avx512_kernels = {
    scores_avx512,
    exp_shift_avx512,
    accumulate_avx512,
    scale_avx512,
    f16_to_f32_avx512,
    brisk_attn_dequant_rows_avx2,
    scores_f16_avx512,
    accumulate_f16_avx512,
    brisk_attn_scores_q8_avx512vnni,
    brisk_attn_accumulate_q8_avx512,
};

const brisk_attn_kernels *brisk_attn_kernels_avx512(void) { return &avx512_kernels; }

#else

const brisk_attn_kernels *brisk_attn_kernels_avx512(void) { return NULL; }

#endif
