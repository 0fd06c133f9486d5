/* Shared pieces of the AVX2 kernels. Functions carry a target attribute
 * instead of global -mavx2 flags, so the library still runs on any x86-64;
 * the driver calls them only when brisk_cpu() reports AVX2, FMA and F16C. */
#ifndef BRISK_BACKEND_CPU_MATMUL_MM_AVX2_H
#define BRISK_BACKEND_CPU_MATMUL_MM_AVX2_H

#include "backend/cpu/matmul/mm_internal.h"

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#  define BRISK_MM_HAVE_AVX2 1
#  include <immintrin.h>

#  define MM_TARGET __attribute__((target("avx2,fma,f16c")))

/* `#pragma GCC unroll n` for the kernels' constant-bound loops, dropped in
 * ASan / TSan builds: fully unrolled, the packed K-type kernels took over
 * five minutes to compile with the sanitizers' instrumentation, and the
 * results do not depend on unrolling. */
#  if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#    define MM_SANITIZED 1
#  elif defined(__has_feature)
#    if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#      define MM_SANITIZED 1
#    endif
#  endif
#  ifdef MM_SANITIZED
#    define MM_UNROLL(n)
#  else
#    define MM_PRAGMA(x) _Pragma(#    x)
#    define MM_UNROLL(n) MM_PRAGMA(GCC unroll n)
#  endif
#  define MM_INLINE static inline __attribute__((always_inline)) MM_TARGET

/* Sum of the 8 lanes in a fixed order. */
MM_INLINE float mm_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The 4 bytes at p (activation bytes, or two int16) in every int32 lane:
 * the packed kernels' broadcast, which the compiler turns into a
 * vpbroadcastd load where it is not hoisted. */
MM_INLINE __m256i mm_bcast32(const void *p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/* The total of the 8 int32 lanes in every lane. */
MM_INLINE __m256i mm_lane_total(__m256i v) {
  v = _mm256_add_epi32(v, _mm256_permute2x128_si256(v, v, 0x01));
  v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0x4e));
  return _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0xb1));
}

/* fp16 bits to float with F16C (once per super-block; the 32-element
 * kernels convert 8 block scales at once). */
MM_INLINE float mm_f16(uint16_t h) { return _cvtsh_ss(h); }

/* 32 unsigned bytes times 32 signed bytes, summed in adjacent pairs then
 * quadruples: 8 int32 lanes. Pair sums stay within int16 because activations
 * are in [-127, 127] and weights below 128. */
MM_INLINE __m256i mm_dot_u8i8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles: bytes 0..15 the low nibbles, 16..31 the high ones,
 * which is element order (the high lane shifted by a per-dword count). */
MM_INLINE __m256i mm_nibbles(const uint8_t *qs) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
  const __m256i by = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  return _mm256_and_si256(_mm256_srlv_epi32(v, by), _mm256_set1_epi8(0x0f));
}

/* Bit j of the little-endian qh word as 0x10 in byte j. */
MM_INLINE __m256i mm_fifth_bits(const uint8_t *qh) {
  uint32_t h;
  __builtin_memcpy(&h, qh, 4);
  /* Bytes 0-7 look at byte 0 of h, 8-15 at byte 1, ... then test one bit each. */
  const __m256i pick = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Prefetches the cache lines of `bytes` at p. The kernels call it for the
 * block C rows further on, which the next tile call of a GEMV sweep reads:
 * rows of a few KiB are too short for the hardware prefetcher to follow four
 * of them at once, and cold GEMV ran at half the speed without it. */
MM_INLINE void mm_prefetch_block(const uint8_t *p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T0);
}

/* The tile shape instantiations every type provides: (n_w, n_x) in
 * {4} x {1} and {1, 2} x {1..4}. KERNEL(t, C, R) is the type's always-inline
 * kernel, so each shape compiles with constant loop bounds and its
 * accumulators in registers. */
/* Packed (_R8) GEMV: prefetch distance ahead in each group's stream. 512 to
 * 4096 bytes measured alike (cold 8192 x 4096, one thread, q4_0 / q8_0 /
 * K-types); none was 10% slower. */
#  define MM_R8_PF_DIST 1024

/* The packed kernels' instantiations: KERNEL `tile_<name>(t, G, R)` for G
 * groups x R activation rows, G in 1..4 with R = 1 (GEMV, n_w = 8 G) and
 * G = 1 with R in 1..4 (GEMM), behind one brisk_mm_tile_fn `name`. */
#  define MM_R8_DISPATCH(name)                                                                     \
    static MM_TARGET void name##_g1r1(const brisk_mm_tile *t) { tile_##name(t, 1, 1); }            \
    static MM_TARGET void name##_g2r1(const brisk_mm_tile *t) { tile_##name(t, 2, 1); }            \
    static MM_TARGET void name##_g3r1(const brisk_mm_tile *t) { tile_##name(t, 3, 1); }            \
    static MM_TARGET void name##_g4r1(const brisk_mm_tile *t) { tile_##name(t, 4, 1); }            \
    static MM_TARGET void name##_g1r2(const brisk_mm_tile *t) { tile_##name(t, 1, 2); }            \
    static MM_TARGET void name##_g1r3(const brisk_mm_tile *t) { tile_##name(t, 1, 3); }            \
    static MM_TARGET void name##_g1r4(const brisk_mm_tile *t) { tile_##name(t, 1, 4); }            \
    static void name(const brisk_mm_tile *t, int n_w, int n_x) {                                   \
      static void (*const gemv[4])(const brisk_mm_tile *) = {name##_g1r1, name##_g2r1,             \
                                                             name##_g3r1, name##_g4r1};            \
      static void (*const gemm[4])(const brisk_mm_tile *) = {name##_g1r1, name##_g1r2,             \
                                                             name##_g1r3, name##_g1r4};            \
      if (n_x == 1)                                                                                \
        gemv[n_w / 8 - 1](t);                                                                      \
      else                                                                                         \
        gemm[n_x - 1](t);                                                                          \
    }

#  define MM_TILE_DISPATCH(name, KERNEL)                                                           \
    static MM_TARGET void name##_4x1(const brisk_mm_tile *t) { KERNEL(t, 4, 1); }                  \
    static MM_TARGET void name##_2x1(const brisk_mm_tile *t) { KERNEL(t, 2, 1); }                  \
    static MM_TARGET void name##_2x2(const brisk_mm_tile *t) { KERNEL(t, 2, 2); }                  \
    static MM_TARGET void name##_2x3(const brisk_mm_tile *t) { KERNEL(t, 2, 3); }                  \
    static MM_TARGET void name##_2x4(const brisk_mm_tile *t) { KERNEL(t, 2, 4); }                  \
    static MM_TARGET void name##_1x1(const brisk_mm_tile *t) { KERNEL(t, 1, 1); }                  \
    static MM_TARGET void name##_1x2(const brisk_mm_tile *t) { KERNEL(t, 1, 2); }                  \
    static MM_TARGET void name##_1x3(const brisk_mm_tile *t) { KERNEL(t, 1, 3); }                  \
    static MM_TARGET void name##_1x4(const brisk_mm_tile *t) { KERNEL(t, 1, 4); }                  \
    static void name(const brisk_mm_tile *t, int n_w, int n_x) {                                   \
      static void (*const fns[3][4])(const brisk_mm_tile *) = {                                    \
          {name##_1x1, name##_1x2, name##_1x3, name##_1x4},                                        \
          {name##_2x1, name##_2x2, name##_2x3, name##_2x4},                                        \
          {name##_4x1, NULL, NULL, NULL},                                                          \
      };                                                                                           \
      fns[n_w == 4 ? 2 : n_w - 1][n_x - 1](t);                                                     \
    }

#endif
#endif
