/* brisk_engine_step: one scheduler iteration.
 *
 * A request feeds tokens[n_computed .. n_tokens) into its KV sequence; when
 * it feeds the last one, that entry's logits give its next token. So a new
 * request prefills its prompt, a generating one feeds one token per step,
 * and a preempted one (KV freed, n_computed reset to 0) recomputes prompt
 * plus generated tokens as if they were all prompt: batch-invariant logits
 * make its continuation identical. In swap mode a preempted request's KV
 * is kept in host memory and restored on admission instead (engine/swap.c).
 * With a step time budget, each request's share is cut to what the cost
 * model (engine/budget.c) predicts still fits. */
#include "engine/engine_internal.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"

#include <stddef.h>
#include <string.h>

static int32_t blocks_for(const brisk_engine *e, int32_t n_tokens) {
  return (int32_t)(((int64_t)n_tokens + e->block_size - 1) / e->block_size);
}

static int32_t free_blocks(const brisk_engine *e) {
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  return brisk_context_kv_stats(e->ctx, &ks) ? 0 : ks.n_free_blocks;
}

static void remove_running(brisk_engine *e, brisk_engine_request *r) {
  int32_t i = 0;
  while (i < e->n_running && e->running[i] != r) i++;
  if (i == e->n_running) return;
  memmove(e->running + i, e->running + i + 1, (size_t)(e->n_running - i - 1) * sizeof *e->running);
  e->n_running--;
  brisk_seq_free(e->ctx, r->seq);
  e->free_seqs[e->n_free_seqs++] = r->seq;
  r->seq = -1;
}

/* Ends a request and queues its last event (room must be reserved). */
static void finish(brisk_engine *e, brisk_engine_request *r, int32_t token, size_t text_off,
                   size_t text_len, brisk_finish_reason reason) {
  if (r->state == BRISK_REQ_RUNNING)
    remove_running(e, r);
  else if (r->state == BRISK_REQ_WAITING)
    e->n_waiting--;
  brisk_engine_swap_drop(e, r);
  r->state = BRISK_REQ_DONE;
  r->reason = reason;
  r->t_finish = brisk_now_ns();
  brisk_engine_metrics_on_finish(e, r);
  e->n_finished++;
  if (reason == BRISK_FINISH_CANCELLED) e->n_cancelled++;
  brisk_engine_push_event(e, r, token, text_off, text_len, reason);
}

/* Frees a running request's KV (in swap mode after copying it to host
 * memory) and queues it again; it keeps its rank, so it is the first of its
 * priority to be admitted again. */
static void preempt(brisk_engine *e, brisk_engine_request *r) {
  brisk_engine_swap_out(e, r);
  remove_running(e, r);
  r->state = BRISK_REQ_WAITING;
  r->n_computed = 0;
  r->n_preemptions++;
  e->n_waiting++;
  e->n_preemptions++;
}

/* Moves a chain of submitted requests to the end of the engine's list. */
static void append_requests(brisk_engine *e, brisk_engine_request *in, brisk_engine_request *last) {
  if (!in) return;
  in->prev = e->tail;
  if (e->tail)
    e->tail->next = in;
  else
    e->head = in;
  e->tail = last;
  for (; in; in = in->next) e->n_waiting++;
}

/* Takes in submissions and applies cancellations; -1 on OOM (the cancel
 * that found no room for its event stays queued). Each cancel is popped
 * together with the submissions before it, so its request is always found
 * here (a cancel can only name an id already queued). */
static int take_in(brisk_engine *e) {
  for (;;) {
    pthread_mutex_lock(&e->mu);
    brisk_engine_request *in = e->in_head, *last = e->in_tail;
    e->in_head = e->in_tail = NULL;
    brisk_engine_cancel_node *c = e->cancel_head;
    if (c) {
      e->cancel_head = c->next;
      if (!c->next) e->cancel_tail = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    append_requests(e, in, last);
    if (!c) return 0;
    brisk_engine_request *r = e->head;
    while (r && r->id != c->id) r = r->next;
    if (r && r->state <= BRISK_REQ_RUNNING) {
      if (brisk_engine_reserve_events(e, 1)) {
        pthread_mutex_lock(&e->mu);
        c->next = e->cancel_head;
        e->cancel_head = c;
        if (!e->cancel_tail) e->cancel_tail = c;
        pthread_mutex_unlock(&e->mu);
        return -1;
      }
      finish(e, r, -1, e->text_n, 0, BRISK_FINISH_CANCELLED);
    }
    brisk_free(c);
  }
}

/* Admits waiting requests by rank while a sequence id is free and the KV
 * pool can hold all their known tokens on top of what the running ones
 * still need for theirs. A request first attaches the longest cached
 * prefix of its known tokens (prompt, plus generated ones after a
 * preemption) and needs blocks only for the rest; attaching may take cached
 * blocks out of the available count, so that is read again after it.
 * Stops at the first that does not fit (FCFS), detaching its prefix. */
static void admit(brisk_engine *e) {
  int32_t committed = 0;
  for (int32_t i = 0; i < e->n_running; i++) {
    const brisk_engine_request *r = e->running[i];
    committed += blocks_for(e, r->n_tokens) - blocks_for(e, r->n_computed);
  }
  while (e->n_waiting > 0 && e->n_free_seqs > 0) {
    brisk_engine_request *best = NULL;
    for (brisk_engine_request *r = e->head; r; r = r->next)
      if (r->state == BRISK_REQ_WAITING && (!best || brisk_engine_ranks_before(r, best))) best = r;
    int32_t seq = e->free_seqs[e->n_free_seqs - 1], reused = 0;
    /* A request with a host copy of its KV (swap preemption) takes that
     * instead. On failure (out of memory) it just computes everything. */
    if (!best->swap.data &&
        brisk_seq_match_prefix(e->ctx, seq, best->tokens, best->n_tokens, &reused))
      reused = 0;
    int32_t need = blocks_for(e, best->n_tokens) - blocks_for(e, reused);
    if (need > free_blocks(e) - committed) {
      brisk_seq_free(e->ctx, seq);
      return;
    }
    committed += need;
    if (e->prefix_cache && !best->swap.data) e->n_prefix_lookup_tokens += (uint64_t)best->n_tokens;
    e->n_prefix_hit_tokens += (uint64_t)reused;
    best->state = BRISK_REQ_RUNNING;
    best->seq = seq;
    e->n_free_seqs--;
    if (best->swap.data)
      brisk_engine_swap_in(e, best); /* its KV comes back from host memory */
    else
      best->n_computed = reused;
    if (!best->t_admit) best->t_admit = brisk_now_ns();
    e->n_waiting--;
    int32_t at = e->n_running;
    while (at > 0 && brisk_engine_ranks_before(best, e->running[at - 1])) at--;
    memmove(e->running + at + 1, e->running + at, (size_t)(e->n_running - at) * sizeof *e->running);
    e->running[at] = best;
    e->n_running++;
  }
}

/* Tokens sequence r can still take without new blocks, plus whole blocks. */
static int64_t room_for(const brisk_engine *e, const brisk_engine_request *r, int32_t n_free) {
  int64_t slack = (int64_t)blocks_for(e, r->n_computed) * e->block_size - r->n_computed;
  return slack + (int64_t)n_free * e->block_size;
}

/* Fills the batch: first every generating request's next token, then prompt
 * chunks, each in rank order, within the token budget and the free blocks.
 * A request that finds no room at all preempts the lowest-ranked running
 * request not yet in the batch (possibly itself). Returns the number of
 * scheduled requests. */
static int32_t schedule(brisk_engine *e, int32_t *n_preempted) {
  int32_t budget = e->max_batch_tokens, n_free = free_blocks(e), n_sched = 0;
  uint64_t stamp = e->n_steps_total;
  brisk_batch_clear(e->batch);
  brisk_step_plan_begin(&e->plan);
  for (int phase = 0; phase < 2 && budget > 0; phase++) {
    for (int32_t i = 0; i < e->n_running && budget > 0;) {
      brisk_engine_request *r = e->running[i];
      int32_t remaining = r->n_tokens - r->n_computed;
      if (r->sched_stamp == stamp || (phase == 0) != (remaining == 1)) {
        i++;
        continue;
      }
      int64_t room = room_for(e, r, n_free);
      if (room < 1) {
        int32_t v = e->n_running - 1;
        while (e->running[v]->sched_stamp == stamp) v--; /* stops at i at the latest */
        /* n_free already excludes what this step's batch will take; add
         * what the victim gives back (less than it held if it shared). */
        int32_t before = free_blocks(e);
        preempt(e, e->running[v]);
        n_free += free_blocks(e) - before;
        (*n_preempted)++;
        continue; /* retry r, or its successor if r itself went */
      }
      int32_t c = remaining < budget ? remaining : budget;
      if (phase == 1 && e->prefill_chunk > 0 && c > e->prefill_chunk) c = e->prefill_chunk;
      if (c > room) c = (int32_t)room;
      if (e->budget_ns > 0) {
        c = brisk_step_cost_fit(&e->cost, &e->plan, e->budget_ns, r->n_computed, c, c == remaining);
        if (c == 0) {
          i++;
          continue;
        }
      }
      brisk_step_plan_add(&e->plan, r->n_computed, c, c == remaining);
      n_free -= blocks_for(e, r->n_computed + c) - blocks_for(e, r->n_computed);
      budget -= c;
      brisk_engine_sched *s = &e->sched[n_sched++];
      s->req = r;
      s->first = brisk_batch_size(e->batch);
      s->count = c;
      for (int32_t t = 0; t < c; t++) {
        int32_t pos = r->n_computed + t;
        brisk_batch_add(e->batch, r->tokens[pos], pos, r->seq, pos == r->n_tokens - 1);
      }
      r->sched_stamp = stamp;
      i++;
    }
  }
  return n_sched;
}

/* Samples the next token of a request whose last token was just fed, queues
 * its event, and finishes it on EOG, max_tokens or an error. */
static void produce(brisk_engine *e, brisk_engine_request *r, int32_t entry) {
  int32_t tok;
  if (brisk_sampler_sample(r->sampler, e->ctx, entry, &tok) ||
      brisk_sampler_accept(r->sampler, tok)) {
    finish(e, r, -1, e->text_n, 0, BRISK_FINISH_ERROR);
    return;
  }
  r->tokens[r->n_tokens++] = tok;
  r->n_generated++;
  e->n_generated++;
  if (!r->t_first) r->t_first = brisk_now_ns();
  const char *text = NULL;
  size_t len = 0, off = e->text_n;
  if (r->detok && (brisk_detokenizer_push(r->detok, tok, &text, &len) ||
                   brisk_engine_append_text(e, text, len, &off))) {
    finish(e, r, tok, e->text_n, 0, BRISK_FINISH_ERROR);
    return;
  }
  if (r->stop_at_eog && brisk_token_is_eog(e->model, tok))
    finish(e, r, tok, off, len, BRISK_FINISH_EOG);
  else if (r->n_generated >= r->max_tokens)
    finish(e, r, tok, off, len, BRISK_FINISH_LENGTH);
  else
    brisk_engine_push_event(e, r, tok, off, len, BRISK_FINISH_NONE);
}

BRISK_API brisk_status brisk_engine_step(brisk_engine *e, brisk_engine_step_info *info) {
  /* Callers built before the swap and budget fields pass a smaller struct. */
  if (!e || (info && info->struct_size < offsetof(brisk_engine_step_info, n_swapped_out)))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_step: engine must be set, and info's struct_size");
  uint64_t t0 = brisk_now_ns();
  e->n_steps_total++;
  brisk_engine_step_info si = {.struct_size = sizeof si};
  uint64_t finished_before = e->n_finished, out_before = e->n_swapped_out,
           in_before = e->n_swapped_in;
  if (take_in(e)) return brisk_error_oom();
  admit(e);
  int32_t n_sched = schedule(e, &si.n_preempted);
  si.n_tokens = brisk_batch_size(e->batch);
  if (si.n_tokens > 0) {
    if (brisk_engine_reserve_events(e, (size_t)n_sched)) return brisk_error_oom();
    si.predicted_ns = (uint64_t)brisk_step_cost_predict(&e->cost, &e->plan);
    uint64_t t_run = brisk_now_ns();
    brisk_status st = brisk_decode(e->ctx, e->batch);
    if (st == BRISK_E_KV_FULL) {
      /* The block accounting above should prevent this; recover anyway by
       * making room, and run nothing this step. */
      preempt(e, e->running[e->n_running - 1]);
      si.n_preempted++;
      si.n_tokens = 0;
    } else if (st) {
      return st;
    } else {
      e->n_steps++;
      e->n_computed += (uint64_t)si.n_tokens;
      for (int32_t k = 0; k < n_sched; k++) {
        brisk_engine_request *r = e->sched[k].req;
        r->n_computed += e->sched[k].count;
        if (r->n_computed == r->n_tokens) {
          si.n_decode_tokens++;
          produce(e, r, e->sched[k].first + e->sched[k].count - 1);
        }
      }
      si.n_prefill_tokens = si.n_tokens - si.n_decode_tokens;
      brisk_step_cost_observe(&e->cost, &e->plan, (double)(brisk_now_ns() - t_run));
    }
  }
  si.n_running = e->n_running;
  si.n_waiting = e->n_waiting;
  si.n_finished = (int32_t)(e->n_finished - finished_before);
  si.n_swapped_out = (int32_t)(e->n_swapped_out - out_before);
  si.n_swapped_in = (int32_t)(e->n_swapped_in - in_before);
  si.duration_ns = brisk_now_ns() - t0;
  brisk_engine_metrics_on_step(e, &si, n_sched);
  if (info) {
    uint32_t size = info->struct_size < sizeof si ? info->struct_size : (uint32_t)sizeof si;
    memcpy(info, &si, size);
    info->struct_size = size;
  }
  return BRISK_OK;
}
