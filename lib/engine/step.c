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
 * model (engine/budget.c) predicts still fits.
 *
 * The scheduler asks and the KV manager decides (kv/kv.h,
 * brisk_kv_seq_reserve): a running pass holds the blocks of every running
 * request's share in rank order, preempting the lowest-ranked one that
 * holds none this step when the pool is full; then, unless that pass
 * preempted, a waiting pass admits requests whose tokens and growth the
 * pool can promise on top of every running request's promise. The batch
 * is then decoded into blocks already held. Waiting embedding requests
 * (engine/embed.c) take what the token budget has left, in rank order with
 * that admission, and run as one embedding pass after the batch. */
#include "engine/engine_internal.h"

#include "context/sched.h"
#include "core/abi.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/memcap.h"
#include "core/log.h"
#include "spec/spec_internal.h"
#include "tokenizer/utf8.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void remove_running(brisk_engine *e, brisk_engine_request *r) {
  int32_t i = 0;
  while (i < e->n_running && e->running[i] != r) i++;
  if (i == e->n_running) return;
  memmove(e->running + i, e->running + i + 1, (size_t)(e->n_running - i - 1) * sizeof *e->running);
  e->n_running--;
  brisk_seq_free(e->ctx, r->seq);
  if (e->spec) brisk_spec_seq_reset(e->spec, r->seq); /* the draft's copy goes too */
  e->free_seqs[e->n_free_seqs++] = r->seq;
  r->seq = -1;
}

/* Inserts r into the running list by rank. */
static void insert_running(brisk_engine *e, brisk_engine_request *r) {
  int32_t at = e->n_running;
  while (at > 0 && brisk_engine_ranks_before(r, e->running[at - 1])) at--;
  memmove(e->running + at + 1, e->running + at, (size_t)(e->n_running - at) * sizeof *e->running);
  e->running[at] = r;
  e->n_running++;
}

/* Ends a completion and queues its last event (room must be reserved); the
 * request counts as finished with its last completion. */
static void finish(brisk_engine *e, brisk_engine_request *r, int32_t token,
                   const brisk_engine_event_extra *x, brisk_finish_reason reason) {
  if (r->state == BRISK_REQ_RUNNING)
    remove_running(e, r);
  else if (r->state == BRISK_REQ_WAITING && r->embed)
    e->n_embed_waiting--;
  else if (r->state == BRISK_REQ_WAITING)
    e->n_waiting--;
  brisk_engine_swap_drop(e, r);
  r->state = BRISK_REQ_DONE;
  r->reason = reason;
  r->t_finish = brisk_now_ns();
  if (--r->leader->n_open == 0) {
    e->n_finished++;
    if (reason == BRISK_FINISH_CANCELLED) e->n_cancelled++;
    brisk_engine_metrics_on_finish(e, r->leader);
  }
  brisk_engine_push_event(e, r, token, x, reason);
}

/* Finishes completion r with BRISK_FINISH_ERROR, keeping the message of
 * the call that failed (the thread's last error) as its reason. */
static void fail(brisk_engine *e, brisk_engine_request *r, int32_t token) {
  snprintf(r->error, sizeof r->error, "%s", brisk_last_error());
  BRISK_WARN("engine: request %llu completion %d failed: %s", (unsigned long long)r->id,
             (int)r->index, r->error);
  finish(e, r, token, NULL, BRISK_FINISH_ERROR);
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
  for (; in; in = in->next) {
    bool waiting = in->state == BRISK_REQ_WAITING;
    e->n_waiting += waiting && !in->embed;
    e->n_embed_waiting += waiting && in->embed;
  }
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
    brisk_engine_request *r = e->head; /* the first with the id is completion 0 */
    while (r && r->id != c->id) r = r->next;
    size_t open = 0;
    const brisk_engine_request *q = r;
    for (int32_t i = 0; r && i < r->n_completions; i++, q = q->next)
      open += q->state <= BRISK_REQ_RUNNING;
    if (open && brisk_engine_reserve_events(e, open)) {
      pthread_mutex_lock(&e->mu);
      c->next = e->cancel_head;
      e->cancel_head = c;
      if (!e->cancel_tail) e->cancel_tail = c;
      pthread_mutex_unlock(&e->mu);
      return -1;
    }
    for (int32_t i = 0, n = open ? r->n_completions : 0; i < n; i++, r = r->next)
      if (r->state <= BRISK_REQ_RUNNING) finish(e, r, -1, NULL, BRISK_FINISH_CANCELLED);
    brisk_free(c);
  }
}

/* The output tokens r is promised room for beyond its known ones:
 * reserve_blocks blocks' worth, capped at its max_tokens. Without such a
 * promise admission fills the pool with prompts that decoding then
 * preempts and recomputes a few steps later (thrash under
 * oversubscription). */
static int32_t growth_tokens(const brisk_engine *e, const brisk_engine_request *r) {
  int64_t left = (int64_t)r->n_prompt + r->max_tokens - r->n_tokens;
  int64_t g = (int64_t)e->reserve_blocks * e->block_size;
  return (int32_t)(g < left ? g : left);
}

/* Completions still waiting to fork r's sequence once its prompt is done. */
static int32_t pending_forks(const brisk_engine_request *r) {
  int32_t forks = 0;
  const brisk_engine_request *f = r->next;
  for (int32_t k = 1; r->index == 0 && k < r->n_completions; k++, f = f->next)
    forks += f->state == BRISK_REQ_FORK_WAIT;
  return forks;
}

/* Asks the KV manager to hold blocks for r's next c tokens and to promise
 * room for the rest of its known tokens, its growth and its forks' (with
 * admit: only if every other promise still fits). BRISK_E_KV_FULL when it
 * cannot, with nothing changed. */
static brisk_status ask(brisk_engine *e, const brisk_engine_request *r, int32_t c, bool admit) {
  int32_t known = r->n_tokens - r->n_computed - c;
  brisk_kv_ask a = {.n_tokens = c,
                    .n_known = known > 0 ? known : 0,
                    .n_grow = growth_tokens(e, r),
                    .n_forks = pending_forks(r),
                    .admit = admit};
  return brisk_context_seq_reserve(e->ctx, r->seq, &a);
}

/* Gives back the blocks r holds for tokens it will not feed this step. */
static void unhold(brisk_engine *e, brisk_engine_request *r) {
  brisk_seq_truncate(e->ctx, r->seq, r->n_computed);
}

/* Holds blocks for r's next c tokens; while the pool is full, preempts the
 * lowest-ranked running request holding none this step (r itself at the
 * latest). BRISK_E_KV_FULL when r went; another error (out of memory)
 * as the KV manager returned it. */
static brisk_status hold(brisk_engine *e, brisk_engine_request *r, int32_t c, uint64_t stamp,
                         int32_t *n_preempted) {
  for (;;) {
    brisk_status st = ask(e, r, c, false);
    if (st != BRISK_E_KV_FULL) return st;
    int32_t v = e->n_running - 1;
    while (e->running[v]->sched_stamp == stamp) v--; /* stops at r at the latest */
    brisk_engine_request *victim = e->running[v];
    preempt(e, victim);
    (*n_preempted)++;
    if (victim == r) return BRISK_E_KV_FULL;
  }
}

/* The best-ranked waiting generation request, or NULL. */
static brisk_engine_request *best_waiting(const brisk_engine *e) {
  if (e->n_waiting == 0) return NULL;
  brisk_engine_request *best = NULL;
  for (brisk_engine_request *r = e->head; r; r = r->next)
    if (r->state == BRISK_REQ_WAITING && !r->embed && (!best || brisk_engine_ranks_before(r, best)))
      best = r;
  return best;
}

/* Admits the best-ranked waiting request if a sequence id is free and the
 * KV manager can promise room for all its known tokens and its growth on
 * top of every running request's promise. It first attaches the longest
 * cached prefix of its known tokens (prompt, plus generated ones after a
 * preemption) and asks only for the rest; a request with a host copy of its
 * KV (swap preemption) takes that instead. Returns it, or NULL (FCFS: the
 * first that does not fit stops admission, its prefix detached). */
static brisk_engine_request *admit_one(brisk_engine *e) {
  if (e->n_waiting == 0 || e->n_free_seqs == 0) return NULL;
  brisk_engine_request *best = best_waiting(e);
  int32_t seq = e->free_seqs[e->n_free_seqs - 1], reused = 0;
  /* The id's window is the request's (a window stays on a freed id); the
   * only failure is out of memory for the sinks' host copy, which stops
   * admission for this step. A windowed sequence attaches no prefix. */
  if (brisk_seq_set_window(e->ctx, seq, best->n_sinks, best->window)) return NULL;
  /* On failure (out of memory) it just computes everything. */
  if (!best->swap.data && best->window == 0 &&
      brisk_seq_match_prefix(e->ctx, seq, best->tokens, best->n_tokens, &reused))
    reused = 0;
  best->seq = seq;
  best->n_computed = reused;
  if (ask(e, best, 0, true)) {
    brisk_seq_free(e->ctx, seq);
    best->seq = -1;
    best->n_computed = 0;
    return NULL;
  }
  if (e->prefix_cache && !best->swap.data && best->window == 0)
    e->n_prefix_lookup_tokens += (uint64_t)best->n_tokens;
  e->n_prefix_hit_tokens += (uint64_t)reused;
  best->state = BRISK_REQ_RUNNING;
  e->n_free_seqs--;
  if (best->swap.data) brisk_engine_swap_in(e, best); /* its KV comes back from host memory */
  if (!best->t_admit) {
    best->t_admit = brisk_now_ns();
    best->n_cached = reused;
  }
  e->n_waiting--;
  insert_running(e, best);
  return best;
}

/* Draft model: up to k drafts for r into r->draft, their distributions
 * into r->q (the brisk_spec's buffers serve the next request). A failed
 * draft only costs the speedup: the request goes on without drafts, and its
 * draft copy is rebuilt next time. */
static int32_t draft_with_model(const brisk_engine *e, brisk_engine_request *r, size_t k) {
  brisk_spec *sp = e->spec;
  size_t m = 0;
  if (brisk_spec_draft_model(sp, r->seq, r->sampler, r->tokens, (size_t)r->n_tokens, k, &m)) {
    brisk_spec_seq_reset(sp, r->seq);
    return 0;
  }
  memcpy(r->draft, sp->draft, m * sizeof *r->draft);
  memcpy(r->q, sp->q, m * (size_t)sp->n_vocab * sizeof *r->q);
  return (int32_t)m;
}

/* Drafts for generating request r, whose pending token holds its block,
 * into r->draft; returns how many. Drafts only use what the generating
 * requests after it do not need for their own next tokens: dec_left
 * tokens of the budget, and the blocks, which those hold already. Never
 * more than max_tokens leaves room to keep. */
static int32_t draft_tokens(brisk_engine *e, brisk_engine_request *r, int32_t budget,
                            int32_t dec_left) {
  if (r->spec_k == 0 || r->n_generated == 0) return 0;
  int64_t cap = r->spec_cur;
  int64_t left = (int64_t)r->max_tokens - r->n_generated - 1;
  if (left < cap) cap = left;
  if ((int64_t)budget - 1 - dec_left < cap) cap = (int64_t)budget - 1 - dec_left;
  int64_t room = brisk_context_seq_room(e->ctx, r->seq) - 1; /* after the pending token */
  if (room < cap) cap = room;
  if (cap <= 0) return 0;
  if (r->spec_use_draft) return draft_with_model(e, r, (size_t)cap);
  return (int32_t)brisk_spec_lookup(r->tokens, (size_t)r->n_tokens, r->spec_g_min, r->spec_g_max,
                                    (size_t)cap, r->draft);
}

/* Adds r's next c entries to the batch: its tokens from n_computed on, then
 * its drafts. Every draft entry has logits: entry j's score draft j + 1. */
static void add_entries(brisk_engine *e, const brisk_engine_request *r, int32_t c) {
  for (int32_t t = 0; t < c; t++) {
    int32_t pos = r->n_computed + t;
    int32_t tok = pos < r->n_tokens ? r->tokens[pos] : r->draft[pos - r->n_tokens];
    brisk_batch_add(e->batch, tok, pos, r->seq, pos >= r->n_tokens - 1);
  }
}

/* The share of r the step's budgets allow: at most c tokens, cut by the
 * cost model with a step time budget (0: none fits). */
static int32_t fit(brisk_engine *e, const brisk_engine_request *r, int32_t c, bool logits) {
  if (e->budget_ns <= 0) return c;
  return brisk_step_cost_fit(&e->cost, &e->plan, e->budget_ns, r->n_computed, c, logits);
}

/* Adds r's share of c entries (m of them drafts), whose blocks it holds,
 * to the batch. */
static void add_share(brisk_engine *e, brisk_engine_request *r, int32_t c, int32_t m, bool logits,
                      int32_t *n_sched, int32_t *budget) {
  brisk_step_plan_add(&e->plan, r->n_computed, c, logits);
  *budget -= c;
  brisk_engine_sched *s = &e->sched[(*n_sched)++];
  s->req = r;
  s->first = brisk_batch_size(e->batch);
  s->count = c;
  s->n_draft = m;
  add_entries(e, r, c);
}

/* A prompt chunk for r (its next tokens, up to the budget, the prefill
 * chunk and its room). With may_preempt, no room preempts the
 * lowest-ranked request holding nothing this step and returns 0 with r
 * unscheduled (the caller retries whoever is then at r's place); else it
 * leaves r for a later step. Returns 1 when r was looked at, 0 to retry. */
static int chunk(brisk_engine *e, brisk_engine_request *r, uint64_t stamp, bool may_preempt,
                 int32_t *n_sched, int32_t *budget, int32_t *n_preempted) {
  int32_t remaining = r->n_tokens - r->n_computed;
  int64_t room = brisk_context_seq_room(e->ctx, r->seq);
  if (room < 1) {
    if (!may_preempt) return 1;
    int32_t v = e->n_running - 1;
    while (e->running[v]->sched_stamp == stamp) v--; /* stops at r at the latest */
    preempt(e, e->running[v]);
    (*n_preempted)++;
    return 0;
  }
  int32_t c = remaining < *budget ? remaining : *budget;
  if (e->prefill_chunk > 0 && c > e->prefill_chunk) c = e->prefill_chunk;
  /* A windowed sequence takes chunks of at most its window, which bounds
   * what it holds (brisk_seq_set_window). */
  if (r->window > 0 && c > r->window) c = r->window;
  if (c > room) c = (int32_t)room;
  c = fit(e, r, c, c == remaining);
  if (c == 0 || ask(e, r, c, false)) return 1; /* within its room: only out of memory fails */
  r->sched_stamp = stamp;
  add_share(e, r, c, 0, c == remaining, n_sched, budget);
  return 1;
}

/* Fills the batch. The running pass: first every generating request's next
 * token holds its block in rank order (preempting as hold does), then
 * each of those adds its drafts, then the running prompts their chunks in
 * rank order, each within the token budget. The waiting pass, unless the
 * running pass preempted: admission (admit_one), each admitted request's
 * first chunk within what the budget has left. Returns the number of
 * scheduled requests; -1 when the KV manager ran out of memory (what the
 * step held is given back; its preemptions stand). */
static int32_t schedule(brisk_engine *e, int32_t *n_preempted) {
  int32_t budget = e->max_batch_tokens, n_sched = 0, n_dec = 0;
  uint64_t stamp = e->n_steps_total;
  e->n_emb = e->n_emb_tokens = 0;
  brisk_batch_clear(e->batch);
  brisk_step_plan_begin(&e->plan);
  for (int32_t i = 0; i < e->n_running && n_dec < budget;) {
    brisk_engine_request *r = e->running[i];
    if (r->n_tokens - r->n_computed != 1) {
      i++;
      continue;
    }
    brisk_status st = hold(e, r, 1, stamp, n_preempted);
    if (st == BRISK_E_KV_FULL) continue; /* r went: its successor is at i */
    if (st) goto fail;
    r->sched_stamp = stamp;
    n_dec++;
    i++;
  }
  /* Drafts use the room left after every next token is held. */
  int32_t dec_left = n_dec;
  for (int32_t i = 0; i < e->n_running; i++) {
    brisk_engine_request *r = e->running[i];
    if (r->sched_stamp != stamp) continue;
    dec_left--;
    int32_t m = draft_tokens(e, r, budget, dec_left);
    int32_t c = fit(e, r, 1 + m, true);
    if (c == 0) { /* the time budget is spent: it goes next step */
      unhold(e, r);
      r->sched_stamp = 0;
      continue;
    }
    if (c > 1 && ask(e, r, c, false)) c = 1; /* within its room: only out of memory fails */
    add_share(e, r, c, c - 1, true, &n_sched, &budget);
  }
  for (int32_t i = 0; i < e->n_running && budget > 0;) {
    brisk_engine_request *r = e->running[i];
    if (r->sched_stamp == stamp || r->n_tokens - r->n_computed == 1) {
      i++;
      continue;
    }
    i += chunk(e, r, stamp, true, &n_sched, &budget, n_preempted);
  }
  /* Waiting embedding requests go in rank order with the admission of
   * waiting generation requests: those ranked before the next one to admit
   * first, then the rest once admission stops. */
  bool emb_blocked = false;
  if (*n_preempted > 0) {
    brisk_engine_schedule_embeds(e, NULL, &budget, &emb_blocked);
    return n_sched;
  }
  for (;;) {
    if (e->n_embed_waiting > 0 && !emb_blocked && e->n_free_seqs > 0)
      brisk_engine_schedule_embeds(e, best_waiting(e), &budget, &emb_blocked);
    brisk_engine_request *r = admit_one(e);
    if (!r) break;
    if (budget > 0) chunk(e, r, stamp, false, &n_sched, &budget, n_preempted);
  }
  brisk_engine_schedule_embeds(e, NULL, &budget, &emb_blocked);
  return n_sched;
fail:
  for (int32_t i = 0; i < e->n_running; i++)
    if (e->running[i]->sched_stamp == stamp) unhold(e, e->running[i]);
  return -1;
}

/* Appends the text the stopper releases for tok to the pending text, and,
 * when the completion ends for another reason (`ending`), what it still
 * holds back but an incomplete UTF-8 tail. Sets x's text range and *stop
 * when the text reached a stop string. -1 on failure. */
static int add_text(brisk_engine *e, brisk_engine_request *r, int32_t tok, int ending,
                    brisk_engine_event_extra *x, int *stop) {
  const char *text;
  size_t len, off;
  brisk_stop_reason sr;
  *stop = 0;
  if (brisk_stopper_push(r->stopper, tok, &text, &len, &sr) ||
      brisk_engine_append_text(e, text, len, &x->text_off))
    return -1;
  x->text_len = len;
  *stop = sr == BRISK_STOP_STRING;
  if (*stop || !ending) return 0;
  if (brisk_stopper_flush(r->stopper, &text, &len)) return -1;
  len -= brisk_utf8_incomplete_tail((const unsigned char *)text, len);
  if (brisk_engine_append_text(e, text, len, &off)) return -1;
  x->text_len += len; /* appended right after */
  return 0;
}

/* Appends tok (already accepted by the sampler; entry holds the logits it
 * came from) to completion r, queues its event, and finishes r on EOG,
 * max_tokens, a stop string or an error. */
static void emit(brisk_engine *e, brisk_engine_request *r, int32_t entry, int32_t tok) {
  r->tokens[r->n_tokens++] = tok;
  r->n_generated++;
  e->n_generated++;
  if (!r->t_first) r->t_first = brisk_now_ns();
  brisk_finish_reason reason = BRISK_FINISH_NONE;
  if (r->stop_at_eog && brisk_token_is_eog(e->model, tok))
    reason = BRISK_FINISH_EOG;
  else if (r->n_generated >= r->max_tokens)
    reason = BRISK_FINISH_LENGTH;
  brisk_engine_event_extra x = {.text_off = e->text_n, .lp_off = e->lp_n};
  int stop = 0;
  if (r->stopper && add_text(e, r, tok, reason != BRISK_FINISH_NONE, &x, &stop)) {
    fail(e, r, tok);
    return;
  }
  if (stop) reason = BRISK_FINISH_STOP;
  if (r->n_logprobs > 0) {
    const float *logits = brisk_get_logits(e->ctx, entry);
    if (!logits) brisk_error(BRISK_E_INTERNAL, "engine: no logits for batch entry %d", (int)entry);
    if (!logits || brisk_engine_append_logprobs(e, logits, brisk_model_n_vocab(e->model), tok,
                                                r->n_logprobs, &x)) {
      fail(e, r, tok);
      return;
    }
  }
  if (reason != BRISK_FINISH_NONE)
    finish(e, r, tok, &x, reason);
  else
    brisk_engine_push_event(e, r, tok, &x, BRISK_FINISH_NONE);
}

/* Samples the next token of a completion whose last token was just fed,
 * queues its event, and finishes it on EOG, max_tokens, a stop string or an
 * error. */
static void produce(brisk_engine *e, brisk_engine_request *r, int32_t entry) {
  int32_t tok;
  brisk_finish_reason blocked = r->constraint ? brisk_engine_constraint_blocked(r) : 0;
  if (blocked != BRISK_FINISH_NONE) {
    finish(e, r, -1, NULL, blocked);
    return;
  }
  if (brisk_sampler_sample(r->sampler, e->ctx, entry, &tok) ||
      brisk_sampler_accept(r->sampler, tok) ||
      (r->constraint && brisk_constraint_accept(r->constraint, tok))) {
    fail(e, r, -1);
    return;
  }
  emit(e, r, entry, tok);
}

/* Generating request r fed its pending token at `entry` and m drafts after
 * it: produces from each row in turn while the produced token is the draft
 * that row's successor holds, so every token comes from the same sampler
 * path as without drafts; then releases the KV of the drafts not kept. */
static void accept_drafts(brisk_engine *e, brisk_engine_request *r, int32_t entry, int32_t m) {
  r->n_spec_drafted += (uint64_t)m;
  e->n_spec_drafted += (uint64_t)m;
  int32_t kept = 0;
  for (int32_t j = 0;; j++) {
    int32_t before = r->n_tokens;
    produce(e, r, entry + j);
    int hit = j < m && r->n_tokens > before && r->tokens[r->n_tokens - 1] == r->draft[j];
    if (hit) {
      r->n_spec_accepted++;
      e->n_spec_accepted++;
      kept++;
    }
    if (!hit || r->state != BRISK_REQ_RUNNING) break; /* finished: its KV is gone */
    r->n_computed++; /* draft j is the token just produced: its KV stays */
  }
  if (r->spec_adaptive) {
    int32_t k = kept == m ? r->spec_cur + 1 : kept + 1;
    r->spec_cur = k < r->spec_k ? k : r->spec_k;
  }
  if (r->state == BRISK_REQ_RUNNING && brisk_seq_truncate(e->ctx, r->seq, r->n_computed))
    fail(e, r, -1);
}

/* Draft model: generating request r fed its pending token at `entry` and
 * m drafts after it, drawn from r->q. The rejection rule (lib/spec's
 * verify) picks the tokens to keep, advancing r's sampler as
 * brisk_spec_round does; then the KV of the drafts not kept is released in
 * the target and in the draft's copy. */
static void accept_verified(brisk_engine *e, brisk_engine_request *r, int32_t entry, int32_t m) {
  brisk_spec *sp = e->spec;
  int32_t out[BRISK_ENGINE_SPEC_MAX_DRAFT + 1]; /* accepted drafts, then one drawn token */
  size_t n_out = 0;
  int32_t n = r->n_tokens; /* the pending token's and those before it */
  r->n_spec_drafted += (uint64_t)m;
  e->n_spec_drafted += (uint64_t)m;
  for (int32_t i = 0; i <= m; i++) sp->rows[i] = brisk_get_logits(e->ctx, entry + i);
  if (brisk_spec_verify(r->sampler, sp->rows, r->draft, (size_t)m, r->q, sp->scratch, out,
                        &n_out)) {
    fail(e, r, -1); /* frees both sequences */
    return;
  }
  int32_t kept = (int32_t)n_out - 1;
  for (int32_t j = 0; j <= kept && r->state == BRISK_REQ_RUNNING; j++) {
    emit(e, r, entry + j, out[j]);
    if (j == kept) break;
    r->n_spec_accepted++;
    e->n_spec_accepted++;
    if (r->state == BRISK_REQ_RUNNING) r->n_computed++; /* draft j's KV stays */
  }
  if (r->spec_adaptive) {
    int32_t k = kept == m ? r->spec_cur + 1 : kept + 1;
    r->spec_cur = k < r->spec_k ? k : r->spec_k;
  }
  if (r->state != BRISK_REQ_RUNNING) return; /* finished: its KV is gone */
  brisk_spec_draft_keep(sp, r->seq, (size_t)n, (size_t)kept);
  if (brisk_seq_truncate(e->ctx, r->seq, r->n_computed)) fail(e, r, -1);
}

/* Completion 0 has just prefilled the prompt: the waiting completions fork
 * its sequence, sharing its blocks, and sample from the same logits (the
 * caller produces their first tokens). One that finds no free sequence id,
 * or whose fork fails, prefills on its own after admission instead. */
static void fork_completions(brisk_engine *e, brisk_engine_request *leader) {
  brisk_engine_request *f = leader->next;
  uint64_t now = brisk_now_ns();
  for (int32_t i = 1; i < leader->n_completions; i++, f = f->next) {
    if (f->state != BRISK_REQ_FORK_WAIT) continue;
    int32_t seq = e->n_free_seqs > 0 ? e->free_seqs[e->n_free_seqs - 1] : -1;
    if (seq >= 0 && brisk_seq_fork(e->ctx, leader->seq, seq) == BRISK_OK) {
      e->n_free_seqs--;
      f->seq = seq;
      f->state = BRISK_REQ_RUNNING;
      f->n_computed = leader->n_computed;
      f->t_admit = now;
      insert_running(e, f);
    } else {
      f->state = BRISK_REQ_WAITING;
      e->n_waiting++;
    }
  }
}

/* Whether k's entry just completed completion 0's prompt while other
 * completions wait to fork it. */
static int prompt_done(const brisk_engine_request *r) {
  return r->index == 0 && r->n_completions > 1 && r->n_generated == 0 &&
         r->n_computed == r->n_tokens && r->next->state == BRISK_REQ_FORK_WAIT;
}

/* After a successful decode of scheduled share s (its entries from
 * s->first on in the batch just run): advances the request, and when it fed
 * its last known token, produces its next tokens (forking waiting
 * completions after a prompt). Returns the entries that produced tokens. */
static int32_t after_decode(brisk_engine *e, const brisk_engine_sched *s) {
  brisk_engine_request *r = s->req;
  int32_t m = s->n_draft;
  r->n_computed += s->count - m; /* drafts count once kept */
  if (r->n_computed < r->n_tokens) return 0;
  int32_t entry = s->first + s->count - 1 - m;
  if (m > 0) {
    if (r->spec_use_draft)
      accept_verified(e, r, entry, m);
    else
      accept_drafts(e, r, entry, m);
    return 1 + m;
  }
  if (!prompt_done(r)) {
    produce(e, r, entry);
    return 1;
  }
  fork_completions(e, r);
  brisk_engine_request *f = r->next;
  produce(e, r, entry); /* after the forks: it may finish and free its sequence */
  for (int32_t i = 1; i < r->n_completions; i++, f = f->next)
    if (f->state == BRISK_REQ_RUNNING && f->n_generated == 0 && f->n_computed == f->n_tokens)
      produce(e, f, entry);
  return 1;
}

/* The step's batch failed for a reason other than memory: some request's
 * share makes the forward pass refuse it. Each share runs alone (its
 * logits are bitwise those it had in the batch), and a share that still
 * fails finishes its request with that error; with completions still
 * waiting to fork its prompt, those fail with it (they would feed the same
 * tokens). A share that runs out of memory alone is kept as it was and
 * scheduled again next step. */
static void decode_alone(brisk_engine *e, int32_t n_sched, brisk_engine_step_info *si) {
  int32_t n_tokens = 0;
  for (int32_t k = 0; k < n_sched; k++) {
    brisk_engine_sched one = e->sched[k];
    brisk_engine_request *r = one.req;
    if (r->state != BRISK_REQ_RUNNING) continue; /* a fork an earlier share failed */
    brisk_batch_clear(e->batch);
    one.first = 0;
    add_entries(e, r, one.count);
    brisk_status st = brisk_decode(e->ctx, e->batch);
    if (st == BRISK_E_OUT_OF_MEMORY) continue;
    if (st) {
      brisk_engine_request *f = r->next;
      int32_t n_forks = r->index == 0 ? r->n_completions - 1 : 0;
      char why[sizeof r->error];
      snprintf(why, sizeof why, "%s", brisk_last_error());
      fail(e, r, -1);
      for (int32_t i = 0; i < n_forks; i++, f = f->next)
        if (f->state == BRISK_REQ_FORK_WAIT) {
          brisk_error(st, "%s", why); /* the leader's reason */
          fail(e, f, -1);
        }
      continue;
    }
    e->n_computed += (uint64_t)one.count;
    n_tokens += one.count;
    si->n_decode_tokens += after_decode(e, &one);
  }
  if (n_tokens) e->n_steps++;
  si->n_tokens = n_tokens;
  si->n_prefill_tokens = n_tokens - si->n_decode_tokens;
}

static brisk_status engine_step(brisk_engine *e, brisk_engine_step_info *info);

BRISK_API brisk_status brisk_engine_step(brisk_engine *e, brisk_engine_step_info *info) {
  if (!e) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_step: engine is NULL");
  brisk_mem_account *outer = brisk_mem_enter(e->mem);
  brisk_status st = engine_step(e, info);
  brisk_mem_leave(outer);
  return st;
}

static brisk_status engine_step(brisk_engine *e, brisk_engine_step_info *info) {
  brisk_status bad = info ? brisk_abi_check_out(&brisk_abi_engine_step_info, info) : BRISK_OK;
  if (bad) return bad;
  uint64_t t0 = brisk_now_ns();
  e->n_steps_total++;
  brisk_engine_step_info si = {.struct_size = sizeof si};
  uint64_t finished_before = e->n_finished, out_before = e->n_swapped_out,
           in_before = e->n_swapped_in;
  if (take_in(e)) return brisk_error_oom();
  int32_t n_sched = schedule(e, &si.n_preempted);
  if (n_sched < 0) return brisk_error_oom(); /* nothing changed: the step can be retried */
  si.n_tokens = brisk_batch_size(e->batch);
  uint64_t t_run = brisk_now_ns();
  bool gen_ok = si.n_tokens == 0;
  if (e->n_emb > 0 && brisk_engine_reserve_events(e, (size_t)e->n_emb)) {
    for (int32_t k = 0; k < n_sched; k++) unhold(e, e->sched[k].req);
    return brisk_error_oom();
  }
  if (si.n_tokens > 0) {
    /* An event per scheduled completion, and per completion that may fork
     * (on top of the embedding requests' reserved above). */
    size_t n_ev = (size_t)n_sched + (size_t)e->n_emb;
    for (int32_t k = 0; k < n_sched; k++) {
      if (e->sched[k].req->index == 0) n_ev += (size_t)e->sched[k].req->n_completions - 1;
      if (e->sched[k].n_draft > 0)
        n_ev += (size_t)e->sched[k].n_draft + 1; /* + a failed truncate */
    }
    if (brisk_engine_reserve_events(e, n_ev)) {
      for (int32_t k = 0; k < n_sched; k++) unhold(e, e->sched[k].req);
      return brisk_error_oom();
    }
    si.predicted_ns = (uint64_t)brisk_step_cost_predict(&e->cost, &e->plan);
    t_run = brisk_now_ns();
    /* Every share holds its blocks: the pool cannot be full here. */
    brisk_status st = brisk_decode(e->ctx, e->batch);
    if (st == BRISK_E_OUT_OF_MEMORY) {
      return st; /* nothing changed (the held blocks went back): the step can be retried */
    } else if (!st) {
      e->n_steps++;
      e->n_computed += (uint64_t)si.n_tokens;
      for (int32_t k = 0; k < n_sched; k++) si.n_decode_tokens += after_decode(e, &e->sched[k]);
      si.n_prefill_tokens = si.n_tokens - si.n_decode_tokens;
      gen_ok = true;
    } else {
      decode_alone(e, n_sched, &si);
    }
  }
  /* After the generation batch, so that its out-of-memory return leaves
   * the embedding requests waiting too. Embedded tokens count as prompt
   * tokens of the step. */
  int32_t n_emb_tokens = e->n_emb > 0 ? e->n_emb_tokens : 0;
  if (e->n_emb > 0) {
    if (si.n_tokens == 0) si.predicted_ns = (uint64_t)brisk_step_cost_predict(&e->cost, &e->plan);
    brisk_engine_run_embeds(e);
    si.n_tokens += n_emb_tokens;
    si.n_prefill_tokens += n_emb_tokens;
  }
  if (gen_ok && si.n_tokens > 0)
    brisk_step_cost_observe(&e->cost, &e->plan, (double)(brisk_now_ns() - t_run));
  si.n_running = e->n_running;
  si.n_waiting = e->n_waiting + e->n_embed_waiting;
  si.n_finished = (int32_t)(e->n_finished - finished_before);
  si.n_swapped_out = (int32_t)(e->n_swapped_out - out_before);
  si.n_swapped_in = (int32_t)(e->n_swapped_in - in_before);
  si.duration_ns = brisk_now_ns() - t0;
  brisk_engine_metrics_on_step(e, &si, n_sched, n_emb_tokens);
  return info ? brisk_abi_write(&brisk_abi_engine_step_info, info, &si) : BRISK_OK;
}

void brisk_engine_finish(brisk_engine *e, brisk_engine_request *r, int32_t token,
                         const brisk_engine_event_extra *x, brisk_finish_reason reason) {
  finish(e, r, token, x, reason);
}

void brisk_engine_fail(brisk_engine *e, brisk_engine_request *r, int32_t token) {
  fail(e, r, token);
}
