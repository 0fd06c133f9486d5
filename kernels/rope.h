/* Rotary position embedding on the device (kernels/rope.cu). */
#ifndef BRISK_KERNELS_ROPE_H
#define BRISK_KERNELS_ROPE_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Layouts, numbered as backend.h's brisk_rope_layout. */
#define BRISK_KROPE_NORMAL 0 /* pairs (x[2i], x[2i+1]) */
#define BRISK_KROPE_NEOX 1   /* pairs (x[i], x[i + n_rot/2]) */

/* Rotates the first n_rot dims of every head of every token in place, pair i
 * of a token at position p by the angle p * inv_freq[i], with cos and sin
 * times mscale: as backend.h's rope. inv_freq and mscale come from
 * brisk_rope_frequencies on the host (every scaling mode is in them), in
 * float64: at positions ~1e5 a float frequency would move angles by ~1e-2.
 * Device pointers; arguments are not checked (the host side checks them
 * like the CPU backend); returns 0 or the CUDA (emulation) error code. */
int brisk_krope(float *x /* [n_tokens][token_stride] */, int32_t n_tokens, int64_t token_stride,
                int32_t n_heads, int32_t head_dim, const int32_t *positions /* [n_tokens] */,
                int32_t layout, int32_t n_rot, const double *inv_freq /* [n_rot / 2] */,
                double mscale, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
