/* Candidate tokens of one sampling step and their partial ordering: the
 * truncation samplers need only the best few of a large vocabulary in
 * order, so nothing sorts the whole vocabulary unless asked to. */
#ifndef BRISK_SAMPLE_SELECT_H
#define BRISK_SAMPLE_SELECT_H

#include <stddef.h>
#include <stdint.h>

typedef struct brisk_sample_cand {
  double key;  /* ordering key of the current step, ascending is better */
  double w;    /* unnormalized probability exp((logit - max) / T) */
  float logit; /* after bias and penalties */
  int32_t id;
} brisk_sample_cand;

/* Whether a comes before b: smaller key first, then smaller id, a total
 * order (ids are distinct and keys never NaN), so every result is
 * deterministic. */
static inline int brisk_sample_cand_before(const brisk_sample_cand *a, const brisk_sample_cand *b) {
  return a->key < b->key || (a->key == b->key && a->id < b->id);
}

/* Permutes c[0, n) so that its m first entries in the order above are at
 * the front, sorted; the rest follow in an unspecified but deterministic
 * order. O(n log m) for small m, a full sort when m is a large part of n. */
void brisk_sample_select(brisk_sample_cand *c, size_t n, size_t m);

#endif
