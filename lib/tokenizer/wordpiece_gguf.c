/* A WordPiece (BERT) tokenizer from GGUF metadata, as llama.cpp's converter
 * writes it: its "phantom space" vocabulary (a word-start piece is U+2581 +
 * text, a continuation loses its "##", CONTROL tokens stay as they are) is
 * turned back into the Hugging Face vocabulary, so that brisk tokenizes a
 * GGUF file exactly as the folder it came from (wordpiece.c). */
#include "tokenizer/wordpiece_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/gguf.h"

#include <string.h>

#define GGUF_TT_CONTROL 3
/* Longest token text accepted, in bytes (BERT's are a few dozen). */
#define WP_GGUF_MAX_TOKEN 4096
#define WP_GGUF_MAX_TOKENS (1u << 24)

static const char phantom[] = "\xe2\x96\x81"; /* U+2581 */

/* An optional bool key; BRISK_OK leaves *out as it was when absent. */
static brisk_status opt_bool(const brisk_gguf *g, const char *key, bool *out) {
  bool b;
  brisk_status st = brisk_gguf_get_bool(g, key, &b);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (!st) *out = b;
  return st;
}

/* An optional token id key, checked against the vocabulary; -1 when absent. */
static brisk_status opt_id(const brisk_gguf *g, const char *key, int32_t n, int32_t *out) {
  uint32_t id;
  brisk_status st = brisk_gguf_get_u32(g, key, &id);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return st;
  if (id >= (uint32_t)n)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: %s %u is not below the %d tokens", key, id, n);
  *out = (int32_t)id;
  return BRISK_OK;
}

/* The token types (or none), checked. */
static brisk_status token_types(const brisk_gguf *g, uint64_t n, const void **types) {
  brisk_gguf_type et;
  uint64_t len;
  *types = NULL;
  brisk_status st = brisk_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &len);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return st;
  if (et != BRISK_GGUF_INT32 || len != n)
    return brisk_error(BRISK_E_FORMAT,
                       "tokenizer: tokenizer.ggml.token_type must be %llu int32 values",
                       (unsigned long long)n);
  *types = brisk_gguf_arr_data(g, brisk_gguf_find_key(g, "tokenizer.ggml.token_type"));
  return BRISK_OK;
}

/* Appends token j's Hugging Face text; marks CONTROL tokens as special. */
static brisk_status add_token(brisk_wordpiece *wp, brisk_gguf_str s, bool control, char *buf) {
  const char *text = s.ptr;
  size_t len = (size_t)s.len;
  if (len > WP_GGUF_MAX_TOKEN)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: token %d is %llu bytes long (at most %d)",
                       wp->n_tokens, (unsigned long long)s.len, WP_GGUF_MAX_TOKEN);
  int32_t id;
  if (!control && len >= 3 && !memcmp(text, phantom, 3)) {
    text += 3; /* a word start */
    len -= 3;
  } else if (!control) { /* a continuation: "##" back in front */
    memcpy(buf, wp->prefix, wp->prefix_len);
    memcpy(buf + wp->prefix_len, text, len);
    text = buf;
    len += wp->prefix_len;
  }
  brisk_status st = brisk_strtab_append(&wp->vocab, text, len, &id);
  if (!st && control && len > 0) wp->added[wp->n_added++] = id;
  if (!st) wp->n_tokens++;
  return st;
}

static brisk_status build(brisk_wordpiece *wp, const brisk_gguf *g) {
  brisk_gguf_type et;
  uint64_t n;
  brisk_status st = brisk_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: key 'tokenizer.ggml.tokens' is missing");
  if (st) return st;
  if (et != BRISK_GGUF_STRING || n == 0 || n > WP_GGUF_MAX_TOKENS)
    return brisk_error(BRISK_E_FORMAT,
                       "tokenizer: tokenizer.ggml.tokens must be 1 to %u strings (got %llu of "
                       "type %d)",
                       WP_GGUF_MAX_TOKENS, (unsigned long long)n, (int)et);
  int64_t idx = brisk_gguf_find_key(g, "tokenizer.ggml.tokens");
  const void *types = NULL;
  if ((st = token_types(g, n, &types))) return st;
  if (!(wp->added = brisk_calloc((size_t)n, sizeof *wp->added))) return brisk_error_oom();
  char *buf = brisk_malloc(WP_GGUF_MAX_TOKEN + WP_MAX_PREFIX);
  if (!buf) return brisk_error_oom();
  for (uint64_t j = 0; j < n && !st; j++) {
    int32_t t = 0;
    if (types) memcpy(&t, (const char *)types + j * sizeof t, sizeof t);
    st = add_token(wp, brisk_gguf_arr_str(g, idx, j), t == GGUF_TT_CONTROL, buf);
  }
  brisk_free(buf);
  if (st) return st;
  /* llama.cpp's BertNormalizer options: strip_accents follows lowercase. */
  if ((st = opt_bool(g, "tokenizer.ggml.normalizer.lowercase", &wp->lowercase))) return st;
  wp->strip_accents = wp->lowercase;
  if ((st = opt_bool(g, "tokenizer.ggml.normalizer.strip_accents", &wp->strip_accents)) ||
      (st = opt_id(g, "tokenizer.ggml.unknown_token_id", wp->n_tokens, &wp->unk)) ||
      (st = opt_id(g, "tokenizer.ggml.bos_token_id", wp->n_tokens, &wp->cls)) ||
      (st = opt_id(g, "tokenizer.ggml.cls_token_id", wp->n_tokens, &wp->cls)) ||
      (st = opt_id(g, "tokenizer.ggml.seperator_token_id", wp->n_tokens, &wp->sep)))
    return st;
  brisk_wordpiece_default_specials(wp);
  if (wp->unk < 0)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: the BERT vocabulary has no unknown token (no "
                                       "tokenizer.ggml.unknown_token_id and no [UNK])");
  return BRISK_OK;
}

brisk_status brisk_wordpiece_from_gguf(const brisk_gguf *g, brisk_wordpiece **out) {
  if (!g || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "wordpiece_from_gguf: NULL argument");
  *out = NULL;
  brisk_gguf_str model;
  brisk_status st = brisk_gguf_get_str(g, "tokenizer.ggml.model", &model);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: key 'tokenizer.ggml.model' is missing");
  if (st) return st;
  if (model.len != 4 || memcmp(model.ptr, "bert", 4))
    return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%.*s' is not bert",
                       (int)(model.len > 64 ? 64 : model.len), model.ptr);
  brisk_wordpiece *wp = brisk_wordpiece_new();
  if (!wp) return brisk_error_oom();
  if ((st = build(wp, g))) {
    brisk_wordpiece_free(wp);
    return st;
  }
  *out = wp;
  return BRISK_OK;
}
