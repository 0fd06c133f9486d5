/* Packing weights into the _R8 layouts of pack.h and reading rows back. */
#include "backend/cpu/matmul/pack.h"

#include "backend/cpu/matmul/mm_internal.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "quant/quant.h"

#include <string.h>

bool brisk_cpu_pack_known(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8: return true;
  default: return brisk_cpu_pack_k_known(type);
  }
}

uint32_t brisk_cpu_pack_type(uint32_t w_type, int64_t n) {
  if (!brisk_cpu_pack_known(w_type | BRISK_DTYPE_PACKED_R8) || n < BRISK_PACK_ROWS) return w_type;
  /* The level, not just the flags: under BRISK_CPU_ISA=scalar nothing runs
   * the SIMD kernels, so weights stay as stored. On aarch64 only the types
   * with NEON packed kernels are packed (the scalar ones read packed weights
   * slower than stored ones). */
  const brisk_isa_level level = brisk_cpu_isa_level();
  const uint32_t packed = w_type | BRISK_DTYPE_PACKED_R8;
  if (brisk_isa_is_neon(level)) return brisk_mm_neon_tile(packed, BRISK_ISA_NEON) ? packed : w_type;
  if (level < BRISK_ISA_AVX2 || !brisk_mm_avx2_tile(packed)) return w_type;
  return w_type | BRISK_DTYPE_PACKED_R8;
}

/* Where a block's fields sit, in the base block and in a group-block
 * (pack.h): n_f16 fp16 fields (d, and m for q4_1 / q5_1) first, then q5_x's
 * qh (hb in the group-block), then the qs bytes (the chunks). */
typedef struct r8_layout {
  size_t bs;    /* block bytes */
  size_t n_f16; /* 1 or 2 */
  bool five;    /* q5_x */
} r8_layout;

static r8_layout layout_of(uint32_t packed_type) {
  const uint32_t base = brisk_dtype_base(packed_type);
  return (r8_layout){.bs = brisk_dtype_get(base)->type_size,
                     .n_f16 = base == BRISK_DTYPE_Q4_1 || base == BRISK_DTYPE_Q5_1 ? 2 : 1,
                     .five = base == BRISK_DTYPE_Q5_0 || base == BRISK_DTYPE_Q5_1};
}

/* Row j's q5_x levels between the base block (qh: 4 bytes, then qs: 16) and
 * a group-block's chunks (4 x [8][4] bytes) and hb ([8][4] bytes), as pack.h
 * lays them out. */
static void q5_to_packed(const uint8_t *qh, uint8_t *chunks, uint8_t *hb, int j) {
  const uint8_t *qs = qh + 4;
  uint8_t lv[32]; /* [32] levels 0..31 */
  for (int e = 0; e < 16; e++) {
    lv[e] = (uint8_t)((qs[e] & 0xf) | ((qh[e / 8] >> (e % 8)) & 1) << 4);
    lv[e + 16] = (uint8_t)((qs[e] >> 4) | ((qh[2 + e / 8] >> (e % 8)) & 1) << 4);
  }
  for (int b = 0; b < 4; b++) {
    uint8_t h = 0;
    for (int c = 0; c < 4; c++) {
      const uint8_t lo = lv[4 * c + b], hi = lv[16 + 4 * c + b];
      chunks[32 * c + 4 * j + b] = (uint8_t)(lo | (hi & 7) << 5);
      h |= (uint8_t)((hi >> 3) << (2 * c));
    }
    hb[4 * j + b] = h;
  }
}
static void q5_from_packed(const uint8_t *chunks, const uint8_t *hb, uint8_t *qh, int j) {
  uint8_t *qs = qh + 4;
  uint8_t lv[32]; /* [32] levels 0..31 */
  for (int b = 0; b < 4; b++)
    for (int c = 0; c < 4; c++) {
      const uint8_t a = chunks[32 * c + 4 * j + b];
      lv[4 * c + b] = a & 0x1f;
      lv[16 + 4 * c + b] = (uint8_t)(a >> 5 | ((hb[4 * j + b] >> (2 * c)) & 3) << 3);
    }
  memset(qh, 0, 4);
  for (int e = 0; e < 16; e++) {
    qs[e] = (uint8_t)((lv[e] & 0xf) | (lv[e + 16] & 0xf) << 4);
    qh[e / 8] |= (uint8_t)((lv[e] >> 4) << (e % 8));
    qh[2 + e / 8] |= (uint8_t)((lv[e + 16] >> 4) << (e % 8));
  }
}

/* Copies row j's block between its base layout (one block) and a
 * group-block: from = the block, to = the group-block when to_packed, the
 * other way round otherwise. Both ways make the same moves. */
static void move_block(const r8_layout *l, int j, const uint8_t *from, uint8_t *to,
                       bool to_packed) {
  const size_t rows = BRISK_PACK_ROWS, ho = 2 * l->n_f16, qo = ho + (l->five ? 4 : 0);
  const size_t gho = 2 * rows * l->n_f16, gqo = gho + (l->five ? 4 * rows : 0);
#define MOVE(bo, go, len)                                                                          \
  memcpy(to + (to_packed ? (go) : (bo)), from + (to_packed ? (bo) : (go)), len)
  for (size_t f = 0; f < l->n_f16; f++) MOVE(2 * f, 2 * rows * f + 2 * (size_t)j, 2);
  if (!l->five)
    for (size_t c = 0; c < (l->bs - qo) / 4; c++)
      MOVE(qo + 4 * c, gqo + 4 * rows * c + 4 * (size_t)j, 4);
#undef MOVE
  if (l->five && to_packed) q5_to_packed(from + ho, to + gqo, to + gho, j);
  if (l->five && !to_packed) q5_from_packed(from + gqo, from + gho, to + ho, j);
}

/* Elements per block of a packed type's base (32, or 256 for the K-types). */
static int64_t block_elems(uint32_t packed_type) {
  return brisk_dtype_get(brisk_dtype_base(packed_type))->block_size;
}

void brisk_cpu_packed_block(uint32_t packed_type, const uint8_t *group, int64_t k, int64_t i, int j,
                            uint8_t *dst) {
  (void)k;
  const r8_layout l = layout_of(packed_type);
  if (brisk_cpu_pack_k_known(packed_type)) {
    brisk_cpu_unpack_k_block(packed_type, group + (size_t)i * BRISK_PACK_ROWS * l.bs, j, dst);
    return;
  }
  move_block(&l, j, group + (size_t)i * BRISK_PACK_ROWS * l.bs, dst, false);
}

void brisk_cpu_packed_row(uint32_t packed_type, const void *w, int64_t n, int64_t k, int64_t r,
                          void *dst) {
  const int64_t nb = k / block_elems(packed_type);
  const size_t bs = layout_of(packed_type).bs, row_bytes = (size_t)nb * bs;
  const int64_t n_packed = n / BRISK_PACK_ROWS * BRISK_PACK_ROWS;
  const uint8_t *base = w;
  if (r >= n_packed) {
    memcpy(dst, base + (size_t)r * row_bytes, row_bytes);
    return;
  }
  const uint8_t *group = base + (size_t)(r / BRISK_PACK_ROWS) * BRISK_PACK_ROWS * row_bytes;
  for (int64_t i = 0; i < nb; i++)
    brisk_cpu_packed_block(packed_type, group, k, i, (int)(r % BRISK_PACK_ROWS),
                           (uint8_t *)dst + (size_t)i * bs);
}

brisk_status brisk_cpu_packed_row_f32(uint32_t packed_type, const void *w, int64_t n, int64_t k,
                                      int64_t r, float *out) {
  const uint32_t base = brisk_dtype_base(packed_type);
  const int64_t be = block_elems(packed_type), nb = k / be;
  const size_t bs = layout_of(packed_type).bs, row_bytes = (size_t)nb * bs;
  if (r >= n / BRISK_PACK_ROWS * BRISK_PACK_ROWS) /* a tail row, as stored */
    return brisk_dequantize_row(base, (const uint8_t *)w + (size_t)r * row_bytes, out, k);
  const uint8_t *group =
      (const uint8_t *)w + (size_t)(r / BRISK_PACK_ROWS) * BRISK_PACK_ROWS * row_bytes;
  uint8_t block[256]; /* one base block (at most 210 bytes: q6_k) */
  if (bs > sizeof block) return BRISK_E_INTERNAL;
  for (int64_t i = 0; i < nb; i++) {
    brisk_cpu_packed_block(packed_type, group, k, i, (int)(r % BRISK_PACK_ROWS), block);
    brisk_status st = brisk_dequantize_row(base, block, out + i * be, be);
    if (st) return st;
  }
  return BRISK_OK;
}

brisk_status brisk_cpu_pack(uint32_t packed_type, void *w, int64_t n, int64_t k) {
  uint64_t row_bytes, group_bytes;
  if (!brisk_cpu_pack_known(packed_type) || n < 0 || k < 0 || (n > 0 && !w) ||
      !brisk_dtype_row_bytes(packed_type, (uint64_t)k, &row_bytes) ||
      brisk_mul_overflow_u64(row_bytes, BRISK_PACK_ROWS, &group_bytes) || group_bytes > SIZE_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_cpu_pack: cannot pack %lld x %lld into %s",
                       (long long)n, (long long)k, brisk_dtype_name(packed_type));
  if (n < BRISK_PACK_ROWS || k == 0) return BRISK_OK;
  uint8_t *scratch = brisk_malloc((size_t)group_bytes); /* [8][row_bytes] one group as it was */
  if (!scratch) return brisk_error_oom();
  const r8_layout l = layout_of(packed_type);
  for (int64_t g = 0; g < n / BRISK_PACK_ROWS; g++) {
    uint8_t *group = (uint8_t *)w + (size_t)g * (size_t)group_bytes;
    memcpy(scratch, group, (size_t)group_bytes);
    for (int64_t i = 0; i < k / block_elems(packed_type); i++)
      for (int j = 0; j < BRISK_PACK_ROWS; j++) {
        const uint8_t *src = scratch + (size_t)j * (size_t)row_bytes + (size_t)i * l.bs;
        uint8_t *gb = group + (size_t)i * BRISK_PACK_ROWS * l.bs;
        if (brisk_cpu_pack_k_known(packed_type))
          brisk_cpu_pack_k_block(packed_type, gb, j, src);
        else
          move_block(&l, j, src, gb, true);
      }
  }
  brisk_free(scratch);
  return BRISK_OK;
}
