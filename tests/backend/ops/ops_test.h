/* Shared by the CPU operation tests: a backend per kernel path (scalar,
 * AVX2 where the processor has it, and the best level when it is another:
 * AVX-512, or NEON on aarch64), random inputs and float64 comparisons. */
#ifndef BRISK_TESTS_BACKEND_OPS_TEST_H
#define BRISK_TESTS_BACKEND_OPS_TEST_H

#include "test_support.h"

#include "backend/backend.h"
#include "backend/cpu/ops/cpu_backend.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ops_paths {
  brisk_threadpool *pool;
  brisk_backend *be[3]; /* scalar, AVX2 if available, the best level if another (AVX-512, NEON) */
  int n;
} ops_paths;

/* Both kernel paths on a pool of n_threads (0: no pool). */
static inline ops_paths ops_paths_open(int n_threads) {
  ops_paths p = {0};
  if (n_threads > 0) assert_int_equal(brisk_threadpool_create(n_threads, &p.pool), BRISK_OK);
  assert_int_equal(brisk_backend_cpu_create(p.pool, BRISK_CPU_ISA_SCALAR, &p.be[p.n]), BRISK_OK);
  p.n++;
  brisk_backend *avx2 = NULL;
  if (brisk_backend_cpu_create(p.pool, BRISK_CPU_ISA_AVX2, &avx2) == BRISK_OK) {
    p.be[p.n++] = avx2;
  } else {
    static int said;
    if (!said++) fprintf(stderr, "note: no AVX2/FMA/F16C here\n");
  }
  brisk_backend *best = NULL;
  assert_int_equal(brisk_backend_cpu_create(p.pool, BRISK_CPU_ISA_AUTO, &best), BRISK_OK);
  if (strcmp(best->name, "cpu-scalar") != 0 && strcmp(best->name, "cpu-avx2") != 0)
    p.be[p.n++] = best;
  else
    brisk_backend_free(best);
  return p;
}

static inline void ops_paths_close(ops_paths *p) {
  for (int i = 0; i < p->n; i++) brisk_backend_free(p->be[i]);
  brisk_threadpool_free(p->pool);
  memset(p, 0, sizeof *p);
}

/* n floats from N(0, sigma^2), never exactly zero. */
static inline float *rand_floats(test_rng *r, size_t n, double sigma) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) {
    double v = test_rng_normal(r) * sigma;
    x[i] = (float)(v == 0 ? sigma * 1e-3 : v);
  }
  return x;
}

static inline int rand_int(test_rng *r, int lo, int hi) { /* [lo, hi] */
  return lo + (int)(test_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* Fails with the first element where |got - want| > atol + rtol |want|. */
#define ASSERT_CLOSE(got, want, n, atol, rtol, ...)                                                \
  do {                                                                                             \
    for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                                                  \
      double g_ = (got)[i_], w_ = (want)[i_];                                                      \
      if (!(fabs(g_ - w_) <= (atol) + (rtol)*fabs(w_))) {                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, ": element %zu: got %.9g want %.9g (diff %.3g)\n", i_, g_, w_,             \
                fabs(g_ - w_));                                                                    \
        fail();                                                                                    \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* The same with a tolerance per element: |got - want| <= tol[i]. */
#define ASSERT_WITHIN(got, want, tol, n, ...)                                                      \
  do {                                                                                             \
    for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                                                  \
      double g_ = (got)[i_], w_ = (want)[i_];                                                      \
      if (!(fabs(g_ - w_) <= (tol)[i_])) {                                                         \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, ": element %zu: got %.9g want %.9g (diff %.3g, tol %.3g)\n", i_, g_, w_,   \
                fabs(g_ - w_), (tol)[i_]);                                                         \
        fail();                                                                                    \
      }                                                                                            \
    }                                                                                              \
  } while (0)

#endif
