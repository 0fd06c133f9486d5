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

/* NULL for an id that is not a known type. */
const brisk_dtype_info *brisk_dtype_get(uint32_t id);
/* The type's name, or "unknown" for an unknown id. */
const char *brisk_dtype_name(uint32_t id);
/* Bytes of a row of n elements into *bytes; false if n is not a multiple of
 * the block size, the type is unknown, or the size overflows. */
bool brisk_dtype_row_bytes(uint32_t id, uint64_t n, uint64_t *bytes);

#endif
