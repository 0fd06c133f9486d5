/* Log-linear latency histogram (see histogram.h). */
#include "engine/histogram.h"

#include <math.h>
#include <string.h>

void brisk_hist_reset(brisk_hist *h) { memset(h, 0, sizeof *h); }

static uint32_t log2_floor(uint64_t v) { return 63u - (uint32_t)__builtin_clzll(v); }

uint32_t brisk_hist_bucket(uint64_t v) {
  if (v < 2u * BRISK_HIST_SUB) return (uint32_t)v;
  uint32_t k = log2_floor(v); /* >= SUB_BITS + 1 */
  /* The top SUB_BITS + 1 bits of v: SUB .. 2 * SUB - 1. */
  uint32_t top = (uint32_t)(v >> (k - BRISK_HIST_SUB_BITS));
  return (k - BRISK_HIST_SUB_BITS) * BRISK_HIST_SUB + top;
}

uint64_t brisk_hist_bucket_low(uint32_t b) {
  if (b < 2u * BRISK_HIST_SUB) return b;
  uint32_t shift = b / BRISK_HIST_SUB - 1u; /* k - SUB_BITS */
  uint64_t top = BRISK_HIST_SUB + b % BRISK_HIST_SUB;
  return top << shift;
}

uint64_t brisk_hist_bucket_high(uint32_t b) {
  if (b < 2u * BRISK_HIST_SUB) return b;
  uint32_t shift = b / BRISK_HIST_SUB - 1u;
  return brisk_hist_bucket_low(b) + ((UINT64_C(1) << shift) - 1u);
}

void brisk_hist_add(brisk_hist *h, uint64_t v) {
  if (h->count == 0 || v < h->min) h->min = v;
  if (h->count == 0 || v > h->max) h->max = v;
  h->count++;
  h->sum += (double)v;
  h->buckets[brisk_hist_bucket(v)]++;
}

uint64_t brisk_hist_quantile(const brisk_hist *h, double q) {
  if (h->count == 0) return 0;
  if (!(q > 0)) return h->min; /* also NaN */
  if (q >= 1) return h->max;
  /* Nearest rank; the product is exact enough for any count below 2^53 and
   * clamped for the rest. */
  double r = ceil(q * (double)h->count);
  uint64_t rank = r < 1 ? 1 : r >= (double)h->count ? h->count : (uint64_t)r;
  /* The extreme ranks are known exactly. */
  if (rank == 1) return h->min;
  if (rank == h->count) return h->max;
  uint64_t seen = 0;
  uint32_t b = 0;
  for (; b < BRISK_HIST_BUCKETS - 1; b++) {
    seen += h->buckets[b];
    if (seen >= rank) break;
  }
  uint64_t lo = brisk_hist_bucket_low(b), hi = brisk_hist_bucket_high(b);
  uint64_t mid = lo + (hi - lo) / 2;
  if (mid < h->min) mid = h->min;
  if (mid > h->max) mid = h->max;
  return mid;
}

double brisk_hist_mean(const brisk_hist *h) { return h->count ? h->sum / (double)h->count : 0.0; }
