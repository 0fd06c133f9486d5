/* Matmul kernels: y[m][n] = x[m][k] . W[n][k]^T with W in the regrouped
 * layout of kernels/regroup.h (types F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K).
 *
 *  - brisk_kmatmul_gemv: small batches, the decode path. Reads W once per 8
 *    activation rows, fp32 accumulation.
 *  - large batches (prefill): brisk_kdequant_tile turns rows [r0, r0 + nr) of
 *    W into an F16/BF16 tile, brisk_kcast_f32 rounds x to the same type, and
 *    a tensor-core GEMM (cuBLASLt on the host side) multiplies them;
 *    brisk_kgemm is the plain SIMT GEMM with the same contract, its emulated
 *    twin and fallback.
 *
 * Launchers take device pointers and a stream, do not validate arguments (the
 * host side checks them as the CPU backend does), and return 0 or the
 * CUDA / emulation error code; 1 (cudaErrorInvalidValue) for a type they
 * have no kernel for or a size beyond the grid limits (more than 2^33 weight
 * rows). */
#ifndef BRISK_KERNELS_MATMUL_H
#define BRISK_KERNELS_MATMUL_H

#include "kstream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation rows per GEMV launch; brisk_kmatmul_gemv loops over groups. */
#define BRISK_KMATMUL_GEMV_ROWS 8

/* True for the weight types of brisk_kmatmul_gemv and brisk_kdequant_tile. */
bool brisk_kmatmul_supported(uint32_t w_type);

/* y[r][c] = sum_i x[r][i] * W[c][i], dequantized weights exactly as
 * lib/quant, fp32 fused multiply-adds: each lane of a warp sums its share of
 * the row in order, then a butterfly over the warp. The result of a row
 * depends only on its inputs (not on m or on what else is in x). w must be
 * 16-byte aligned, and so must x for the quantized types (1 otherwise; rows
 * of k floats keep it, k being a multiple of 32). */
int brisk_kmatmul_gemv(uint32_t w_type, const void *w /* regrouped [n][k] */, int64_t n, int64_t k,
                       const float *x /* [m][k] */, int64_t m, float *y /* [m][n] */,
                       brisk_kstream stream);

/* out[r - r0][i] = W[r][i] for r in [r0, r0 + nr), rounded to nearest even
 * into out_type: F16 (1), BF16 (30) or F32 (0, exact). */
int brisk_kdequant_tile(uint32_t w_type, const void *w /* regrouped [n][k] */, int64_t n, int64_t k,
                        int64_t r0, int64_t nr, uint32_t out_type,
                        void *out /* [nr][k] of out_type */, brisk_kstream stream);

/* out[i] = x[i] rounded to nearest even into F16 (1) or BF16 (30). */
int brisk_kcast_f32(uint32_t out_type, const float *x /* [count] */, int64_t count,
                    void *out /* [count] of out_type */, brisk_kstream stream);

/* c[r][ldc-row offset j] = sum_i a[r][i] * b[j][i] in fp32 (i ascending,
 * fused multiply-adds), for (a_type, b_type) in (F32, F32), (F32, F16),
 * (F32, BF16), (F16, F16), (BF16, BF16); ldc >= n. The twin of the
 * cuBLASLt call of the prefill path (which adds in another order). */
int brisk_kgemm(uint32_t a_type, const void *a /* [m][k] */, uint32_t b_type,
                const void *b /* [n][k] */, int64_t m, int64_t n, int64_t k,
                float *c /* [m][ldc] */, int64_t ldc, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
