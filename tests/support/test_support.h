/* Helpers shared by the cmocka tests. */
#ifndef BRISK_TEST_SUPPORT_H
#define BRISK_TEST_SUPPORT_H

#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "brisk.h"

/* The shared data folder (models, golden logits, tokenizer vectors), or NULL
 * when absent; tests that need it call skip() with a message. */
const char *test_shared_dir(void);
/* Joins test_shared_dir() and rel into a static buffer; NULL if absent or if
 * the file does not exist. */
const char *test_shared_path(const char *rel);
/* Prints why a test is skipped and skips it. */
#define SKIP_BECAUSE(...)                                                                          \
  do {                                                                                             \
    fprintf(stderr, "SKIP: " __VA_ARGS__);                                                         \
    fprintf(stderr, "\n");                                                                         \
    skip();                                                                                        \
  } while (0)

/* A deterministic generator for fresh random test inputs (splitmix64),
 * seeded per test from BRISK_TEST_SEED or the clock; the seed is printed so
 * a failure can be replayed. */
typedef struct test_rng {
  uint64_t state;
} test_rng;
test_rng test_rng_seeded(const char *test_name);
uint64_t test_rng_u64(test_rng *r);
/* Uniform in [lo, hi). */
double test_rng_uniform(test_rng *r, double lo, double hi);
/* Standard normal. */
double test_rng_normal(test_rng *r);

/* The 8-bit KV caches' rotation R (quant/kv_quant.h) in float64 from its
 * definition, independent of the library's butterflies: within each group
 * of 64 (the last one shorter), blocks of n = the largest power of two
 * dividing the group's length, y_i = sum_j (-1)^popcount(i & j) x_j /
 * sqrt(n). R is symmetric and its own inverse. */
static inline void test_kvq_rotate_f64(const double *x, double *y, int hd) {
  for (int i0 = 0; i0 < hd; i0 += 64) {
    const int len = hd - i0 < 64 ? hd - i0 : 64, n = len & -len;
    for (int b = i0; b < i0 + len; b += n)
      for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++)
          s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1) * x[b + j];
        y[b + i] = s / sqrt((double)n);
      }
  }
}

/* Runs `op` once per allocation it makes, failing the 1st, 2nd, ... one,
 * and asserts that each failing run returns BRISK_E_OUT_OF_MEMORY and leaks
 * nothing; then a final run must succeed. `op` returns a status and cleans
 * up after itself on success. Returns the number of allocations op makes. */
typedef brisk_status (*test_alloc_op)(void *ctx);
uint64_t test_every_allocation_fails(test_alloc_op op, void *ctx);

#endif
