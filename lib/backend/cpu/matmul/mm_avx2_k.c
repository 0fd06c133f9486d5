/* AVX2 kernels for Q4_K, Q5_K and Q6_K against Q8_K activations. Within a
 * super-block everything is integer: maddubs for the level products, madd
 * with the broadcast sub-block scale, int32 accumulation; one FMA per
 * super-block and output converts it. The mins (q4_k / q5_k) and the -32
 * offset (q6_k) go through the activation's 16-element sums. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2

/* The 8 six-bit scales and mins of a q4_k / q5_k super-block (the packing
 * brisk_k4_scale_min documents), four at a time in 32-bit words. */
MM_INLINE void scales_mins_k4(const uint8_t *s, __m128i *sc16, __m128i *mn16) {
  uint32_t u0, u1, u2;
  __builtin_memcpy(&u0, s, 4);
  __builtin_memcpy(&u1, s + 4, 4);
  __builtin_memcpy(&u2, s + 8, 4);
  const uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
  *sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)sc_hi << 32 | sc_lo)));
  *mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)mn_hi << 32 | mn_lo)));
}

/* Broadcast of 16-bit word j of both 128-bit lanes (control for vpshufb). */
MM_INLINE __m256i word_picker(const int j) {
  return _mm256_set1_epi16((short)((2 * j) | (2 * j + 1) << 8));
}

/* Sum of 4 int32 lanes. */
MM_INLINE int hsum_i32x4(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
  return _mm_cvtsi128_si32(v);
}

/* Sub-block j (0..7, 32 elements) of a q4_k / q5_k super-block as 32
 * unsigned levels. */
MM_INLINE __m256i levels_k(const uint8_t *qs, const uint8_t *qh, const int j, const int five) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
  __m256i q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
  if (five) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(h, j), _mm256_set1_epi8(1));
    q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
  }
  return q;
}

/* Weight rows run outermost inside a super-block so that only one row's
 * levels are live at a time; activation rows reuse them from registers. */
MM_INLINE void tile_q45_k(const brisk_mm_tile *t, const int five, const int C, const int R) {
  const size_t bs = five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k);
  const int64_t nb = t->k / BRISK_QK_K;
  __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  float accm[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      acc[r][c] = _mm256_setzero_ps();
      accm[r][c] = 0;
    }
  for (int64_t i = 0; i < nb; i++) {
    /* Pair sums of the activation's 16-sums: one per 32-element sub-block. */
    __m128i bs2[BRISK_MM_MAX_X];
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      const __m128i b0 = _mm_loadu_si128((const __m128i *)xb[r]->bsums);
      const __m128i b1 = _mm_loadu_si128((const __m128i *)(xb[r]->bsums + 8));
      bs2[r] = _mm_hadd_epi16(b0, b1);
    }
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      const uint8_t *blk = t->w + (size_t)c * t->w_stride + (size_t)i * bs;
      mm_prefetch_block(blk + (size_t)C * t->w_stride, bs);
      const uint8_t *qs, *qh = NULL, *scales;
      float d, dmin;
      if (five) {
        const brisk_block_q5_k *b = (const brisk_block_q5_k *)blk;
        d = mm_f16(b->d);
        dmin = mm_f16(b->dmin);
        scales = b->scales;
        qs = b->qs;
        qh = b->qh;
      } else {
        const brisk_block_q4_k *b = (const brisk_block_q4_k *)blk;
        d = mm_f16(b->d);
        dmin = mm_f16(b->dmin);
        scales = b->scales;
        qs = b->qs;
      }
      __m128i sc16, mn16;
      scales_mins_k4(scales, &sc16, &mn16);
      const __m256i sc = _mm256_broadcastsi128_si256(sc16);
      __m256i sumi[BRISK_MM_MAX_X];
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
#  pragma GCC unroll 8
      for (int j = 0; j < 8; j++) {
        const __m256i q = levels_k(qs, qh, j, five);
        const __m256i s = _mm256_shuffle_epi8(sc, word_picker(j));
#  pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
          const __m256i y = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 32 * j));
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s));
        }
      }
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const int summ = hsum_i32x4(_mm_madd_epi16(mn16, bs2[r]));
        acc[r][c] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_set1_ps(d * xb[r]->d), acc[r][c]);
        accm[r][c] -= (float)summ * (dmin * xb[r]->d);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      t->y[(size_t)r * t->y_stride + (size_t)c] = mm_hsum(acc[r][c]) + accm[r][c];
}

/* Group g (0..7) of 32 q6_k levels, unsigned 0..63: half h = g / 4 holds
 * 64 ql bytes and 32 qh bytes; group s = g % 4 takes nibble s / 2 of ql
 * bytes 32 * (s % 2).. and bits 2s..2s+1 of qh. */
MM_INLINE __m256i levels_q6(const brisk_block_q6_k *b, const int g) {
  const int h = g / 4, s = g % 4;
  const __m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (s % 2)));
  const __m256i hi = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
  const __m256i lo4 = _mm256_and_si256(s / 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0f));
  const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * s), _mm256_set1_epi8(3));
  return _mm256_or_si256(lo4, _mm256_slli_epi16(hi2, 4));
}

/* vpshufb control giving word 2j in the low lane and word 2j + 1 in the high
 * lane (scales of the two 16-element halves of a 32-element group). */
MM_INLINE __m256i pair_picker(const int j) {
  return _mm256_setr_epi8(4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
                          4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
                          4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3,
                          4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3,
                          4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3);
}

MM_INLINE void tile_q6_k(const brisk_mm_tile *t, const int C, const int R) {
  const int64_t nb = t->k / BRISK_QK_K;
  __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  float accm[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      acc[r][c] = _mm256_setzero_ps();
      accm[r][c] = 0;
    }
  for (int64_t i = 0; i < nb; i++) {
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
    __m256i bsums[BRISK_MM_MAX_X];
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      bsums[r] = _mm256_loadu_si256((const __m256i *)xb[r]->bsums);
    }
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      const brisk_block_q6_k *b = (const brisk_block_q6_k *)(t->w + (size_t)c * t->w_stride) + i;
      mm_prefetch_block((const uint8_t *)b + (size_t)C * t->w_stride, sizeof *b);
      /* 16 int8 scales as int16: [0..7] in both lanes, and [8..15]. */
      const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
      const __m256i sc_a = _mm256_permute2x128_si256(sc, sc, 0x00);
      const __m256i sc_b = _mm256_permute2x128_si256(sc, sc, 0x11);
      __m256i sumi[BRISK_MM_MAX_X];
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
#  pragma GCC unroll 8
      for (int g = 0; g < 8; g++) {
        const __m256i q = levels_q6(b, g);
        const __m256i s = _mm256_shuffle_epi8(g < 4 ? sc_a : sc_b, pair_picker(g % 4));
#  pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
          const __m256i y = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 32 * g));
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s));
        }
      }
      const float d = mm_f16(b->d);
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        /* sum of scale * 16-sum: the -32 offset of every level */
        const __m256i o = _mm256_madd_epi16(sc, bsums[r]);
        const int offs =
            hsum_i32x4(_mm_add_epi32(_mm256_castsi256_si128(o), _mm256_extracti128_si256(o, 1)));
        const float dd = d * xb[r]->d;
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_set1_ps(dd), acc[r][c]);
        accm[r][c] -= (float)(32 * offs) * dd;
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      t->y[(size_t)r * t->y_stride + (size_t)c] = mm_hsum(acc[r][c]) + accm[r][c];
}

#  define KERNEL_Q4_K(t, C, R) tile_q45_k(t, 0, C, R)
#  define KERNEL_Q5_K(t, C, R) tile_q45_k(t, 1, C, R)
#  define KERNEL_Q6_K(t, C, R) tile_q6_k(t, C, R)
MM_TILE_DISPATCH(tile_q4_k, KERNEL_Q4_K)
MM_TILE_DISPATCH(tile_q5_k, KERNEL_Q5_K)
MM_TILE_DISPATCH(tile_q6_k_fn, KERNEL_Q6_K)

brisk_mm_tile_fn brisk_mm_avx2_k_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q4_K: return tile_q4_k;
  case BRISK_DTYPE_Q5_K: return tile_q5_k;
  case BRISK_DTYPE_Q6_K: return tile_q6_k_fn;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx2_k_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
