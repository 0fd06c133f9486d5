/* Fuzz target: llama.cpp's saved-logits file (brisk perplexity
 * --kl-divergence-base) read through ppl_base_open / ppl_base_next, each
 * chunk then compared with fixed logits as brisk perplexity --kl-divergence
 * does. The file is read from memory (fmemopen), so the size check against
 * the header is skipped and short reads are what catch lies. Aborts when a
 * failure has no message or an accepted file has values the reader
 * promised to refuse. */
#include "fuzz_target.h"

#include "../../tools/brisk/ppl_logits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_logits: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  /* fmemopen needs a writable buffer of its own. */
  void *copy = malloc(size);
  if (!copy) return 0;
  memcpy(copy, data, size);
  FILE *f = fmemopen(copy, size, "rb");
  if (!f) {
    free(copy);
    return 0;
  }
  ppl_base b;
  brisk_status st = ppl_base_open(f, "fuzz", &b);
  if (st) {
    CHECK(brisk_last_error()[0]);
    free(copy);
    return 0;
  }
  CHECK(b.n_ctx >= 4 && b.n_vocab >= 1 && b.n_chunk >= 1);
  for (size_t i = 0; i < (size_t)b.n_chunk * b.n_ctx; i++)
    CHECK(b.tokens[i] >= 0 && b.tokens[i] < b.n_vocab);
  /* Logits for the comparison: only small vocabularies, to bound the work. */
  float *logits = b.n_vocab <= 4096 ? malloc((size_t)b.n_vocab * sizeof *logits) : NULL;
  for (int32_t i = 0; logits && i < b.n_vocab; i++) logits[i] = (float)(i % 7) - 3.0f;
  const size_t nv = ppl_row_u16(b.n_vocab), scored = b.n_ctx - 1 - b.n_ctx / 2;
  ppl_kld k = {0};
  for (int32_t c = 0; c < b.n_chunk; c++) {
    if ((st = ppl_base_next(&b))) {
      CHECK(brisk_last_error()[0]);
      break;
    }
    for (size_t r = 0; logits && r < scored; r++) {
      float scale, mn, dp;
      memcpy(&scale, b.rows + r * nv, 4);
      memcpy(&mn, b.rows + r * nv + 2, 4);
      CHECK(isfinite(scale) && isfinite(mn) && scale >= 0 && mn <= 0);
      const int32_t tok = b.tokens[(size_t)c * b.n_ctx + b.n_ctx / 2 + r + 1];
      double kl = ppl_kld_row(b.n_vocab, logits, b.rows + r * nv, tok, &k, &dp);
      CHECK(!isnan(kl) || !isfinite(scale * 65535.f + mn));
    }
  }
  free(logits);
  ppl_base_close(&b);
  free(copy);
  return 0;
}
