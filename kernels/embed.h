/* Embedding and activation-column gathers on the device (kernels/embed.cu). */
#ifndef BRISK_KERNELS_EMBED_H
#define BRISK_KERNELS_EMBED_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t] = table[tokens[t]] as floats, the table in its GGUF layout (dtype
 * ids of core/dtype.h: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
 * Q5_K, Q6_K; another type is error 1, invalid value). As backend.h's embed,
 * with the CPU backend's dequantization bit for bit. Device pointers (tokens
 * too); arguments are not checked (the host side checks them like the CPU
 * backend, ids included); returns 0 or the CUDA (emulation) error code. */
int brisk_kembed(uint32_t table_type, const void *table /* [n_vocab][row bytes] */, int64_t n_vocab,
                 int64_t n_embd, const int32_t *tokens /* [n_tokens] */, int32_t n_tokens,
                 float *out /* [n_tokens][n_embd] */, brisk_kstream stream);

/* Activation columns by index (backend.h gather_cols, GPTQ act-order):
 * out[r][j] = x[r][cols[j]]. Device pointers (cols too), not checked (the
 * host side checks every index); returns 0 or the CUDA (emulation) error
 * code. */
int brisk_kgather_cols(const float *x /* [n_rows][n_cols] */, int64_t n_rows, int64_t n_cols,
                       const int32_t *cols /* [n_out] */, int64_t n_out,
                       float *out /* [n_rows][n_out] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
