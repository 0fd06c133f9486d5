/* The 256-bit kernels for the packed _R8 layouts (pack.h) of q4_k, q5_k and q6_k against
 * Q8_K activations: one tile is G groups of 8 weight rows (GEMV: up to 4,
 * read as parallel streams) against R activation rows (GEMM: up to 4).
 *
 * The base kernels (mm_avx2_k.c) spend a good part of each row's
 * super-block outside the dot products: unpacking the 6-bit scales,
 * picking them per sub-block, the min / offset sums and their horizontal
 * adds, the float steps. Here a 32-byte chunk holds 4 levels of each of the
 * 8 rows, so all that is done once per 8 rows with every row in its own
 * lane. The base kernels sum in int32 lane c the products of elements
 * 4c .. 4c + 3 of every sub-block; chunk c of a sub-block is exactly those
 * elements, so with the loop over c outermost each lane c of the base is one
 * int32 accumulator here, converted with the same fma per super-block into
 * float accumulator c, and the final lane sum of the base becomes vertical
 * adds in its order. The integer sums are exact and the float steps the
 * base kernels', so the results are the base layout's bit for bit.
 *
 * Keeping the 8 lanes apart costs one maddubs and one madd per 4 levels of
 * a row, as in the base kernels: on a CPU with one vector integer
 * multiplier (Zen 2 here) both are bound by those multiplies when the data
 * is in cache, and the gain is in what surrounds them. Summing the maddubs
 * results of one sub-block in int16 first would halve the madds (GEMM about
 * 1.6x faster measured for q4_k) but gives other float sums than the base
 * AVX2 kernels.
 *
 * A template, included once by mm_avx2_r8_k.c (AVX2) and once by
 * mm_avxvnni_r8_k.c (AVX-VNNI), which differ only in how a scaled int16
 * product joins its int32 sum. The includer defines R8K_TILE_FN (the name
 * of the table function) and R8K_DPWSSD(acc, a, b) (acc + madd(a, b) in
 * int32 lanes, exact either way), and for an ISA past AVX2 redefines
 * MM_TARGET after mm_avx2.h. */
#ifndef R8K_TILE_FN
#  error "define R8K_TILE_FN and R8K_DPWSSD before including mm_r8_k_avx2.h"
#endif

#ifdef BRISK_MM_HAVE_AVX2
/* GEMV prefetch distance in each stream (a group-block is 1152 / 1680
 * bytes): 512 to 4096 measured within noise on a shared machine (cold
 * 8192 x 4096, one thread), 1024 a little ahead. */
#  define MM_R8_PF_DIST 1024

/* vpshufb control putting byte `pos` of each row's lane into both int16 of
 * the lane: in the low byte (zero-extended, hi = 0) or the high byte (for an
 * arithmetic shift, hi = 1). */
MM_INLINE __m256i lane_byte(const int pos, const int hi) {
  int32_t w[4]; /* [row in a 128-bit half]: control bytes z b z b or b z b z */
  for (int r = 0; r < 4; r++) {
    const uint32_t b = (uint32_t)(4 * r + pos), z = 0x80;
    w[r] = (int32_t)(hi ? z | b << 8 | z << 16 | b << 24 : b | z << 8 | b << 16 | z << 24);
  }
  return _mm256_setr_epi32(w[0], w[1], w[2], w[3], w[0], w[1], w[2], w[3]);
}

/* Byte of a lane holding item i (0..3) of a run of 4 (pack.h's PERM). */
#  define LANE_POS(i) ((i) == 1 ? 2 : (i) == 2 ? 1 : (i))

/* Row totals of the 8 lane accumulators in mm_hsum's order, plus the min /
 * offset sums: what the base kernels store for each row. */
MM_INLINE __m256 r8k_finish(const __m256 a[8], __m256 accm) {
  const __m256 s0 = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
  const __m256 s1 = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
  return _mm256_add_ps(_mm256_add_ps(s0, s1), accm);
}

/* Prefetches the c-th eighth (c = 0..7) of the group-block MM_R8_PF_DIST ahead of
 * g (gbs bytes): a line per 64 bytes read, spread over the block as the
 * chunks are. */
MM_INLINE void r8k_prefetch(const uint8_t *g, size_t gbs, int c) {
  const size_t o1 = (size_t)(c + 1) * gbs / 8;
  for (size_t o = ((size_t)c * gbs / 8 + 63) / 64 * 64; o < o1; o += 64)
    _mm_prefetch((const char *)(g + MM_R8_PF_DIST + o), _MM_HINT_T0);
}

/* The fifth bits of sub-block j (0..7) from a qh chunk, as 0x10. */
MM_INLINE __m256i fifth_bit(const __m256i h, const int j) {
  const __m256i b = j < 4 ? _mm256_slli_epi16(h, 4 - j) : _mm256_srli_epi16(h, j - 4);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

/* q4_k_r8 and q5_k_r8 (five). Per group-block: the scales and mins of the 8
 * rows decoded at once into bytes (lane r, byte b: item PERM[b] of
 * sub-blocks 0..3 in sa / ma, 4..7 in sb / mb); the min term of each row
 * from two madds per half against the activation's 32-sums. Unsigned levels
 * times int8 activations in maddubs pairs stay below 2 * 31 * 127; madd
 * with the int16 scale sums them to int32. */
MM_INLINE void tile_q45_k_r8(const brisk_mm_tile *t, const int five, const int G, const int R) {
  const int64_t nb = t->k / BRISK_QK_K;
  const size_t gbs = BRISK_PACK_ROWS * (five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k));
  const size_t qs_at = five ? BRISK_R8_Q5_K_QS : BRISK_R8_Q4_K_QS;
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i lo16 = _mm256_set1_epi16(0x00ff);
  __m256 acc[BRISK_MM_MAX_X][8]; /* [G * R][lane c] x 8 rows */
  __m256 accm[BRISK_MM_MAX_X];   /* [G * R] x 8 rows: min terms */
  for (int a = 0; a < G * R; a++) {
    accm[a] = _mm256_setzero_ps();
    for (int c = 0; c < 8; c++) acc[a][c] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; i++) {
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
    __m256i bs2[BRISK_MM_MAX_X][4]; /* [R][pair]: 32-sums 2p, 2p + 1 in every lane */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      const __m128i b0 = _mm_loadu_si128((const __m128i *)xb[r]->bsums);
      const __m128i b1 = _mm_loadu_si128((const __m128i *)(xb[r]->bsums + 8));
      const __m256i s = _mm256_castsi128_si256(_mm_hadd_epi16(b0, b1));
      MM_UNROLL(4)
      for (int p = 0; p < 4; p++) bs2[r][p] = _mm256_permutevar8x32_epi32(s, _mm256_set1_epi32(p));
    }
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + BRISK_R8_Q4_K_D)));
      const __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + BRISK_R8_Q4_K_DMIN)));
      const __m256i slo = _mm256_loadu_si256((const __m256i *)(g + BRISK_R8_Q4_K_SCLO));
      const __m256i mlo = _mm256_loadu_si256((const __m256i *)(g + BRISK_R8_Q4_K_MNLO));
      const __m256i hi = _mm256_loadu_si256((const __m256i *)(g + BRISK_R8_Q4_K_HI));
      const __m256i sa = _mm256_or_si256(_mm256_and_si256(slo, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(hi, 4), m30));
      const __m256i sb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(slo, 4), m4),
                                         _mm256_and_si256(_mm256_slli_epi16(hi, 2), m30));
      const __m256i ma = _mm256_or_si256(_mm256_and_si256(mlo, m4), _mm256_and_si256(hi, m30));
      const __m256i mb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(mlo, 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi16(hi, 2), m30));
      __m256i sc[8]; /* [sub-block] x 8 rows: the scale in both int16 of the row's lane */
      MM_UNROLL(8)
      for (int j = 0; j < 8; j++)
        sc[j] = _mm256_shuffle_epi8(j < 4 ? sa : sb, lane_byte(LANE_POS(j % 4), 0));
      __m256 dd[BRISK_MM_MAX_X]; /* [R] x 8 rows: d * d_x */
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        const __m256 xd = _mm256_set1_ps(xb[r]->d);
        dd[r] = _mm256_mul_ps(dv, xd);
        __m256i summ = _mm256_madd_epi16(_mm256_and_si256(ma, lo16), bs2[r][0]);
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(_mm256_srli_epi16(ma, 8), bs2[r][1]));
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(_mm256_and_si256(mb, lo16), bs2[r][2]));
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(_mm256_srli_epi16(mb, 8), bs2[r][3]));
        accm[gi * R + r] = _mm256_sub_ps(
            accm[gi * R + r], _mm256_mul_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(mv, xd)));
      }
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++) {
        if (t->prefetch) r8k_prefetch(g, gbs, c);
        __m256i sumi[BRISK_MM_MAX_X]; /* [R] x 8 rows: lane c of the base kernel */
        MM_UNROLL(4)
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        const __m256i qh =
            five ? _mm256_loadu_si256((const __m256i *)(g + BRISK_R8_Q5_K_QH + 32 * c))
                 : _mm256_setzero_si256();
        MM_UNROLL(4)
        for (int p = 0; p < 4; p++) {
          const __m256i q = _mm256_loadu_si256((const __m256i *)(g + qs_at + 32 * (4 * c + p)));
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hq = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          if (five) {
            lo = _mm256_or_si256(lo, fifth_bit(qh, 2 * p));
            hq = _mm256_or_si256(hq, fifth_bit(qh, 2 * p + 1));
          }
          MM_UNROLL(4)
          for (int r = 0; r < R; r++) {
            const __m256i y0 = mm_bcast32(xb[r]->qs + 32 * (2 * p) + 4 * c);
            const __m256i y1 = mm_bcast32(xb[r]->qs + 32 * (2 * p + 1) + 4 * c);
            sumi[r] = R8K_DPWSSD(sumi[r], _mm256_maddubs_epi16(lo, y0), sc[2 * p]);
            sumi[r] = R8K_DPWSSD(sumi[r], _mm256_maddubs_epi16(hq, y1), sc[2 * p + 1]);
          }
        }
        MM_UNROLL(4)
        for (int r = 0; r < R; r++)
          acc[gi * R + r][c] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), dd[r], acc[gi * R + r][c]);
      }
    }
  }
  for (int gi = 0; gi < G; gi++)
    for (int r = 0; r < R; r++)
      _mm256_storeu_ps(t->y + (size_t)r * t->y_stride + (size_t)gi * BRISK_PACK_ROWS,
                       r8k_finish(acc[gi * R + r], accm[gi * R + r]));
}

/* q6_k_r8. Scales are int8: picked into the high byte of each int16 and
 * shifted down arithmetically. Levels 0..63 times int8 activations stay
 * below 2 * 63 * 127 in maddubs pairs. The -32 offset of every level comes
 * off as 32 * sum(scale * 16-sum) from the activation's sums, per row. */
MM_INLINE void tile_q6_k_r8(const brisk_mm_tile *t, const int G, const int R) {
  const int64_t nb = t->k / BRISK_QK_K;
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q6_k);
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const __m256i m3f = _mm256_set1_epi8(0x3f);
  __m256 acc[BRISK_MM_MAX_X][8]; /* [G * R][lane c] x 8 rows */
  __m256 accm[BRISK_MM_MAX_X];   /* [G * R] x 8 rows: offset terms */
  for (int a = 0; a < G * R; a++) {
    accm[a] = _mm256_setzero_ps();
    for (int c = 0; c < 8; c++) acc[a][c] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; i++) {
    const brisk_block_q8_k *xb[BRISK_MM_MAX_X];
    MM_UNROLL(4)
    for (int r = 0; r < R; r++)
      xb[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + BRISK_R8_Q6_K_D)));
      __m256i sv[4]; /* [v] x 8 rows: int8 scales 4v + PERM[b] */
      MM_UNROLL(4)
      for (int v = 0; v < 4; v++)
        sv[v] = _mm256_loadu_si256((const __m256i *)(g + BRISK_R8_Q6_K_SC + 32 * v));
      __m256 dd[BRISK_MM_MAX_X]; /* [R] x 8 rows: d * d_x */
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        dd[r] = _mm256_mul_ps(dv, _mm256_set1_ps(xb[r]->d));
        __m256i offs = _mm256_setzero_si256();
        MM_UNROLL(4)
        for (int v = 0; v < 4; v++) {
          const __m256i ev = _mm256_srai_epi16(_mm256_slli_epi16(sv[v], 8), 8);
          const __m256i od = _mm256_srai_epi16(sv[v], 8);
          offs = _mm256_add_epi32(offs, _mm256_madd_epi16(ev, mm_bcast32(xb[r]->bsums + 4 * v)));
          offs =
              _mm256_add_epi32(offs, _mm256_madd_epi16(od, mm_bcast32(xb[r]->bsums + 4 * v + 2)));
        }
        accm[gi * R + r] = _mm256_sub_ps(
            accm[gi * R + r], _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_slli_epi32(offs, 5)), dd[r]));
      }
      /* Chunks 0..3 of a group of 32 take its first scale, 4..7 its second. */
      MM_UNROLL(2)
      for (int half = 0; half < 2; half++) {
        __m256i sc[8]; /* [group of 32] x 8 rows: scale 2 * group + half, int16 pairs */
        MM_UNROLL(8)
        for (int q = 0; q < 8; q++) {
          const int s = 2 * q + half;
          sc[q] =
              _mm256_srai_epi16(_mm256_shuffle_epi8(sv[s / 4], lane_byte(LANE_POS(s % 4), 1)), 8);
        }
        MM_UNROLL(4)
        for (int c = 4 * half; c < 4 * half + 4; c++) {
          if (t->prefetch) r8k_prefetch(g, gbs, c);
          __m256i sumi[BRISK_MM_MAX_X]; /* [R] x 8 rows: lane c of the base kernel */
          MM_UNROLL(4)
          for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
          MM_UNROLL(2)
          for (int h = 0; h < 2; h++) {
            const uint8_t *qp = g + BRISK_R8_Q6_K_Q + 96 * (2 * c + h);
            __m256i lv[4]; /* levels of groups 4h + s, elements 4c.. (pack.h) */
            lv[3] = _mm256_setzero_si256();
            MM_UNROLL(3)
            for (int part = 0; part < 3; part++) {
              const __m256i x = _mm256_loadu_si256((const __m256i *)(qp + 32 * part));
              lv[part] = _mm256_and_si256(x, m3f);
              lv[3] = _mm256_or_si256(lv[3],
                                      _mm256_srli_epi16(_mm256_andnot_si256(m3f, x), 6 - 2 * part));
            }
            MM_UNROLL(4)
            for (int s = 0; s < 4; s++) {
              MM_UNROLL(4)
              for (int r = 0; r < R; r++) {
                const __m256i y = mm_bcast32(xb[r]->qs + 32 * (4 * h + s) + 4 * c);
                sumi[r] = R8K_DPWSSD(sumi[r], _mm256_maddubs_epi16(lv[s], y), sc[4 * h + s]);
              }
            }
          }
          MM_UNROLL(4)
          for (int r = 0; r < R; r++)
            acc[gi * R + r][c] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), dd[r], acc[gi * R + r][c]);
        }
      }
    }
  }
  for (int gi = 0; gi < G; gi++)
    for (int r = 0; r < R; r++)
      _mm256_storeu_ps(t->y + (size_t)r * t->y_stride + (size_t)gi * BRISK_PACK_ROWS,
                       r8k_finish(acc[gi * R + r], accm[gi * R + r]));
}

#  define tile_q4_k_r8(t, G, R) tile_q45_k_r8(t, 0, G, R)
#  define tile_q5_k_r8(t, G, R) tile_q45_k_r8(t, 1, G, R)
MM_R8_DISPATCH(q4_k_r8)
MM_R8_DISPATCH(q5_k_r8)
MM_R8_DISPATCH(q6_k_r8)

brisk_mm_tile_fn R8K_TILE_FN(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8: return q4_k_r8;
  case BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8: return q5_k_r8;
  case BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8: return q6_k_r8;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn R8K_TILE_FN(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
