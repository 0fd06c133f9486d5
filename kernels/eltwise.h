/* Elementwise kernels (kernels/eltwise.cu): gated activations, add, scale. */
#ifndef BRISK_KERNELS_ELTWISE_H
#define BRISK_KERNELS_ELTWISE_H

#include "kstream.h"

#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of brisk_kglu, numbered as backend.h's brisk_glu_kind. */
#define BRISK_KGLU_SWIGLU 0
#define BRISK_KGLU_GEGLU 1

/* All launchers take device pointers, do not check their arguments (the host
 * side checks them like the CPU backend), allow out to equal an input, and
 * return 0 or the CUDA (emulation) error code. */

/* out = act(gate) * up: silu (kind 0) or gelu by its tanh approximation
 * (kind 1), as backend.h's glu. */
int brisk_kglu(int kind, const float *gate /* [n] */, const float *up /* [n] */, int64_t n,
               float *out /* [n] */, brisk_kstream stream);

/* out[r][i] = a[r][i] + b[r][i], or + b[i] when broadcast_b. */
int brisk_kadd(const float *a /* [n_rows][n_cols] */,
               const float *b /* [n_rows][n_cols] or [n_cols] */, int64_t n_rows, int64_t n_cols,
               bool broadcast_b, float *out /* [n_rows][n_cols] */, brisk_kstream stream);

/* out = x * s. */
int brisk_kscale(const float *x /* [n] */, int64_t n, float s, float *out /* [n] */,
                 brisk_kstream stream);

/* out[r][i] = x[r][i] * sigmoid(g[r]). */
int brisk_ksigmoid_gate(const float *x /* [n_rows][n_cols] */, const float *g /* [n_rows] */,
                        int64_t n_rows, int64_t n_cols, float *out /* [n_rows][n_cols] */,
                        brisk_kstream stream);

/* out = cap * tanh(x / cap), cap > 0. */
int brisk_ksoftcap(const float *x /* [n] */, int64_t n, float cap, float *out /* [n] */,
                   brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
