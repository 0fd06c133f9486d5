#include "context/stream.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "model/model.h"

#include <string.h>

typedef struct stream_seq {
  int32_t sink_tokens; /* 0: no window, or no sinks */
  int32_t at_evicted;  /* the evicted count its sink keys are rotated for */
  float *k, *v;        /* host [n_layer][sink_tokens][kvd]: K before RoPE, and V */
} stream_seq;

struct brisk_stream {
  int32_t n_seq, n_layer, max_tokens;
  size_t kvd;
  stream_seq *seqs;    /* [n_seq] */
  int32_t *tpos;       /* [max_tokens] a batch's table positions */
  int32_t *keep_rows;  /* [max_tokens] */
  int32_t *keep_tpos;  /* [max_tokens] their table positions */
  float *keep_k;       /* [n_layer][keep_cap][kvd] */
  float *keep_v;       /* same */
  size_t keep_cap;     /* rows keep_k holds per layer */
  int32_t *rope_pos;   /* [max_tokens] a sink rewrite's positions */
  int64_t *slot;       /* [max_tokens] and slots */
  int32_t *moved;      /* [n_seq] sequences whose sinks a batch rewrote */
  int32_t *moved_from; /* [n_seq] the evicted count they were rotated for before */
  int32_t n_moved;
};

void brisk_stream_free(brisk_stream *s) {
  if (!s) return;
  if (s->seqs)
    for (int32_t i = 0; i < s->n_seq; i++) {
      brisk_free(s->seqs[i].k);
      brisk_free(s->seqs[i].v);
    }
  brisk_free(s->seqs);
  brisk_free(s->tpos);
  brisk_free(s->keep_rows);
  brisk_free(s->keep_tpos);
  brisk_free(s->keep_k);
  brisk_free(s->keep_v);
  brisk_free(s->rope_pos);
  brisk_free(s->slot);
  brisk_free(s->moved);
  brisk_free(s->moved_from);
  brisk_free(s);
}

static brisk_status stream_create(const brisk_model *m, int32_t n_seq, int32_t max_tokens,
                                  brisk_stream **out) {
  brisk_stream *s = brisk_calloc(1, sizeof *s);
  if (!s) return brisk_error_oom();
  s->n_seq = n_seq;
  s->n_layer = (int32_t)m->hp.n_layer;
  s->max_tokens = max_tokens;
  s->kvd = (size_t)m->hp.n_head_kv * m->hp.head_dim;
  size_t n = (size_t)max_tokens;
  s->seqs = brisk_calloc((size_t)n_seq, sizeof *s->seqs);
  s->tpos = brisk_malloc(n * sizeof *s->tpos);
  s->keep_rows = brisk_malloc(n * sizeof *s->keep_rows);
  s->keep_tpos = brisk_malloc(n * sizeof *s->keep_tpos);
  s->rope_pos = brisk_malloc(n * sizeof *s->rope_pos);
  s->slot = brisk_malloc(n * sizeof *s->slot);
  s->moved = brisk_malloc((size_t)n_seq * sizeof *s->moved);
  s->moved_from = brisk_malloc((size_t)n_seq * sizeof *s->moved_from);
  if (!s->seqs || !s->tpos || !s->keep_rows || !s->keep_tpos || !s->rope_pos || !s->slot ||
      !s->moved || !s->moved_from) {
    brisk_stream_free(s);
    return brisk_error_oom();
  }
  *out = s;
  return BRISK_OK;
}

brisk_status brisk_stream_set(brisk_stream **sp, brisk_kv *kv, const brisk_model *m, int32_t n_seq,
                              int32_t max_tokens, int32_t seq, int32_t n_sinks, int32_t window) {
  if (seq < 0 || seq >= n_seq)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_set_window: sequence id %d is outside [0, %d)", seq, n_seq);
  int32_t bs = brisk_kv_block_size(kv);
  int64_t sink_tokens = n_sinks > 0 ? ((int64_t)n_sinks + bs - 1) / bs * bs : 0;
  if (sink_tokens > max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_set_window: %d sinks (%lld in whole blocks of %d) exceed the "
                       "batch size %d",
                       n_sinks, (long long)sink_tokens, bs, max_tokens);
  brisk_status st;
  if (!*sp && window > 0 && (st = stream_create(m, n_seq, max_tokens, sp))) return st;
  brisk_stream *s = *sp;
  float *k = NULL, *v = NULL;
  size_t n = 0;
  if (sink_tokens > 0 && window > 0) {
    if (brisk_mul_overflow_size((size_t)s->n_layer * (size_t)sink_tokens, s->kvd, &n) ||
        brisk_mul_overflow_size(n, sizeof(float), &n))
      return brisk_error_oom();
    k = brisk_malloc(n);
    v = brisk_malloc(n);
    if (!k || !v) {
      brisk_free(k);
      brisk_free(v);
      return brisk_error_oom();
    }
  }
  if ((st = brisk_kv_seq_set_window(kv, seq, n_sinks, window))) {
    brisk_free(k);
    brisk_free(v);
    return st;
  }
  if (!s) return BRISK_OK; /* turned off, never on */
  stream_seq *q = &s->seqs[seq];
  brisk_free(q->k);
  brisk_free(q->v);
  *q = (stream_seq){k ? (int32_t)sink_tokens : 0, 0, k, v};
  return BRISK_OK;
}

/* Rewrites seq's sinks rotated for `evicted` evicted positions. */
static brisk_status rewrite_sinks(brisk_stream *s, brisk_kv *kv, brisk_forward *f,
                                  const brisk_forward_kv *storage, int32_t seq, int32_t evicted) {
  stream_seq *q = &s->seqs[seq];
  int32_t bs = brisk_kv_block_size(kv), nb;
  const int32_t *table = brisk_kv_block_table(kv, seq, &nb);
  for (int32_t p = 0; p < q->sink_tokens; p++) {
    s->rope_pos[p] = p + evicted;
    s->slot[p] = (int64_t)table[p / bs] * bs + p % bs;
  }
  brisk_status st =
      brisk_forward_rewrite_kv(f, storage, q->sink_tokens, q->k, q->v, s->rope_pos, s->slot);
  if (!st) q->at_evicted = evicted;
  return st;
}

brisk_status brisk_stream_begin(brisk_stream *s, brisk_kv *kv, brisk_forward *f,
                                const brisk_forward_kv *storage, const int32_t *seq,
                                const int32_t *pos, int32_t n, brisk_forward_batch *fb) {
  if (!s) return BRISK_OK;
  s->n_moved = 0;
  bool shifted = false;
  int32_t n_keep = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t ev = brisk_kv_seq_evicted(kv, seq[i]);
    s->tpos[i] = pos[i] - ev;
    shifted |= ev > 0;
    if (s->tpos[i] < s->seqs[seq[i]].sink_tokens) {
      s->keep_rows[n_keep] = i;
      s->keep_tpos[n_keep++] = s->tpos[i];
    }
  }
  if (shifted) {
    fb->pos = s->tpos;
    fb->rope_pos = pos;
  }
  if (n_keep > 0) {
    size_t per = (size_t)s->n_layer * s->kvd, rows = (size_t)n_keep;
    if (rows > s->keep_cap) {
      float *k = brisk_malloc(per * rows * sizeof *k), *v = brisk_malloc(per * rows * sizeof *v);
      if (!k || !v) {
        brisk_free(k);
        brisk_free(v);
        return brisk_error_oom();
      }
      brisk_free(s->keep_k);
      brisk_free(s->keep_v);
      s->keep_k = k;
      s->keep_v = v;
      s->keep_cap = rows;
    }
    fb->n_keep = n_keep;
    fb->keep_rows = s->keep_rows;
    fb->keep_k = s->keep_k;
    fb->keep_v = s->keep_v;
  }
  /* Sequences whose reserve evicted: their sinks move next to the window
   * before this batch attends to them. */
  for (int32_t i = 0; i < n; i++) {
    stream_seq *q = &s->seqs[seq[i]];
    int32_t ev = brisk_kv_seq_evicted(kv, seq[i]);
    if (ev == 0) q->at_evicted = 0; /* started over: its sinks are written afresh */
    if (q->sink_tokens == 0 || ev == q->at_evicted) continue;
    s->moved[s->n_moved] = seq[i];
    s->moved_from[s->n_moved++] = q->at_evicted;
    brisk_status st = rewrite_sinks(s, kv, f, storage, seq[i], ev);
    if (st) return st;
  }
  return BRISK_OK;
}

void brisk_stream_end(brisk_stream *s, const int32_t *seq, const brisk_forward_batch *fb) {
  if (!s) return;
  for (int32_t j = 0; j < fb->n_keep; j++) {
    stream_seq *q = &s->seqs[seq[fb->keep_rows[j]]];
    size_t p = (size_t)s->keep_tpos[j];
    for (int32_t l = 0; l < s->n_layer; l++) {
      size_t from = ((size_t)l * (size_t)fb->n_keep + (size_t)j) * s->kvd;
      size_t to = ((size_t)l * (size_t)q->sink_tokens + p) * s->kvd;
      memcpy(q->k + to, fb->keep_k + from, s->kvd * sizeof(float));
      memcpy(q->v + to, fb->keep_v + from, s->kvd * sizeof(float));
    }
  }
}

brisk_status brisk_stream_undo(brisk_stream *s, brisk_kv *kv, brisk_forward *f,
                               const brisk_forward_kv *storage) {
  brisk_status first = BRISK_OK;
  for (int32_t i = 0; s && i < s->n_moved; i++) {
    brisk_status st = rewrite_sinks(s, kv, f, storage, s->moved[i], s->moved_from[i]);
    if (st && !first) first = st;
  }
  if (s) s->n_moved = 0;
  return first;
}
