#include "core/dtype.h"

#include "core/checked.h"

#include <stddef.h>

#define QK_K 256
static const brisk_dtype_info table[BRISK_DTYPE_COUNT] = {
    [BRISK_DTYPE_F32] = {"f32", 1, 4, false},
    [BRISK_DTYPE_F16] = {"f16", 1, 2, false},
    [BRISK_DTYPE_Q4_0] = {"q4_0", 32, 2 + 16, true},
    [BRISK_DTYPE_Q4_1] = {"q4_1", 32, 2 + 2 + 16, true},
    [BRISK_DTYPE_Q5_0] = {"q5_0", 32, 2 + 4 + 16, true},
    [BRISK_DTYPE_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16, true},
    [BRISK_DTYPE_Q8_0] = {"q8_0", 32, 2 + 32, true},
    [BRISK_DTYPE_Q2_K] = {"q2_k", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, true},
    [BRISK_DTYPE_Q3_K] = {"q3_k", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, true},
    [BRISK_DTYPE_Q4_K] = {"q4_k", QK_K, 2 + 2 + 12 + QK_K / 2, true},
    [BRISK_DTYPE_Q5_K] = {"q5_k", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true},
    [BRISK_DTYPE_Q6_K] = {"q6_k", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true},
    [BRISK_DTYPE_Q8_K] = {"q8_k", QK_K, 4 + QK_K + QK_K / 16 * 2, true},
    [BRISK_DTYPE_I8] = {"i8", 1, 1, false},
    [BRISK_DTYPE_I16] = {"i16", 1, 2, false},
    [BRISK_DTYPE_I32] = {"i32", 1, 4, false},
    [BRISK_DTYPE_I64] = {"i64", 1, 8, false},
    [BRISK_DTYPE_F64] = {"f64", 1, 8, false},
    [BRISK_DTYPE_BF16] = {"bf16", 1, 2, false},
};

const brisk_dtype_info *brisk_dtype_get(uint32_t id) {
  if (id >= BRISK_DTYPE_COUNT || !table[id].name) return NULL;
  return &table[id];
}

const char *brisk_dtype_name(uint32_t id) {
  if (id == (BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8)) return "q4_0_r8";
  if (id == (BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8)) return "q8_0_r8";
  if (id == (BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8)) return "q4_1_r8";
  if (id == (BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8)) return "q5_0_r8";
  if (id == (BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8)) return "q5_1_r8";
  if (id == (BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8)) return "q4_k_r8";
  if (id == (BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8)) return "q5_k_r8";
  if (id == (BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8)) return "q6_k_r8";
  const brisk_dtype_info *t = brisk_dtype_get(id);
  return t ? t->name : "unknown";
}

bool brisk_dtype_row_bytes(uint32_t id, uint64_t n, uint64_t *bytes) {
  if ((id & BRISK_DTYPE_PACKED_MASK) == BRISK_DTYPE_PACKED_R8) id = brisk_dtype_base(id);
  const brisk_dtype_info *t = brisk_dtype_get(id);
  if (!t || n % t->block_size) return false;
  return !brisk_mul_overflow_u64(n / t->block_size, t->type_size, bytes);
}
