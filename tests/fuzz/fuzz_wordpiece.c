/* Fuzz target for the WordPiece (BERT) tokenizer: tokenizer.json or
 * vocab.txt loading, BertNormalizer, BertPreTokenizer and the greedy
 * longest match. Input: a flags byte (bit 0 add_special, bit 1 the source is
 * vocab.txt, bit 2 lowercase for vocab.txt), the source up to the first NUL
 * byte, then the text. A tokenizer that loads must give ids below its size
 * (or fail with a message), [CLS] first and [SEP] last when asked. */
#include "fuzz_target.h"

#include "core/alloc.h"
#include "tokenizer/wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_wordpiece: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool add_special = data[0] & 1, vocab_txt = data[0] & 2, lower = data[0] & 4;
  const char *src = (const char *)data + 1;
  const char *nul = memchr(src, 0, size - 1);
  size_t src_len = nul ? (size_t)(nul - src) : size - 1;
  const char *text = nul ? nul + 1 : "";
  size_t text_len = nul ? size - 1 - src_len - 1 : 0;
  brisk_wordpiece *wp = NULL;
  brisk_status st = vocab_txt ? brisk_wordpiece_from_vocab_txt(src, src_len, lower, &wp)
                              : brisk_wordpiece_from_hf_json(src, src_len, &wp);
  if (st) {
    CHECK(wp == NULL && brisk_last_error()[0]);
    return 0;
  }
  int32_t n_tok = brisk_wordpiece_n_tokens(wp);
  int32_t *ids = NULL;
  size_t n = 0;
  st = brisk_wordpiece_encode(wp, text, text_len, add_special, &ids, &n);
  CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
  for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < n_tok);
  if (st == BRISK_OK && add_special) {
    int32_t cls = brisk_wordpiece_cls(wp), sep = brisk_wordpiece_sep(wp);
    if (cls >= 0) CHECK(n >= 1 && ids[0] == cls);
    if (sep >= 0) CHECK(n >= 1 && ids[n - 1] == sep);
  }
  /* Words become at most one piece per character, or one [UNK]. */
  CHECK(n <= 3 * text_len + 2 || n <= 2);
  brisk_free(ids);
  brisk_wordpiece_free(wp);
  return 0;
}
