/* Shared pieces of the AVX-512 VNNI kernels (mm_avx512_*.c). They carry a
 * target attribute, as the AVX2 ones do, so the library still runs on any
 * x86-64: the driver calls them only at BRISK_ISA_AVX512 (core/cpu.h:
 * AVX-512 F/BW/VL/VNNI with the OS saving the opmask and ZMM state). The
 * AVX2 helpers of mm_avx2.h inline into them (a subset target). */
#ifndef BRISK_BACKEND_CPU_MATMUL_MM_AVX512_H
#define BRISK_BACKEND_CPU_MATMUL_MM_AVX512_H

#include "backend/cpu/matmul/mm_avx2.h"
#include "backend/cpu/matmul/pack.h"

#ifdef BRISK_MM_HAVE_AVX2
#  define BRISK_MM_HAVE_AVX512 1
/* MM_INLINE and the dispatch macros below pick this up where they expand. */
#  undef MM_TARGET
#  define MM_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* The 4 bytes at p in every int32 lane (a broadcast load). */
MM_INLINE __m512i mm512_bcast4(const void *p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/* 32 bytes at a in the low half, at b in the high half: the same chunk of
 * two groups, 16 rows. */
MM_INLINE __m512i mm512_load2(const uint8_t *a, const uint8_t *b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                            _mm256_loadu_si256((const __m256i *)b), 1);
}

/* 8 fp16 at a, then 8 at b, as 16 floats. */
MM_INLINE __m512 mm512_load_f16x2(const uint8_t *a, const uint8_t *b) {
  return _mm512_cvtph_ps(
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                              _mm_loadu_si128((const __m128i *)b), 1));
}

/* The groups pair p of a G-group tile reads: 2p and 2p + 1, or 2p twice
 * when G is odd and p the last pair (its upper half is computed and
 * dropped). */
#  define MM512_PAIR_HI(p, G) (2 * (p) + 1 < (G) ? 2 * (p) + 1 : 2 * (p))

/* Stores pair p's 16 results of activation row r (8 for a lone group). */
MM_INLINE void mm512_store_pair(const brisk_mm_tile *t, int p, int r, __m512 v, const int G) {
  float *y = t->y + (size_t)r * t->y_stride + (size_t)(2 * p) * BRISK_PACK_ROWS;
  if (2 * p + 1 < G)
    _mm512_storeu_ps(y, v);
  else
    _mm256_storeu_ps(y, _mm512_castps512_ps256(v));
}

/* The packed kernels' shapes: KERNEL `tile_<name>(t, G, R)` for G = 1..4
 * groups with R = 1 (GEMV) and G = 1..2 with R = 1..4 (GEMM), behind one
 * brisk_mm_tile_fn `name`. */
#  define BRISK_MM_R8_512_DISPATCH(name)                                                           \
    static MM_TARGET void name##_g1r1(const brisk_mm_tile *t) { tile_##name(t, 1, 1); }            \
    static MM_TARGET void name##_g2r1(const brisk_mm_tile *t) { tile_##name(t, 2, 1); }            \
    static MM_TARGET void name##_g3r1(const brisk_mm_tile *t) { tile_##name(t, 3, 1); }            \
    static MM_TARGET void name##_g4r1(const brisk_mm_tile *t) { tile_##name(t, 4, 1); }            \
    static MM_TARGET void name##_g1r2(const brisk_mm_tile *t) { tile_##name(t, 1, 2); }            \
    static MM_TARGET void name##_g1r3(const brisk_mm_tile *t) { tile_##name(t, 1, 3); }            \
    static MM_TARGET void name##_g1r4(const brisk_mm_tile *t) { tile_##name(t, 1, 4); }            \
    static MM_TARGET void name##_g2r2(const brisk_mm_tile *t) { tile_##name(t, 2, 2); }            \
    static MM_TARGET void name##_g2r3(const brisk_mm_tile *t) { tile_##name(t, 2, 3); }            \
    static MM_TARGET void name##_g2r4(const brisk_mm_tile *t) { tile_##name(t, 2, 4); }            \
    static void name(const brisk_mm_tile *t, int n_w, int n_x) {                                   \
      static void (*const gemv[4])(const brisk_mm_tile *) = {name##_g1r1, name##_g2r1,             \
                                                             name##_g3r1, name##_g4r1};            \
      static void (*const gemm[2][4])(const brisk_mm_tile *) = {                                   \
          {name##_g1r1, name##_g1r2, name##_g1r3, name##_g1r4},                                    \
          {name##_g2r1, name##_g2r2, name##_g2r3, name##_g2r4}};                                   \
      if (n_x == 1)                                                                                \
        gemv[n_w / 8 - 1](t);                                                                      \
      else                                                                                         \
        gemm[n_w / 8 - 1][n_x - 1](t);                                                             \
    }

#endif
#endif
