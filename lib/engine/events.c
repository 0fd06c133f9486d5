/* The event queue and brisk_engine_poll. Texts of queued events live in one
 * pending buffer, in event order, and so do their log-probability
 * alternatives; poll copies the delivered ones to second buffers so that
 * their pointers stay valid while later steps append. */
#include "engine/engine_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/memcap.h"

#include <math.h>
#include <string.h>

int brisk_engine_reserve_events(brisk_engine *e, size_t more) {
  if (more > SIZE_MAX - e->n_events) return -1;
  return brisk_grow((void **)&e->events, &e->events_cap, e->n_events + more, sizeof *e->events);
}

int brisk_engine_append_text(brisk_engine *e, const char *text, size_t len, size_t *off) {
  *off = e->text_n;
  if (len == 0) return 0;
  if (len > SIZE_MAX - e->text_n ||
      brisk_grow((void **)&e->pending_text, &e->text_cap, e->text_n + len, 1))
    return -1;
  memcpy(e->pending_text + e->text_n, text, len);
  e->text_n += len;
  return 0;
}

int brisk_engine_append_logprobs(brisk_engine *e, const float *logits, int32_t n_vocab,
                                 int32_t token, int32_t n, brisk_engine_event_extra *x) {
  if (n > n_vocab) n = n_vocab;
  if ((size_t)n > SIZE_MAX / 2 - e->lp_n ||
      brisk_grow((void **)&e->pending_lp, &e->lp_cap, e->lp_n + (size_t)n, sizeof *e->pending_lp))
    return -1;
  /* The n largest logits, in decreasing order; a later (higher) id only
   * displaces a strictly smaller logit, so ties keep the lower id first. */
  brisk_token_logprob *top = e->pending_lp + e->lp_n; /* [n] */
  int32_t k = 0;
  float mx = -INFINITY;
  for (int32_t v = 0; v < n_vocab; v++) {
    float l = logits[v];
    if (l > mx) mx = l;
    if (k == n && !(l > top[k - 1].logprob)) continue;
    int32_t at = k < n ? k++ : n - 1;
    while (at > 0 && l > top[at - 1].logprob) {
      top[at] = top[at - 1];
      at--;
    }
    top[at].token = v;
    top[at].logprob = l;
  }
  /* log-softmax in double: lse = max + log(sum exp(l - max)). */
  double sum = 0;
  for (int32_t v = 0; v < n_vocab; v++) sum += exp((double)logits[v] - mx);
  double lse = (double)mx + log(sum);
  for (int32_t i = 0; i < n; i++) top[i].logprob = (float)((double)top[i].logprob - lse);
  x->logprob = (float)((double)logits[token] - lse);
  x->lp_off = e->lp_n;
  x->lp_len = (size_t)n;
  e->lp_n += (size_t)n;
  return 0;
}

void brisk_engine_push_event(brisk_engine *e, brisk_engine_request *r, int32_t token,
                             const brisk_engine_event_extra *x, brisk_finish_reason reason) {
  brisk_engine_event_slot *s = &e->events[e->n_events++];
  s->req = r;
  s->token = token;
  s->finished = reason != BRISK_FINISH_NONE;
  s->reason = reason;
  s->text_off = x ? x->text_off : e->text_n;
  s->text_len = x ? x->text_len : 0;
  s->logprob = x ? x->logprob : 0;
  s->lp_off = x ? x->lp_off : e->lp_n;
  s->lp_len = x ? x->lp_len : 0;
}

/* Frees the requests whose every completion's finished event was delivered
 * by the previous poll (completions of a request go together, so that
 * brisk_engine_request_stats covers all of them until then). */
static void forget_retired(brisk_engine *e) {
  for (brisk_engine_request *r = e->head, *next; r; r = next) {
    int retired = 1;
    next = r;
    for (int32_t i = 0; i < r->n_completions; i++, next = next->next)
      retired &= next->state == BRISK_REQ_RETIRED;
    if (!retired) continue;
    for (brisk_engine_request *q = r, *after; q != next; q = after) {
      after = q->next;
      brisk_engine_forget(e, q);
    }
  }
}

/* Makes *buf hold at least `need` elements of `size` bytes; the old
 * contents need not survive, so not brisk_grow. The new buffer is returned
 * in *fresh (NULL when *buf is big enough). -1 on OOM. */
static int out_buffer(size_t need, size_t cap, size_t size, void **fresh) {
  *fresh = NULL;
  if (need <= cap) return 0;
  *fresh = brisk_malloc(need * size);
  return *fresh ? 0 : -1;
}

static brisk_status poll_events(brisk_engine *e, brisk_engine_event *events, size_t capacity,
                                size_t *n);

BRISK_API brisk_status brisk_engine_poll(brisk_engine *e, brisk_engine_event *events,
                                         size_t capacity, size_t *n) {
  if (!e || !n || (!events && capacity > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_poll: engine and n must be set, events when capacity > 0");
  brisk_mem_account *outer = brisk_mem_enter(e->mem);
  brisk_status st = poll_events(e, events, capacity, n);
  brisk_mem_leave(outer);
  return st;
}

static brisk_status poll_events(brisk_engine *e, brisk_engine_event *events, size_t capacity,
                                size_t *n) {
  forget_retired(e);
  size_t k = capacity < e->n_events ? capacity : e->n_events;
  const brisk_engine_event_slot *last = k ? &e->events[k - 1] : NULL;
  size_t text_end = last ? last->text_off + last->text_len : 0;
  size_t lp_end = last ? last->lp_off + last->lp_len : 0;
  void *t = NULL, *lp = NULL;
  if (out_buffer(text_end, e->out_cap, 1, &t) ||
      out_buffer(lp_end, e->out_lp_cap, sizeof *e->out_lp, &lp)) {
    brisk_free(t);
    return brisk_error_oom();
  }
  if (t) {
    brisk_free(e->out_text);
    e->out_text = t;
    e->out_cap = text_end;
  }
  if (lp) {
    brisk_free(e->out_lp);
    e->out_lp = lp;
    e->out_lp_cap = lp_end;
  }
  if (text_end) memcpy(e->out_text, e->pending_text, text_end);
  if (lp_end) memcpy(e->out_lp, e->pending_lp, lp_end * sizeof *e->out_lp);
  for (size_t i = 0; i < k; i++) {
    const brisk_engine_event_slot *s = &e->events[i];
    brisk_engine_event *ev = &events[i];
    memset(ev, 0, sizeof *ev);
    ev->id = s->req->id;
    ev->user_data = s->req->user_data;
    ev->token = s->token;
    ev->text = s->text_len ? e->out_text + s->text_off : "";
    ev->text_len = s->text_len;
    ev->finished = s->finished;
    ev->reason = s->reason;
    ev->index = s->req->index;
    ev->logprob = s->logprob;
    ev->top_logprobs = s->lp_len ? e->out_lp + s->lp_off : NULL;
    ev->n_top_logprobs = (int32_t)s->lp_len;
    if (s->finished) s->req->state = BRISK_REQ_RETIRED;
  }
  /* Shift the rest (events, their texts and alternatives) to the front. */
  if (k < e->n_events) memmove(e->events, e->events + k, (e->n_events - k) * sizeof *e->events);
  e->n_events -= k;
  if (text_end < e->text_n)
    memmove(e->pending_text, e->pending_text + text_end, e->text_n - text_end);
  e->text_n -= text_end;
  if (lp_end < e->lp_n)
    memmove(e->pending_lp, e->pending_lp + lp_end, (e->lp_n - lp_end) * sizeof *e->pending_lp);
  e->lp_n -= lp_end;
  for (size_t i = 0; i < e->n_events; i++) {
    e->events[i].text_off -= text_end;
    e->events[i].lp_off -= lp_end;
  }
  *n = k;
  return BRISK_OK;
}
