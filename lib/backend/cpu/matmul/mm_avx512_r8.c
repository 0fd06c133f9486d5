/* AVX-512 VNNI kernels for the packed _R8 layouts (pack.h) of the
 * 32-element types (q8_0, q4_0, q4_1, q5_0, q5_1): G groups of 8 weight
 * rows (GEMV: up to 4) against R activation rows (GEMM: up to 4, with up to
 * 2 groups, BRISK_MM_R8_GEMM_GROUPS_512), on 64-byte vectors.
 *
 * Groups go in pairs: a 512-bit vector holds chunk c (4 bytes of each of 8
 * rows, pack.h) of two groups, so its 16 int32 lanes are 16 weight rows and
 * the activation bytes y[4c..4c+3] are one broadcast load for all of them.
 * (Two chunks of one group in a vector need a permute of y per row and
 * block instead, which bounded the GEMM: q4_0 ran 1.25x the AVX2 kernel
 * that way, 2.0x this way, one core.)
 * vpdpbusd multiplies unsigned weight bytes by signed activation bytes and
 * adds each 4 products into int32 without maddubs' int16 step and its
 * saturation care, so one instruction does the AVX2 kernels' maddubs + add
 * (+ madd) on twice the bytes; the float steps cover 16 rows at once. q8_0's
 * signed levels go in as q + 128 (an xor), and 128 x sum(y) comes off once
 * per block, from the activation's lane sums. An odd last group is read
 * twice and its second half dropped.
 *
 * Every row's per-block integer P_i is exact either way, and the float
 * steps after it are the AVX2 kernels' lane for lane (the same fma chain),
 * so the results equal the AVX2 kernels' bit for bit, and hence the base
 * layout's: the n % 8 tail rows can run the AVX2 base-layout kernels
 * without breaking batch invariance. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx512.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX512
#  define MM_R8_PF_DIST 1024

/* The lane total of 8 int32 (the activation's ls) in all 16 lanes. */
MM_INLINE __m512i total16(const int32_t *ls) {
  const __m256i t = mm_lane_total(_mm256_loadu_si256((const __m256i *)ls));
  return _mm512_broadcastd_epi32(_mm256_castsi256_si128(t));
}

MM_INLINE void prefetch_group(const uint8_t *g, const int lines) {
  for (int l = 0; l < lines; l++)
    _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 64 * l), _MM_HINT_T0);
}

enum { NIB_Q4_0, NIB_Q4_1, NIB_Q5_0, NIB_Q5_1 };

/* q4_x / q5_x _r8 (layout in pack.h and mm_avx2_r8.c): chunk c of the
 * two groups of a pair, against y[4c..4c+3] (lo levels) and y[16+4c..]
 * (hi). q5_x's hi levels take bits 3-4 from hb shifted by 3 - 2c in 16-bit
 * lanes, as the AVX2 kernel shifts them. */
MM_INLINE void tile_nib_r8(const brisk_mm_tile *t, const int type, const int G, const int R) {
  static const size_t block_size[] = {sizeof(brisk_block_q4_0), sizeof(brisk_block_q4_1),
                                      sizeof(brisk_block_q5_0), sizeof(brisk_block_q5_1)};
  const bool has_min = type == NIB_Q4_1 || type == NIB_Q5_1;
  const bool five = type == NIB_Q5_0 || type == NIB_Q5_1;
  const bool offset = type == NIB_Q4_0 || type == NIB_Q5_0;
  const size_t mo = 2 * BRISK_PACK_ROWS;                  /* mins */
  const size_t ho = has_min ? 4 * BRISK_PACK_ROWS : mo;   /* q5_x hb */
  const size_t qo = five ? ho + 4 * BRISK_PACK_ROWS : ho; /* chunks */
  const int64_t nb = t->k / 32;
  const int NP = (G + 1) / 2;
  const size_t gbs = BRISK_PACK_ROWS * block_size[type];
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m31 = _mm512_set1_epi8(0x1f);
  const __m512i m7 = _mm512_set1_epi8(0x07), m24 = _mm512_set1_epi8(0x18);
  __m512 acc[2 * BRISK_MM_MAX_X];  /* [pairs][R] x 16 outputs */
  __m512 accm[2 * BRISK_MM_MAX_X]; /* the same: min terms (q4_1, q5_1) */
  MM_UNROLL(4)
  for (int a = 0; a < NP * R; a++) acc[a] = accm[a] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
    MM_UNROLL(2)
    for (int p = 0; p < NP; p++) {
      const uint8_t *ga = t->w + (size_t)(2 * p) * gstride + (size_t)i * gbs;
      const uint8_t *gb = t->w + (size_t)MM512_PAIR_HI(p, G) * gstride + (size_t)i * gbs;
      if (t->prefetch) {
        prefetch_group(ga, 3);
        if (2 * p + 1 < G) prefetch_group(gb, 3);
      }
      const __m512 dwv = mm512_load_f16x2(ga, gb);
      const __m512 mwv = has_min ? mm512_load_f16x2(ga + mo, gb + mo) : _mm512_setzero_ps();
      const __m512i hb = five ? mm512_load2(ga + ho, gb + ho) : _mm512_setzero_si512();
      __m512i lo[4], hi[4];
      MM_UNROLL(4)
      for (int c = 0; c < 4; c++) {
        const __m512i q = mm512_load2(ga + qo + 32 * c, gb + qo + 32 * c);
        if (five) {
          const int sh = 3 - 2 * c;
          const __m512i h =
              sh >= 0 ? _mm512_slli_epi16(hb, (unsigned)sh) : _mm512_srli_epi16(hb, (unsigned)-sh);
          lo[c] = _mm512_and_si512(q, m31);
          hi[c] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 5), m7),
                                  _mm512_and_si512(h, m24));
        } else {
          lo[c] = _mm512_and_si512(q, m4);
          hi[c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        }
      }
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        const int8_t *y = xb[r]->qs;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512(); /* two chains */
        MM_UNROLL(4)
        for (int c = 0; c < 4; c++) {
          s0 = _mm512_dpbusd_epi32(s0, lo[c], mm512_bcast4(y + 4 * c));
          s1 = _mm512_dpbusd_epi32(s1, hi[c], mm512_bcast4(y + 16 + 4 * c));
        }
        __m512i tot = _mm512_add_epi32(s0, s1);
        if (offset) {
          const __m512i o = total16(xb[r]->ls);
          tot = _mm512_sub_epi32(tot, five ? _mm512_add_epi32(o, o) : o);
        }
        const __m512 dd = _mm512_mul_ps(dwv, _mm512_set1_ps(xb[r]->d));
        acc[p * R + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), dd, acc[p * R + r]);
        if (has_min)
          accm[p * R + r] = _mm512_fmadd_ps(mwv, _mm512_set1_ps(xb[r]->s), accm[p * R + r]);
      }
    }
  }
  if (has_min)
    for (int a = 0; a < NP * R; a++) acc[a] = _mm512_add_ps(acc[a], accm[a]);
  for (int p = 0; p < NP; p++)
    for (int r = 0; r < R; r++) mm512_store_pair(t, p, r, acc[p * R + r], G);
}
MM_INLINE void tile_q4_0_r8(const brisk_mm_tile *t, int G, int R) {
  tile_nib_r8(t, NIB_Q4_0, G, R);
}
MM_INLINE void tile_q4_1_r8(const brisk_mm_tile *t, int G, int R) {
  tile_nib_r8(t, NIB_Q4_1, G, R);
}
MM_INLINE void tile_q5_0_r8(const brisk_mm_tile *t, int G, int R) {
  tile_nib_r8(t, NIB_Q5_0, G, R);
}
MM_INLINE void tile_q5_1_r8(const brisk_mm_tile *t, int G, int R) {
  tile_nib_r8(t, NIB_Q5_1, G, R);
}

/* q8_0_r8: d[8], then 8 chunks; chunk c against y[4c..4c+3]. The levels
 * go in as q ^ 0x80 = q + 128 (0..255, unsigned), so a lane gathers
 * sum (q + 128) y = sum q y + 128 sum y; the last term is 16 x the sum of
 * the activation's ls (8 x its 4-sums), the same for every row. */
MM_INLINE void tile_q8_0_r8(const brisk_mm_tile *t, const int G, const int R) {
  const int64_t nb = t->k / 32;
  const int NP = (G + 1) / 2;
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q8_0);
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  __m512 acc[2 * BRISK_MM_MAX_X]; /* [pairs][R] x 16 outputs */
  MM_UNROLL(4)
  for (int a = 0; a < NP * R; a++) acc[a] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
    MM_UNROLL(2)
    for (int p = 0; p < NP; p++) {
      const uint8_t *ga = t->w + (size_t)(2 * p) * gstride + (size_t)i * gbs;
      const uint8_t *gb = t->w + (size_t)MM512_PAIR_HI(p, G) * gstride + (size_t)i * gbs;
      if (t->prefetch) {
        prefetch_group(ga, 5);
        if (2 * p + 1 < G) prefetch_group(gb, 5);
      }
      const __m512 dwv = mm512_load_f16x2(ga, gb);
      __m512i u[8];
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++)
        u[c] = _mm512_xor_si512(mm512_load2(ga + 16 + 32 * c, gb + 16 + 32 * c), bias);
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        const int8_t *y = xb[r]->qs;
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        MM_UNROLL(4)
        for (int c = 0; c < 4; c++) {
          s0 = _mm512_dpbusd_epi32(s0, u[c], mm512_bcast4(y + 4 * c));
          s1 = _mm512_dpbusd_epi32(s1, u[4 + c], mm512_bcast4(y + 16 + 4 * c));
        }
        const __m512i tot =
            _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_slli_epi32(total16(xb[r]->ls), 4));
        const __m512 dd = _mm512_mul_ps(dwv, _mm512_set1_ps(xb[r]->d));
        acc[p * R + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), dd, acc[p * R + r]);
      }
    }
  }
  for (int p = 0; p < NP; p++)
    for (int r = 0; r < R; r++) mm512_store_pair(t, p, r, acc[p * R + r], G);
}

BRISK_MM_R8_512_DISPATCH(q4_0_r8)
BRISK_MM_R8_512_DISPATCH(q8_0_r8)
BRISK_MM_R8_512_DISPATCH(q4_1_r8)
BRISK_MM_R8_512_DISPATCH(q5_0_r8)
BRISK_MM_R8_512_DISPATCH(q5_1_r8)

brisk_mm_tile_fn brisk_mm_avx512_r8_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8: return q4_0_r8;
  case BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8: return q8_0_r8;
  case BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8: return q4_1_r8;
  case BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8: return q5_0_r8;
  case BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8: return q5_1_r8;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx512_r8_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif

/* The AVX-512 table: the packed layouts and the float types; the base
 * layouts of the quantized types keep their AVX2 kernels at BRISK_ISA_AVX512. */
brisk_mm_tile_fn brisk_mm_avx512_tile(uint32_t w_type) {
  brisk_mm_tile_fn f = brisk_mm_avx512_r8_tile(w_type);
  if (!f) f = brisk_mm_avx512_r8_k_tile(w_type);
  return f ? f : brisk_mm_avx512_float_tile(w_type);
}
