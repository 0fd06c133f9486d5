/* Speculative decoding: the drafters and the verification rule, as
 * separate pieces so that the engine can run them per request over rows of
 * a shared batch; spec.c assembles them into the public brisk_spec round. */
#ifndef BRISK_SPEC_SPEC_H
#define BRISK_SPEC_SPEC_H

#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

/* Prompt lookup: finds the most recent earlier occurrence of the last g
 * tokens of hist[0, n) for g = g_max down to g_min (the first g that
 * matches wins) and copies up to k tokens that followed it into out[k].
 * Returns how many were copied (0: no match). O(n * g) per call. */
size_t brisk_spec_lookup(const int32_t *hist, size_t n, int32_t g_min, int32_t g_max, size_t k,
                         int32_t *out);

/* The residual distribution of the rejection rule: r = max(0, p - q)
 * normalized, into r[n] (may alias neither). Returns the mass before
 * normalizing; when it is 0 (p <= q everywhere, which the rule reaches
 * only through rounding) r is a copy of p. */
double brisk_spec_residual(const double *p, const double *q, size_t n, double *r);

/* The index that the uniform number u in [0, 1) picks from probs[n]
 * (inverse CDF in id order; never a zero-probability index). */
int32_t brisk_spec_draw(const double *probs, size_t n, double u);

/* Verification of one sequence's round: logits[i] (i = 0..m) are the
 * target's rows for the pending token and the m drafted tokens draft[m];
 * q is the drafter's distribution per drafted token, [m][n_vocab], or
 * NULL for a point mass (prompt lookup). Writes the produced tokens
 * (accepted drafts, then one drawn token) to out (room for m + 1) and
 * their count to *n_out, and accepts each into the sampler. scratch holds
 * [2][n_vocab] doubles. On error the sampler may have advanced: the caller
 * restores it (see brisk_spec_sampler_save). */
brisk_status brisk_spec_verify(brisk_sampler *sampler, const float *const *logits,
                               const int32_t *draft, size_t m, const double *q, double *scratch,
                               int32_t *out, size_t *n_out);

/* A copy of a sampler's mutable state (penalty window and generator), so
 * that a failed round can put it back. */
typedef struct brisk_spec_sampler_state {
  uint64_t rng[4];
  int32_t window_len, window_next;
  int32_t *window; /* [cap] */
  size_t cap;
} brisk_spec_sampler_state;

brisk_status brisk_spec_sampler_save(const brisk_sampler *s, brisk_spec_sampler_state *st);
void brisk_spec_sampler_restore(brisk_sampler *s, const brisk_spec_sampler_state *st);

#endif
