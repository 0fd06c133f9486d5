/* Tensor element types, numbered as in GGUF files (ggml_type), with their
 * block geometry. Quantized types store rows as blocks of `block_size`
 * elements taking `type_size` bytes each. */
#ifndef BRISK_CORE_DTYPE_H
#define BRISK_CORE_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum brisk_dtype {
  BRISK_DTYPE_F32 = 0,
  BRISK_DTYPE_F16 = 1,
  BRISK_DTYPE_Q4_0 = 2,
  BRISK_DTYPE_Q4_1 = 3,
  BRISK_DTYPE_Q5_0 = 6,
  BRISK_DTYPE_Q5_1 = 7,
  BRISK_DTYPE_Q8_0 = 8,
  BRISK_DTYPE_Q8_1 = 9,
  BRISK_DTYPE_Q2_K = 10,
  BRISK_DTYPE_Q3_K = 11,
  BRISK_DTYPE_Q4_K = 12,
  BRISK_DTYPE_Q5_K = 13,
  BRISK_DTYPE_Q6_K = 14,
  BRISK_DTYPE_Q8_K = 15,
  BRISK_DTYPE_I8 = 24,
  BRISK_DTYPE_I16 = 25,
  BRISK_DTYPE_I32 = 26,
  BRISK_DTYPE_I64 = 27,
  BRISK_DTYPE_F64 = 28,
  BRISK_DTYPE_BF16 = 30,
  BRISK_DTYPE_COUNT = 31 /* one past the largest id */
} brisk_dtype;

typedef struct brisk_dtype_info {
  const char *name;    /* "q4_0"; NULL for ids that are not types */
  uint32_t block_size; /* elements per block (1 for plain types) */
  uint32_t type_size;  /* bytes per block */
  bool quantized;
} brisk_dtype_info;

/* Packed layouts: a GGUF type's blocks regrouped in memory for a backend's
 * kernels (lib/backend/cpu/matmul/pack.h). They exist only in memory, never
 * in files: brisk_dtype_get() does not know them, so a file that names one is
 * rejected like any unknown type. A packed id is the base type's id with a
 * layout flag; rows keep the base type's byte size. */
#define BRISK_DTYPE_PACKED_R8 0x100u /* 8 rows interleaved 4 bytes at a time */
#define BRISK_DTYPE_PACKED_MASK 0xf00u

static inline uint32_t brisk_dtype_base(uint32_t id) { return id & ~BRISK_DTYPE_PACKED_MASK; }
static inline bool brisk_dtype_is_packed(uint32_t id) {
  return (id & BRISK_DTYPE_PACKED_MASK) != 0;
}

/* NULL for an id that is not a known type. */
const brisk_dtype_info *brisk_dtype_get(uint32_t id);
/* The type's name, or "unknown" for an unknown id; packed ids get the base
 * name with a suffix ("q4_0_r8"). */
const char *brisk_dtype_name(uint32_t id);
/* Bytes of a row of n elements into *bytes; false if n is not a multiple of
 * the block size, the type is unknown, or the size overflows. Packed ids
 * have their base type's row size. */
bool brisk_dtype_row_bytes(uint32_t id, uint64_t n, uint64_t *bytes);

#endif
