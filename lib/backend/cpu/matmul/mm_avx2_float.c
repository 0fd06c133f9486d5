/* AVX2 kernels for float weights (F32, F16, BF16) against float
 * activations: 8-lane FMA accumulators per output, the k % 8 remainder added
 * after the lanes are summed. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "core/dtype.h"
#include "core/half.h"

#ifdef BRISK_MM_HAVE_AVX2

enum { W_F32, W_F16, W_BF16 };

MM_INLINE __m256 load_w8(const uint8_t *row, int64_t i, const int kind) {
  if (kind == W_F32) return _mm256_loadu_ps((const float *)row + i);
  const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
  if (kind == W_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

MM_INLINE float load_w1(const uint8_t *row, int64_t i, const int kind) {
  if (kind == W_F32) return ((const float *)row)[i];
  const uint16_t h = ((const uint16_t *)row)[i];
  return kind == W_F16 ? mm_f16(h) : brisk_bf16_to_f32(h);
}

/* The FMA steps over [k0, k1) (multiples of 8) into the lane accumulators. */
MM_INLINE void steps(const brisk_mm_tile *t, const int kind, const int C, const int R, int64_t k0,
                     int64_t k1, __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W]) {
  for (int64_t i = k0; i < k1; i += 8) {
    __m256 wv[BRISK_MM_MAX_W];
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) wv[c] = load_w8(t->w + (size_t)c * t->w_stride, i, kind);
#  pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      __m256 xv = _mm256_loadu_ps((const float *)(t->x + (size_t)r * t->x_stride) + i);
      /* Keep xv in a register: gcc otherwise folds the load into every FMA,
       * which doubles the loads and makes the loop load-bound. */
      __asm__("" : "+x"(xv));
#  pragma GCC unroll 4
      for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
}

/* Lane sum, then the k % 8 remainder in order, into y. */
MM_INLINE void finish(const brisk_mm_tile *t, const int kind, const int C, const int R,
                      __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W]) {
  const int64_t k8 = t->k / 8 * 8;
  for (int r = 0; r < R; r++) {
    const float *x = (const float *)(t->x + (size_t)r * t->x_stride);
    for (int c = 0; c < C; c++) {
      const uint8_t *w = t->w + (size_t)c * t->w_stride;
      float s = mm_hsum(acc[r][c]);
      for (int64_t i = k8; i < t->k; i++) s += load_w1(w, i, kind) * x[i];
      t->y[(size_t)r * t->y_stride + (size_t)c] = s;
    }
  }
}

MM_INLINE void tile_float(const brisk_mm_tile *t, const int kind, const int C, const int R) {
  __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
#  pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  steps(t, kind, C, R, 0, t->k / 8 * 8, acc);
  finish(t, kind, C, R, acc);
}

/* The same steps over one k chunk with the accumulators kept in memory
 * (acc[(r * acc_stride + c) * 8 + lane]), so the GEMM can walk k in chunks
 * that stay in L1 and still produce the bits of the one-pass kernel. k1 < 0
 * means: no steps, finish into y. */
MM_INLINE void chunk_float(const brisk_mm_tile *t, const int kind, const int C, const int R,
                           int64_t k0, int64_t k1, float *buf, size_t acc_stride) {
  __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
#  pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_loadu_ps(buf + (r * acc_stride + c) * 8);
  if (k1 < 0) {
    finish(t, kind, C, R, acc);
    return;
  }
  steps(t, kind, C, R, k0, k1, acc);
#  pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) _mm256_storeu_ps(buf + (r * acc_stride + c) * 8, acc[r][c]);
}

#  define CHUNK_SHAPE(name, kind, C, R)                                                            \
    static MM_TARGET void name##_##C##x##R(const brisk_mm_tile *t, int64_t k0, int64_t k1,         \
                                           float *buf, size_t acc_stride) {                        \
      chunk_float(t, kind, C, R, k0, k1, buf, acc_stride);                                         \
    }
#  define CHUNK_DISPATCH(name, kind)                                                               \
    CHUNK_SHAPE(name, kind, 2, 4)                                                                  \
    CHUNK_SHAPE(name, kind, 1, 4)                                                                  \
    CHUNK_SHAPE(name, kind, 2, 3)                                                                  \
    CHUNK_SHAPE(name, kind, 1, 3)                                                                  \
    CHUNK_SHAPE(name, kind, 2, 2)                                                                  \
    CHUNK_SHAPE(name, kind, 1, 2)                                                                  \
    CHUNK_SHAPE(name, kind, 2, 1)                                                                  \
    CHUNK_SHAPE(name, kind, 1, 1)                                                                  \
    static void name(const brisk_mm_tile *t, int n_w, int n_x, int64_t k0, int64_t k1, float *buf, \
                     size_t acc_stride) {                                                          \
      static void (*const fns[2][4])(const brisk_mm_tile *, int64_t, int64_t, float *, size_t) = { \
          {name##_1x1, name##_1x2, name##_1x3, name##_1x4},                                        \
          {name##_2x1, name##_2x2, name##_2x3, name##_2x4},                                        \
      };                                                                                           \
      fns[n_w - 1][n_x - 1](t, k0, k1, buf, acc_stride);                                           \
    }
CHUNK_DISPATCH(chunk_f32, W_F32)
CHUNK_DISPATCH(chunk_f16, W_F16)
CHUNK_DISPATCH(chunk_bf16, W_BF16)

brisk_mm_chunk_fn brisk_mm_avx2_float_chunk(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return chunk_f32;
  case BRISK_DTYPE_F16: return chunk_f16;
  case BRISK_DTYPE_BF16: return chunk_bf16;
  default: return NULL;
  }
}

#  define KERNEL_F32(t, C, R) tile_float(t, W_F32, C, R)
#  define KERNEL_F16(t, C, R) tile_float(t, W_F16, C, R)
#  define KERNEL_BF16(t, C, R) tile_float(t, W_BF16, C, R)
MM_TILE_DISPATCH(tile_f32, KERNEL_F32)
MM_TILE_DISPATCH(tile_f16, KERNEL_F16)
MM_TILE_DISPATCH(tile_bf16, KERNEL_BF16)

brisk_mm_tile_fn brisk_mm_avx2_float_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return tile_f32;
  case BRISK_DTYPE_F16: return tile_f16;
  case BRISK_DTYPE_BF16: return tile_bf16;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx2_float_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}
brisk_mm_chunk_fn brisk_mm_avx2_float_chunk(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
