/* Embedding requests on the engine: submission, their place in a step
 * (after the running requests' tokens, in rank order with the admission
 * of waiting generation requests, within the token budget), the step's one
 * packed embedding pass (context/embedder.h) and the vector's fetch call.
 * An embedding request is an engine request with one completion that never
 * holds a KV sequence: it waits, runs whole in one step, and finishes with
 * one event; its vector stays with it until the request is forgotten (the
 * poll after the one that delivered that event). */
#include "engine/engine_internal.h"

#include "context/context.h"
#include "context/embedder.h"
#include "core/abi.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memcap.h"
#include "model/embed_tok.h"
#include "model/model.h"

#include <stdio.h>
#include <string.h>

BRISK_API void brisk_embed_request_params_init(brisk_embed_request_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->normalize = -1;
}

/* The input's ids into r->tokens: copied, or tokenized and cut as
 * brisk_embed does. */
static brisk_status load_input(brisk_engine *e, const brisk_embed_request_params *p,
                               const brisk_embed_choice *ch, brisk_engine_request *r) {
  size_t n = p->n_tokens;
  brisk_status st;
  if (p->tokens) {
    if (n < 1)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit_embed: the input has no tokens");
    if (n > ch->max_tokens)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit_embed: %zu tokens are more than max_tokens %u", n,
                         ch->max_tokens);
    if (n > (size_t)e->max_batch_tokens) goto too_long;
    if (!(r->tokens = brisk_malloc(n * sizeof *r->tokens))) return brisk_error_oom();
    memcpy(r->tokens, p->tokens, n * sizeof *r->tokens);
  } else {
    if (!p->text)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit_embed: neither tokens nor text is set");
    if ((st = brisk_model_embed_tokens(e->model, p->text, strlen(p->text), ch->max_tokens,
                                       &r->tokens, &n)))
      return st;
    if (n > (size_t)e->max_batch_tokens) goto too_long;
  }
  int32_t n_vocab = brisk_model_n_vocab(e->model);
  for (size_t i = 0; i < n; i++)
    if (r->tokens[i] < 0 || r->tokens[i] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit_embed: token %zu is %d, outside [0, %d)", i,
                         r->tokens[i], n_vocab);
  r->n_prompt = r->n_tokens = (int32_t)n;
  return BRISK_OK;
too_long:
  /* A request runs whole in one step's pass; nothing is cut silently. */
  return brisk_error(BRISK_E_INVALID_ARGUMENT,
                     "brisk_engine_submit_embed: the input has %zu tokens, more than the engine's "
                     "max_batch_tokens %d (raise it, or set max_tokens to cut the text)",
                     n, e->max_batch_tokens);
}

static brisk_status make_embed(brisk_engine *e, const brisk_embed_request_params *p,
                               brisk_engine_request *r) {
  brisk_embed_choice ch;
  brisk_status st;
  if ((st = brisk_embed_check_model(e->model)) ||
      (st = brisk_embed_choose(e->model, p->pooling, p->normalize, p->max_tokens, &ch)) ||
      (st = load_input(e, p, &ch, r)))
    return st;
  if (!(r->embedding = brisk_malloc((size_t)brisk_model_n_embd(e->model) * sizeof(float))))
    return brisk_error_oom();
  r->embed = true;
  r->embed_pooling = ch.pooling;
  r->embed_normalize = ch.normalize;
  r->leader = r;
  r->n_completions = 1;
  r->n_open = 1;
  r->priority = p->priority;
  r->user_data = p->user_data;
  r->seq = -1;
  r->state = BRISK_REQ_WAITING;
  return BRISK_OK;
}

static brisk_status submit_embed(brisk_engine *e, const brisk_embed_request_params *params,
                                 uint64_t *id) {
  brisk_embed_request_params p;
  brisk_embed_request_params_init(&p);
  brisk_status st = brisk_abi_read(&brisk_abi_embed_request_params, params, &p);
  if (st) return st;
  brisk_engine_request *r = brisk_calloc(1, sizeof *r);
  if (!r) return brisk_error_oom();
  if ((st = make_embed(e, &p, r))) {
    brisk_engine_request_free(r);
    return st;
  }
  uint64_t now = brisk_now_ns();
  pthread_mutex_lock(&e->mu);
  r->id = ++e->last_id;
  r->t_submit = now;
  r->prev = e->in_tail;
  if (e->in_tail)
    e->in_tail->next = r;
  else
    e->in_head = r;
  e->in_tail = r;
  e->n_submitted++;
  brisk_metrics_on_submit(&e->metrics, now);
  *id = r->id;
  pthread_mutex_unlock(&e->mu);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_engine_submit_embed(brisk_engine *e,
                                                 const brisk_embed_request_params *params,
                                                 uint64_t *id) {
  if (!e || !params || !id)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit_embed: engine, params and id must be set");
  brisk_mem_account *outer = brisk_mem_enter(e->mem);
  brisk_status st = submit_embed(e, params, id);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API brisk_status brisk_engine_embedding(brisk_engine *e, uint64_t id, float *out, size_t cap,
                                              size_t *n) {
  if (!e || !n || (!out && cap > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_embedding: engine and n must be set, out when cap > 0");
  const brisk_engine_request *r = e->head;
  while (r && r->id != id) r = r->next;
  if (!r) {
    /* Submitted but not yet taken in by a step: known, without a vector. */
    pthread_mutex_lock(&e->mu);
    const brisk_engine_request *q = e->in_head;
    while (q && q->id != id) q = q->next;
    pthread_mutex_unlock(&e->mu);
    if (q)
      return brisk_error(BRISK_E_INVALID_STATE,
                         "brisk_engine_embedding: request %llu has not run yet",
                         (unsigned long long)id);
    return brisk_error(BRISK_E_NOT_FOUND, "brisk_engine_embedding: no live request has id %llu",
                       (unsigned long long)id);
  }
  if (!r->embed)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "brisk_engine_embedding: request %llu is a generation request",
                       (unsigned long long)id);
  if (!r->embed_ready)
    return brisk_error(
        BRISK_E_INVALID_STATE, "brisk_engine_embedding: request %llu has no vector (%s)",
        (unsigned long long)id, r->state < BRISK_REQ_DONE ? "not run yet" : "cancelled or failed");
  size_t d = (size_t)brisk_model_n_embd(e->model);
  *n = d;
  if (cap < d)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                       "brisk_engine_embedding: out holds %zu floats; the vector has %zu", cap, d);
  memcpy(out, r->embedding, d * sizeof *out);
  return BRISK_OK;
}

void brisk_engine_schedule_embeds(brisk_engine *e, const brisk_engine_request *before,
                                  int32_t *budget, bool *blocked) {
  uint64_t stamp = e->n_steps_total;
  while (!*blocked && e->n_emb < e->max_batch_tokens) {
    brisk_engine_request *best = NULL;
    for (brisk_engine_request *r = e->head; r; r = r->next)
      if (r->embed && r->state == BRISK_REQ_WAITING && r->sched_stamp != stamp &&
          (!best || brisk_engine_ranks_before(r, best)))
        best = r;
    if (!best || (before && !brisk_engine_ranks_before(best, before))) return;
    int32_t n = best->n_prompt;
    /* Whole or not at all; with a time budget the cost model must fit all
     * of it, unless the step has nothing else yet (a step makes progress)
     * or the time budget has already held it back for
     * BRISK_ENGINE_EMBED_PATIENCE steps (running decodes alone could
     * otherwise keep it waiting for as long as they run). */
    bool fits = n <= *budget;
    if (fits && e->budget_ns > 0 && e->plan.n_tokens > 0 &&
        e->emb_held_steps < BRISK_ENGINE_EMBED_PATIENCE &&
        brisk_step_cost_fit(&e->cost, &e->plan, e->budget_ns, 0, n, false) != n) {
      if (e->emb_held_stamp != stamp) e->emb_held_steps++;
      e->emb_held_stamp = stamp;
      fits = false;
    }
    if (!fits) {
      *blocked = true;
      return;
    }
    e->emb_held_steps = 0;
    best->sched_stamp = stamp;
    brisk_step_plan_add(&e->plan, 0, n, false);
    *budget -= n;
    e->emb_sched[e->n_emb++] = best;
    e->n_emb_tokens += n;
  }
}

/* Finishes r with its vector, or with the error of its pass. */
static void settle(brisk_engine *e, brisk_engine_request *r, brisk_status st) {
  if (st) {
    brisk_engine_fail(e, r, -1);
    return;
  }
  r->embed_ready = true;
  brisk_engine_finish(e, r, -1, NULL, BRISK_FINISH_LENGTH);
}

void brisk_engine_run_embeds(brisk_engine *e) {
  int32_t n = e->n_emb;
  e->n_emb = 0;
  uint64_t now = brisk_now_ns();
  for (int32_t k = 0; k < n; k++) {
    brisk_engine_request *r = e->emb_sched[k];
    if (!r->t_admit) r->t_admit = now;
    e->emb_items[k] = (brisk_embed_item){r->tokens, r->n_prompt, r->embed_pooling,
                                         r->embed_normalize, r->embedding};
  }
  brisk_status st = BRISK_OK;
  if (!e->embedder) {
    /* On the context's host backend (its thread pool), or, for an
     * encoder-only engine, on a CPU backend of its own. */
    st = brisk_embedder_create(e->model, e->ctx ? brisk_context_host_backend(e->ctx) : NULL,
                               e->n_threads, e->max_batch_tokens, &e->embedder);
  }
  if (!st) st = brisk_embedder_run(e->embedder, e->emb_items, n);
  if (!st || n == 1 || !e->embedder) {
    for (int32_t k = 0; k < n; k++) settle(e, e->emb_sched[k], st);
  } else {
    /* The pass failed: each request alone, so one bad input cannot fail
     * the others (their vectors do not depend on the batch). */
    for (int32_t k = 0; k < n; k++)
      settle(e, e->emb_sched[k], brisk_embedder_run(e->embedder, &e->emb_items[k], 1));
  }
  e->n_computed += (uint64_t)e->n_emb_tokens;
}
