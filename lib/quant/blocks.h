/* Block layouts of the quantized tensor types, bit-compatible with GGUF files
 * (ggml's block_q4_0 etc.). Structs are packed (alignment 1) so that a block
 * may be read at any address of an mmap'ed file without undefined behaviour;
 * gcc then emits plain unaligned loads. fp16 fields are raw binary16 bits.
 *
 * 32-element types: value = scale * (q - offset) [+ min]
 *   q4_0: d, 16 bytes: element j in the low nibble of byte j, element j+16 in
 *         the high nibble; value (q - 8) * d.
 *   q4_1: d, m, nibbles as q4_0; value q * d + m.
 *   q5_0: d, qh (32 bits, bit j = 5th bit of element j, little-endian), nibbles
 *         as q4_0; value (q - 16) * d.
 *   q5_1: d, m, qh, nibbles; value q * d + m.
 *   q8_0: d, 32 int8; value q * d.
 * K-types: super-blocks of 256 elements with sub-block scales packed in bits;
 * see the dequantizers in kquant_dequant.c for the exact bit positions. */
#ifndef BRISK_QUANT_BLOCKS_H
#define BRISK_QUANT_BLOCKS_H

#include <stdint.h>

#define BRISK_QK 32    /* elements per block of the 32-element types */
#define BRISK_QK_K 256 /* elements per K-type super-block */
#define BRISK_K_SCALE_SIZE 12

typedef struct __attribute__((packed)) brisk_block_q4_0 {
  uint16_t d;
  uint8_t qs[BRISK_QK / 2];
} brisk_block_q4_0;

typedef struct __attribute__((packed)) brisk_block_q4_1 {
  uint16_t d, m;
  uint8_t qs[BRISK_QK / 2];
} brisk_block_q4_1;

typedef struct __attribute__((packed)) brisk_block_q5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[BRISK_QK / 2];
} brisk_block_q5_0;

typedef struct __attribute__((packed)) brisk_block_q5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[BRISK_QK / 2];
} brisk_block_q5_1;

typedef struct __attribute__((packed)) brisk_block_q8_0 {
  uint16_t d;
  int8_t qs[BRISK_QK];
} brisk_block_q8_0;

/* 16 sub-blocks of 16: scales[i] = scale (low 4 bits) | min (high 4 bits);
 * value d * scale * q - dmin * min, q 2 bits. */
typedef struct __attribute__((packed)) brisk_block_q2_k {
  uint8_t scales[BRISK_QK_K / 16];
  uint8_t qs[BRISK_QK_K / 4];
  uint16_t d, dmin;
} brisk_block_q2_k;

/* 16 sub-blocks of 16 with signed 6-bit scales; q 3 bits (2 in qs, 1 in
 * hmask); value d * (scale - 32) * (q - 4). */
typedef struct __attribute__((packed)) brisk_block_q3_k {
  uint8_t hmask[BRISK_QK_K / 8];
  uint8_t qs[BRISK_QK_K / 4];
  uint8_t scales[BRISK_K_SCALE_SIZE];
  uint16_t d;
} brisk_block_q3_k;

/* 8 sub-blocks of 32 with 6-bit scale and min each, packed in 12 bytes;
 * value d * scale * q - dmin * min, q 4 bits. */
typedef struct __attribute__((packed)) brisk_block_q4_k {
  uint16_t d, dmin;
  uint8_t scales[BRISK_K_SCALE_SIZE];
  uint8_t qs[BRISK_QK_K / 2];
} brisk_block_q4_k;

/* As q4_k with a 5th bit per element in qh. */
typedef struct __attribute__((packed)) brisk_block_q5_k {
  uint16_t d, dmin;
  uint8_t scales[BRISK_K_SCALE_SIZE];
  uint8_t qh[BRISK_QK_K / 8];
  uint8_t qs[BRISK_QK_K / 2];
} brisk_block_q5_k;

/* 16 sub-blocks of 16 with int8 scales; q 6 bits (4 in ql, 2 in qh);
 * value d * scale * (q - 32). */
typedef struct __attribute__((packed)) brisk_block_q6_k {
  uint8_t ql[BRISK_QK_K / 2];
  uint8_t qh[BRISK_QK_K / 4];
  int8_t scales[BRISK_QK_K / 16];
  uint16_t d;
} brisk_block_q6_k;

/* The activation format of K-type dot products: float scale, int8 values,
 * and the sum of each 16 values (for the min / offset terms). */
typedef struct __attribute__((packed)) brisk_block_q8_k {
  float d;
  int8_t qs[BRISK_QK_K];
  int16_t bsums[BRISK_QK_K / 16];
} brisk_block_q8_k;

_Static_assert(sizeof(brisk_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(brisk_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(brisk_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(brisk_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(brisk_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(brisk_block_q2_k) == 84, "q2_k block");
_Static_assert(sizeof(brisk_block_q3_k) == 110, "q3_k block");
_Static_assert(sizeof(brisk_block_q4_k) == 144, "q4_k block");
_Static_assert(sizeof(brisk_block_q5_k) == 176, "q5_k block");
_Static_assert(sizeof(brisk_block_q6_k) == 210, "q6_k block");
_Static_assert(sizeof(brisk_block_q8_k) == 292, "q8_k block");

/* Sub-block j (0..7) scale and min of a q4_k / q5_k super-block: j < 4 keep
 * 6 bits in bytes j and j + 4; j >= 4 keep their low 4 bits in byte j + 4
 * and their top 2 bits in the spare top bits of bytes j - 4 and j. */
static inline void brisk_k4_scale_min(const uint8_t *scales, int j, uint8_t *sc, uint8_t *mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (uint8_t)((scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4));
    *mn = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

#endif
