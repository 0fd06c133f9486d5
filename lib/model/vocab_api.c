/* The public vocabulary calls: thin wrappers over lib/tokenizer on the
 * model's vocabulary. */
#include "model/model.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

_Static_assert(BRISK_DETOKENIZE_REMOVE_SPECIAL == BRISK_DETOK_REMOVE_SPECIAL &&
                   BRISK_DETOKENIZE_RENDER_SPECIAL == BRISK_DETOK_RENDER_SPECIAL &&
                   BRISK_DETOKENIZE_CLEAN_SPACES == BRISK_DETOK_CLEAN_SPACES &&
                   BRISK_DETOKENIZE_REPLACE_INVALID == BRISK_DETOK_REPLACE_INVALID,
               "public detokenize flags are the tokenizer's");
_Static_assert((int)BRISK_TOKEN_EOS == (int)BRISK_VOCAB_EOS &&
                   (int)BRISK_TOKEN_EOT == (int)BRISK_VOCAB_EOT &&
                   (int)BRISK_TOKEN_EOM == (int)BRISK_VOCAB_EOM,
               "public special tokens follow the tokenizer's order");

static brisk_status need_vocab(const brisk_model *m, const char *fn) {
  if (!m) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: model is NULL", fn);
  if (!m->vocab)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: the model has no vocabulary (%s)", fn,
                       m->vocab_error ? m->vocab_error : "none in the file");
  return BRISK_OK;
}

BRISK_API brisk_status brisk_tokenize(const brisk_model *m, const char *text, size_t len,
                                      int32_t *tokens, size_t capacity, uint32_t flags,
                                      size_t *n_tokens) {
  brisk_status st = need_vocab(m, "brisk_tokenize");
  if (st) return st;
  if ((!text && len) || (!tokens && capacity) || !n_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_tokenize: text, tokens and n_tokens must be set");
  if (flags & ~(BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_tokenize: unknown flags 0x%x", flags);
  return brisk_vocab_tokenize(m->vocab, text, len, flags & BRISK_TOKENIZE_ADD_SPECIAL,
                              flags & BRISK_TOKENIZE_PARSE_SPECIAL, tokens, capacity, n_tokens);
}

BRISK_API brisk_status brisk_token_to_piece(const brisk_model *m, int32_t token, uint32_t flags,
                                            char *buf, size_t capacity, size_t *n_bytes) {
  brisk_status st = need_vocab(m, "brisk_token_to_piece");
  if (st) return st;
  if ((!buf && capacity) || !n_bytes)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_token_to_piece: buf and n_bytes must be set");
  return brisk_vocab_token_to_piece(m->vocab, token, flags & BRISK_DETOKENIZE_RENDER_SPECIAL, buf,
                                    capacity, n_bytes);
}

BRISK_API brisk_status brisk_detokenize(const brisk_model *m, const int32_t *tokens,
                                        size_t n_tokens, uint32_t flags, char *buf,
                                        size_t capacity, size_t *n_bytes) {
  brisk_status st = need_vocab(m, "brisk_detokenize");
  if (st) return st;
  if ((!tokens && n_tokens) || (!buf && capacity) || !n_bytes)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_detokenize: tokens, buf and n_bytes must be set");
  /* The public flag bits are the tokenizer's. */
  return brisk_vocab_detokenize(m->vocab, tokens, n_tokens, flags & 15u, buf, capacity, n_bytes);
}

struct brisk_detokenizer {
  brisk_detok_stream *stream;
};

BRISK_API brisk_status brisk_detokenizer_create(const brisk_model *m, uint32_t flags,
                                                brisk_detokenizer **out) {
  brisk_status st = need_vocab(m, "brisk_detokenizer_create");
  if (st) return st;
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_detokenizer_create: out is NULL");
  brisk_detokenizer *d = brisk_calloc(1, sizeof *d);
  if (!d) return brisk_error_oom();
  st = brisk_detok_stream_create(m->vocab, flags & (BRISK_DETOKENIZE_RENDER_SPECIAL |
                                                    BRISK_DETOKENIZE_REPLACE_INVALID),
                                 &d->stream);
  if (st) {
    brisk_free(d);
    return st;
  }
  *out = d;
  return BRISK_OK;
}

BRISK_API void brisk_detokenizer_free(brisk_detokenizer *d) {
  if (!d) return;
  brisk_detok_stream_free(d->stream);
  brisk_free(d);
}

BRISK_API brisk_status brisk_detokenizer_push(brisk_detokenizer *d, int32_t token,
                                              const char **text, size_t *len) {
  if (!d || !text || !len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_detokenizer_push: NULL argument");
  return brisk_detok_stream_push(d->stream, token, text, len);
}

BRISK_API brisk_status brisk_detokenizer_flush(brisk_detokenizer *d, const char **text,
                                               size_t *len) {
  if (!d || !text || !len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_detokenizer_flush: NULL argument");
  return brisk_detok_stream_flush(d->stream, text, len);
}

BRISK_API int32_t brisk_model_special_token(const brisk_model *m, brisk_special_token which) {
  if (!m || !m->vocab || (unsigned)which > BRISK_TOKEN_EOM) return -1;
  /* The public enum follows the tokenizer's first six entries. */
  return brisk_vocab_special_id(m->vocab, (brisk_vocab_special)which);
}

BRISK_API int brisk_token_is_eog(const brisk_model *m, int32_t token) {
  return m && m->vocab && brisk_vocab_is_eog(m->vocab, token);
}

BRISK_API uint32_t brisk_token_attr(const brisk_model *m, int32_t token) {
  return m && m->vocab ? brisk_vocab_token_attr(m->vocab, token) & 63u : 0;
}

BRISK_API const char *brisk_model_tokenizer(const brisk_model *m) {
  if (!m || !m->vocab) return "";
  return brisk_vocab_get_type(m->vocab) == BRISK_VOCAB_SPM ? "spm" : "bpe";
}
