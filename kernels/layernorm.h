/* The encoder models' row and elementwise operations on the device
 * (kernels/layernorm.cu): LayerNorm with a bias, and the exact GELU. */
#ifndef BRISK_KERNELS_LAYERNORM_H
#define BRISK_KERNELS_LAYERNORM_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[r][i] = (x[r][i] - mean) / sqrt(var + eps) * weight[i] + bias[i], as
 * backend.h's layernorm (weight NULL: 1, bias NULL: 0); out may equal x.
 * Device pointers; arguments are not checked (the host side checks them
 * like the CPU backend). Returns 0 or the CUDA (emulation) error code. */
int brisk_klayernorm(const float *x /* [n_rows][n_cols] */,
                     const float *weight /* [n_cols] or NULL */,
                     const float *bias /* [n_cols] or NULL */, int64_t n_rows, int64_t n_cols,
                     float eps, float *out /* [n_rows][n_cols] */, brisk_kstream stream);

/* out[i] = x[i] / 2 * erfc(-x[i] / sqrt 2), the exact GELU; out may equal x. */
int brisk_kgelu(const float *x /* [n] */, int64_t n, float *out /* [n] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
