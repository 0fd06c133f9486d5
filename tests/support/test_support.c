#include "test_support.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <math.h>

const char *test_shared_dir(void) {
  static char buf[4096];
  const char *d = getenv("BRISK_SHARED_DIR");
  if (!d || !*d) d = "../shared";
  struct stat st;
  if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
  snprintf(buf, sizeof buf, "%s", d);
  return buf;
}

const char *test_shared_path(const char *rel) {
  static char buf[4096];
  const char *d = test_shared_dir();
  if (!d) return NULL;
  snprintf(buf, sizeof buf, "%s/%s", d, rel);
  struct stat st;
  if (stat(buf, &st) != 0) return NULL;
  return buf;
}

test_rng test_rng_seeded(const char *test_name) {
  const char *env = getenv("BRISK_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
  fprintf(stderr, "[%s] BRISK_TEST_SEED=%llu\n", test_name, (unsigned long long)seed);
  test_rng r = {seed ^ 0x9e3779b97f4a7c15ull};
  return r;
}

uint64_t test_rng_u64(test_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double test_rng_uniform(test_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(test_rng_u64(r) >> 11) * 0x1.0p-53);
}

double test_rng_normal(test_rng *r) {
  /* Box-Muller; u1 in (0, 1] keeps the log finite. */
  double u1 = 1.0 - test_rng_uniform(r, 0, 1), u2 = test_rng_uniform(r, 0, 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t test_every_allocation_fails(test_alloc_op op, void *ctx) {
  /* Count how many allocations a clean run makes. */
  brisk_alloc_fail_at(0, 0);
  uint64_t live0 = brisk_alloc_live_count();
  assert_int_equal(op(ctx), BRISK_OK);
  uint64_t n = brisk_alloc_fail_at(0, 0);
  assert_int_equal(brisk_alloc_live_count(), live0);
  for (uint64_t k = 1; k <= n; k++) {
    brisk_alloc_fail_at(k, 0);
    brisk_status st = op(ctx);
    brisk_alloc_fail_at(0, 0);
    if (st != BRISK_E_OUT_OF_MEMORY) {
      fprintf(stderr, "failing allocation %llu of %llu gave status %d (%s)\n",
              (unsigned long long)k, (unsigned long long)n, st, brisk_last_error());
      fail();
    }
    if (brisk_alloc_live_count() != live0) {
      fprintf(stderr, "failing allocation %llu of %llu leaked %llu allocations\n",
              (unsigned long long)k, (unsigned long long)n,
              (unsigned long long)(brisk_alloc_live_count() - live0));
      fail();
    }
  }
  assert_int_equal(op(ctx), BRISK_OK);
  return n;
}
