/* Fused RMSNorm on the device (kernels/rmsnorm.cu). */
#ifndef BRISK_KERNELS_RMSNORM_H
#define BRISK_KERNELS_RMSNORM_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * weight[i] (weight NULL:
 * 1), as backend.h's rmsnorm; out may equal x. Device pointers; arguments
 * are not checked (the host side checks them like the CPU backend). Returns
 * 0 or the CUDA (emulation) error code. */
int brisk_krmsnorm(const float *x /* [n_rows][n_cols] */,
                   const float *weight /* [n_cols] or NULL */, int64_t n_rows, int64_t n_cols,
                   float eps, float *out /* [n_rows][n_cols] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
