/* Stop conditions and the shown text of one generation. Text goes through a
 * streaming detokenizer (whole UTF-8 characters only) into `pending`; the
 * longest suffix of pending that could begin a stop string is held back, so
 * a stop string split across tokens is caught before any of it is shown. */
#include "brisk.h"

#include "core/abi.h"
#include "core/alloc.h"
#include "core/error.h"

#include <stdbool.h>
#include <string.h>

struct brisk_stopper {
  const brisk_model *model;
  brisk_detokenizer *detok;
  int32_t max_tokens;
  int stop_at_eog;
  int32_t *stop_tokens; /* [n_stop_tokens] */
  size_t n_stop_tokens;
  char **stop_strings; /* [n_stop_strings] */
  size_t *stop_lens;
  size_t n_stop_strings;
  uint32_t detok_flags;
  char *pending; /* text decoded but not yet released */
  size_t n_pending, cap_pending;
  char *out; /* what the last call released */
  size_t cap_out;
  int32_t n_pushed;
  int stopped;
};

BRISK_API void brisk_stopper_params_init(brisk_stopper_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->stop_at_eog = 1;
}

BRISK_API void brisk_stopper_free(brisk_stopper *s) {
  if (!s) return;
  brisk_detokenizer_free(s->detok);
  for (size_t i = 0; s->stop_strings && i < s->n_stop_strings; i++) brisk_free(s->stop_strings[i]);
  brisk_free(s->stop_strings);
  brisk_free(s->stop_lens);
  brisk_free(s->stop_tokens);
  brisk_free(s->pending);
  brisk_free(s->out);
  brisk_free(s);
}

static brisk_status check_params(const brisk_model *m, const brisk_stopper_params *p) {
  if (p->max_tokens < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "max_tokens %d is negative", p->max_tokens);
  if ((p->n_stop_tokens && !p->stop_tokens) || (p->n_stop_strings && !p->stop_strings))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "stop token or string array is NULL");
  int32_t n_vocab = brisk_model_n_vocab(m);
  for (size_t i = 0; i < p->n_stop_tokens; i++)
    if (p->stop_tokens[i] < 0 || p->stop_tokens[i] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "stop_tokens[%zu] = %d is outside [0, %d)", i,
                         p->stop_tokens[i], n_vocab);
  for (size_t i = 0; i < p->n_stop_strings; i++)
    if (!p->stop_strings[i] || !p->stop_strings[i][0])
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "stop_strings[%zu] is NULL or empty", i);
  if (p->detokenize_flags & ~(BRISK_DETOKENIZE_RENDER_SPECIAL | BRISK_DETOKENIZE_REPLACE_INVALID))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "detokenize_flags 0x%x: only RENDER_SPECIAL and "
                       "REPLACE_INVALID apply to streams", p->detokenize_flags);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_stopper_create(const brisk_model *m, const brisk_stopper_params *p,
                                            brisk_stopper **out) {
  if (!m || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_stopper_create: model and out must be set");
  brisk_stopper_params params;
  brisk_stopper_params_init(&params);
  brisk_status st;
  if (p && (st = brisk_abi_read(&brisk_abi_stopper_params, p, &params))) return st;
  p = &params;
  if ((st = check_params(m, p))) return st;
  if (st) return st;
  brisk_stopper *s = brisk_calloc(1, sizeof *s);
  if (!s) return brisk_error_oom();
  s->model = m;
  s->max_tokens = p->max_tokens;
  s->stop_at_eog = p->stop_at_eog;
  s->detok_flags = p->detokenize_flags;
  s->n_stop_tokens = p->n_stop_tokens;
  s->n_stop_strings = p->n_stop_strings;
  if ((st = brisk_detokenizer_create(m, p->detokenize_flags, &s->detok))) goto fail;
  if (p->n_stop_tokens) {
    if (!(s->stop_tokens = brisk_malloc(p->n_stop_tokens * sizeof *s->stop_tokens))) goto oom;
    memcpy(s->stop_tokens, p->stop_tokens, p->n_stop_tokens * sizeof *s->stop_tokens);
  }
  if (p->n_stop_strings) {
    s->stop_strings = brisk_calloc(p->n_stop_strings, sizeof *s->stop_strings);
    s->stop_lens = brisk_calloc(p->n_stop_strings, sizeof *s->stop_lens);
    if (!s->stop_strings || !s->stop_lens) goto oom;
    for (size_t i = 0; i < p->n_stop_strings; i++) {
      if (!(s->stop_strings[i] = brisk_strdup(p->stop_strings[i]))) goto oom;
      s->stop_lens[i] = strlen(p->stop_strings[i]);
    }
  }
  *out = s;
  return BRISK_OK;
oom:
  st = brisk_error_oom();
fail:
  brisk_stopper_free(s);
  return st;
}

BRISK_API void brisk_stopper_reset(brisk_stopper *s) {
  if (!s) return;
  const char *t;
  size_t n;
  brisk_detokenizer_flush(s->detok, &t, &n);
  s->n_pending = 0;
  s->n_pushed = 0;
  s->stopped = 0;
}

static brisk_status append_pending(brisk_stopper *s, const char *t, size_t n) {
  if (n == 0) return BRISK_OK;
  if (brisk_grow((void **)&s->pending, &s->cap_pending, s->n_pending + n, 1))
    return brisk_error_oom();
  memcpy(s->pending + s->n_pending, t, n);
  s->n_pending += n;
  return BRISK_OK;
}

/* Moves pending[0, n) into the output buffer and drops it from pending. */
static brisk_status release(brisk_stopper *s, size_t n, const char **text, size_t *len) {
  if (brisk_grow((void **)&s->out, &s->cap_out, n + 1, 1)) return brisk_error_oom();
  /* pending is NULL until the first text: no memcpy from NULL, even of 0. */
  if (n) memcpy(s->out, s->pending, n);
  s->out[n] = 0;
  if (n && n < s->n_pending) memmove(s->pending, s->pending + n, s->n_pending - n);
  s->n_pending -= n;
  *text = s->out;
  *len = n;
  return BRISK_OK;
}

/* Earliest occurrence of any stop string in pending, or SIZE_MAX. */
static size_t find_stop(const brisk_stopper *s) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < s->n_stop_strings; i++) {
    size_t L = s->stop_lens[i];
    for (size_t j = 0; j + L <= s->n_pending && j < best; j++)
      if (memcmp(s->pending + j, s->stop_strings[i], L) == 0) {
        best = j;
        break;
      }
  }
  return best;
}

/* Length of the longest suffix of pending that is a proper prefix of a stop
 * string (so could still grow into one). */
static size_t held_suffix(const brisk_stopper *s) {
  size_t hold = 0;
  for (size_t i = 0; i < s->n_stop_strings; i++) {
    size_t L = s->stop_lens[i];
    for (size_t k = (L - 1 < s->n_pending ? L - 1 : s->n_pending); k > hold; k--)
      if (memcmp(s->pending + s->n_pending - k, s->stop_strings[i], k) == 0) {
        hold = k;
        break;
      }
  }
  return hold;
}

/* Releases everything: pending plus what the detokenizer still holds. */
static brisk_status release_all(brisk_stopper *s, const char **text, size_t *len) {
  const char *t;
  size_t n;
  brisk_status st = brisk_detokenizer_flush(s->detok, &t, &n);
  if (!st) st = append_pending(s, t, n);
  if (!st) st = release(s, s->n_pending, text, len);
  return st;
}

BRISK_API brisk_status brisk_stopper_push(brisk_stopper *s, int32_t token, const char **text,
                                          size_t *len, brisk_stop_reason *reason) {
  if (!s || !text || !len || !reason)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_stopper_push: NULL argument");
  if (s->stopped)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "brisk_stopper_push: generation already stopped (call brisk_stopper_reset)");
  if (token < 0 || token >= brisk_model_n_vocab(s->model))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_stopper_push: token %d is out of range",
                       token);
  *reason = BRISK_STOP_NONE;
  bool stop_token = false;
  for (size_t i = 0; i < s->n_stop_tokens && !stop_token; i++) stop_token = s->stop_tokens[i] == token;
  bool eog = s->stop_at_eog && brisk_token_is_eog(s->model, token);
  s->n_pushed++;
  if (eog || stop_token) {
    /* Held-back text was real text after all. */
    s->stopped = 1;
    *reason = eog ? BRISK_STOP_EOG : BRISK_STOP_TOKEN;
    return release_all(s, text, len);
  }
  const char *piece;
  size_t n;
  brisk_status st = brisk_detokenizer_push(s->detok, token, &piece, &n);
  if (!st) st = append_pending(s, piece, n);
  if (st) return st;
  size_t at = find_stop(s);
  if (at != SIZE_MAX) {
    s->stopped = 1;
    *reason = BRISK_STOP_STRING;
    st = release(s, at, text, len);
    s->n_pending = 0;
    return st;
  }
  if (s->max_tokens > 0 && s->n_pushed >= s->max_tokens) {
    s->stopped = 1;
    *reason = BRISK_STOP_MAX_TOKENS;
    return release_all(s, text, len);
  }
  return release(s, s->n_pending - held_suffix(s), text, len);
}

BRISK_API brisk_status brisk_stopper_flush(brisk_stopper *s, const char **text, size_t *len) {
  if (!s || !text || !len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_stopper_flush: NULL argument");
  return release_all(s, text, len);
}
