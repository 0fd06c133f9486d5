/* Selection on the device (kernels/select.cu): greedy and top-k sampling
 * candidates, and mixture-of-experts routing, so only a few values per row
 * cross to the host. */
#ifndef BRISK_KERNELS_SELECT_H
#define BRISK_KERNELS_SELECT_H

#include "kstream.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest k of brisk_ktop_k and brisk_kmoe_route. */
#define BRISK_KTOP_K_MAX 64

/* One total order everywhere, as backend.h: larger value first, equal values
 * by lower index, NaN after every number (NaNs among themselves by index).
 * Device pointers; arguments are not checked (the host side checks them like
 * the CPU backend); 0 or the CUDA (emulation) error code. */

/* ids[r] = index of row r's first-ranked value. */
int brisk_kargmax(const float *x /* [n_rows][n_cols] */, int64_t n_rows, int64_t n_cols,
                  int32_t *ids /* [n_rows] */, brisk_kstream stream);

/* Each row's k first-ranked values in rank order; vals may be NULL. k above
 * BRISK_KTOP_K_MAX is error 1 (invalid value). */
int brisk_ktop_k(const float *x /* [n_rows][n_cols] */, int64_t n_rows, int64_t n_cols, int32_t k,
                 int32_t *ids /* [n_rows][k] */, float *vals /* [n_rows][k] or NULL */,
                 brisk_kstream stream);

/* p = softmax(logits[t]); the k largest p in descending order (ties: lower
 * expert first) into ids and weights, divided by their sum when renormalize.
 * As backend.h's moe_route, in float64 like the CPU backend. k above
 * BRISK_KTOP_K_MAX is error 1. */
int brisk_kmoe_route(const float *logits /* [n_tokens][n_experts] */, int32_t n_tokens,
                     int32_t n_experts, int32_t k, bool renormalize,
                     int32_t *ids /* [n_tokens][k] */, float *weights /* [n_tokens][k] */,
                     brisk_kstream stream);

/* Most experts of brisk_kmoe_route_group (backend.h's BRISK_MAX_EXPERTS). */
#define BRISK_KMOE_MAX_EXPERTS 1024

/* As backend.h's moe_route_group (groups of consecutive experts, the
 * topk_group best by their largest logit, then the k best experts among
 * them), in float64 like the CPU backend; more than BRISK_KMOE_MAX_EXPERTS
 * experts or groups that do not divide them is error 1. */
int brisk_kmoe_route_group(const float *logits /* [n_tokens][n_experts] */, int32_t n_tokens,
                           int32_t n_experts, int32_t k, int32_t n_group, int32_t topk_group,
                           bool renormalize, int32_t *ids /* [n_tokens][k] */,
                           float *weights /* [n_tokens][k] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
