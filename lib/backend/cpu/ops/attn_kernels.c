/* Scalar and AVX2 kernels for paged attention (see attn_kernels.h). */
#include "backend/cpu/ops/attn_kernels.h"

#include "backend/cpu/ops/vec.h"
#include "core/half.h"

#include "quant/kv_quant.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static void scores_scalar(const float *q, const float *k, int32_t n, int32_t hd, float *sc) {
  for (int32_t c = 0; c < n; c++) {
    const float *kc = k + (int64_t)c * hd;
    float s = 0;
    for (int32_t i = 0; i < hd; i++) s += q[i] * kc[i];
    sc[c] = s;
  }
}

static void exp_shift_scalar(float *sc, int32_t n, float m) {
  for (int32_t c = 0; c < n; c++) sc[c] = expf(sc[c] - m);
}

static void accumulate_scalar(float *acc, const float *p, const float *v, int32_t n, int32_t hd) {
  for (int32_t c = 0; c < n; c++) {
    const float *vc = v + (int64_t)c * hd;
    for (int32_t i = 0; i < hd; i++) acc[i] += p[c] * vc[i];
  }
}

static void scale_scalar(float *x, float s, int32_t n) {
  for (int32_t i = 0; i < n; i++) x[i] *= s;
}

void brisk_attn_dequant_rows_scalar(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                                    float *dst) {
  const size_t rb = brisk_kvq_row_bytes(dtype, hd);
  for (int32_t r = 0; r < n; r++)
    brisk_kvq_dequantize_row_rotated(dtype, rows + (size_t)r * rb, dst + (int64_t)r * hd, hd);
}

/* F16 rows are widened a chunk at a time (scores_f16 NULL): the scalar
 * path is the portable reference, not a fast one. */
static const brisk_attn_kernels scalar_kernels = {
    scores_scalar,
    exp_shift_scalar,
    accumulate_scalar,
    scale_scalar,
    brisk_f16_to_f32_array,
    brisk_attn_dequant_rows_scalar,
    NULL,
    NULL,
    brisk_attn_scores_q8_scalar,
    brisk_attn_accumulate_q8_scalar,
};

const brisk_attn_kernels *brisk_attn_kernels_scalar(void) { return &scalar_kernels; }

#ifdef BRISK_HAVE_AVX2_KERNELS

/* [sum(a0), sum(a1), ..., sum(a7)] */
BRISK_AVX2 static inline __m256 sum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4,
                                     __m256 a5, __m256 a6, __m256 a7) {
  __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s0, s1, 0x31));
}

/* Eight keys at a time, one accumulator each, reduced together: no
 * horizontal sum per key. Leftover keys (n % 8) take a plain dot. */
/* Key rows read as stored: F32, or F16 with each half widened in a
 * register (exact). One body for both, so the two do the same operations in
 * the same order; `f16` is a constant in each caller. */
BRISK_AVX2 static inline __attribute__((always_inline)) __m256 row8(const void *r, int64_t at,
                                                                    bool f16) {
  return f16 ? brisk_avx2_load_f16((const uint16_t *)r + at)
             : _mm256_loadu_ps((const float *)r + at);
}

static inline __attribute__((always_inline)) float row1(const void *r, int64_t at, bool f16) {
  return f16 ? brisk_f16_to_f32(((const uint16_t *)r)[at]) : ((const float *)r)[at];
}

BRISK_AVX2 static inline __attribute__((always_inline)) void
scores_rows(const float *q, const void *k, int32_t n, int32_t hd, float *sc, bool f16) {
  int32_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const int64_t kc = (int64_t)c * hd;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int32_t i = 0;
    for (; i + 8 <= hd; i += 8) {
      __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, row8(k, kc + i, f16), a0);
      a1 = _mm256_fmadd_ps(qv, row8(k, kc + hd + i, f16), a1);
      a2 = _mm256_fmadd_ps(qv, row8(k, kc + 2 * hd + i, f16), a2);
      a3 = _mm256_fmadd_ps(qv, row8(k, kc + 3 * hd + i, f16), a3);
      a4 = _mm256_fmadd_ps(qv, row8(k, kc + 4 * hd + i, f16), a4);
      a5 = _mm256_fmadd_ps(qv, row8(k, kc + 5 * hd + i, f16), a5);
      a6 = _mm256_fmadd_ps(qv, row8(k, kc + 6 * hd + i, f16), a6);
      a7 = _mm256_fmadd_ps(qv, row8(k, kc + 7 * hd + i, f16), a7);
    }
    _mm256_storeu_ps(sc + c, sum8(a0, a1, a2, a3, a4, a5, a6, a7));
    for (; i < hd; i++)
      for (int32_t j = 0; j < 8; j++) sc[c + j] += q[i] * row1(k, kc + (int64_t)j * hd + i, f16);
  }
  for (; c < n; c++) {
    const int64_t kc = (int64_t)c * hd;
    __m256 a = _mm256_setzero_ps();
    int32_t i = 0;
    for (; i + 8 <= hd; i += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), row8(k, kc + i, f16), a);
    float s = brisk_avx2_hsum(a);
    for (; i < hd; i++) s += q[i] * row1(k, kc + i, f16);
    sc[c] = s;
  }
}

BRISK_AVX2 static void scores_avx2(const float *q, const float *k, int32_t n, int32_t hd,
                                   float *sc) {
  scores_rows(q, k, n, hd, sc, false);
}

BRISK_AVX2 static void exp_shift_avx2(float *sc, int32_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  for (int32_t c = 0; c < n; c += 8)
    _mm256_store_ps(sc + c, brisk_avx2_exp(_mm256_sub_ps(_mm256_load_ps(sc + c), vm)));
}

/* Output slices outermost, keys inside: each slice of acc stays in a
 * register across the chunk, and four slices at once keep four independent
 * FMA chains in flight. Per element the keys are still added in order. */
BRISK_AVX2 static inline __attribute__((always_inline)) void
accumulate_rows(float *acc, const float *p, const void *v, int32_t n, int32_t hd, bool f16) {
  int32_t i = 0;
  for (; i + 32 <= hd; i += 32) {
    __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
    __m256 a2 = _mm256_loadu_ps(acc + i + 16), a3 = _mm256_loadu_ps(acc + i + 24);
    for (int32_t c = 0; c < n; c++) {
      const int64_t vc = (int64_t)c * hd + i;
      __m256 pc = _mm256_set1_ps(p[c]);
      a0 = _mm256_fmadd_ps(pc, row8(v, vc, f16), a0);
      a1 = _mm256_fmadd_ps(pc, row8(v, vc + 8, f16), a1);
      a2 = _mm256_fmadd_ps(pc, row8(v, vc + 16, f16), a2);
      a3 = _mm256_fmadd_ps(pc, row8(v, vc + 24, f16), a3);
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= hd; i += 8) {
    __m256 a = _mm256_loadu_ps(acc + i);
    for (int32_t c = 0; c < n; c++)
      a = _mm256_fmadd_ps(_mm256_set1_ps(p[c]), row8(v, (int64_t)c * hd + i, f16), a);
    _mm256_storeu_ps(acc + i, a);
  }
  for (; i < hd; i++) {
    float a = acc[i];
    for (int32_t c = 0; c < n; c++) a += p[c] * row1(v, (int64_t)c * hd + i, f16);
    acc[i] = a;
  }
}

BRISK_AVX2 static void accumulate_avx2(float *acc, const float *p, const float *v, int32_t n,
                                       int32_t hd) {
  accumulate_rows(acc, p, v, n, hd, false);
}

BRISK_AVX2 static void scale_avx2(float *x, float s, int32_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; i++) x[i] *= s;
}

BRISK_AVX2 static void f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, brisk_avx2_load_f16(src + i));
  for (; i < n; i++) dst[i] = brisk_f16_to_f32(src[i]);
}

/* Eight values at a time: INT8 sign-extended, E4M3 moved into a float's
 * exponent and mantissa fields (e4m3 bits << 20 reads as the value times
 * 2^-120, subnormals included) and scaled back by 2^120, exactly; then one
 * multiply by the group's scale, as the reference. */
BRISK_AVX2 void brisk_attn_dequant_rows_avx2(uint32_t dtype, const uint8_t *rows, int32_t n,
                                             int32_t hd, float *dst) {
  const size_t rb = brisk_kvq_row_bytes(dtype, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  const bool q8 = dtype == BRISK_KVQ_DTYPE_Q8;
  const __m256 two120 = _mm256_set1_ps(0x1p120f);
  const __m256i mag = _mm256_set1_epi32(0x7f), sgn = _mm256_set1_epi32(0x80);
  for (int32_t r = 0; r < n; r++) {
    const uint8_t *row = rows + (size_t)r * rb, *q = row + 2 * ng;
    float *x = dst + (int64_t)r * hd;
    for (int32_t g = 0; g < ng; g++) {
      uint16_t dh;
      memcpy(&dh, row + 2 * g, 2);
      const float s = brisk_f16_to_f32(dh);
      const __m256 vs = _mm256_set1_ps(s);
      int32_t i = g * BRISK_KVQ_GROUP, end = i + BRISK_KVQ_GROUP < hd ? i + BRISK_KVQ_GROUP : hd;
      for (; i + 8 <= end; i += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(q + i));
        __m256 v;
        if (q8) {
          v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        } else {
          __m256i c = _mm256_cvtepu8_epi32(b);
          __m256i f = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(c, mag), 20),
                                      _mm256_slli_epi32(_mm256_and_si256(c, sgn), 24));
          v = _mm256_mul_ps(_mm256_castsi256_ps(f), two120);
        }
        _mm256_storeu_ps(x + i, _mm256_mul_ps(v, vs));
      }
      for (; i < end; i++) x[i] = s * (q8 ? (float)(int8_t)q[i] : brisk_kvq_e4m3_to_f32(q[i]));
    }
  }
}

/* scores_avx2 and accumulate_avx2 reading F16 rows in place. */
BRISK_AVX2 static void scores_f16_avx2(const float *q, const uint16_t *k, int32_t n, int32_t hd,
                                       float *sc) {
  scores_rows(q, k, n, hd, sc, true);
}

BRISK_AVX2 static void accumulate_f16_avx2(float *acc, const float *p, const uint16_t *v, int32_t n,
                                           int32_t hd) {
  accumulate_rows(acc, p, v, n, hd, true);
}

static const brisk_attn_kernels avx2_kernels = {
    scores_avx2,
    exp_shift_avx2,
    accumulate_avx2,
    scale_avx2,
    f16_to_f32_avx2,
    brisk_attn_dequant_rows_avx2,
    scores_f16_avx2,
    accumulate_f16_avx2,
    brisk_attn_scores_q8_avx2,
    brisk_attn_accumulate_q8_avx2,
};

const brisk_attn_kernels *brisk_attn_kernels_avx2(void) { return &avx2_kernels; }

/* The AVX2 kernels with the AVX-VNNI INT8 scores. */
static const brisk_attn_kernels avxvnni_kernels = {
    scores_avx2,
    exp_shift_avx2,
    accumulate_avx2,
    scale_avx2,
    f16_to_f32_avx2,
    brisk_attn_dequant_rows_avx2,
    scores_f16_avx2,
    accumulate_f16_avx2,
    brisk_attn_scores_q8_avxvnni,
    brisk_attn_accumulate_q8_avx2,
};

const brisk_attn_kernels *brisk_attn_kernels_avxvnni(void) { return &avxvnni_kernels; }

#else

const brisk_attn_kernels *brisk_attn_kernels_avx2(void) { return NULL; }
const brisk_attn_kernels *brisk_attn_kernels_avxvnni(void) { return NULL; }

#endif
