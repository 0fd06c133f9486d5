/* Seeds for fuzz_logits: small saved-logits files in llama.cpp's layout
 * (see tools/brisk/ppl_logits.h), written out byte by byte here so that the
 * generator needs nothing from the tools, and broken copies: truncated, a
 * token out of range, a bad magic, a negative scale. */
#include "fuzz_seeds.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static size_t put(uint8_t *p, const void *v, size_t n) {
  memcpy(p, v, n);
  return n;
}

/* A file of n_chunk windows of n_ctx over a vocabulary of n_vocab. */
static size_t make(uint8_t *buf, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk) {
  size_t n = put(buf, "_logits_", 8);
  n += put(buf + n, &n_ctx, 4);
  n += put(buf + n, &n_vocab, 4);
  n += put(buf + n, &n_chunk, 4);
  for (uint32_t i = 0; i < n_ctx * (uint32_t)n_chunk; i++) {
    int32_t t = (int32_t)((i * 7u + 3u) % (uint32_t)n_vocab);
    n += put(buf + n, &t, 4);
  }
  const size_t nv = 2 * (((size_t)n_vocab + 1) / 2) + 4, scored = n_ctx - 1 - n_ctx / 2;
  for (int32_t c = 0; c < n_chunk; c++)
    for (size_t r = 0; r < scored; r++) {
      const float scale = 16.f / 65535.f, mn = -20.f;
      n += put(buf + n, &scale, 4);
      n += put(buf + n, &mn, 4);
      for (size_t v = 0; v < nv - 4; v++) {
        uint16_t q = v < (size_t)n_vocab ? (uint16_t)((v * 977 + r * 31) % 65536) : 0;
        n += put(buf + n, &q, 2);
      }
    }
  return n;
}

int fuzz_write_seeds(const char *dir) {
  static uint8_t buf[1 << 16];
  size_t n = make(buf, 8, 5, 2);
  if (fuzz_seed_save(dir, "small", buf, n)) return 1;
  if (fuzz_seed_save(dir, "truncated", buf, n - 7)) return 1;
  uint8_t bad[1 << 12];
  memcpy(bad, buf, n);
  int32_t big = 99;
  memcpy(bad + 20 + 4 * 3, &big, 4); /* a token outside the vocabulary */
  if (fuzz_seed_save(dir, "bad_token", bad, n)) return 1;
  memcpy(bad, buf, n);
  bad[0] = 'X';
  if (fuzz_seed_save(dir, "bad_magic", bad, n)) return 1;
  memcpy(bad, buf, n);
  const float neg = -1.f;
  memcpy(bad + 20 + 4 * 16, &neg, 4); /* the first row's scale */
  if (fuzz_seed_save(dir, "bad_scale", bad, n)) return 1;
  n = make(buf, 16, 33, 3);
  if (fuzz_seed_save(dir, "odd_vocab", buf, n)) return 1;
  return fuzz_seed_save(dir, "header_only", buf, 20);
}
