/* Row softmax on the device (kernels/softmax.cu). */
#ifndef BRISK_KERNELS_SOFTMAX_H
#define BRISK_KERNELS_SOFTMAX_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[r] = softmax(x[r] * scale) over each row, as backend.h's softmax; out
 * may equal x. Device pointers, arguments not checked; returns 0 or the CUDA
 * (emulation) error code. */
int brisk_ksoftmax(const float *x /* [n_rows][n_cols] */, int64_t n_rows, int64_t n_cols,
                   float scale, float *out /* [n_rows][n_cols] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
