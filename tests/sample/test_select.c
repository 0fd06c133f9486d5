/* Partial selection of the best candidates against a full sort, on random
 * keys with many ties (broken by id), for sizes on both sides of the
 * heap / full-sort switch. */
#include "test_support.h"

#include "sample/select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int by_key_then_id(const void *pa, const void *pb) {
  const brisk_sample_cand *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

static void test_select_matches_sort(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("sample_select");
  const size_t sizes[] = {1, 2, 3, 7, 64, 65, 100, 1000, 5003, 40000};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    size_t n = sizes[si];
    brisk_sample_cand *c = malloc(n * sizeof *c), *want = malloc(n * sizeof *want); // [n]
    const size_t ms[] = {0, 1, 2, 5, 40, n / 8, n / 4, n - 1, n};
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
      size_t m = ms[mi] > n ? n : ms[mi];
      /* Coarse keys: ties are common; -inf and +inf appear too. */
      for (size_t i = 0; i < n; i++) {
        double k = (double)(test_rng_u64(&r) % 50) - 25;
        if (i % 97 == 3) k = -INFINITY;
        if (i % 89 == 5) k = INFINITY;
        c[i] = (brisk_sample_cand){k, 0, 0, (int32_t)i};
      }
      memcpy(want, c, n * sizeof *c);
      qsort(want, n, sizeof *want, by_key_then_id);
      brisk_sample_select(c, n, m);
      for (size_t i = 0; i < m; i++) {
        if (c[i].id != want[i].id)
          fail_msg("n %zu m %zu: entry %zu is id %d, want %d", n, m, i, c[i].id, want[i].id);
      }
      /* Still a permutation of every id. */
      char *seen = calloc(n, 1);
      for (size_t i = 0; i < n; i++) {
        assert_true(c[i].id >= 0 && (size_t)c[i].id < n && !seen[c[i].id]);
        seen[c[i].id] = 1;
      }
      free(seen);
    }
    free(c);
    free(want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_select_matches_sort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
