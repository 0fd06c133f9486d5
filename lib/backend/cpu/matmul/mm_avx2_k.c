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
    const uint8_t *qs[BRISK_MM_MAX_W], *qh[BRISK_MM_MAX_W];
    uint8_t sc[BRISK_MM_MAX_W][8], mn[BRISK_MM_MAX_W][8];
    float d[BRISK_MM_MAX_W], dmin[BRISK_MM_MAX_W];
    for (int c = 0; c < C; c++) {
      const uint8_t *blk = t->w + (size_t)c * t->w_stride + (size_t)i * bs;
      const uint8_t *scales;
      if (five) {
        const brisk_block_q5_k *b = (const brisk_block_q5_k *)blk;
        d[c] = mm_f16(b->d);
        dmin[c] = mm_f16(b->dmin);
        scales = b->scales;
        qs[c] = b->qs;
        qh[c] = b->qh;
      } else {
        const brisk_block_q4_k *b = (const brisk_block_q4_k *)blk;
        d[c] = mm_f16(b->d);
        dmin[c] = mm_f16(b->dmin);
        scales = b->scales;
        qs[c] = b->qs;
        qh[c] = NULL;
      }
      for (int j = 0; j < 8; j++) brisk_k4_scale_min(scales, j, &sc[c][j], &mn[c][j]);
    }
    __m256i sumi[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
      for (int c = 0; c < C; c++) sumi[r][c] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
      __m256i q[BRISK_MM_MAX_W], s[BRISK_MM_MAX_W];
#  pragma GCC unroll 4
      for (int c = 0; c < C; c++) {
        q[c] = levels_k(qs[c], qh[c], j, five);
        s[c] = _mm256_set1_epi16(sc[c][j]);
      }
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const brisk_block_q8_k *xb = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
        const __m256i y = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * j));
#  pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], y), s[c]);
          sumi[r][c] = _mm256_add_epi32(sumi[r][c], p);
        }
      }
    }
    for (int r = 0; r < R; r++) {
      const brisk_block_q8_k *xb = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      int bs2[8];
      for (int j = 0; j < 8; j++) bs2[j] = xb->bsums[2 * j] + xb->bsums[2 * j + 1];
      for (int c = 0; c < C; c++) {
        int summ = 0;
        for (int j = 0; j < 8; j++) summ += mn[c][j] * bs2[j];
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r][c]), _mm256_set1_ps(d[c] * xb->d),
                                    acc[r][c]);
        accm[r][c] -= (float)summ * (dmin[c] * xb->d);
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
    const brisk_block_q6_k *b[BRISK_MM_MAX_W];
    for (int c = 0; c < C; c++)
      b[c] = (const brisk_block_q6_k *)(t->w + (size_t)c * t->w_stride) + i;
    __m256i sumi[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
      for (int c = 0; c < C; c++) sumi[r][c] = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
      __m256i q[BRISK_MM_MAX_W], s[BRISK_MM_MAX_W];
#  pragma GCC unroll 4
      for (int c = 0; c < C; c++) {
        q[c] = levels_q6(b[c], g);
        /* Elements 0-15 and 16-31 of the group have their own scales. */
        s[c] = _mm256_set_m128i(_mm_set1_epi16(b[c]->scales[2 * g + 1]),
                                _mm_set1_epi16(b[c]->scales[2 * g]));
      }
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const brisk_block_q8_k *xb = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
        const __m256i y = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * g));
#  pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], y), s[c]);
          sumi[r][c] = _mm256_add_epi32(sumi[r][c], p);
        }
      }
    }
    for (int r = 0; r < R; r++) {
      const brisk_block_q8_k *xb = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      for (int c = 0; c < C; c++) {
        int offs = 0;
        for (int g = 0; g < 16; g++) offs += b[c]->scales[g] * xb->bsums[g];
        const float dd = mm_f16(b[c]->d) * xb->d;
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r][c]), _mm256_set1_ps(dd), acc[r][c]);
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
