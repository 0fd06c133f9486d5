/* Prompt lookup drafting: the sequence itself is the draft model. */
#include "spec/spec.h"

#include <string.h>

size_t brisk_spec_lookup(const int32_t *hist, size_t n, int32_t g_min, int32_t g_max, size_t k,
                         int32_t *out) {
  if (k == 0 || g_min < 1) return 0;
  for (int32_t gi = g_max; gi >= g_min; gi--) {
    size_t g = (size_t)gi;
    if (g + 1 > n) continue;            /* an earlier occurrence needs g tokens and a follower */
    const int32_t *tail = hist + n - g; // [g]
    /* j is where an earlier occurrence starts; it must end before the tail
     * starts being the only copy, i.e. be followed by at least one token. */
    for (size_t j = n - g; j-- > 0;) {
      if (hist[j] != tail[0] || memcmp(hist + j, tail, g * sizeof *tail) != 0) continue;
      size_t from = j + g, m = n - from < k ? n - from : k;
      memcpy(out, hist + from, m * sizeof *out);
      return m;
    }
  }
  return 0;
}
