/* Partial selection with a bounded max-heap: the heap holds the m best
 * seen so far with the worst at its root, so each further entry costs one
 * comparison unless it enters the heap. Worst case O(n log m) on any input
 * (a quickselect could be driven quadratic by adversarial logits). */
#include "sample/select.h"

#include <stdlib.h>

static int cmp_cand(const void *pa, const void *pb) {
  const brisk_sample_cand *a = pa, *b = pb;
  if (brisk_sample_cand_before(a, b)) return -1;
  if (brisk_sample_cand_before(b, a)) return 1;
  return 0;
}

static void swap(brisk_sample_cand *a, brisk_sample_cand *b) {
  brisk_sample_cand t = *a;
  *a = *b;
  *b = t;
}

/* Restores the heap below `i` where the root is the entry that comes last. */
static void sift_down(brisk_sample_cand *h, size_t m, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, worst = i;
    if (l < m && brisk_sample_cand_before(&h[worst], &h[l])) worst = l;
    if (r < m && brisk_sample_cand_before(&h[worst], &h[r])) worst = r;
    if (worst == i) return;
    swap(&h[i], &h[worst]);
    i = worst;
  }
}

void brisk_sample_select(brisk_sample_cand *c, size_t n, size_t m) {
  if (m == 0 || n == 0) return;
  if (m >= n / 4) {
    qsort(c, n, sizeof *c, cmp_cand);
    return;
  }
  for (size_t i = m / 2; i-- > 0;) sift_down(c, m, i);
  for (size_t j = m; j < n; j++) {
    if (brisk_sample_cand_before(&c[j], &c[0])) {
      swap(&c[0], &c[j]);
      sift_down(c, m, 0);
    }
  }
  qsort(c, m, sizeof *c, cmp_cand);
}
