/* Tokens -> text: pieces, whole-sequence detokenization, and a streaming
 * detokenizer that only releases complete UTF-8 sequences. */
#include "tokenizer/vocab_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

#include <string.h>

static const uint16_t k_hidden = BRISK_TOKEN_ATTR_CONTROL | BRISK_TOKEN_ATTR_UNKNOWN;
static const uint16_t k_special =
    BRISK_TOKEN_ATTR_CONTROL | BRISK_TOKEN_ATTR_UNKNOWN | BRISK_TOKEN_ATTR_USER_DEFINED;

const char *brisk_vocab_piece(const brisk_vocab *v, int32_t id, bool render_special, size_t *len) {
  if (!v || id < 0 || id >= v->n_tokens) return NULL;
  if (!render_special && (v->attrs[id] & k_hidden)) {
    if (len) *len = 0;
    return v->pieces ? v->pieces + v->piece_off[id] : "";
  }
  if (len) *len = v->piece_len[id];
  return v->pieces + v->piece_off[id];
}

brisk_status brisk_vocab_token_to_piece(const brisk_vocab *v, int32_t id, bool render_special,
                                        char *buf, size_t cap, size_t *n_needed) {
  if (!v || !n_needed || (!buf && cap))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "token_to_piece: NULL argument");
  size_t n;
  const char *p = brisk_vocab_piece(v, id, render_special, &n);
  if (!p)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "token_to_piece: token id %d out of range [0, %d)",
                       (int)id, (int)v->n_tokens);
  *n_needed = n;
  if (n > cap)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "token_to_piece: piece of %zu bytes, buffer %zu",
                       n, cap);
  if (n) memcpy(buf, p, n);
  return BRISK_OK;
}

/* Output that counts what it cannot store. */
typedef struct sink {
  char *buf;
  size_t cap, n;
} sink;

static void put(sink *s, const char *p, size_t n) {
  if (s->n < s->cap) {
    size_t k = s->cap - s->n < n ? s->cap - s->n : n;
    memcpy(s->buf + s->n, p, k);
  }
  s->n += n;
}

/* Appends p[0, n) replacing every byte that is not part of a valid sequence
 * with U+FFFD (the replacement as in WHATWG: one per invalid byte). */
static void put_replacing(sink *s, const char *p, size_t n) {
  const unsigned char *u = (const unsigned char *)p;
  size_t run = 0; /* start of the current valid stretch */
  for (size_t i = 0; i < n;) {
    size_t k = u[i] < 0x80 ? 1 : brisk_utf8_seq(u + i, n - i, NULL);
    if (k) {
      i += k;
      continue;
    }
    put(s, p + run, i - run);
    put(s, "\xEF\xBF\xBD", 3);
    run = ++i;
  }
  put(s, p + run, n - run);
}

/* The piece a token adds at this point of a sequence: strips the space the
 * tokenizer prepended at the start and after special tokens. */
static const char *piece_at(const brisk_vocab *v, int32_t id, bool render, bool *after_special,
                            size_t *len) {
  size_t n = 0;
  const char *p = brisk_vocab_piece(v, id, render, &n);
  bool special = (v->attrs[id] & k_special) != 0;
  if (!special && *after_special && v->strip_leading_space && n > 0 && p[0] == ' ') p++, n--;
  /* Only text resets it: an empty control piece keeps the strip pending. */
  if (special)
    *after_special = true;
  else if (n > 0 || v->piece_len[id] > 0)
    *after_special = false;
  *len = n;
  return p;
}

/* llama.cpp's clean-up of tokenizer spacing: " ?" " !" " ." " ," lose the
 * space, " ' " loses both, " 's" " 'm" " 're" " 've" lose it. In place. */
static size_t clean_spaces(char *t, size_t n) {
  size_t k = n ? 1 : 0;
  for (size_t i = 1; i < n; i++) {
    char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
    t[k++] = x;
  }
  n = k, k = n ? 1 : 0;
  for (size_t i = 1; i < n; i++) {
    char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      k--;
      t[k++] = x;
      i++; /* the space after */
      continue;
    }
    t[k++] = x;
  }
  n = k, k = n ? 1 : 0;
  for (size_t i = 1; i < n; i++) {
    char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      char x1 = t[i + 1];
      char x2 = i + 2 < n ? t[i + 2] : 0;
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) k--;
    }
    t[k++] = x;
  }
  return k;
}

brisk_status brisk_vocab_detokenize(const brisk_vocab *v, const int32_t *tokens, size_t n_tokens,
                                    uint32_t flags, char *buf, size_t cap, size_t *n_needed) {
  if (!v || !n_needed || (!tokens && n_tokens) || (!buf && cap))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "detokenize: NULL argument");
  for (size_t i = 0; i < n_tokens; i++)
    if (tokens[i] < 0 || tokens[i] >= v->n_tokens)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "detokenize: token %zu is id %d, out of range [0, %d)", i, (int)tokens[i],
                         (int)v->n_tokens);
  if (flags & BRISK_DETOK_REMOVE_SPECIAL) {
    if (n_tokens && brisk_vocab_adds_bos(v) && tokens[0] == v->special[BRISK_VOCAB_BOS])
      tokens++, n_tokens--;
    if (n_tokens && brisk_vocab_adds_eos(v) && tokens[n_tokens - 1] == v->special[BRISK_VOCAB_EOS])
      n_tokens--;
  }
  bool render = (flags & BRISK_DETOK_RENDER_SPECIAL) != 0;
  bool clean = (flags & BRISK_DETOK_CLEAN_SPACES) && v->clean_spaces;
  bool replace = (flags & BRISK_DETOK_REPLACE_INVALID) != 0;
  char *tmp = NULL;
  sink s = {buf, cap, 0};
  if (clean || replace) {
    /* Both look across piece boundaries: assemble the raw text first. */
    size_t total = 0;
    bool after = true;
    for (size_t i = 0; i < n_tokens; i++) {
      size_t n = 0;
      piece_at(v, tokens[i], render, &after, &n);
      total += n;
    }
    tmp = brisk_malloc(total ? total : 1);
    if (!tmp) return brisk_error_oom();
    sink raw = {tmp, total, 0};
    after = true;
    for (size_t i = 0; i < n_tokens; i++) {
      size_t n = 0;
      const char *p = piece_at(v, tokens[i], render, &after, &n);
      put(&raw, p, n);
    }
    size_t rn = clean ? clean_spaces(tmp, raw.n) : raw.n;
    if (replace)
      put_replacing(&s, tmp, rn);
    else
      put(&s, tmp, rn);
    brisk_free(tmp);
  } else {
    bool after = true;
    for (size_t i = 0; i < n_tokens; i++) {
      size_t n = 0;
      const char *p = piece_at(v, tokens[i], render, &after, &n);
      put(&s, p, n);
    }
  }
  *n_needed = s.n;
  if (s.n > cap)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "detokenize: %zu bytes do not fit in %zu", s.n,
                       cap);
  return BRISK_OK;
}

struct brisk_detok_stream {
  const brisk_vocab *v;
  uint32_t flags;
  bool after_special;
  char held[4]; /* start of an incomplete sequence */
  size_t n_held;
  char *out; /* what the last call released */
  size_t out_cap;
};

brisk_status brisk_detok_stream_create(const brisk_vocab *v, uint32_t flags,
                                       brisk_detok_stream **out) {
  if (!v || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "detok_stream: NULL argument");
  brisk_detok_stream *s = brisk_calloc(1, sizeof *s);
  if (!s) return brisk_error_oom();
  s->v = v;
  s->flags = flags;
  s->after_special = true;
  *out = s;
  return BRISK_OK;
}

void brisk_detok_stream_free(brisk_detok_stream *s) {
  if (!s) return;
  brisk_free(s->out);
  brisk_free(s);
}

/* Releases text[0, n) (held bytes first) except an incomplete tail. */
static brisk_status release(brisk_detok_stream *s, const char *p, size_t n, bool final,
                            const char **text, size_t *len) {
  size_t total = s->n_held + n;
  /* With replacement each byte can grow to 3. */
  size_t room = (s->flags & BRISK_DETOK_REPLACE_INVALID) ? 3 * total : total;
  if (brisk_grow((void **)&s->out, &s->out_cap, room ? room : 1, 1) != 0) return brisk_error_oom();
  /* Assemble held + new at the end of the buffer, then emit to its start. */
  char *src = s->out + (room - total);
  if (n) memmove(src + s->n_held, p, n); /* p never points into s->out */
  memcpy(src, s->held, s->n_held);
  size_t keep = final ? 0 : brisk_utf8_incomplete_tail((const unsigned char *)src, total);
  size_t give = total - keep;
  char held[4];
  memcpy(held, src + give, keep);
  sink o = {s->out, room, 0};
  if (s->flags & BRISK_DETOK_REPLACE_INVALID) {
    /* Replacement can grow the text, so it must not read where it writes. */
    char *copy = brisk_malloc(give ? give : 1);
    if (!copy) return brisk_error_oom();
    memcpy(copy, src, give);
    put_replacing(&o, copy, give);
    brisk_free(copy);
  } else {
    memmove(s->out, src, give);
    o.n = give;
  }
  memcpy(s->held, held, keep);
  s->n_held = keep;
  *text = s->out;
  *len = o.n;
  return BRISK_OK;
}

brisk_status brisk_detok_stream_push(brisk_detok_stream *s, int32_t token, const char **text,
                                     size_t *len) {
  if (!s || !text || !len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "detok_stream_push: NULL argument");
  const brisk_vocab *v = s->v;
  if (token < 0 || token >= v->n_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "detok_stream_push: token id %d out of range [0, %d)", (int)token,
                       (int)v->n_tokens);
  bool after = s->after_special;
  size_t n = 0;
  const char *p = piece_at(v, token, (s->flags & BRISK_DETOK_RENDER_SPECIAL) != 0, &after, &n);
  brisk_status st = release(s, p, n, false, text, len);
  if (st == BRISK_OK) s->after_special = after;
  return st;
}

brisk_status brisk_detok_stream_flush(brisk_detok_stream *s, const char **text, size_t *len) {
  if (!s || !text || !len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "detok_stream_flush: NULL argument");
  brisk_status st = release(s, NULL, 0, true, text, len);
  if (st == BRISK_OK) s->after_special = true;
  return st;
}
