/* AVX-VNNI kernels (the VEX vpdpbusd of AVX2-class CPUs: Intel Alder Lake
 * and later, AMD Zen 5) for the packed _R8 layouts of the 32-element types:
 * mm_avx2_r8.c with each maddubs + int16 add (+ the closing madd) replaced
 * by a vpdpbusd into int32 lanes. The tile shapes, the exact per-block
 * integers and the float steps are those of the AVX2 kernels, so the
 * results are theirs bit for bit. Run at BRISK_ISA_AVXVNNI (core/cpu.h)
 * when the CPU has AVX-VNNI. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2
#  undef MM_TARGET
#  define MM_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#  define MM_R8_PF_DIST 1024

/* v shifted left by s bits (right by -s) in 16-bit lanes; s is a constant
 * once the callers' loops are unrolled. */
MM_INLINE __m256i shift16(__m256i v, int s) {
  return s >= 0 ? _mm256_slli_epi16(v, s) : _mm256_srli_epi16(v, -s);
}

/* Both kernels run G groups (GEMV: up to 4, so that a thread reads several
 * streams at once; one stream per core stays near 13 GB/s here, short of what
 * the memory gives) against R activation rows (GEMM: up to 4, G = 1). Each
 * group's data is contiguous, so prefetching a fixed distance ahead in each
 * stream covers it. */

/* The broadcast activation bytes y[4c..4c+3] of row r: made once per block
 * and shared when several groups use them (GEMV); with one group (GEMM, up
 * to 4 rows x 8 vectors, more than the registers) made where used, which
 * the compiler turns into broadcast loads. */
#  define Y(r, c) (G > 1 ? yb[r][c] : mm_bcast32(xb[r]->qs + 4 * (c)))

/* The nibble types: q4_0 (levels - 8), q4_1 (+ min), q5_0 (levels - 16),
 * q5_1 (+ min). */
enum { NIB_Q4_0, NIB_Q4_1, NIB_Q5_0, NIB_Q5_1 };

/* q4_x / q5_x _r8 (pack.h; mm_avx2_r8.c): per row, the lo and hi levels
 * times y gather in two int32 chains, added per block; the +8 / +16 offsets
 * of q4_0 / q5_0 come off from the activation's lane sums, the mins of
 * q4_1 / q5_1 take their own float chain, as in the AVX2 kernels. */
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
  const __m256i m4 = _mm256_set1_epi8(0x0f), m31 = _mm256_set1_epi8(0x1f);
  const __m256i m7 = _mm256_set1_epi8(0x07), m24 = _mm256_set1_epi8(0x18);
  __m256 acc[BRISK_MM_MAX_X];  /* [G][R] x 8 outputs */
  __m256 accm[BRISK_MM_MAX_X]; /* [G][R] x 8: min terms (q4_1, q5_1) */
  MM_UNROLL(4)
  for (int a = 0; a < G * R; a++) acc[a] = accm[a] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    __m256i off[BRISK_MM_MAX_X];   /* [R] 8 or 16 x sum(y) in every lane */
    __m256i yb[BRISK_MM_MAX_X][8]; /* [R][8]: y[4c..4c+3] in every lane, shared by the groups */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      off[r] = _mm256_setzero_si256();
      if (offset) {
        off[r] = mm_lane_total(_mm256_loadu_si256((const __m256i *)xb[r]->ls));
        if (five) off[r] = _mm256_add_epi32(off[r], off[r]);
      }
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++)
        yb[r][c] = G > 1 ? mm_bcast32(xb[r]->qs + 4 * c) : _mm256_setzero_si256();
    }
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      if (t->prefetch) {
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 128), _MM_HINT_T0);
      }
      const __m256 dwv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
      const __m256 mwv = has_min ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + mo)))
                                 : _mm256_setzero_ps();
      /* q5_x: [8][4] bytes, bits 3-4 of the high levels of chunk c at 2c, 2c+1 */
      const __m256i hb =
          five ? _mm256_loadu_si256((const __m256i *)(g + ho)) : _mm256_setzero_si256();
      __m256i s[BRISK_MM_MAX_X];  /* [R] x 8 int32: row j's sum in lane j (lo levels) */
      __m256i sh[BRISK_MM_MAX_X]; /* [R]: the same for the hi levels */
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) s[r] = sh[r] = _mm256_setzero_si256();
      MM_UNROLL(4)
      for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(g + qo + 32 * c));
        __m256i lo, hi;
        if (five) { /* q = low level | high level bits 0-2 << 5 */
          lo = _mm256_and_si256(q, m31);
          hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 5), m7),
                               _mm256_and_si256(shift16(hb, 3 - 2 * c), m24));
        } else {
          lo = _mm256_and_si256(q, m4);
          hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        MM_UNROLL(4)
        for (int r = 0; r < R; r++) {
          s[r] = _mm256_dpbusd_avx_epi32(s[r], lo, Y(r, c));
          sh[r] = _mm256_dpbusd_avx_epi32(sh[r], hi, Y(r, 4 + c));
        }
      }
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        __m256i tot = _mm256_add_epi32(s[r], sh[r]);
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

/* q8_0_r8: group-block = d[8], then 8 chunks of 32 bytes, elements 4c..4c+3
 * of each row. Signed levels: vpdpbusd takes |q| (128 for -128, unsigned)
 * and y with q's sign. */
MM_INLINE void tile_q8_0_r8(const brisk_mm_tile *t, const int G, const int R) {
  const int64_t nb = t->k / 32;
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q8_0);
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  __m256 acc[BRISK_MM_MAX_X]; /* [G][R] x 8 outputs */
  MM_UNROLL(4)
  for (int a = 0; a < G * R; a++) acc[a] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; i++) {
    const brisk_mm_q8 *xb[BRISK_MM_MAX_X];
    __m256i yb[BRISK_MM_MAX_X][8]; /* [R][8]: y[4c..4c+3] in every lane, shared by the groups */
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      xb[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++)
        yb[r][c] = G > 1 ? mm_bcast32(xb[r]->qs + 4 * c) : _mm256_setzero_si256();
    }
    MM_UNROLL(4)
    for (int gi = 0; gi < G; gi++) {
      const uint8_t *g = t->w + (size_t)gi * gstride + (size_t)i * gbs;
      if (t->prefetch) {
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 128), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 192), _MM_HINT_T0);
        _mm_prefetch((const char *)(g + MM_R8_PF_DIST + 256), _MM_HINT_T0);
      }
      const __m256 dwv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
      __m256i s[BRISK_MM_MAX_X]; /* [R] x 8 int32: row j's sum in lane j */
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) s[r] = _mm256_setzero_si256();
      MM_UNROLL(8)
      for (int c = 0; c < 8; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * c));
        const __m256i u = _mm256_sign_epi8(q, q);
        MM_UNROLL(4)
        for (int r = 0; r < R; r++) {
          s[r] = _mm256_dpbusd_avx_epi32(s[r], u, _mm256_sign_epi8(Y(r, c), q));
        }
      }
      MM_UNROLL(4)
      for (int r = 0; r < R; r++) {
        const __m256 dd = _mm256_mul_ps(dwv, _mm256_broadcast_ss(&xb[r]->d));
        acc[gi * R + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), dd, acc[gi * R + r]);
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

brisk_mm_tile_fn brisk_mm_avxvnni_r8_tile(uint32_t w_type) {
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

brisk_mm_tile_fn brisk_mm_avxvnni_r8_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif

brisk_mm_tile_fn brisk_mm_avxvnni_tile(uint32_t w_type) {
  brisk_mm_tile_fn f = brisk_mm_avxvnni_r8_tile(w_type);
  return f ? f : brisk_mm_avxvnni_r8_k_tile(w_type);
}
