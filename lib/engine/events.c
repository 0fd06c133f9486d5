/* The event queue and brisk_engine_poll. Texts of queued events live in one
 * pending buffer, in event order; poll copies the delivered ones to a second
 * buffer so that their pointers stay valid while later steps append. */
#include "engine/engine_internal.h"

#include "core/alloc.h"
#include "core/error.h"

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

void brisk_engine_push_event(brisk_engine *e, brisk_engine_request *r, int32_t token,
                             size_t text_off, size_t text_len, brisk_finish_reason reason) {
  brisk_engine_event_slot *s = &e->events[e->n_events++];
  s->req = r;
  s->token = token;
  s->finished = reason != BRISK_FINISH_NONE;
  s->reason = reason;
  s->text_off = text_off;
  s->text_len = text_len;
}

BRISK_API brisk_status brisk_engine_poll(brisk_engine *e, brisk_engine_event *events,
                                         size_t capacity, size_t *n) {
  if (!e || !n || (!events && capacity > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_poll: engine and n must be set, events when capacity > 0");
  /* Requests whose finished event the previous poll delivered go now. */
  for (brisk_engine_request *r = e->head, *next; r; r = next) {
    next = r->next;
    if (r->state == BRISK_REQ_RETIRED) brisk_engine_forget(e, r);
  }
  size_t k = capacity < e->n_events ? capacity : e->n_events;
  size_t text_end = k ? e->events[k - 1].text_off + e->events[k - 1].text_len : 0;
  if (text_end > e->out_cap) {
    /* Not brisk_grow: the old contents need not survive. */
    char *t = brisk_malloc(text_end);
    if (!t) return brisk_error_oom();
    brisk_free(e->out_text);
    e->out_text = t;
    e->out_cap = text_end;
  }
  if (text_end) memcpy(e->out_text, e->pending_text, text_end);
  for (size_t i = 0; i < k; i++) {
    const brisk_engine_event_slot *s = &e->events[i];
    brisk_engine_event *ev = &events[i];
    ev->id = s->req->id;
    ev->user_data = s->req->user_data;
    ev->token = s->token;
    ev->text = s->text_len ? e->out_text + s->text_off : "";
    ev->text_len = s->text_len;
    ev->finished = s->finished;
    ev->reason = s->reason;
    if (s->finished) s->req->state = BRISK_REQ_RETIRED;
  }
  /* Shift the rest (events and their texts) to the front. */
  if (k < e->n_events) memmove(e->events, e->events + k, (e->n_events - k) * sizeof *e->events);
  e->n_events -= k;
  if (text_end < e->text_n)
    memmove(e->pending_text, e->pending_text + text_end, e->text_n - text_end);
  e->text_n -= text_end;
  for (size_t i = 0; i < e->n_events; i++) e->events[i].text_off -= text_end;
  *n = k;
  return BRISK_OK;
}
