/* CPU matrix product over a (possibly quantized) weight:
 *
 *   y[m][n] = x[m][k] . W[n][k]^T
 *
 * W rows are k elements of w_type (row bytes from brisk_dtype_row_bytes),
 * stored back to back; x and y are float32 row-major. Weight types: F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. For the quantized
 * types, x is quantized on the fly to 8 bits (blocks of 32 with a float
 * scale, or Q8_K super-blocks for the K-types) and dot products run on
 * integers; float weights multiply x as given. W is never dequantized whole.
 *
 * m <= 4 takes the GEMV path (each weight byte streamed once, output rows
 * split across tasks); larger m a cache-tiled GEMM. Kernels are chosen at run
 * time (core/cpu.h levels): AVX-512 VNNI ones for the packed 32-element
 * types where the CPU has AVX-512 F/BW/VL/VNNI, AVX2+FMA+F16C ones for the
 * rest (and all types on AVX2 machines); on aarch64 NEON ones (with sdot
 * where the CPU has DotProd) for the float and 32-element types; else
 * portable scalar ones.
 *
 * Determinism: for one kernel set, each y[i][j] depends only on x row i and
 * W row j: not on the thread count, not on m (batch invariance), not on the
 * path. Scalar and AVX2 results agree to rounding, not bitwise; AVX-512 and
 * AVX2 results of the quantized types are bitwise equal (same exact integer
 * block sums, same float steps), and so are NEON and scalar results. Float
 * weights at AVX-512 sum in their own orders (F32: 16 lanes; F16 and BF16:
 * serial chains over blocks of 128, mm_avx512_half.c), within rounding of
 * the AVX2 ones.
 */
#ifndef BRISK_BACKEND_CPU_MATMUL_MATMUL_H
#define BRISK_BACKEND_CPU_MATMUL_MATMUL_H

#include "brisk.h"
#include "core/cpu.h"
#include "core/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of workspace brisk_cpu_matmul needs for these sizes (the quantized
 * activations); 0 for float weight types. n_tasks is the caller's planned
 * concurrency; the current kernels need no per-task scratch, so it only has
 * to be >= 1. Returns SIZE_MAX for arguments brisk_cpu_matmul would reject
 * (unsupported type, negative or misaligned k, overflow). */
size_t brisk_cpu_matmul_workspace_size(uint32_t w_type, int64_t k, int64_t m, int n_tasks);

/* Computes y as above on `pool` (NULL: the calling thread; the host's
 * parallel_for hook when installed). `workspace` may be NULL: the call then
 * allocates (and frees) what it needs. x, y and w must not overlap; x and y
 * must be 4-byte aligned, and float-type weights aligned to their element.
 * Errors: BRISK_E_UNSUPPORTED (a weight type without a kernel, e.g. Q2_K,
 * Q3_K: the message names it), BRISK_E_INVALID_ARGUMENT (negative sizes, k not
 * a multiple of the block size, NULL or misaligned pointers, sizes that
 * overflow), BRISK_E_BUFFER_TOO_SMALL (workspace_size below the need),
 * BRISK_E_OUT_OF_MEMORY (no workspace given and allocation failed). y is
 * untouched on error. m == 0 or n == 0 does nothing; k == 0 zeroes y. */
brisk_status brisk_cpu_matmul(brisk_threadpool *pool, uint32_t w_type, const void *w, int64_t n,
                              int64_t k, const float *x, int64_t m, float *y, void *workspace,
                              size_t workspace_size);

/* As brisk_cpu_matmul with the kernel set chosen per call: allow_avx2 false
 * runs the scalar kernels (a backend created for the scalar ISA); true runs
 * the best set the process allows (brisk_cpu_matmul_isa). */
brisk_status brisk_cpu_matmul_ex(brisk_threadpool *pool, bool allow_avx2, uint32_t w_type,
                                 const void *w, int64_t n, int64_t k, const float *x, int64_t m,
                                 float *y, void *workspace, size_t workspace_size);

/* As brisk_cpu_matmul with the kernels capped at `max` (a backend created
 * for one ISA): the lower of max and brisk_cpu_matmul_isa() runs. Weight
 * types without a kernel at that level take the next level down. */
brisk_status brisk_cpu_matmul_at(brisk_threadpool *pool, brisk_isa_level max, uint32_t w_type,
                                 const void *w, int64_t n, int64_t k, const float *x, int64_t m,
                                 float *y, void *workspace, size_t workspace_size);

/* Test and benchmark hooks (process-wide; not for use while a matmul runs).
 * brisk_cpu_matmul_set_isa caps the kernels at `level` (at most what
 * brisk_cpu_isa_level allows: the processor and BRISK_CPU_ISA);
 * brisk_cpu_matmul_force_scalar(true) is set_isa(SCALAR), false restores
 * the default, brisk_cpu_isa_level(). */
void brisk_cpu_matmul_set_isa(brisk_isa_level level);
void brisk_cpu_matmul_force_scalar(bool force);
/* The kernel level the next call will use. */
brisk_isa_level brisk_cpu_matmul_isa(void);
/* Whether the next call will use SIMD (AVX2, AVX-512 or NEON) kernels. */
bool brisk_cpu_matmul_uses_avx2(void);

#endif
