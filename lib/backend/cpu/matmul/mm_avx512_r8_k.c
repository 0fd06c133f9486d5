/* AVX-512 VNNI kernels for the packed _R8 layouts (pack.h) of q4_k, q5_k
 * and q6_k against Q8_K activations: the AVX2 kernels of mm_avx2_r8_k.c on
 * 512-bit vectors that hold the same chunk of two groups (16 weight rows,
 * one per int32 lane; mm_avx512_r8.c), so an activation broadcast, the
 * scale decoding and the float steps serve 16 rows.
 *
 * The AVX2 kernels multiply each maddubs pair sum by the sub-block scale
 * with a madd and add it to lane c's int32 sum; vpdpwssd does both (int16
 * pairs times int16, added into int32 without saturation), so a row's lane c
 * sum is the same exact integer, and the float steps are the AVX2 kernels'
 * lane for lane: the results equal the AVX2 kernels' (and the base
 * layout's) bit for bit. Two int32 chains per lane (lo and hi halves of the
 * chunk pairs) are added at the end of each c, still exactly. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx512.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX512
#  define MM_R8_PF_DIST 1024

/* As mm_avx2_r8_k.c: the vpshufb control putting byte `pos` of each row's
 * lane into both int16 of the lane, low byte (hi = 0) or high (hi = 1); the
 * same in every 128-bit lane. */
MM_INLINE __m512i lane_byte(const int pos, const int hi) {
  int32_t w[4];
  for (int r = 0; r < 4; r++) {
    const uint32_t b = (uint32_t)(4 * r + pos), z = 0x80;
    w[r] = (int32_t)(hi ? z | b << 8 | z << 16 | b << 24 : b | z << 8 | b << 16 | z << 24);
  }
  return _mm512_broadcast_i32x4(_mm_setr_epi32(w[0], w[1], w[2], w[3]));
}
#  define LANE_POS(i) ((i) == 1 ? 2 : (i) == 2 ? 1 : (i))

/* The c-th eighth of a group-block, MM_R8_PF_DIST ahead (mm_avx2_r8_k.c). */
MM_INLINE void prefetch_eighth(const uint8_t *g, size_t gbs, int c) {
  const size_t o1 = (size_t)(c + 1) * gbs / 8;
  for (size_t o = ((size_t)c * gbs / 8 + 63) / 64 * 64; o < o1; o += 64)
    _mm_prefetch((const char *)(g + MM_R8_PF_DIST + o), _MM_HINT_T0);
}

/* mm_avx2_r8_k.c's r8k_finish on 16 lanes: lane sums in mm_hsum's order. */
MM_INLINE __m512 finish(const __m512 a[8], __m512 accm) {
  const __m512 s0 = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6]));
  const __m512 s1 = _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7]));
  return _mm512_add_ps(_mm512_add_ps(s0, s1), accm);
}

/* The fifth bits of sub-block j (0..7) from a qh chunk, as 0x10. */
MM_INLINE __m512i fifth_bit(const __m512i h, const int j) {
  const __m512i b =
      j < 4 ? _mm512_slli_epi16(h, (unsigned)(4 - j)) : _mm512_srli_epi16(h, (unsigned)(j - 4));
  return _mm512_and_si512(b, _mm512_set1_epi8(0x10));
}

/* q4_k_r8 and q5_k_r8 (five): mm_avx2_r8_k.c's tile_q45_k_r8, per pair. */
MM_INLINE void tile_q45_k_r8(const brisk_mm_tile *t, const int five, const int G, const int R) {
  const int64_t nb = t->k / BRISK_QK_K;
  const int NP = (G + 1) / 2;
  const size_t gbs = BRISK_PACK_ROWS * (five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k));
  const size_t qs_at = five ? BRISK_R8_Q5_K_QS : BRISK_R8_Q4_K_QS;
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  const __m512i lo16 = _mm512_set1_epi16(0x00ff);
  __m512 acc[2 * BRISK_MM_MAX_X][8]; /* [pairs * R][lane c] x 16 rows */
  __m512 accm[2 * BRISK_MM_MAX_X];   /* [pairs * R] x 16 rows: min terms */
  for (int a = 0; a < NP * R; a++) {
    accm[a] = _mm512_setzero_ps();
    for (int c = 0; c < 8; c++) acc[a][c] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nb; i++) {
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
    __m512i bs2[BRISK_MM_MAX_X][4]; /* [R][pair]: 32-sums 2p, 2p + 1 in every lane */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      const __m128i b0 = _mm_loadu_si128((const __m128i *)xb[r]->bsums);
      const __m128i b1 = _mm_loadu_si128((const __m128i *)(xb[r]->bsums + 8));
      int32_t s[4];
      _mm_storeu_si128((__m128i *)s, _mm_hadd_epi16(b0, b1));
      MM_UNROLL(4)
      for (int p = 0; p < 4; p++) bs2[r][p] = _mm512_set1_epi32(s[p]);
    }
    MM_UNROLL(2)
    for (int pi = 0; pi < NP; pi++) {
      const uint8_t *ga = t->w + (size_t)(2 * pi) * gstride + (size_t)i * gbs;
      const uint8_t *gb = t->w + (size_t)MM512_PAIR_HI(pi, G) * gstride + (size_t)i * gbs;
      const __m512 dv = mm512_load_f16x2(ga + BRISK_R8_Q4_K_D, gb + BRISK_R8_Q4_K_D);
      const __m512 mv = mm512_load_f16x2(ga + BRISK_R8_Q4_K_DMIN, gb + BRISK_R8_Q4_K_DMIN);
      const __m512i slo = mm512_load2(ga + BRISK_R8_Q4_K_SCLO, gb + BRISK_R8_Q4_K_SCLO);
      const __m512i mlo = mm512_load2(ga + BRISK_R8_Q4_K_MNLO, gb + BRISK_R8_Q4_K_MNLO);
      const __m512i hi = mm512_load2(ga + BRISK_R8_Q4_K_HI, gb + BRISK_R8_Q4_K_HI);
      const __m512i sa = _mm512_or_si512(_mm512_and_si512(slo, m4),
                                         _mm512_and_si512(_mm512_slli_epi16(hi, 4), m30));
      const __m512i sb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(slo, 4), m4),
                                         _mm512_and_si512(_mm512_slli_epi16(hi, 2), m30));
      const __m512i ma = _mm512_or_si512(_mm512_and_si512(mlo, m4), _mm512_and_si512(hi, m30));
      const __m512i mb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(mlo, 4), m4),
                                         _mm512_and_si512(_mm512_srli_epi16(hi, 2), m30));
      __m512i sc[8]; /* [sub-block] x 16 rows: the scale in both int16 of the row's lane */
      MM_UNROLL(8)
      for (int j = 0; j < 8; j++)
        sc[j] = _mm512_shuffle_epi8(j < 4 ? sa : sb, lane_byte(LANE_POS(j % 4), 0));
      __m512 dd[BRISK_MM_MAX_X];
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        const __m512 xd = _mm512_set1_ps(xb[r]->d);
        dd[r] = _mm512_mul_ps(dv, xd);
        __m512i summ = _mm512_madd_epi16(_mm512_and_si512(ma, lo16), bs2[r][0]);
        summ = _mm512_add_epi32(summ, _mm512_madd_epi16(_mm512_srli_epi16(ma, 8), bs2[r][1]));
        summ = _mm512_add_epi32(summ, _mm512_madd_epi16(_mm512_and_si512(mb, lo16), bs2[r][2]));
        summ = _mm512_add_epi32(summ, _mm512_madd_epi16(_mm512_srli_epi16(mb, 8), bs2[r][3]));
        accm[pi * R + r] = _mm512_sub_ps(
            accm[pi * R + r], _mm512_mul_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mv, xd)));
      }
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++) {
        if (t->prefetch) {
          prefetch_eighth(ga, gbs, c);
          if (2 * pi + 1 < G) prefetch_eighth(gb, gbs, c);
        }
        __m512i s0[BRISK_MM_MAX_X], s1[BRISK_MM_MAX_X]; /* [R] x 16 rows: lane c, two chains */
        MM_UNROLL(4)
        for (int r = 0; r < R; r++) s0[r] = s1[r] = _mm512_setzero_si512();
        const __m512i qh =
            five ? mm512_load2(ga + BRISK_R8_Q5_K_QH + 32 * c, gb + BRISK_R8_Q5_K_QH + 32 * c)
                 : _mm512_setzero_si512();
        MM_UNROLL(4)
        for (int p = 0; p < 4; p++) {
          const size_t qo = qs_at + 32 * (size_t)(4 * c + p);
          const __m512i q = mm512_load2(ga + qo, gb + qo);
          __m512i lo = _mm512_and_si512(q, m4);
          __m512i hq = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
          if (five) {
            lo = _mm512_or_si512(lo, fifth_bit(qh, 2 * p));
            hq = _mm512_or_si512(hq, fifth_bit(qh, 2 * p + 1));
          }
          MM_UNROLL(4)
          for (int r = 0; r < R; r++) {
            const __m512i y0 = mm512_bcast4(xb[r]->qs + 32 * (2 * p) + 4 * c);
            const __m512i y1 = mm512_bcast4(xb[r]->qs + 32 * (2 * p + 1) + 4 * c);
            s0[r] = _mm512_dpwssd_epi32(s0[r], _mm512_maddubs_epi16(lo, y0), sc[2 * p]);
            s1[r] = _mm512_dpwssd_epi32(s1[r], _mm512_maddubs_epi16(hq, y1), sc[2 * p + 1]);
          }
        }
        MM_UNROLL(4)
        for (int r = 0; r < R; r++)
          acc[pi * R + r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0[r], s1[r])),
                                               dd[r], acc[pi * R + r][c]);
      }
    }
  }
  for (int pi = 0; pi < NP; pi++)
    for (int r = 0; r < R; r++)
      mm512_store_pair(t, pi, r, finish(acc[pi * R + r], accm[pi * R + r]), G);
}

/* q6_k_r8: mm_avx2_r8_k.c's tile_q6_k_r8, per pair. */
MM_INLINE void tile_q6_k_r8(const brisk_mm_tile *t, const int G, const int R) {
  const int64_t nb = t->k / BRISK_QK_K;
  const int NP = (G + 1) / 2;
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q6_k);
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m512i m3f = _mm512_set1_epi8(0x3f);
  __m512 acc[2 * BRISK_MM_MAX_X][8]; /* [pairs * R][lane c] x 16 rows */
  __m512 accm[2 * BRISK_MM_MAX_X];   /* [pairs * R] x 16 rows: offset terms */
  for (int a = 0; a < NP * R; a++) {
    accm[a] = _mm512_setzero_ps();
    for (int c = 0; c < 8; c++) acc[a][c] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nb; i++) {
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
    MM_UNROLL(4)
    for (int r = 0; r < R; r++)
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
    MM_UNROLL(2)
    for (int pi = 0; pi < NP; pi++) {
      const uint8_t *ga = t->w + (size_t)(2 * pi) * gstride + (size_t)i * gbs;
      const uint8_t *gb = t->w + (size_t)MM512_PAIR_HI(pi, G) * gstride + (size_t)i * gbs;
      const __m512 dv = mm512_load_f16x2(ga + BRISK_R8_Q6_K_D, gb + BRISK_R8_Q6_K_D);
      __m512i sv[4]; /* [v] x 16 rows: int8 scales 4v + PERM[b] */
      MM_UNROLL(4)
      for (int v = 0; v < 4; v++)
        sv[v] = mm512_load2(ga + BRISK_R8_Q6_K_SC + 32 * v, gb + BRISK_R8_Q6_K_SC + 32 * v);
      __m512 dd[BRISK_MM_MAX_X];
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        dd[r] = _mm512_mul_ps(dv, _mm512_set1_ps(xb[r]->d));
        __m512i offs = _mm512_setzero_si512();
        MM_UNROLL(4)
        for (int v = 0; v < 4; v++) {
          const __m512i ev = _mm512_srai_epi16(_mm512_slli_epi16(sv[v], 8), 8);
          const __m512i od = _mm512_srai_epi16(sv[v], 8);
          offs = _mm512_add_epi32(offs, _mm512_madd_epi16(ev, mm512_bcast4(xb[r]->bsums + 4 * v)));
          offs =
              _mm512_add_epi32(offs, _mm512_madd_epi16(od, mm512_bcast4(xb[r]->bsums + 4 * v + 2)));
        }
        accm[pi * R + r] = _mm512_sub_ps(
            accm[pi * R + r], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_slli_epi32(offs, 5)), dd[r]));
      }
      MM_UNROLL(2)
      for (int half = 0; half < 2; half++) {
        __m512i sc[8]; /* [group of 32] x 16 rows: scale 2 * group + half, int16 pairs */
        MM_UNROLL(8)
        for (int q = 0; q < 8; q++) {
          const int s = 2 * q + half;
          sc[q] =
              _mm512_srai_epi16(_mm512_shuffle_epi8(sv[s / 4], lane_byte(LANE_POS(s % 4), 1)), 8);
        }
        MM_UNROLL(4)
        for (int c = 4 * half; c < 4 * half + 4; c++) {
          if (t->prefetch) {
            prefetch_eighth(ga, gbs, c);
            if (2 * pi + 1 < G) prefetch_eighth(gb, gbs, c);
          }
          __m512i s0[BRISK_MM_MAX_X], s1[BRISK_MM_MAX_X];
          MM_UNROLL(4)
          for (int r = 0; r < R; r++) s0[r] = s1[r] = _mm512_setzero_si512();
          MM_UNROLL(2)
          for (int h = 0; h < 2; h++) {
            const size_t qo = BRISK_R8_Q6_K_Q + 96 * (size_t)(2 * c + h);
            __m512i lv[4];
            lv[3] = _mm512_setzero_si512();
            MM_UNROLL(3)
            for (int part = 0; part < 3; part++) {
              const __m512i x = mm512_load2(ga + qo + 32 * part, gb + qo + 32 * part);
              lv[part] = _mm512_and_si512(x, m3f);
              lv[3] = _mm512_or_si512(
                  lv[3], _mm512_srli_epi16(_mm512_andnot_si512(m3f, x), (unsigned)(6 - 2 * part)));
            }
            MM_UNROLL(4)
            for (int s = 0; s < 4; s++) {
              MM_UNROLL(4)
              for (int r = 0; r < R; r++) {
                const __m512i y = mm512_bcast4(xb[r]->qs + 32 * (4 * h + s) + 4 * c);
                const __m512i pr = _mm512_maddubs_epi16(lv[s], y);
                if (s % 2 == 0)
                  s0[r] = _mm512_dpwssd_epi32(s0[r], pr, sc[4 * h + s]);
                else
                  s1[r] = _mm512_dpwssd_epi32(s1[r], pr, sc[4 * h + s]);
              }
            }
          }
          MM_UNROLL(4)
          for (int r = 0; r < R; r++)
            acc[pi * R + r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0[r], s1[r])),
                                                 dd[r], acc[pi * R + r][c]);
        }
      }
    }
  }
  for (int pi = 0; pi < NP; pi++)
    for (int r = 0; r < R; r++)
      mm512_store_pair(t, pi, r, finish(acc[pi * R + r], accm[pi * R + r]), G);
}

#  define tile_q4_k_r8(t, G, R) tile_q45_k_r8(t, 0, G, R)
#  define tile_q5_k_r8(t, G, R) tile_q45_k_r8(t, 1, G, R)
BRISK_MM_R8_512_DISPATCH(q4_k_r8)
BRISK_MM_R8_512_DISPATCH(q5_k_r8)
BRISK_MM_R8_512_DISPATCH(q6_k_r8)

brisk_mm_tile_fn brisk_mm_avx512_r8_k_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8: return q4_k_r8;
  case BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8: return q5_k_r8;
  case BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8: return q6_k_r8;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx512_r8_k_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
