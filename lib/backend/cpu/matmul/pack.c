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
  return type == (BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8) ||
         type == (BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8) || brisk_cpu_pack_k_known(type);
}

uint32_t brisk_cpu_pack_type(uint32_t w_type, int64_t n) {
  if (!brisk_cpu_pack_known(w_type | BRISK_DTYPE_PACKED_R8) || n < BRISK_PACK_ROWS) return w_type;
  const brisk_cpu_features *f = brisk_cpu();
  if (!f->avx2 || !f->fma || !f->f16c || !brisk_mm_avx2_tile(w_type | BRISK_DTYPE_PACKED_R8))
    return w_type;
  return w_type | BRISK_DTYPE_PACKED_R8;
}

/* Block bytes and elements of a packed type's base. */
static size_t block_bytes(uint32_t packed_type) {
  return brisk_dtype_get(brisk_dtype_base(packed_type))->type_size;
}
static int64_t block_elems(uint32_t packed_type) {
  return brisk_dtype_get(brisk_dtype_base(packed_type))->block_size;
}

void brisk_cpu_packed_block(uint32_t packed_type, const uint8_t *group, int64_t k, int64_t i, int j,
                            uint8_t *dst) {
  (void)k;
  const size_t bs = block_bytes(packed_type), qs = bs - 2;
  const uint8_t *gb = group + (size_t)i * BRISK_PACK_ROWS * bs;
  if (brisk_cpu_pack_k_known(packed_type)) {
    brisk_cpu_unpack_k_block(packed_type, gb, j, dst);
    return;
  }
  memcpy(dst, gb + 2 * j, 2);
  for (size_t c = 0; c < qs / 4; c++)
    memcpy(dst + 2 + 4 * c, gb + 2 * BRISK_PACK_ROWS + 32 * c + 4 * (size_t)j, 4);
}

void brisk_cpu_packed_row(uint32_t packed_type, const void *w, int64_t n, int64_t k, int64_t r,
                          void *dst) {
  const int64_t nb = k / block_elems(packed_type);
  const size_t bs = block_bytes(packed_type), row_bytes = (size_t)nb * bs;
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
  const size_t bs = block_bytes(packed_type), qs = bs - 2;
  for (int64_t g = 0; g < n / BRISK_PACK_ROWS; g++) {
    uint8_t *group = (uint8_t *)w + (size_t)g * (size_t)group_bytes;
    memcpy(scratch, group, (size_t)group_bytes);
    for (int64_t i = 0; i < k / block_elems(packed_type); i++) {
      uint8_t *gb = group + (size_t)i * BRISK_PACK_ROWS * bs;
      for (int j = 0; j < BRISK_PACK_ROWS; j++) {
        const uint8_t *src = scratch + (size_t)j * (size_t)row_bytes + (size_t)i * bs;
        if (brisk_cpu_pack_k_known(packed_type)) {
          brisk_cpu_pack_k_block(packed_type, gb, j, src);
          continue;
        }
        memcpy(gb + 2 * j, src, 2);
        for (size_t c = 0; c < qs / 4; c++)
          memcpy(gb + 2 * BRISK_PACK_ROWS + 32 * c + 4 * (size_t)j, src + 2 + 4 * c, 4);
      }
    }
  }
  brisk_free(scratch);
  return BRISK_OK;
}
