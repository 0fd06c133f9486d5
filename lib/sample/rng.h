/* The sampler's random generator: xoshiro256** seeded through splitmix64.
 * Integer arithmetic only, so a seed gives the same stream on every
 * platform; uniform doubles come from the top 53 bits. */
#ifndef BRISK_SAMPLE_RNG_H
#define BRISK_SAMPLE_RNG_H

#include <stdint.h>

typedef struct brisk_sample_rng {
  uint64_t s[4];
} brisk_sample_rng;

/* Expands a 64-bit seed into the 256-bit state (never all zero). */
void brisk_sample_rng_seed(brisk_sample_rng *r, uint64_t seed);
uint64_t brisk_sample_rng_next(brisk_sample_rng *r);
/* Uniform in [0, 1): a multiple of 2^-53, exact on every platform. */
double brisk_sample_rng_uniform(brisk_sample_rng *r);

#endif
