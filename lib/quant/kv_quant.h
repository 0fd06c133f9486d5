/* The quantized KV cache row formats and their reference quantizers. A row
 * is one token's head_dim values of one KV head. Quantized rows hold
 * ceil(head_dim / BRISK_KVQ_GROUP) F16 scales s_g, then head_dim value
 * bytes: x = s_g * q for INT8 (q in [-127, 127]) and x = s_g * e4m3(q) for
 * FP8 E4M3 (the format of the GPUs' FP8 units: 1 sign, 4 exponent bits of
 * bias 7, 3 mantissa bits, largest finite 448, no infinities; the NaN codes
 * 0x7f/0xff are never written, and read as +-480 so that every decoder,
 * scalar or vector, gives the same floats for any byte). The values stored
 * are those of R x, R the per-group rotation below (brisk_kvq_rotate), so
 * that an outlier channel does not set its whole group's scale. A group of
 * 64 values shares one scale: 66 bytes a row of 64 against 128 for F16
 * (1.94x the tokens in the same memory). These functions define the
 * numbers: the CPU and CUDA kernels write the same bytes and read back the
 * same floats. */
#ifndef BRISK_QUANT_KV_QUANT_H
#define BRISK_QUANT_KV_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Cache element types beyond the plain BRISK_DTYPE_F16 / F32: in-memory
 * only (never in files), outside the GGUF id range and the packed flags. */
#define BRISK_KVQ_DTYPE_Q8 0x1000u  /* INT8 with per-group F16 scales */
#define BRISK_KVQ_DTYPE_FP8 0x1001u /* FP8 E4M3 with per-group F16 scales */

#define BRISK_KVQ_GROUP 64 /* values per scale */

static inline int brisk_kvq_is_quantized(uint32_t dtype) {
  return dtype == BRISK_KVQ_DTYPE_Q8 || dtype == BRISK_KVQ_DTYPE_FP8;
}

static inline int32_t brisk_kvq_n_groups(int32_t head_dim) {
  return (head_dim + BRISK_KVQ_GROUP - 1) / BRISK_KVQ_GROUP;
}

/* The rotation R the rows are stored under (see brisk_kvq_rotate): within
 * each group, Walsh-Hadamard blocks of the largest power of two that
 * divides the group's length (64 for a whole group), each scaled by
 * 1 / sqrt(block). */
static inline int32_t brisk_kvq_rotation_block(int32_t len) { return len & -len; }
static inline float brisk_kvq_rotation_scale(int32_t n) {
  switch (n) {
  case 1: return 1.0f;
  case 2: return 0.70710678118654752f;
  case 4: return 0.5f;
  case 8: return 0.35355339059327376f;
  case 16: return 0.25f;
  case 32: return 0.17677669529663688f;
  default: return 0.125f; /* 64 */
  }
}

/* Bytes of one cache row of head_dim values for F16, F32, Q8 and FP8; 0 for
 * any other dtype. */
static inline size_t brisk_kvq_row_bytes(uint32_t dtype, int32_t head_dim) {
  switch (dtype) {
  case 0: return (size_t)head_dim * 4; /* BRISK_DTYPE_F32 */
  case 1: return (size_t)head_dim * 2; /* BRISK_DTYPE_F16 */
  case BRISK_KVQ_DTYPE_Q8:
  case BRISK_KVQ_DTYPE_FP8: return 2 * (size_t)brisk_kvq_n_groups(head_dim) + (size_t)head_dim;
  default: return 0;
  }
}

/* "q8_0", "fp8_e4m3", or NULL for dtypes that are not quantized KV types. */
const char *brisk_kvq_name(uint32_t dtype);

/* Float to E4M3, round to nearest even, saturating to +-448 (NaN to +448). */
uint8_t brisk_kvq_f32_to_e4m3(float x);
/* E4M3 to float (exact); the NaN codes read as +-480 (see above). */
float brisk_kvq_e4m3_to_f32(uint8_t c);

/* One row: x[head_dim] to the row's bytes, dtype Q8 or FP8, quantizing
 * y = R x (brisk_kvq_rotate, group by group). Each group's scale is its
 * largest |y| over 127 (Q8) or 448 (FP8), rounded to F16
 * (capped at 65504); values are y / s rounded to nearest even (clamped to
 * +-127 for Q8). A zero (or F16-underflowing) scale stores zeros. */
void brisk_kvq_quantize_row(uint32_t dtype, const float *x, uint8_t *row, int32_t head_dim);
/* The row back: R applied to s_g * value_i, in float32. */
void brisk_kvq_dequantize_row(uint32_t dtype, const uint8_t *row, float *x, int32_t head_dim);
/* The stored values without the rotation back: x[i] = s_g * value_i, that
 * is R x. Attention works in that basis: q . k = (R q) . (R k) since R is
 * orthonormal, and sum p_i v_i = R (sum p_i R v_i), so it rotates the
 * query once and its output once instead of every row. */
void brisk_kvq_dequantize_row_rotated(uint32_t dtype, const uint8_t *row, float *x,
                                      int32_t head_dim);
/* In place: x[head_dim] to R x (R = R^T = R^-1, up to float rounding). */
void brisk_kvq_rotate(float *x, int32_t head_dim);

/* Values per scale of a query row quantized for the INT8 dot products
 * against a Q8 cache (llama.cpp's q8_0 block; two per cache group). */
#define BRISK_KVQ_QBLOCK 32

static inline int32_t brisk_kvq_n_qblocks(int32_t head_dim) {
  return (head_dim + BRISK_KVQ_QBLOCK - 1) / BRISK_KVQ_QBLOCK;
}

/* A query row x[head_dim] to INT8 for those dot products: per block of
 * BRISK_KVQ_QBLOCK values d = largest |x| / 127 (kept in float32, unlike
 * q8_0's F16, since it never goes to memory), q = x / d rounded to nearest
 * even and clamped to +-127 (-128 is never written, so sign tricks on q
 * cannot overflow); a zero d stores zeros, a NaN or infinite x stores 0
 * with a NaN or infinite d, so the scores are not finite either. */
void brisk_kvq_quantize_query(const float *x, int8_t *q /* [head_dim] */,
                              float *d /* [brisk_kvq_n_qblocks] */, int32_t head_dim);

#endif
