/* Packing weights into the _R8 layouts of pack.h and reading rows back. */
#include "backend/cpu/matmul/pack.h"

#include "backend/cpu/matmul/mm_internal.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

bool brisk_cpu_pack_known(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8:
  case BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8: return true;
  default: return false;
  }
}

uint32_t brisk_cpu_pack_type(uint32_t w_type, int64_t n) {
  if (!brisk_cpu_pack_known(w_type | BRISK_DTYPE_PACKED_R8) || n < BRISK_PACK_ROWS) return w_type;
  const brisk_cpu_features *f = brisk_cpu();
  if (!f->avx2 || !f->fma || !f->f16c || !brisk_mm_avx2_tile(w_type | BRISK_DTYPE_PACKED_R8))
    return w_type;
  return w_type | BRISK_DTYPE_PACKED_R8;
}

/* Where a block's fields sit, in the base block and in a group-block
 * (pack.h): n_f16 fp16 fields (d, and m for q4_1 / q5_1) first, then q5_x's
 * 4 bytes of fifth bits, then the qs bytes. */
typedef struct r8_layout {
  size_t bs;    /* block bytes */
  size_t n_f16; /* 1 or 2 */
  bool qh;      /* q5_x */
} r8_layout;

static r8_layout layout_of(uint32_t packed_type) {
  const uint32_t base = brisk_dtype_base(packed_type);
  return (r8_layout){.bs = brisk_dtype_get(base)->type_size,
                     .n_f16 = base == BRISK_DTYPE_Q4_1 || base == BRISK_DTYPE_Q5_1 ? 2 : 1,
                     .qh = base == BRISK_DTYPE_Q5_0 || base == BRISK_DTYPE_Q5_1};
}

/* q5_x fifth bits: bit e (element e) of a row's qh word goes to bit
 * e / 4 + 8 * (e % 4) of its packed word, so that the bits of chunk vector v
 * (pack.h) sit at v, v + 8, v + 16, v + 24. */
static uint32_t qh_pack(uint32_t h) {
  uint32_t o = 0;
  for (unsigned e = 0; e < 32; e++) o |= ((h >> e) & 1u) << (e / 4 + 8 * (e % 4));
  return o;
}
static uint32_t qh_unpack(uint32_t p) {
  uint32_t o = 0;
  for (unsigned e = 0; e < 32; e++) o |= ((p >> (e / 4 + 8 * (e % 4))) & 1u) << e;
  return o;
}
static uint32_t load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void store_le32(uint8_t *p, uint32_t v) {
  for (int b = 0; b < 4; b++) p[b] = (uint8_t)(v >> (8 * b));
}

/* Copies row j's block between its base layout (one block) and a
 * group-block: from = the block, to = the group-block when to_packed, the
 * other way round otherwise. Both ways make the same moves. */
static void move_block(const r8_layout *l, int j, const uint8_t *from, uint8_t *to,
                       bool to_packed) {
  const size_t rows = BRISK_PACK_ROWS, ho = 2 * l->n_f16, qo = ho + (l->qh ? 4 : 0);
  const size_t gho = 2 * rows * l->n_f16, gqo = gho + (l->qh ? 4 * rows : 0);
#define MOVE(bo, go, len)                                                                          \
  memcpy(to + (to_packed ? (go) : (bo)), from + (to_packed ? (bo) : (go)), len)
  for (size_t f = 0; f < l->n_f16; f++) MOVE(2 * f, 2 * rows * f + 2 * (size_t)j, 2);
  for (size_t c = 0; c < (l->bs - qo) / 4; c++)
    MOVE(qo + 4 * c, gqo + 4 * rows * c + 4 * (size_t)j, 4);
#undef MOVE
  if (l->qh) {
    const size_t go = gho + 4 * (size_t)j;
    if (to_packed)
      store_le32(to + go, qh_pack(load_le32(from + ho)));
    else
      store_le32(to + ho, qh_unpack(load_le32(from + go)));
  }
}

void brisk_cpu_packed_block(uint32_t packed_type, const uint8_t *group, int64_t k, int64_t i, int j,
                            uint8_t *dst) {
  (void)k;
  const r8_layout l = layout_of(packed_type);
  move_block(&l, j, group + (size_t)i * BRISK_PACK_ROWS * l.bs, dst, false);
}

void brisk_cpu_packed_row(uint32_t packed_type, const void *w, int64_t n, int64_t k, int64_t r,
                          void *dst) {
  const size_t bs = layout_of(packed_type).bs, row_bytes = (size_t)(k / 32) * bs;
  const int64_t n_packed = n / BRISK_PACK_ROWS * BRISK_PACK_ROWS;
  const uint8_t *base = w;
  if (r >= n_packed) {
    memcpy(dst, base + (size_t)r * row_bytes, row_bytes);
    return;
  }
  const uint8_t *group = base + (size_t)(r / BRISK_PACK_ROWS) * BRISK_PACK_ROWS * row_bytes;
  for (int64_t i = 0; i < k / 32; i++)
    brisk_cpu_packed_block(packed_type, group, k, i, (int)(r % BRISK_PACK_ROWS),
                           (uint8_t *)dst + (size_t)i * bs);
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
    for (int64_t i = 0; i < k / 32; i++)
      for (int j = 0; j < BRISK_PACK_ROWS; j++)
        move_block(&l, j, scratch + (size_t)j * (size_t)row_bytes + (size_t)i * l.bs,
                   group + (size_t)i * BRISK_PACK_ROWS * l.bs, true);
  }
  brisk_free(scratch);
  return BRISK_OK;
}
