/* xoshiro256** (Blackman and Vigna, 2018) from the published description;
 * splitmix64 fills the state because xoshiro must not start from a state
 * with little entropy (or all zeros). */
#include "sample/rng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void brisk_sample_rng_seed(brisk_sample_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
  /* splitmix64 is a bijection of its counter, so four consecutive outputs
   * are never all zero; keep the guard anyway since xoshiro would stick. */
  if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1;
}

uint64_t brisk_sample_rng_next(brisk_sample_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double brisk_sample_rng_uniform(brisk_sample_rng *r) {
  /* 53 bits convert to double exactly; the scale is a power of two. */
  return (double)(brisk_sample_rng_next(r) >> 11) * 0x1.0p-53;
}
