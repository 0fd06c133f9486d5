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
 * result of the kernels, is what the base layout gives. */
#ifndef BRISK_BACKEND_CPU_MATMUL_PACK_H
#define BRISK_BACKEND_CPU_MATMUL_PACK_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_PACK_ROWS 8

/* The packed id the CPU kernels prefer for a weight of w_type with n rows,
 * or w_type itself when there is none: a type without a packed layout,
 * n < 8, or a CPU without the AVX2 kernels that make packing pay (the
 * scalar kernels read packed weights too, no faster). */
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

/* Block i of row j (0..7) of the group starting at `group`, in the base
 * layout, into dst (one block). For the kernels and the row extraction. */
void brisk_cpu_packed_block(uint32_t packed_type, const uint8_t *group, int64_t k, int64_t i, int j,
                            uint8_t *dst);

#endif
