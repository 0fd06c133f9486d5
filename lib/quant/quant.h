/* Reference (scalar, readable) quantizers and dequantizers for the GGUF
 * tensor types. Block layouts are in quant/blocks.h. These define the
 * numbers: the CPU kernels are tested against them.
 *
 * Quantizable: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K, Q8_K. Dequantizable: all of those and Q2_K, Q3_K.
 * The 32-element quantizers reproduce ggml's / gguf-py's reference rounding
 * bit for bit; the K quantizers are brisk's own (a per-sub-block least-squares
 * search), writing the same layouts. */
#ifndef BRISK_QUANT_QUANT_H
#define BRISK_QUANT_QUANT_H

#include "brisk.h"

#include <stdbool.h>
#include <stdint.h>

/* One row of n elements: src float[n] -> dst (row bytes from
 * brisk_dtype_row_bytes). n must be >= 0 and a multiple of the type's block
 * size. Errors: BRISK_E_UNSUPPORTED for a type without a quantizer (the message
 * names it), BRISK_E_INVALID_ARGUMENT for a bad n or a NULL pointer (with
 * n > 0). Non-finite inputs give unspecified (but memory-safe) blocks. */
brisk_status brisk_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* One row back to float[n]; same rules. */
brisk_status brisk_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* brisk_quantize_row with column importance imp[n] (an importance matrix's
 * mean squared activations, finite and >= 0): the block search minimizes
 * the error weighted by it. imp NULL, or a type without a weighted search
 * (F32, F16, BF16, Q8_0, Q8_K), is brisk_quantize_row. Same errors. */
brisk_status brisk_quantize_row_weighted(uint32_t type, const float *src, void *dst, int64_t n,
                                         const float *imp);
/* Whether imp changes what brisk_quantize_row_weighted writes for type. */
bool brisk_quant_uses_importance(uint32_t type);

bool brisk_quant_can_quantize(uint32_t type);
bool brisk_quant_can_dequantize(uint32_t type);

/* Per-type rows without argument checks: n is a multiple of the block size. */
void brisk_quantize_row_q4_0(const float *x, void *y, int64_t n);
void brisk_quantize_row_q4_1(const float *x, void *y, int64_t n);
void brisk_quantize_row_q5_0(const float *x, void *y, int64_t n);
void brisk_quantize_row_q5_1(const float *x, void *y, int64_t n);
void brisk_quantize_row_q8_0(const float *x, void *y, int64_t n);
void brisk_quantize_row_q4_k(const float *x, void *y, int64_t n);
void brisk_quantize_row_q5_k(const float *x, void *y, int64_t n);
void brisk_quantize_row_q6_k(const float *x, void *y, int64_t n);
/* Weighted versions (imp[n] column importance; NULL: the plain ones). */
void brisk_quantize_row_q4_0_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q4_1_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q5_0_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q5_1_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q4_k_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q5_k_w(const float *x, void *y, int64_t n, const float *imp);
void brisk_quantize_row_q6_k_w(const float *x, void *y, int64_t n, const float *imp);
/* Symmetric: d = amax / 127, q = round-half-even(x * 127 / amax), so |q| <=
 * 127 (int8 products then never saturate 16-bit pair sums). */
void brisk_quantize_row_q8_k(const float *x, void *y, int64_t n);

void brisk_dequantize_row_q4_0(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q4_1(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q5_0(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q5_1(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q8_0(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q2_k(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q3_k(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q4_k(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q5_k(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q6_k(const void *x, float *y, int64_t n);
void brisk_dequantize_row_q8_k(const void *x, float *y, int64_t n);

#endif
