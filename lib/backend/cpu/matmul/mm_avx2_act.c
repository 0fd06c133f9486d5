/* AVX2 activation quantizers (bit-identical to the scalar ones: the same
 * float operations, round half to even) and the AVX2 kernel lookup. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2

MM_INLINE __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

MM_INLINE float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

/* 32 floats times id, rounded to int8 into out[0..32); returns their sum,
 * and with ls != NULL stores 8 x the sums of each 4 consecutive values. */
MM_INLINE int round32(const float *x, __m256 id, int8_t *out, int32_t *ls) {
  const __m256 lim = _mm256_set1_ps(127);
  __m256i v[4];
  for (int q = 0; q < 4; q++) {
    __m256 f = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * q), id),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    f = _mm256_min_ps(_mm256_max_ps(f, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
    v[q] = _mm256_cvtps_epi32(f);
  }
  if (ls) {
    /* Pairwise adds give the 4-sums in lane order 0 2 4 6 | 1 3 5 7. */
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i l = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)ls, _mm256_slli_epi32(l, 3));
  }
  __m256i s = _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  /* Packing interleaves the 128-bit lanes; the permute restores order. */
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i *)out, p);
  return _mm_cvtsi128_si32(s4);
}

static MM_TARGET void quantize_q8(const float *x, void *dst, int64_t k) {
  brisk_mm_q8 *b = dst;
  for (int64_t i = 0; i < k / 32; i++, x += 32) {
    __m256 m = abs8(_mm256_loadu_ps(x));
    for (int q = 1; q < 4; q++) m = _mm256_max_ps(m, abs8(_mm256_loadu_ps(x + 8 * q)));
    const float amax = hmax8(m);
    const float id = amax > 0 ? 127 / amax : 0;
    const int sum = round32(x, _mm256_set1_ps(id), b[i].qs, b[i].ls);
    b[i].d = amax / 127;
    b[i].s = b[i].d * (float)sum;
  }
}

static MM_TARGET void quantize_q8k(const float *x, void *dst, int64_t k) {
  brisk_block_q8_k *b = dst;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++, x += BRISK_QK_K) {
    __m256 m = abs8(_mm256_loadu_ps(x));
    for (int q = 1; q < BRISK_QK_K / 8; q++) m = _mm256_max_ps(m, abs8(_mm256_loadu_ps(x + 8 * q)));
    const float amax = hmax8(m);
    const float id = amax > 0 ? 127 / amax : 0;
    const __m256 idv = _mm256_set1_ps(id);
    for (int g = 0; g < BRISK_QK_K / 32; g++) round32(x + 32 * g, idv, b[i].qs + 32 * g, NULL);
    b[i].d = amax / 127;
    for (int g = 0; g < BRISK_QK_K / 16; g++) {
      int s = 0;
      for (int l = 0; l < 16; l++) s += b[i].qs[16 * g + l];
      b[i].bsums[g] = (int16_t)s;
    }
  }
}

brisk_mm_act_fn brisk_mm_avx2_act(brisk_mm_act act) {
  switch (act) {
  case BRISK_MM_ACT_Q8: return quantize_q8;
  case BRISK_MM_ACT_Q8K: return quantize_q8k;
  default: return NULL;
  }
}

brisk_mm_tile_fn brisk_mm_avx2_tile(uint32_t w_type) {
  brisk_mm_tile_fn f = brisk_mm_avx2_float_tile(w_type);
  if (!f) f = brisk_mm_avx2_q32_wide(w_type);
  if (!f) f = brisk_mm_avx2_k_tile(w_type);
  if (!f) f = brisk_mm_avx2_r8_tile(w_type);
  if (!f) f = brisk_mm_avx2_r8_k_tile(w_type);
  return f;
}

#else

brisk_mm_act_fn brisk_mm_avx2_act(brisk_mm_act act) {
  (void)act;
  return NULL;
}
brisk_mm_tile_fn brisk_mm_avx2_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
