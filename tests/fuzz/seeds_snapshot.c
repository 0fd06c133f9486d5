/* Seeds for fuzz_snapshot: real snapshots of the target's tiny model, of
 * every KV type and a few lengths (one and several blocks, a partial last
 * block), each with the four checksum-rewrite modes. */
#include "fuzz_seeds.h"

#include "snapshot_model.h"

#include <stdio.h>

int fuzz_write_seeds(const char *dir) {
  brisk_model *m = snapshot_fuzz_model();
  if (!m) return 1;
  int bad = 0;
  const int32_t lens[] = {1, 4, 9, 30};
  brisk_batch *b = NULL;
  if (brisk_batch_create(32, &b)) return 1;
  for (unsigned t = 0; t < 4; t++) {
    brisk_context *c = snapshot_fuzz_context(m, t);
    if (!c) return 1;
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
      brisk_seq_free(c, 0);
      brisk_batch_clear(b);
      for (int32_t i = 0; i < lens[li]; i++) brisk_batch_add(b, (i * 7 + 3) % 40, i, 0, 0);
      size_t n = 0;
      if (brisk_decode(c, b) || brisk_seq_export(c, 0, NULL, 0, &n) != BRISK_E_BUFFER_TOO_SMALL)
        return 1;
      unsigned char *buf = malloc(n + 1);
      if (!buf || brisk_seq_export(c, 0, buf + 1, n, &n)) return 1;
      for (unsigned mode = 0; mode < 4; mode++) {
        buf[0] = (unsigned char)(t | (mode << 2));
        char name[48];
        snprintf(name, sizeof name, "t%u-len%d-m%u", t, lens[li], mode);
        bad |= fuzz_seed_save(dir, name, buf, n + 1);
      }
      free(buf);
    }
    brisk_context_free(c);
  }
  brisk_batch_free(b);
  brisk_model_free(m);
  return bad;
}
