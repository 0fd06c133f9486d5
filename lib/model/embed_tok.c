#include "model/embed_tok.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

static brisk_status vocab_tokens(const brisk_model *m, const char *text, size_t len, int32_t **ids,
                                 size_t *n) {
  size_t cap = len + 8, need = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    int32_t *buf = brisk_malloc(cap * sizeof *buf);
    if (!buf) return brisk_error_oom();
    brisk_status st = brisk_vocab_tokenize(m->vocab, text, len, true, false, buf, cap, &need);
    if (st == BRISK_OK) {
      *ids = buf;
      *n = need;
      return BRISK_OK;
    }
    brisk_free(buf);
    if (st != BRISK_E_BUFFER_TOO_SMALL) return st;
    cap = need;
  }
  return brisk_error(BRISK_E_INTERNAL, "embed: the tokenizer's count changed between calls");
}

brisk_status brisk_model_embed_tokens(const brisk_model *m, const char *text, size_t len,
                                      uint32_t max_tokens, int32_t **ids, size_t *n) {
  brisk_status st;
  bool wp = m->wordpiece != NULL;
  if (wp)
    st = brisk_wordpiece_encode(m->wordpiece, text, len, true, ids, n);
  else if (m->vocab)
    st = vocab_tokens(m, text, len, ids, n);
  else
    return brisk_error(BRISK_E_UNSUPPORTED, "embed: the model has no tokenizer (%s)",
                       m->vocab_error ? m->vocab_error : "none found");
  if (st) return st;
  if (*n == 0) {
    brisk_free(*ids);
    *ids = NULL;
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: the text gives no tokens");
  }
  if (*n > max_tokens) {
    int32_t sep = wp ? brisk_wordpiece_sep(m->wordpiece) : -1;
    if (sep >= 0 && (*ids)[*n - 1] == sep) (*ids)[max_tokens - 1] = sep;
    *n = max_tokens;
  }
  return BRISK_OK;
}
