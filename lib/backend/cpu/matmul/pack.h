/* Packed weight layouts for the CPU matmul: a weight matrix's blocks
 * regrouped so that the AVX2 kernels read 8 rows as one stream and sum
 * each row's products with vertical adds only.
 *
 * The _R8 layout of a 32-element type (q4_0, q4_1, q5_0, q5_1, q8_0) with n
 * rows of k elements: rows 8g .. 8g+7 (a group) take the same bytes as
 * before, 8 rows x row_bytes, and hold the group's blocks column by column:
 *
 *   group g: [k / 32] group-blocks, each
 *     d[8]              fp16 scales of block i of rows 8g .. 8g+7
 *     m[8]              q4_1 / q5_1: their fp16 mins
 *     hb[8][4]          q5_0 / q5_1: the bits the chunks leave out (below)
 *     chunk[c][8][4]    c = 0 .. (16 or 32) / 4 - 1: bytes 4c .. 4c+3 of
 *                       block i's qs, row by row
 *
 * so a 32-byte chunk holds 4 consecutive qs bytes of each of the 8 rows: one
 * int32 lane per row. In the nibble types byte b of row j's lane in chunk c
 * holds two elements of row j: lo = element 4c+b (low nibble) and hi =
 * element 16+4c+b (high nibble), as in the base block.
 *
 * q5_x levels (0..31) are regrouped at pack time so that the AVX2 kernel
 * gets them with few instructions: that byte of the chunk holds lo | (hi &
 * 7) << 5, all 5 bits of lo and the low 3 of hi, and byte b of hb[j] holds
 * bits 3-4 of the hi of chunk c at bits 2c, 2c+1. So lo is chunk & 0x1f and
 * hi is (chunk >> 5) & 7 | (hb shifted by 3 - 2c) & 0x18: the 32 bytes of
 * hb serve all 4 chunks.
 *
 * The last n % 8 rows stay in the base layout after the groups. Packing
 * moves bits only (bytes only, but for q5_x): every value, and so every
 * result of the kernels, is what the base layout gives.
 *
 * The K-types (q4_k, q5_k, q6_k) keep the scheme per super-block of 256: group g
 * holds [k / 256] group-blocks of 8 x the base block bytes, and every 32-byte
 * vector in one has row j's 4 bytes at 4j. In a lane, byte b belongs to
 * sub-block (or scale) PERM[b] = {0, 2, 1, 3}[b] of a run of 4, so that the
 * even bytes of a lane read as int16 give items 0, 1 and the odd bytes 2, 3,
 * in the order of the activation's sums.
 *
 *   q4_k_r8 group-block (1152 bytes = 8 x 144):
 *     d[8], dmin[8]     fp16, row by row
 *     sclo[8][4]        low 4 bits of scale PERM[b] | of scale 4 + PERM[b] << 4
 *     mnlo[8][4]        the same for the mins
 *     hi[8][4]          the top 2 bits of those four values, at bits 0, 2, 4, 6
 *     qs[8][4][8][4]    [c][p][row]: qs bytes 32p + 4c .. 32p + 4c + 3, whose
 *                       low nibbles are elements 4c.. of sub-block 2p and
 *                       high nibbles of sub-block 2p + 1
 *   The 6-bit scales and mins are re-split, not widened: 96 bytes as in the
 *   base (bytes of all 16 per row would be 128).
 *
 *   q5_k_r8 group-block (1408 bytes = 8 x 176): the q4_k_r8 fields, with
 *     qh[8][8][4]       [c][row]: qh bytes 4c .. 4c + 3, bit j the fifth bit
 *                       of element 4c.. of sub-block j
 *   after hi and before qs.
 *
 *   q6_k_r8 group-block (1680 bytes = 8 x 210):
 *     d[8]              fp16
 *     sc[4][8][4]       [v][row]: int8 scale 4v + PERM[b]
 *     q[8][2][3][8][4]  [c][half h][part][row]: elements 4c .. 4c + 3 of the
 *                       4 groups of 32 of half h as 6-bit levels L0..L3:
 *                       part p (0..2) = Lp | bits 2p, 2p + 1 of L3 << 6, so
 *                       one and gives L0..L2 and three pieces give L3
 *                       (the base block splits each level into a nibble and
 *                       2 bits, which takes more operations to join)
 *
 * A 32-byte chunk of levels thus holds elements 4c .. 4c + 3 of a sub-block
 * of each row, the products the base AVX2 kernels sum in int32 lane c; the
 * packed kernels keep the 8 lanes apart and end with the same float steps,
 * so their results are the base layout's bit for bit. */
#ifndef BRISK_BACKEND_CPU_MATMUL_PACK_H
#define BRISK_BACKEND_CPU_MATMUL_PACK_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_PACK_ROWS 8

/* The packed id the CPU kernels prefer for a weight of w_type with n rows,
 * or w_type itself when there is none: a type without a packed layout,
 * n < 8, or a CPU without the AVX2 (aarch64: NEON) kernels of that packed
 * type that make packing pay, or a
 * level capped below AVX2 by BRISK_CPU_ISA (the scalar kernels read packed
 * weights too, no faster). */
uint32_t brisk_cpu_pack_type(uint32_t w_type, int64_t n);

/* Whether `type` is a packed id the CPU kernels can read. */
bool brisk_cpu_pack_known(uint32_t type);

/* Rewrites w ([n][row_bytes] of w_type) in place into the layout of
 * packed_type (brisk_cpu_pack_type's answer, or an explicit packed id of
 * w_type). Allocates a scratch of one group (8 rows). Errors:
 * BRISK_E_INVALID_ARGUMENT (not a packed id of w_type, bad sizes),
 * BRISK_E_OUT_OF_MEMORY (w untouched). */
brisk_status brisk_cpu_pack(uint32_t packed_type, void *w, int64_t n, int64_t k);

/* Row r (0 <= r < n) of a packed weight, in the base type's layout, into
 * dst (row_bytes of the base type). */
void brisk_cpu_packed_row(uint32_t packed_type, const void *w, int64_t n, int64_t k, int64_t r,
                          void *dst);

/* Byte offsets in the K group-blocks (layouts above). */
#define BRISK_R8_Q4_K_D 0
#define BRISK_R8_Q4_K_DMIN 16
#define BRISK_R8_Q4_K_SCLO 32
#define BRISK_R8_Q4_K_MNLO 64
#define BRISK_R8_Q4_K_HI 96
#define BRISK_R8_Q4_K_QS 128
#define BRISK_R8_Q5_K_QH 128
#define BRISK_R8_Q5_K_QS 384
#define BRISK_R8_Q6_K_D 0
#define BRISK_R8_Q6_K_SC 16
#define BRISK_R8_Q6_K_Q 144

/* pack_k.c: whether `type` is a packed K id; row j's (0..7) base block src
 * into / out of the group-block gb of a packed K id. */
bool brisk_cpu_pack_k_known(uint32_t type);
void brisk_cpu_pack_k_block(uint32_t packed_type, uint8_t *gb, int j, const uint8_t *src);
void brisk_cpu_unpack_k_block(uint32_t packed_type, const uint8_t *gb, int j, uint8_t *dst);

/* Row r of a packed weight as k floats, a block at a time without a row
 * buffer (the embedding gather of tied embeddings): what
 * brisk_dequantize_row gives for the row as stored. */
brisk_status brisk_cpu_packed_row_f32(uint32_t packed_type, const void *w, int64_t n, int64_t k,
                                      int64_t r, float *out);

/* Block i of row j (0..7) of the group starting at `group`, in the base
 * layout, into dst (one block). For the kernels and the row extraction. */
void brisk_cpu_packed_block(uint32_t packed_type, const uint8_t *group, int64_t k, int64_t i, int j,
                            uint8_t *dst);

#endif
