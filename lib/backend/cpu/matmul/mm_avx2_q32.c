/* AVX2 kernels for the 32-element types against brisk_mm_q8 activations.
 * Each weight block is unpacked once into 32 bytes and reused for every
 * activation row of the tile: integer products with maddubs, one FMA per
 * block and output with the product of the two scales. Levels stay unsigned
 * (0..15 / 0..31): the -8 / -16 offsets of q4_0 / q5_0 come off the int32
 * lanes through the activation's lane sums, and q4_1 / q5_1 add
 * min * (d_x * sum x) on the side. q8_0 levels are signed: maddubs sees |q|
 * and y with q's sign. Scales are read through brisk_mm_f16_table. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2

enum { T_Q8_0, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1 };

static inline size_t block_bytes(const int type) {
  switch (type) {
  case T_Q8_0: return sizeof(brisk_block_q8_0);
  case T_Q4_0: return sizeof(brisk_block_q4_0);
  case T_Q4_1: return sizeof(brisk_block_q4_1);
  case T_Q5_0: return sizeof(brisk_block_q5_0);
  default: return sizeof(brisk_block_q5_1);
  }
}

static inline int has_min(const int type) { return type == T_Q4_1 || type == T_Q5_1; }

/* One weight block: the 32 levels (signed for q8_0, else unsigned), and the
 * fp16 bits of its scale and min. */
MM_INLINE __m256i decode(const uint8_t *blk, const int type, uint16_t *d, uint16_t *mn) {
  switch (type) {
  case T_Q8_0: {
    const brisk_block_q8_0 *b = (const brisk_block_q8_0 *)blk;
    *d = b->d;
    return _mm256_loadu_si256((const __m256i *)b->qs);
  }
  case T_Q4_0: {
    const brisk_block_q4_0 *b = (const brisk_block_q4_0 *)blk;
    *d = b->d;
    return mm_nibbles(b->qs);
  }
  case T_Q4_1: {
    const brisk_block_q4_1 *b = (const brisk_block_q4_1 *)blk;
    *d = b->d;
    *mn = b->m;
    return mm_nibbles(b->qs);
  }
  case T_Q5_0: {
    const brisk_block_q5_0 *b = (const brisk_block_q5_0 *)blk;
    *d = b->d;
    return _mm256_or_si256(mm_nibbles(b->qs), mm_fifth_bits(b->qh));
  }
  default: {
    const brisk_block_q5_1 *b = (const brisk_block_q5_1 *)blk;
    *d = b->d;
    *mn = b->m;
    return _mm256_or_si256(mm_nibbles(b->qs), mm_fifth_bits(b->qh));
  }
  }
}

MM_INLINE void tile_q32(const brisk_mm_tile *t, const int type, const int C, const int R) {
  const float *f16 = brisk_mm_f16_table();
  const size_t bs = block_bytes(type);
  const int64_t nb = t->k / 32;
  __m256 acc[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
  float accm[BRISK_MM_MAX_X][BRISK_MM_MAX_W];
#  pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      acc[r][c] = _mm256_setzero_ps();
      accm[r][c] = 0;
    }
  for (int64_t i = 0; i < nb; i++) {
    /* One weight row at a time keeps few registers live; its unpacked
     * block serves every activation row. */
#  pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      uint16_t d, mn = 0;
      const uint8_t *blk = t->w + (size_t)c * t->w_stride + (size_t)i * bs;
      /* see mm_prefetch_block: the next GEMV tile's block, one line */
      _mm_prefetch((const char *)(blk + (size_t)C * t->w_stride), _MM_HINT_T0);
      const __m256i q = decode(blk, type, &d, &mn);
      const __m256 dw = _mm256_broadcast_ss(&f16[d]);
      const __m256i aq = type == T_Q8_0 ? _mm256_sign_epi8(q, q) : q; /* |q| */
#  pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const brisk_mm_q8 *xb = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
        const __m256i y = _mm256_loadu_si256((const __m256i *)xb->qs);
        __m256i p;
        if (type == T_Q8_0) {
          /* sign(y, q) moves q's sign onto y so maddubs sees |q| unsigned. */
          p = mm_dot_u8i8(aq, _mm256_sign_epi8(y, q));
        } else {
          p = mm_dot_u8i8(q, y);
          const __m256i ls = _mm256_loadu_si256((const __m256i *)xb->ls);
          if (type == T_Q4_0) p = _mm256_sub_epi32(p, ls);
          if (type == T_Q5_0) p = _mm256_sub_epi32(_mm256_sub_epi32(p, ls), ls);
        }
        const __m256 dd = _mm256_mul_ps(dw, _mm256_broadcast_ss(&xb->d));
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dd, acc[r][c]);
        if (has_min(type)) accm[r][c] += f16[mn] * xb->s;
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      t->y[(size_t)r * t->y_stride + (size_t)c] = mm_hsum(acc[r][c]) + accm[r][c];
}

#  define KERNEL_Q8_0(t, C, R) tile_q32(t, T_Q8_0, C, R)
#  define KERNEL_Q4_0(t, C, R) tile_q32(t, T_Q4_0, C, R)
#  define KERNEL_Q4_1(t, C, R) tile_q32(t, T_Q4_1, C, R)
#  define KERNEL_Q5_0(t, C, R) tile_q32(t, T_Q5_0, C, R)
#  define KERNEL_Q5_1(t, C, R) tile_q32(t, T_Q5_1, C, R)
MM_TILE_DISPATCH(tile_q8_0, KERNEL_Q8_0)
MM_TILE_DISPATCH(tile_q4_0, KERNEL_Q4_0)
MM_TILE_DISPATCH(tile_q4_1, KERNEL_Q4_1)
MM_TILE_DISPATCH(tile_q5_0, KERNEL_Q5_0)
MM_TILE_DISPATCH(tile_q5_1, KERNEL_Q5_1)

brisk_mm_tile_fn brisk_mm_avx2_q32_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q8_0: return tile_q8_0;
  case BRISK_DTYPE_Q4_0: return tile_q4_0;
  case BRISK_DTYPE_Q4_1: return tile_q4_1;
  case BRISK_DTYPE_Q5_0: return tile_q5_0;
  case BRISK_DTYPE_Q5_1: return tile_q5_1;
  default: return NULL;
  }
}

#else

brisk_mm_tile_fn brisk_mm_avx2_q32_tile(uint32_t w_type) {
  (void)w_type;
  return NULL;
}

#endif
