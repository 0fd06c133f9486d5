/* Internals of the CPU matmul: activation formats and the tile kernels the
 * driver (matmul.c) calls.
 *
 * A tile kernel computes y[r][c] = dot(W row c, x row r) for n_w <= 4 (wide: 8) weight
 * rows and n_x <= 4 activation rows over the whole k. Every output has its own
 * accumulators and the same sequence of operations whatever the tile shape,
 * so a result never depends on how rows were grouped: not on the thread count,
 * not on m (batch invariance), not on GEMV vs GEMM. The AVX2 and scalar
 * kernels sum in different orders and agree only to rounding. */
#ifndef BRISK_BACKEND_CPU_MATMUL_MM_INTERNAL_H
#define BRISK_BACKEND_CPU_MATMUL_MM_INTERNAL_H

#include "core/cpu.h"
#include "core/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_MM_MAX_W 4 /* weight rows per tile call */
#define BRISK_MM_MAX_X 4 /* activation rows per tile call */

/* How activations are fed to a weight type's kernels. */
typedef enum brisk_mm_act {
  BRISK_MM_ACT_F32 = 0, /* float rows as given (F32/F16/BF16 weights) */
  BRISK_MM_ACT_Q8 = 1,  /* brisk_mm_q8 blocks of 32 (the 32-element types) */
  BRISK_MM_ACT_Q8K = 2, /* brisk_block_q8_k super-blocks (K-types) */
} brisk_mm_act;

/* An activation block of 32: x ~ d * qs, s = d * sum(qs) for the min terms of
 * q4_1 / q5_1, and ls[l] = 8 * (qs[4l] + ... + qs[4l+3]): the -8 offset of
 * q4_0 levels (twice it for q5_0's -16) in the int32 lanes the AVX2 dot
 * product leaves, so the weights can stay unsigned. d is float (not fp16) as
 * it never leaves memory. */
typedef struct brisk_mm_q8 {
  float d;
  float s;
  int8_t qs[32];
  int32_t ls[8];
} brisk_mm_q8;

typedef struct brisk_mm_tile {
  int64_t k;        /* elements per row */
  const uint8_t *w; /* [n_w][w_stride] weight rows */
  size_t w_stride;  /* bytes */
  const uint8_t *x; /* [n_x][x_stride] activation rows in the type's act format */
  size_t x_stride;  /* bytes */
  float *y;         /* y[r * y_stride + c] */
  size_t y_stride;  /* floats */
  bool prefetch;    /* GEMV path: prefetch the next tile's weight blocks (GEMM reuses them) */
} brisk_mm_tile;

/* n_w in 1..4, n_x in 1..4; n_w == 4 only with n_x == 1 (wide kernels: below). */
typedef void (*brisk_mm_tile_fn)(const brisk_mm_tile *t, int n_w, int n_x);
/* Float-weight GEMM pieces: the FMA steps of a tile kernel over [k0, k1)
 * (multiples of 8) with the 8-lane accumulators of output (r, c) kept at
 * acc[(r * acc_stride + c) * 8]; k1 < 0 finishes (lane sum, k % 8 remainder)
 * into y. Chunked or not, each output gets the same operations, so the bits
 * equal the one-pass tile kernel's. n_w in 1..2, n_x in 1..4. */
typedef void (*brisk_mm_chunk_fn)(const brisk_mm_tile *t, int n_w, int n_x, int64_t k0, int64_t k1,
                                  float *acc, size_t acc_stride);

/* One row of k floats into the activation format. */
typedef void (*brisk_mm_act_fn)(const float *x, void *dst, int64_t k);

brisk_mm_act brisk_mm_act_format(uint32_t w_type);
/* Bytes of one activation row of k elements (k a multiple of the block). */
size_t brisk_mm_act_row_bytes(brisk_mm_act act, int64_t k);

/* Kernels for a weight type: NULL if the type has no kernel (or, for AVX2,
 * when this build has no AVX2 code). */
brisk_mm_tile_fn brisk_mm_scalar_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avx2_tile(uint32_t w_type);
/* Activation quantizers; the AVX2 ones write exactly the scalar ones' bytes. */
brisk_mm_act_fn brisk_mm_scalar_act(brisk_mm_act act);
brisk_mm_act_fn brisk_mm_avx2_act(brisk_mm_act act);

void brisk_mm_quantize_q8_scalar(const float *x, void *dst, int64_t k);

/* fp16 -> float for every bit pattern (256 KiB, built on first use): a
 * broadcast load from it is cheaper in the AVX2 inner loops than an F16C
 * conversion of one scalar. Exact, as brisk_f16_to_f32. */
const float *brisk_mm_f16_table(void);

/* Per-family AVX2 tables behind brisk_mm_avx2_tile (NULL without AVX2). */
brisk_mm_tile_fn brisk_mm_avx2_float_tile(uint32_t w_type);
brisk_mm_chunk_fn brisk_mm_avx2_float_chunk(uint32_t w_type);
/* Wide AVX2 kernels for the 32-element types (q8_0, q4_0, q4_1, q5_0, q5_1;
 * NULL otherwise): n_w in 1..BRISK_MM_WIDE_W with any n_x in 1..4, one output
 * per float lane. The driver uses them for every call of these types, GEMV
 * and GEMM. */
#define BRISK_MM_WIDE_W 8
brisk_mm_tile_fn brisk_mm_avx2_q32_wide(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avx2_k_tile(uint32_t w_type);
/* Kernels for packed (_R8, pack.h) weights: a tile is whole groups starting
 * at a group, n_w = 8 with n_x in 1..4, or with n_x == 1 (GEMV) n_w = 8 x
 * (1..BRISK_MM_R8_GEMV_GROUPS), read as that many streams at once. The
 * scalar table (brisk_mm_scalar_tile) has them too. */
#define BRISK_MM_R8_GEMV_GROUPS 4
brisk_mm_tile_fn brisk_mm_avx2_r8_tile(uint32_t w_type);
/* The same for the packed K-types (mm_avx2_r8_k.c). */
brisk_mm_tile_fn brisk_mm_avx2_r8_k_tile(uint32_t w_type);
/* AVX-512 VNNI kernels (BRISK_ISA_AVX512) for the packed layouts that have
 * them (mm_avx512_*.c; NULL otherwise: the driver then runs the AVX2 one).
 * The AVX2 packed kernels' tile shapes, and with n_x in 2..4 also up to
 * BRISK_MM_R8_GEMM_GROUPS_512 groups (n_w = 16); bit for bit the AVX2
 * kernels' results. */
#define BRISK_MM_R8_GEMM_GROUPS_512 2
/* AVX-VNNI kernels (BRISK_ISA_AVXVNNI, mm_avxvnni_r8.c, mm_avxvnni_r8_k.c)
 * for the packed layouts: the AVX2 packed kernels' shapes and bits. */
brisk_mm_tile_fn brisk_mm_avxvnni_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avxvnni_r8_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avxvnni_r8_k_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avx512_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avx512_r8_tile(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_avx512_r8_k_tile(uint32_t w_type);
/* AVX-512 float-weight kernels (mm_avx512_float.c; F32 only, the 16-bit
 * types have mm_avx512_half.c): as the AVX2 ones, but the
 * chunk kernels keep 16 floats per output in acc (acc[(r * acc_stride + c) *
 * 16]); they agree with the AVX2 kernels to rounding, and tile and chunk
 * kernels with each other bit for bit. */
#define BRISK_MM_CHUNK_W_512 4 /* their chunk kernels' n_w: 1..4 (the AVX2 ones': 1..2) */
brisk_mm_tile_fn brisk_mm_avx512_float_tile(uint32_t w_type);
brisk_mm_chunk_fn brisk_mm_avx512_float_chunk(uint32_t w_type);
/* 16-bit float weights (F16, BF16) at BRISK_ISA_AVX512 (mm_avx512_half.c):
 * the whole product y[m][n] = x[m][k] . W[n][k]^T on `pool`, GEMV (m <= 4)
 * and GEMM in one summation order (serial FMA chains over blocks of
 * BRISK_MM_HALF_KC elements, the block sums added in order), so the bits
 * depend neither on m nor on the thread count; not the AVX2 kernels' bits.
 * Arguments are the driver's, already checked (k > 0). false: another
 * type, or this build has no AVX-512. */
#define BRISK_MM_HALF_KC 128
bool brisk_mm_avx512_half(brisk_threadpool *pool, uint32_t w_type, const uint16_t *w, int64_t n,
                          int64_t k, const float *x, int64_t m, float *y);
/* aarch64 NEON kernels (mm_neon*.c; NULL on other machines and for other
 * types): F32, F16, BF16, the 32-element types, the K-types q4_k, q5_k and
 * q6_k, and the _R8 layouts of both, in the scalar kernels' tile shapes and
 * with their results bit for bit. The level picks the build: plain NEON below
 * BRISK_ISA_NEON_DOTPROD, sdot from there, and at BRISK_ISA_NEON_I8MM sdot
 * plus smmla for q8_0 and q4_0 (base and _R8) tiles of several activation
 * rows. */
brisk_mm_tile_fn brisk_mm_neon_tile(uint32_t w_type, brisk_isa_level level);

#endif
