/* AVX-512 VNNI kernels for the packed _R8 layouts (pack.h) of the
 * 32-element types (q8_0, q4_0, q4_1, q5_0, q5_1): the AVX2 kernels'
 * tiles (mm_avx2_r8.c), G groups of 8 weight rows (GEMV: up to 4) against
 * R activation rows (GEMM: up to 4, G = 1), on 64-byte vectors.
 *
 * A 512-bit vector holds two consecutive 32-byte chunks of a group-block
 * (chunks c and c + 1: 4 bytes of each of the 8 rows, twice), so row j's
 * products land in int32 lanes j and 8 + j. The activation vector of the
 * pair has y[4c..4c+3] in lanes 0-7 and y[4c+4..4c+7] in lanes 8-15, made
 * once per block and row with one permute. vpdpbusd multiplies unsigned
 * weight bytes by signed activation bytes and adds each 4 products into
 * int32 without the int16 step (and the saturation care) of maddubs, so
 * one instruction does the AVX2 kernels' maddubs + add (+ madd), on twice
 * the bytes. q8_0's signed levels go in as q + 128 (an xor), and
 * 128 x sum(y) comes off once per block, from the activation's lane sums.
 *
 * Every row's per-block integer P_i is exact either way, and the float
 * steps after it are the AVX2 kernels' (the same fma chain on 8 lanes), so
 * the results equal the AVX2 kernels' bit for bit, and hence the base
 * layout's: a model may mix these tiles with the AVX2 base-layout kernels
 * for the n % 8 tail rows without breaking batch invariance. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2
/* The driver calls these only at BRISK_ISA_AVX512 (core/cpu.h): AVX-512
 * F/BW/VL/VNNI with the OS saving the ZMM state. The AVX2 helpers of
 * mm_avx2.h inline into them (a subset target). */
#  undef MM_TARGET
#  define MM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#  define MM_R8_PF_DIST 1024

/* y[8P .. 8P+7] of a block as (4 bytes in lanes 0-7, the next 4 in lanes
 * 8-15): the activation vector of chunk pair P, from the block's 32 bytes
 * in the low half of y. */
MM_INLINE __m512i pair_bcast(__m512i y, const int P) {
  const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * P), _mm256_set1_epi32(2 * P + 1), 1);
  return _mm512_permutexvar_epi32(idx, y);
}

MM_INLINE __m512i load_y(const brisk_mm_q8 *xb) {
  return _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)xb->qs));
}

/* Lanes j and 8 + j added: row j's total in lane j. */
MM_INLINE __m256i fold(__m512i s) {
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

MM_INLINE void prefetch_group(const uint8_t *g, const int lines) {
  for (int l = 0; l < lines; l++)
    _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 64 * l), _MM_HINT_T0);
}

enum { NIB_Q4_0, NIB_Q4_1, NIB_Q5_0, NIB_Q5_1 };

/* q4_x / q5_x _r8 (layout in pack.h and mm_avx2_r8.c): chunk pair 0 holds
 * the lo levels of y pair 0 and the hi levels of y pair 2, chunk pair 1 those
 * of y pairs 1 and 3. q5_x's hi levels take bits 3-4 from hb shifted by
 * 3 - 2c (c the chunk) in 16-bit lanes, as the AVX2 kernel shifts them:
 * per-half counts here. */
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
  const size_t gbs = BRISK_PACK_ROWS * block_size[type];
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m31 = _mm512_set1_epi8(0x1f);
  const __m512i m7 = _mm512_set1_epi8(0x07), m24 = _mm512_set1_epi8(0x18);
  /* hb shifts of chunks 0, 1 (left 3, 1) and 2, 3 (right 1, 3) */
  const __m512i sl01 = _mm512_inserti64x4(_mm512_set1_epi16(3), _mm256_set1_epi16(1), 1);
  const __m512i sr23 = _mm512_inserti64x4(_mm512_set1_epi16(1), _mm256_set1_epi16(3), 1);
  __m256 acc[BRISK_MM_MAX_X];  /* [G][R] x 8 outputs */
  __m256 accm[BRISK_MM_MAX_X]; /* [G][R] x 8: min terms (q4_1, q5_1) */
  MM_UNROLL(4)
  for (int a = 0; a < G * R; a++) acc[a] = accm[a] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    __m256i off[BRISK_MM_MAX_X];   /* [R] 8 or 16 x sum(y) in every lane */
    __m512i yp[BRISK_MM_MAX_X][4]; /* [R][pair] */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      off[r] = _mm256_setzero_si256();
      if (offset) {
        off[r] = mm_lane_total(_mm256_loadu_si256((const __m256i *)xb[r]->ls));
        if (five) off[r] = _mm256_add_epi32(off[r], off[r]);
      }
      const __m512i y = load_y(xb[r]);
      MM_UNROLL(4)
      for (int p = 0; p < 4; p++) yp[r][p] = pair_bcast(y, p);
    }
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      if (t->prefetch) prefetch_group(g, 3);
      const __m256 dwv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
      const __m256 mwv = has_min ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + mo)))
                                 : _mm256_setzero_ps();
      const __m512i q01 = _mm512_loadu_si512((const void *)(g + qo));
      const __m512i q23 = _mm512_loadu_si512((const void *)(g + qo + 64));
      __m512i lo01, hi01, lo23, hi23;
      if (five) {
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(g + ho)));
        lo01 = _mm512_and_si512(q01, m31);
        lo23 = _mm512_and_si512(q23, m31);
        hi01 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q01, 5), m7),
                               _mm512_and_si512(_mm512_sllv_epi16(hb, sl01), m24));
        hi23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q23, 5), m7),
                               _mm512_and_si512(_mm512_srlv_epi16(hb, sr23), m24));
      } else {
        lo01 = _mm512_and_si512(q01, m4);
        lo23 = _mm512_and_si512(q23, m4);
        hi01 = _mm512_and_si512(_mm512_srli_epi16(q01, 4), m4);
        hi23 = _mm512_and_si512(_mm512_srli_epi16(q23, 4), m4);
      }
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        /* two chains, joined in the fold */
        __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo01, yp[r][0]);
        __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo23, yp[r][1]);
        s0 = _mm512_dpbusd_epi32(s0, hi01, yp[r][2]);
        s1 = _mm512_dpbusd_epi32(s1, hi23, yp[r][3]);
        __m256i tot = fold(_mm512_add_epi32(s0, s1));
        if (offset) tot = _mm256_sub_epi32(tot, off[r]);
        const __m256 dd = _mm256_mul_ps(dwv, _mm256_broadcast_ss(&xb[r]->d));
        acc[gi * R + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), dd, acc[gi * R + r]);
        if (has_min)
          accm[gi * R + r] = _mm256_fmadd_ps(mwv, _mm256_broadcast_ss(&xb[r]->s), accm[gi * R + r]);
      }
    }
  }
  for (int gi = 0; gi < G; gi++)
    for (int r = 0; r < R; r++)
      _mm256_storeu_ps(t->y + (size_t)r * t->y_stride + (size_t)gi * BRISK_PACK_ROWS,
                       has_min ? _mm256_add_ps(acc[gi * R + r], accm[gi * R + r])
                               : acc[gi * R + r]);
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

/* q8_0_r8: d[8], then 8 chunks; chunk pair P against y pair P. The levels
 * go in as q ^ 0x80 = q + 128 (0..255, unsigned), so a lane gathers
 * sum (q + 128) y = sum q y + 128 sum y; the last term is 16 x the sum of
 * the activation's ls (8 x its 4-sums), the same for every row. */
MM_INLINE void tile_q8_0_r8(const brisk_mm_tile *t, const int G, const int R) {
  const int64_t nb = t->k / 32;
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q8_0);
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  __m256 acc[BRISK_MM_MAX_X]; /* [G][R] x 8 outputs */
  MM_UNROLL(4)
  for (int a = 0; a < G * R; a++) acc[a] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    __m256i off[BRISK_MM_MAX_X];   /* [R] 128 x sum(y) in every lane */
    __m512i yp[BRISK_MM_MAX_X][4]; /* [R][pair] */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      off[r] = _mm256_slli_epi32(mm_lane_total(_mm256_loadu_si256((const __m256i *)xb[r]->ls)), 4);
      const __m512i y = load_y(xb[r]);
      MM_UNROLL(4)
      for (int p = 0; p < 4; p++) yp[r][p] = pair_bcast(y, p);
    }
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      if (t->prefetch) prefetch_group(g, 5);
      const __m256 dwv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
      __m512i u[4];
      MM_UNROLL(4)
      for (int p = 0; p < 4; p++)
        u[p] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(g + 16 + 64 * p)), bias);
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], yp[r][0]);
        __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], yp[r][1]);
        s0 = _mm512_dpbusd_epi32(s0, u[2], yp[r][2]);
        s1 = _mm512_dpbusd_epi32(s1, u[3], yp[r][3]);
        const __m256i tot = _mm256_sub_epi32(fold(_mm512_add_epi32(s0, s1)), off[r]);
        const __m256 dd = _mm256_mul_ps(dwv, _mm256_broadcast_ss(&xb[r]->d));
        acc[gi * R + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), dd, acc[gi * R + r]);
      }
    }
  }
  for (int gi = 0; gi < G; gi++)
    for (int r = 0; r < R; r++)
      _mm256_storeu_ps(t->y + (size_t)r * t->y_stride + (size_t)gi * BRISK_PACK_ROWS,
                       acc[gi * R + r]);
}

MM_R8_DISPATCH(q4_0_r8)
MM_R8_DISPATCH(q8_0_r8)
MM_R8_DISPATCH(q4_1_r8)
MM_R8_DISPATCH(q5_0_r8)
MM_R8_DISPATCH(q5_1_r8)

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

/* The AVX-512 table: the packed 32-element types for now; every other type
 * keeps its AVX2 kernel at BRISK_ISA_AVX512. */
brisk_mm_tile_fn brisk_mm_avx512_tile(uint32_t w_type) { return brisk_mm_avx512_r8_tile(w_type); }
