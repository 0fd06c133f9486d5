/* AVX2 "wide" kernels for the 32-element types (q8_0, q4_0, q4_1, q5_0,
 * q5_1) against brisk_mm_q8 activations: up to 8 weight rows at once, one
 * output per float lane.
 *
 * The previous kernels kept 8 lane sums per output and paid an int->float
 * conversion, a scale product and an FMA per block and output; this layout
 * ran 1.1-1.5x faster than they did (docs/performance.md). Here each weight block's lane sums for
 * the 8 rows are reduced to one exact integer per row with a hadd tree (q4_x in int16 from the
 * maddubs results, which also saves the madd; q5_x two steps in int16; q8_0's products are too
 * large for int16 sums), so the conversion, the scale product (8 weight scales times one activation
 * scale) and the FMA serve 8 outputs. Each output is then the plain chain acc = fma((float)P_i,
 * fl(d_w,i * d_x,i), acc)   over blocks i in order, with P_i the exact integer dot product of block
 * i: the same for any tile shape, GEMV or GEMM, thread count or batch, as mm_internal.h requires.
 * Missing rows of a short tile repeat the last row; their lanes are dropped. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2

enum { W_Q8_0, W_Q4_0, W_Q4_1, W_Q5_0, W_Q5_1 };

/* [8] int32 vectors -> one vector of their 8 lane totals (lane j = v[j]). */
/* _mm_insert_epi16 with a lane known only once the caller's loop is
 * unrolled: clang wants a literal lane, so each case has one (gcc folds the
 * switch away). */
MM_INLINE __m128i insert16(__m128i v, uint16_t x, int j) {
  switch (j) {
  case 0: return _mm_insert_epi16(v, x, 0);
  case 1: return _mm_insert_epi16(v, x, 1);
  case 2: return _mm_insert_epi16(v, x, 2);
  case 3: return _mm_insert_epi16(v, x, 3);
  case 4: return _mm_insert_epi16(v, x, 4);
  case 5: return _mm_insert_epi16(v, x, 5);
  case 6: return _mm_insert_epi16(v, x, 6);
  default: return _mm_insert_epi16(v, x, 7);
  }
}

MM_INLINE __m256i reduce8(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  /* a = [rows 0-3 of the low 128-bit halves | rows 0-3 of the high ones] */
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

/* [8] maddubs results of q4_x rows -> their 8 totals (lane j = m[j]), in
 * int16 up to the last step: a lane of m is at most 2 * 15 * 127, so 16
 * elements (one 128-bit half of a block) sum to at most 30480. */
MM_INLINE __m256i reduce8_i16(const __m256i m[8]) {
  const __m256i a = _mm256_hadd_epi16(_mm256_hadd_epi16(m[0], m[1]), _mm256_hadd_epi16(m[2], m[3]));
  const __m256i b = _mm256_hadd_epi16(_mm256_hadd_epi16(m[4], m[5]), _mm256_hadd_epi16(m[6], m[7]));
  const __m256i c = _mm256_hadd_epi16(a, b); /* [rows 0-7, elements 0-15 | 16-31] */
  return _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(c)),
                          _mm256_cvtepi16_epi32(_mm256_extracti128_si256(c, 1)));
}

/* As reduce8_i16 for q5_x, whose lanes (up to 2 * 31 * 127) allow two int16
 * steps: the third goes through int32. */
MM_INLINE __m256i reduce8_i16x2(const __m256i m[8], const __m256i ones) {
  const __m256i a = _mm256_madd_epi16(
      _mm256_hadd_epi16(_mm256_hadd_epi16(m[0], m[1]), _mm256_hadd_epi16(m[2], m[3])), ones);
  const __m256i b = _mm256_madd_epi16(
      _mm256_hadd_epi16(_mm256_hadd_epi16(m[4], m[5]), _mm256_hadd_epi16(m[6], m[7])), ones);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

MM_INLINE void tile_wide(const brisk_mm_tile *t, const int type, const int NW, const int R) {
  static const size_t block_size[] = {sizeof(brisk_block_q8_0), sizeof(brisk_block_q4_0),
                                      sizeof(brisk_block_q4_1), sizeof(brisk_block_q5_0),
                                      sizeof(brisk_block_q5_1)};
  const size_t bs = block_size[type];
  const bool has_min = type == W_Q4_1 || type == W_Q5_1;
  /* offsets in a block: the levels (low nibbles) and q5_x's fifth bits */
  const size_t qo = type == W_Q5_1 ? 8 : type == W_Q5_0 ? 6 : has_min ? 4 : 2;
  const size_t ho = type == W_Q5_1 ? 4 : 2;
  const int64_t nb = t->k / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t *w[8]; /* [8] weight rows; short tiles repeat the last */
  for (int j = 0; j < 8; j++) w[j] = t->w + (size_t)(j < NW ? j : NW - 1) * t->w_stride;
  const size_t pf = (size_t)NW * t->w_stride;
  __m256 acc[BRISK_MM_MAX_X];  /* [R] x 8 outputs */
  __m256 accm[BRISK_MM_MAX_X]; /* [R] x 8: q4_1 / q5_1 min terms, added last */
#  pragma GCC unroll 4
  for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm256_setzero_ps();

  for (int64_t i = 0; i < nb; i++) {
    const size_t o = (size_t)i * bs;
    __m256i u[8];                     /* [8 rows][32] levels: |q|, 0..15 or 0..31 */
    __m256i sg[8];                    /* q8_0: the signed levels, for sign(y, q) */
    __m128i dh = _mm_setzero_si128(); /* [8] fp16 weight scales */
    __m128i mh = _mm_setzero_si128(); /* [8] fp16 mins (q4_1, q5_1) */
#  pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      const uint8_t *blk = w[j] + o;
      /* see mm_prefetch_block: the next GEMV tile's block */
      if (t->prefetch) _mm_prefetch((const char *)(blk + pf), _MM_HINT_T0);
      uint16_t d;
      __builtin_memcpy(&d, blk, 2);
      dh = insert16(dh, d, j);
      if (has_min) {
        uint16_t mn;
        __builtin_memcpy(&mn, blk + 2, 2);
        mh = insert16(mh, mn, j);
      }
      if (type == W_Q8_0) {
        sg[j] = _mm256_loadu_si256((const __m256i *)(blk + 2));
        u[j] = _mm256_sign_epi8(sg[j], sg[j]);
      } else {
        u[j] = mm_nibbles(blk + qo);
        if (type == W_Q5_0 || type == W_Q5_1) u[j] = _mm256_or_si256(u[j], mm_fifth_bits(blk + ho));
      }
    }
    const __m256 dwv = _mm256_cvtph_ps(dh);
    const __m256 mwv = _mm256_cvtph_ps(mh);
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const brisk_mm_q8 *xb = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      const __m256i y = _mm256_loadu_si256((const __m256i *)xb->qs);
      __m256i p[8], tot;
      if (type == W_Q8_0) {
#  pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
          p[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(u[j], _mm256_sign_epi8(y, sg[j])), ones);
        tot = reduce8(p);
      } else {
#  pragma GCC unroll 8
        for (int j = 0; j < 8; j++) p[j] = _mm256_maddubs_epi16(u[j], y);
        tot = type == W_Q4_0 || type == W_Q4_1 ? reduce8_i16(p) : reduce8_i16x2(p, ones);
      }
      /* q4_0 / q5_0 levels carry +8 / +16: ls holds 8 x the 4-sums of y */
      if (type == W_Q4_0 || type == W_Q5_0) {
        const __m256i l = mm_lane_total(_mm256_loadu_si256((const __m256i *)xb->ls));
        tot = _mm256_sub_epi32(tot, type == W_Q4_0 ? l : _mm256_add_epi32(l, l));
      }
      const __m256 dd = _mm256_mul_ps(dwv, _mm256_broadcast_ss(&xb->d));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), dd, acc[r]);
      /* q4_1 / q5_1: + min * (d_x * sum y) */
      if (has_min) accm[r] = _mm256_fmadd_ps(mwv, _mm256_broadcast_ss(&xb->s), accm[r]);
    }
  }
  for (int r = 0; r < R; r++) {
    float out[8];
    _mm256_storeu_ps(out, has_min ? _mm256_add_ps(acc[r], accm[r]) : acc[r]);
    for (int j = 0; j < NW; j++) t->y[(size_t)r * t->y_stride + (size_t)j] = out[j];
  }
}

#  define WIDE_DISPATCH(name, TYPE)                                                                \
    static MM_TARGET void name##_1(const brisk_mm_tile *t, int n_w) {                              \
      tile_wide(t, TYPE, n_w, 1);                                                                  \
    }                                                                                              \
    static MM_TARGET void name##_2(const brisk_mm_tile *t, int n_w) {                              \
      tile_wide(t, TYPE, n_w, 2);                                                                  \
    }                                                                                              \
    static MM_TARGET void name##_3(const brisk_mm_tile *t, int n_w) {                              \
      tile_wide(t, TYPE, n_w, 3);                                                                  \
    }                                                                                              \
    static MM_TARGET void name##_4(const brisk_mm_tile *t, int n_w) {                              \
      tile_wide(t, TYPE, n_w, 4);                                                                  \
    }                                                                                              \
    static void name(const brisk_mm_tile *t, int n_w, int n_x) {                                   \
      static void (*const fns[4])(const brisk_mm_tile *, int) = {name##_1, name##_2, name##_3,     \
                                                                 name##_4};                        \
      fns[n_x - 1](t, n_w);                                                                        \
    }

WIDE_DISPATCH(wide_q8_0, W_Q8_0)
WIDE_DISPATCH(wide_q4_0, W_Q4_0)
WIDE_DISPATCH(wide_q4_1, W_Q4_1)
WIDE_DISPATCH(wide_q5_0, W_Q5_0)
WIDE_DISPATCH(wide_q5_1, W_Q5_1)

brisk_mm_tile_fn brisk_mm_avx2_q32_wide(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q8_0: return wide_q8_0;
  case BRISK_DTYPE_Q4_0: return wide_q4_0;
  case BRISK_DTYPE_Q4_1: return wide_q4_1;
  case BRISK_DTYPE_Q5_0: return wide_q5_0;
  case BRISK_DTYPE_Q5_1: return wide_q5_1;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx2_q32_wide(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
