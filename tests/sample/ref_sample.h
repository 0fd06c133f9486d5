/* A plain float64 reference of the documented sampler chain, written
 * straight from brisk.h's description with full sorts: the target the
 * library's partial selections and draws are checked against. */
#ifndef BRISK_TEST_REF_SAMPLE_H
#define BRISK_TEST_REF_SAMPLE_H

#include "brisk.h"

#include <stdint.h>

/* probs[n_vocab] = the chain's distribution for logits[n_vocab] with the
 * accepted tokens window[n_window] (the last penalty_last_n of them count). */
void ref_sample_distribution(const brisk_sampler_params *p, const float *logits, int32_t n_vocab,
                             const int32_t *window, int32_t n_window, double *probs);

/* The logits after bias and penalties, in double. */
void ref_sample_adjusted(const brisk_sampler_params *p, const float *logits, int32_t n_vocab,
                         const int32_t *window, int32_t n_window, double *out);

#endif
