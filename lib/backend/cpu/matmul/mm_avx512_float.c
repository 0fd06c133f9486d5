/* AVX-512 kernels for F32 weights against float activations:
 * mm_avx2_float.c on 16 lanes (F16 and BF16 have their own at this level,
 * mm_avx512_half.c). Each output keeps 16 FMA lane
 * accumulators over k in steps of 16 (a last step of 8 when k % 16 >= 8
 * touches the low 8 lanes only); then the two halves are added, the 8 lanes
 * summed in mm_hsum's order and the k % 8 remainder added in order.
 *
 * The sums run in another order than the AVX2 kernels' (16 partial sums per
 * output, not 8), so the results agree with them to rounding only; against
 * the float64 reference they keep the AVX2 bound (fewer additions per lane).
 * The one-pass tile kernel (GEMV) and the chunked one (GEMM) run the same
 * steps, so an output's bits depend neither on m nor on the thread count.
 *
 */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx512.h"
#include "core/dtype.h"

#ifdef BRISK_MM_HAVE_AVX512

/* The weight kind: F32 only now; the parameter keeps the kernels' shape
 * for another 32-bit type. */
enum { W_F32 };

MM_INLINE __m512 load_w16(const uint8_t *row, int64_t i, const int kind) {
  (void)kind;
  return _mm512_loadu_ps((const float *)row + i);
}

/* 8 weights at i in the low lanes (the high ones are not used). */
MM_INLINE __m512 load_w8(const uint8_t *row, int64_t i, const int kind) {
  (void)kind;
  return _mm512_castps256_ps512(_mm256_loadu_ps((const float *)row + i));
}

MM_INLINE float load_w1(const uint8_t *row, int64_t i, const int kind) {
  (void)kind;
  return ((const float *)row)[i];
}

/* The FMA steps over [k0, k1) (k0 a multiple of 16, k1 of 8). */
MM_INLINE void steps(const brisk_mm_tile *t, const int kind, const int C, const int R, int64_t k0,
                     int64_t k1, __m512 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W]) {
  int64_t i = k0;
  for (; i + 16 <= k1; i += 16) {
    __m512 wv[BRISK_MM_MAX_W];
    MM_UNROLL(4)
    for (int c = 0; c < C; c++) wv[c] = load_w16(t->w + (size_t)c * t->w_stride, i, kind);
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      __m512 xv = _mm512_loadu_ps((const float *)(t->x + (size_t)r * t->x_stride) + i);
      /* In a register: see mm_avx2_float.c. */
      __asm__("" : "+v"(xv));
      MM_UNROLL(4)
      for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  if (i + 8 <= k1) {
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) {
      const __m512 xv = _mm512_castps256_ps512(
          _mm256_loadu_ps((const float *)(t->x + (size_t)r * t->x_stride) + i));
      MM_UNROLL(4)
      for (int c = 0; c < C; c++)
        acc[r][c] = _mm512_mask3_fmadd_ps(load_w8(t->w + (size_t)c * t->w_stride, i, kind), xv,
                                          acc[r][c], 0x00ff);
    }
  }
}

MM_INLINE void finish(const brisk_mm_tile *t, const int kind, const int C, const int R,
                      __m512 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W]) {
  const int64_t k8 = t->k / 8 * 8;
  for (int r = 0; r < R; r++) {
    const float *x = (const float *)(t->x + (size_t)r * t->x_stride);
    for (int c = 0; c < C; c++) {
      const uint8_t *w = t->w + (size_t)c * t->w_stride;
      const __m512 a = acc[r][c];
      float s =
          mm_hsum(_mm256_add_ps(_mm512_castps512_ps256(a),
                                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
      for (int64_t i = k8; i < t->k; i++) s += load_w1(w, i, kind) * x[i];
      t->y[(size_t)r * t->y_stride + (size_t)c] = s;
    }
  }
}

MM_INLINE void tile_float(const brisk_mm_tile *t, const int kind, const int C, const int R) {
  __m512 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  MM_UNROLL(4)
  for (int r = 0; r < R; r++) {
    MM_UNROLL(4)
    for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
  }
  steps(t, kind, C, R, 0, t->k / 8 * 8, acc);
  finish(t, kind, C, R, acc);
}

/* As mm_avx2_float.c's chunk kernel, with 16 floats per output in buf
 * (buf[(r * acc_stride + c) * 16 + lane]): k0 is a multiple of 16 (chunks
 * are, FCHUNK_K in matmul.c), k1 too but for the last chunk. */
MM_INLINE void chunk_float(const brisk_mm_tile *t, const int kind, const int C, const int R,
                           int64_t k0, int64_t k1, float *buf, size_t acc_stride) {
  __m512 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  MM_UNROLL(4)
  for (int r = 0; r < R; r++) {
    MM_UNROLL(4)
    for (int c = 0; c < C; c++) acc[r][c] = _mm512_loadu_ps(buf + (r * acc_stride + c) * 16);
  }
  if (k1 < 0) {
    finish(t, kind, C, R, acc);
    return;
  }
  steps(t, kind, C, R, k0, k1, acc);
  MM_UNROLL(4)
  for (int r = 0; r < R; r++) {
    MM_UNROLL(4)
    for (int c = 0; c < C; c++) _mm512_storeu_ps(buf + (r * acc_stride + c) * 16, acc[r][c]);
  }
}

#  define CHUNK_SHAPE(name, kind, C, R)                                                            \
    static MM_TARGET void name##_##C##x##R(const brisk_mm_tile *t, int64_t k0, int64_t k1,         \
                                           float *buf, size_t acc_stride) {                        \
      chunk_float(t, kind, C, R, k0, k1, buf, acc_stride);                                         \
    }
/* n_w up to 4 (BRISK_MM_CHUNK_W_512): 16 accumulators of 32 registers, so
 * that each weight and activation load serves 4 FMAs (the AVX2 kernels'
 * 2 x 4 tile left the AVX-512 GEMM load- and latency-bound). */
#  define CHUNK_ROWS(name, kind, C)                                                                \
    CHUNK_SHAPE(name, kind, C, 1)                                                                  \
    CHUNK_SHAPE(name, kind, C, 2)                                                                  \
    CHUNK_SHAPE(name, kind, C, 3)                                                                  \
    CHUNK_SHAPE(name, kind, C, 4)
#  define CHUNK_DISPATCH(name, kind)                                                               \
    CHUNK_ROWS(name, kind, 1)                                                                      \
    CHUNK_ROWS(name, kind, 2)                                                                      \
    CHUNK_ROWS(name, kind, 3)                                                                      \
    CHUNK_ROWS(name, kind, 4)                                                                      \
    static void name(const brisk_mm_tile *t, int n_w, int n_x, int64_t k0, int64_t k1, float *buf, \
                     size_t acc_stride) {                                                          \
      static void (*const fns[4][4])(const brisk_mm_tile *, int64_t, int64_t, float *, size_t) = { \
          {name##_1x1, name##_1x2, name##_1x3, name##_1x4},                                        \
          {name##_2x1, name##_2x2, name##_2x3, name##_2x4},                                        \
          {name##_3x1, name##_3x2, name##_3x3, name##_3x4},                                        \
          {name##_4x1, name##_4x2, name##_4x3, name##_4x4},                                        \
      };                                                                                           \
      fns[n_w - 1][n_x - 1](t, k0, k1, buf, acc_stride);                                           \
    }
CHUNK_DISPATCH(chunk_f32, W_F32)

brisk_mm_chunk_fn brisk_mm_avx512_float_chunk(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return chunk_f32;
  default: return NULL;
  }
}

#  define KERNEL_F32(t, C, R) tile_float(t, W_F32, C, R)
MM_TILE_DISPATCH(tile_f32, KERNEL_F32)

brisk_mm_tile_fn brisk_mm_avx512_float_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return tile_f32;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx512_float_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}
brisk_mm_chunk_fn brisk_mm_avx512_float_chunk(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
