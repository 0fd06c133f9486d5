/* A latency histogram in fixed memory: log-linear buckets over the whole
 * uint64 range (nanoseconds: 1 ns .. centuries). Values below 128 have
 * exact buckets; above, every power-of-two octave [2^k, 2^(k+1)) is split
 * into 64 equal buckets, so a bucket is at most 1/64 of its lower bound
 * wide and a quantile read back from it (the bucket's midpoint, clamped to
 * the observed min and max) is within 1/128 (< 0.8%) of the exact sample.
 * Memory does not depend on the number of samples. Not thread-safe. */
#ifndef BRISK_ENGINE_HISTOGRAM_H
#define BRISK_ENGINE_HISTOGRAM_H

#include <stdint.h>

#define BRISK_HIST_SUB_BITS 6
#define BRISK_HIST_SUB (1u << BRISK_HIST_SUB_BITS) /* buckets per octave */
/* Exact buckets for [0, 2 * SUB), then SUB per octave for k = 7 .. 63. */
#define BRISK_HIST_BUCKETS (2u * BRISK_HIST_SUB + (63u - BRISK_HIST_SUB_BITS) * BRISK_HIST_SUB)

/* The guaranteed relative error of brisk_hist_quantile: 1 / (2 * SUB). */
#define BRISK_HIST_REL_ERROR (1.0 / (2.0 * BRISK_HIST_SUB))

typedef struct brisk_hist {
  uint64_t count;
  uint64_t min, max; /* meaningful when count > 0 */
  double sum;        /* for the mean; double so that huge values cannot overflow */
  uint64_t buckets[BRISK_HIST_BUCKETS]; /* [BRISK_HIST_BUCKETS] sample counts */
} brisk_hist;

/* Empties the histogram. */
void brisk_hist_reset(brisk_hist *h);
void brisk_hist_add(brisk_hist *h, uint64_t value);
/* The q-quantile (q in [0, 1], clamped; NaN is read as 0) by nearest rank:
 * the sample of rank max(1, ceil(q * count)) in sorted order, to within
 * BRISK_HIST_REL_ERROR relative error; ranks 1 and count (so q = 0 and
 * q = 1) give the min and the max exactly. 0 for an empty histogram. */
uint64_t brisk_hist_quantile(const brisk_hist *h, double q);
/* The exact mean; 0 for an empty histogram. */
double brisk_hist_mean(const brisk_hist *h);

/* Bucket of a value, and the smallest and largest values of a bucket. */
uint32_t brisk_hist_bucket(uint64_t value);
uint64_t brisk_hist_bucket_low(uint32_t bucket);
uint64_t brisk_hist_bucket_high(uint32_t bucket);

#endif
