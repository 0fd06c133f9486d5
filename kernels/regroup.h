/* Weight layouts of the CUDA matmul kernels: GGUF rows regrouped at upload
 * so that a warp reads each stream with wide (16-byte) coalesced loads.
 *
 * A regrouped [n][k] matrix is up to three sections, one after the other,
 * each holding every row at a fixed row stride (a multiple of 16 bytes):
 *
 *   Q  the quants (or the plain values of F32/F16/BF16 rows), per block in
 *      the GGUF order except as noted;            [n][q_stride] bytes
 *   S  a per-block record: the 16-byte scale record of a super-block, or
 *      the 4 qh bytes of a Q5_0/Q5_1 block;       [n][s_stride] bytes
 *   D  the binary16 block scale d (and min m);   [n][d_stride] bytes
 *
 *   type   block  Q per block                      S per block          D
 *   F32    1      the float (rows padded to 16 B)  -                    -
 *   F16    1      the binary16                     -                    -
 *   BF16   1      the bfloat16                     -                    -
 *   Q8_0   32     qs[32]                           -                    d
 *   Q4_0   32     qs[16]                           -                    d
 *   Q4_1   32     qs[16]                           -                    d, m
 *   Q5_0   32     qs[16]                           qh[4]                d
 *   Q5_1   32     qs[16]                           qh[4]                d, m
 *   Q4_K   256    qs[128]                          d, dmin, scales[12]  -
 *   Q5_K   256    qs[128] then qh[32]              d, dmin, scales[12]  -
 *   Q6_K   256    ql[128] then qh[64]              scales[16] (int8)    d
 *
 * Row padding is zero. The values are untouched (no rescaling), so the
 * dequantized weights are exactly those of lib/quant. The C functions are
 * used by the host side at upload and by the tests; the static inline layout
 * is shared with the kernel launchers. */
#ifndef BRISK_KERNELS_REGROUP_H
#define BRISK_KERNELS_REGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF type ids (lib/core/dtype.h) of the types regrouped here. */
enum {
  BRISK_KR_F32 = 0,
  BRISK_KR_F16 = 1,
  BRISK_KR_Q4_0 = 2,
  BRISK_KR_Q4_1 = 3,
  BRISK_KR_Q5_0 = 6,
  BRISK_KR_Q5_1 = 7,
  BRISK_KR_Q8_0 = 8,
  BRISK_KR_Q4_K = 12,
  BRISK_KR_Q5_K = 13,
  BRISK_KR_Q6_K = 14,
  BRISK_KR_BF16 = 30
};

typedef struct brisk_kregroup_layout {
  int64_t block;   /* elements per block */
  int64_t nb;      /* blocks per row: k / block */
  size_t q_stride; /* bytes per row of each section (multiples of 16; 0: absent) */
  size_t s_stride;
  size_t d_stride;
  size_t s_offset; /* section starts, from the matrix start (multiples of 16) */
  size_t d_offset;
  size_t bytes; /* the whole matrix */
} brisk_kregroup_layout;

static inline size_t brisk_kregroup_pad16_(size_t x) { return (x + 15) & ~(size_t)15; }

/* The layout of an [n][k] matrix of `type`; false for a type not listed
 * above, n < 0, k < 1, k not a multiple of the block, or a size that
 * overflows size_t (or int64 byte offsets). */
static inline bool brisk_kregroup_layout_of(uint32_t type, int64_t n, int64_t k,
                                            brisk_kregroup_layout *l) {
  int64_t block, q_per_block, s_per_block = 0, d_per_block = 0;
  switch (type) {
  case BRISK_KR_F32: block = 1, q_per_block = 4; break;
  case BRISK_KR_F16:
  case BRISK_KR_BF16: block = 1, q_per_block = 2; break;
  case BRISK_KR_Q8_0: block = 32, q_per_block = 32, d_per_block = 2; break;
  case BRISK_KR_Q4_0: block = 32, q_per_block = 16, d_per_block = 2; break;
  case BRISK_KR_Q4_1: block = 32, q_per_block = 16, d_per_block = 4; break;
  case BRISK_KR_Q5_0: block = 32, q_per_block = 16, s_per_block = 4, d_per_block = 2; break;
  case BRISK_KR_Q5_1: block = 32, q_per_block = 16, s_per_block = 4, d_per_block = 4; break;
  case BRISK_KR_Q4_K: block = 256, q_per_block = 128, s_per_block = 16; break;
  case BRISK_KR_Q5_K: block = 256, q_per_block = 160, s_per_block = 16; break;
  case BRISK_KR_Q6_K: block = 256, q_per_block = 192, s_per_block = 16, d_per_block = 2; break;
  default: return false;
  }
  /* Bounds that keep every product below 2^62 bytes. */
  if (n < 0 || k < 1 || k % block != 0 || k > ((int64_t)1 << 40) || n > ((int64_t)1 << 40))
    return false;
  const int64_t nb = k / block;
  size_t q = brisk_kregroup_pad16_((size_t)(nb * q_per_block));
  size_t s = brisk_kregroup_pad16_((size_t)(nb * s_per_block));
  size_t d = brisk_kregroup_pad16_((size_t)(nb * d_per_block));
  size_t total = 0;
  if (__builtin_add_overflow(q, s, &total) || __builtin_add_overflow(total, d, &total) ||
      __builtin_mul_overflow(total, (size_t)n, &total) || total > ((size_t)1 << 62))
    return false;
  l->block = block;
  l->nb = nb;
  l->q_stride = q;
  l->s_stride = s;
  l->d_stride = d;
  l->s_offset = q * (size_t)n;
  l->d_offset = l->s_offset + s * (size_t)n;
  l->bytes = total;
  return true;
}

/* Bytes of the regrouped [n][k] matrix; 0 when the layout is undefined (see
 * brisk_kregroup_layout_of) or n == 0. */
size_t brisk_kregroup_bytes(uint32_t type, int64_t n, int64_t k);

/* Regroups n GGUF rows of k elements (src_gguf, [n][row bytes], host memory,
 * any alignment) into dst (host memory of brisk_kregroup_bytes bytes, any
 * alignment), padding included. Returns 0, or -1 (writing nothing) when the
 * layout is undefined or a pointer is NULL with n > 0. src and dst must not
 * overlap. Thread-safe (no state). */
int brisk_kregroup(uint32_t type, const void *src_gguf, int64_t n, int64_t k, void *dst);

/* The inverse, for tests and for downloading weights: regrouped -> GGUF rows.
 * Same rules. */
int brisk_kregroup_undo(uint32_t type, const void *src, int64_t n, int64_t k, void *dst_gguf);

#ifdef __cplusplus
}
#endif

#endif
