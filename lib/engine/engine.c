/* Engine lifetime, submission and cancellation (the thread-safe entry
 * points), and statistics. The scheduler is in step.c, events in events.c. */
#include "engine/engine_internal.h"

#include "core/abi.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/memcap.h"
#include "context/embedder.h"
#include "model/model.h"
#include "spec/spec_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

BRISK_API void brisk_engine_params_init(brisk_engine_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  /* The context's defaults, so the two cannot drift apart. */
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  p->block_size = cp.block_size;
  p->kv_type = cp.kv_type;
  p->max_batch_tokens = cp.max_batch_tokens;
  p->max_running = cp.n_seq_max;
  p->prefix_cache = cp.prefix_cache;
  p->reserve_blocks = 1;
}

BRISK_API void brisk_request_params_init(brisk_request_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->max_tokens = 128;
  p->stop_at_eog = 1;
  p->n = 1;
  p->spec_ngram_min = 2;
  p->spec_ngram_max = 3;
}

/* Copies the caller's first struct_size bytes over the defaults. */
static brisk_status read_params(const brisk_engine_params *in, brisk_engine_params *out) {
  brisk_engine_params_init(out);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_engine_params, in, out);
  if (st) return st;
  if (out->max_running < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "engine params: max_running %d must be >= 1",
                       out->max_running);
  if (out->max_batch_tokens < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "engine params: max_batch_tokens %d must be >= 1",
                       out->max_batch_tokens);
  if (out->reserve_blocks < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "engine params: reserve_blocks %d must be >= 0",
                       out->reserve_blocks);
  if (out->prefill_chunk < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "engine params: prefill_chunk %d must be >= 0",
                       out->prefill_chunk);
  if (out->preempt_mode != BRISK_PREEMPT_RECOMPUTE && out->preempt_mode != BRISK_PREEMPT_SWAP)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: preempt_mode %d is not a brisk_preempt_mode",
                       (int)out->preempt_mode);
  if (out->step_time_budget_us < 0 || out->step_time_budget_us > INT64_MAX / 1000)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: step_time_budget_us %lld is negative or too large",
                       (long long)out->step_time_budget_us);
  return BRISK_OK;
}

/* The draft model's brisk_spec on the engine's context: its draft context
 * takes the target context's parameters. */
static brisk_status create_drafter(brisk_engine *e, const brisk_model *draft) {
  brisk_status st = brisk_spec_check_vocab(e->model, draft);
  if (st) {
    char msg[512]; /* the message is rewritten in the same thread-local buffer */
    snprintf(msg, sizeof msg, "%s", brisk_last_error());
    const char *what = strstr(msg, ": ");
    return brisk_error(st, "brisk_engine_create: draft_model:%s", what ? what + 1 : msg);
  }
  brisk_spec_params sp;
  brisk_spec_params_init(&sp);
  sp.drafter = BRISK_SPEC_DRAFT_MODEL;
  sp.draft_model = draft;
  sp.n_draft = BRISK_ENGINE_SPEC_MAX_DRAFT;
  return brisk_spec_create(e->ctx, &sp, &e->spec);
}

BRISK_API brisk_status brisk_engine_create(const brisk_model *model,
                                           const brisk_engine_params *params, brisk_engine **out) {
  if (!model || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_create: model and out must be set");
  brisk_engine_params p;
  brisk_status st = read_params(params, &p);
  if (st) return st;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = p.n_threads;
  cp.kv_tokens = p.kv_tokens;
  cp.kv_bytes = p.kv_bytes;
  cp.block_size = p.block_size;
  cp.kv_type = p.kv_type;
  cp.max_batch_tokens = p.max_batch_tokens;
  cp.n_seq_max = p.max_running;
  cp.prefix_cache = p.prefix_cache;
  cp.prefix_host_bytes = p.prefix_host_bytes;
  brisk_mem_account *mem = NULL;
  if ((st = brisk_mem_account_create(p.memory_limit, "engine's", &mem))) return st;
  brisk_mem_account *outer = brisk_mem_enter(mem);
  brisk_engine *e = brisk_calloc(1, sizeof *e);
  if (!e || pthread_mutex_init(&e->mu, NULL)) {
    st = e ? brisk_error(BRISK_E_INTERNAL, "brisk_engine_create: pthread_mutex_init failed")
           : brisk_error_oom();
    brisk_free(e);
    brisk_mem_leave(outer);
    brisk_mem_account_release(mem);
    return st;
  }
  e->mem = mem;
  e->model = model;
  e->max_batch_tokens = p.max_batch_tokens;
  e->max_running = p.max_running;
  e->prefill_chunk = p.prefill_chunk;
  e->prefix_cache = p.prefix_cache != 0;
  e->reserve_blocks = p.reserve_blocks;
  e->preempt_mode = p.preempt_mode;
  e->budget_ns = (double)p.step_time_budget_us * 1000.0;
  e->n_threads = p.n_threads;
  /* An encoder (BERT family) gives no tokens: its engine has no context
   * and serves embedding requests only. */
  const brisk_arch_info *ai = brisk_arch_get(model->hp.arch);
  e->encoder_only = ai && ai->encoder;
  if (e->encoder_only && p.draft_model) {
    st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                     "brisk_engine_create: a %s model is an encoder (embedding requests only); "
                     "it takes no draft_model",
                     ai->name);
    goto fail;
  }
  if ((st = brisk_engine_metrics_setup(e, &p)) ||
      (!e->encoder_only && (st = brisk_context_create(model, &cp, &e->ctx))) ||
      (st = brisk_batch_create(p.max_batch_tokens, &e->batch)))
    goto fail;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  if (e->ctx && (st = brisk_context_kv_stats(e->ctx, &ks))) goto fail;
  e->block_size = ks.block_size;
  e->n_blocks = ks.n_blocks;
  e->swap_limit = p.swap_bytes ? p.swap_bytes : ks.kv_bytes;
  size_t nr = (size_t)p.max_running, nb = (size_t)p.max_batch_tokens;
  e->running = brisk_calloc(nr, sizeof *e->running);
  e->free_seqs = brisk_calloc(nr, sizeof *e->free_seqs);
  e->sched = brisk_calloc(nr, sizeof *e->sched);
  e->emb_sched = brisk_calloc(nb, sizeof *e->emb_sched);
  e->emb_items = brisk_calloc(nb, sizeof *e->emb_items);
  if (!e->running || !e->free_seqs || !e->sched || !e->emb_sched || !e->emb_items) {
    st = brisk_error_oom();
    goto fail;
  }
  if (p.draft_model && (st = create_drafter(e, p.draft_model))) goto fail;
  /* Popped from the end: ids are handed out from 0 up. */
  for (int32_t i = 0; i < p.max_running; i++) e->free_seqs[i] = p.max_running - 1 - i;
  e->n_free_seqs = p.max_running;
  brisk_mem_leave(outer);
  *out = e;
  return BRISK_OK;
fail:
  brisk_engine_free(e);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API uint64_t brisk_engine_memory_used(const brisk_engine *e) {
  return e ? brisk_mem_account_used(e->mem) : 0;
}

BRISK_API brisk_status brisk_engine_set_memory_limit(brisk_engine *e, uint64_t bytes) {
  if (!e) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_set_memory_limit: NULL");
  brisk_mem_account_set_limit(e->mem, bytes);
  return BRISK_OK;
}

void brisk_engine_request_free(brisk_engine_request *r) {
  if (!r) return;
  brisk_seq_swap_release(&r->swap);
  brisk_sampler_free(r->sampler);
  brisk_constraint_free(r->constraint);
  brisk_stopper_free(r->stopper);
  brisk_free(r->tokens);
  brisk_free(r->draft);
  brisk_free(r->q);
  brisk_free(r->embedding);
  brisk_free(r);
}

void brisk_engine_forget(brisk_engine *e, brisk_engine_request *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    e->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    e->tail = r->prev;
  brisk_engine_request_free(r);
}

BRISK_API void brisk_engine_free(brisk_engine *e) {
  if (!e) return;
  for (brisk_engine_request *r = e->head, *next; r; r = next) {
    next = r->next;
    brisk_engine_request_free(r);
  }
  for (brisk_engine_request *r = e->in_head, *next; r; r = next) {
    next = r->next;
    brisk_engine_request_free(r);
  }
  for (brisk_engine_cancel_node *c = e->cancel_head, *next; c; c = next) {
    next = c->next;
    brisk_free(c);
  }
  brisk_free(e->running);
  brisk_free(e->free_seqs);
  brisk_free(e->sched);
  brisk_free(e->emb_sched);
  brisk_free(e->emb_items);
  brisk_embedder_free(e->embedder);
  brisk_free(e->events);
  brisk_free(e->pending_text);
  brisk_free(e->out_text);
  brisk_free(e->pending_lp);
  brisk_free(e->out_lp);
  brisk_batch_free(e->batch);
  brisk_spec_free(e->spec);
  brisk_context_free(e->ctx);
  brisk_engine_constraints_free(e);
  pthread_mutex_destroy(&e->mu);
  brisk_mem_account *mem = e->mem;
  brisk_free(e);
  brisk_mem_account_release(mem);
}

/* The prompt as tokens: copied from the params or tokenized from text into
 * r->tokens, sized for the prompt plus max_tokens. */
static brisk_status load_prompt(brisk_engine *e, const brisk_request_params *p,
                                brisk_engine_request *r) {
  size_t n = p->n_prompt_tokens;
  size_t text_len = 0;
  brisk_status st;
  if (!p->prompt_tokens) {
    if (!p->prompt_text)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit: neither prompt_tokens nor prompt_text is set");
    text_len = strlen(p->prompt_text);
    st =
        brisk_tokenize(e->model, p->prompt_text, text_len, NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n);
    if (st && st != BRISK_E_BUFFER_TOO_SMALL) return st;
  }
  int64_t pool = (int64_t)e->n_blocks * e->block_size;
  if (n < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_submit: the prompt has no tokens");
  /* A windowed request holds at most its sinks, two windows and three
   * blocks, however long it runs (docs/kv.md). */
  int64_t need = (int64_t)n + p->max_tokens, bs = e->block_size;
  if (p->window > 0) {
    int64_t bound = ((p->n_sinks + bs - 1) / bs + (2 * (int64_t)p->window + bs - 1) / bs + 3) * bs;
    if (need > bound) need = bound;
  }
  if (need > pool)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: prompt (%zu tokens) + max_tokens (%d)%s exceeds the "
                       "KV pool (%lld tokens)",
                       n, p->max_tokens, p->window > 0 ? ", or its window's bound," : "",
                       (long long)pool);
  size_t cap = n + (size_t)p->max_tokens;
  r->tokens = brisk_malloc(cap * sizeof *r->tokens);
  if (!r->tokens) return brisk_error_oom();
  if (p->prompt_tokens) {
    memcpy(r->tokens, p->prompt_tokens, n * sizeof *r->tokens);
  } else {
    size_t got = 0;
    st = brisk_tokenize(e->model, p->prompt_text, text_len, r->tokens, n,
                        BRISK_TOKENIZE_ADD_SPECIAL, &got);
    if (st) return st;
  }
  /* Tokenized prompts too: an id the model cannot embed would fail every
   * batch it joins, so it is refused here, where only this request fails. */
  int32_t n_vocab = brisk_model_n_vocab(e->model);
  for (size_t i = 0; i < n; i++)
    if (r->tokens[i] < 0 || r->tokens[i] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit: prompt token %zu is %d, outside [0, %d)%s", i,
                         r->tokens[i], n_vocab, p->prompt_tokens ? "" : " (from the tokenizer)");
  r->n_prompt = r->n_tokens = (int32_t)n;
  return BRISK_OK;
}

/* A request's window (n_sinks, window), checked at submit so that its
 * admission, which sets it on the sequence, cannot refuse it. */
static brisk_status check_window(const brisk_engine *e, const brisk_request_params *p) {
  if (p->n_sinks < 0 || p->window < 0 || (p->n_sinks > 0 && p->window == 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: n_sinks %d and window %d must be >= 0, with a "
                       "window for sinks",
                       p->n_sinks, p->window);
  if (p->window == 0) return BRISK_OK;
  /* Windowed sequences are never forked, and drafts would be truncated
   * across evictions. */
  if (p->n > 1 || p->spec_n_draft > 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: a window (%d) takes n 1 and no speculation (n %d, "
                       "spec_n_draft %d)",
                       p->window, p->n, p->spec_n_draft);
  int64_t sink_tokens = ((int64_t)p->n_sinks + e->block_size - 1) / e->block_size * e->block_size;
  if (sink_tokens > e->max_batch_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: %d sinks (%lld in whole blocks of %d) exceed "
                       "max_batch_tokens %d",
                       p->n_sinks, (long long)sink_tokens, e->block_size, e->max_batch_tokens);
  const brisk_model *m = e->model;
  if (m->tp_size > 1 || m->pp_size > 1 || m->hp.kv_lora_rank > 0 ||
      m->hp.rope_scaling == BRISK_HP_ROPE_SCALING_LONGROPE)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_engine_submit: a window is not supported with tensor or pipeline "
                       "parallelism, latent attention or LongRoPE");
  return BRISK_OK;
}

/* Checks the fields after user_data (stop strings are checked by the
 * stopper). */
static brisk_status check_request(const brisk_engine *e, const brisk_request_params *p) {
  brisk_status st;
  if (p->max_tokens < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_submit: max_tokens %d must be >= 1",
                       p->max_tokens);
  if (p->n < 1 || p->n > e->max_running)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: n %d must be in [1, max_running %d]", p->n,
                       e->max_running);
  if (p->logprobs < 0 || p->logprobs > BRISK_MAX_LOGPROBS)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: logprobs %d must be in [0, %d]", p->logprobs,
                       BRISK_MAX_LOGPROBS);
  if (p->spec_n_draft < 0 || p->spec_n_draft > BRISK_ENGINE_SPEC_MAX_DRAFT)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: spec_n_draft %d must be in [0, %d]", p->spec_n_draft,
                       BRISK_ENGINE_SPEC_MAX_DRAFT);
  if (p->spec_n_draft > 0 && (p->spec_ngram_min < 1 || p->spec_ngram_min > p->spec_ngram_max ||
                              p->spec_ngram_max > BRISK_ENGINE_SPEC_MAX_NGRAM))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: spec_ngram_min %d and spec_ngram_max %d must satisfy "
                       "1 <= min <= max <= %d",
                       p->spec_ngram_min, p->spec_ngram_max, BRISK_ENGINE_SPEC_MAX_NGRAM);
  if (p->spec_draft_model && (p->spec_n_draft < 1 || !e->spec))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: spec_draft_model needs spec_n_draft >= 1 (it is %d) "
                       "and an engine with a draft_model (%s)",
                       p->spec_n_draft, e->spec ? "it has one" : "it has none");
  if ((st = check_window(e, p))) return st;
  if (p->n_stop && !brisk_model_tokenizer(e->model)[0])
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_engine_submit: stop strings need a model with a vocabulary");
  /* Matching costs each token up to (stop strings) x (their length) x (the
   * text held back, which is up to their length): bounded here so one
   * request cannot make every step slow. */
  if (p->n_stop > BRISK_MAX_STOP_STRINGS)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: n_stop %zu is more than %d stop strings", p->n_stop,
                       BRISK_MAX_STOP_STRINGS);
  for (size_t i = 0; p->stop && i < p->n_stop; i++) {
    size_t len = p->stop[i] ? strnlen(p->stop[i], BRISK_MAX_STOP_BYTES + 1) : 0;
    if (len > BRISK_MAX_STOP_BYTES)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit: stop string %zu is longer than %d bytes", i,
                         BRISK_MAX_STOP_BYTES);
  }
  return BRISK_OK;
}

/* Completion `index` of a request whose leader (completion 0) is made. */
static brisk_status make_completion(brisk_engine *e, const brisk_request_params *p,
                                    brisk_engine_request *leader, int32_t index,
                                    brisk_engine_request *r) {
  brisk_status st;
  if (index == 0) {
    if ((st = load_prompt(e, p, r))) return st;
  } else {
    size_t cap = (size_t)leader->n_prompt + (size_t)p->max_tokens;
    if (!(r->tokens = brisk_malloc(cap * sizeof *r->tokens))) return brisk_error_oom();
    memcpy(r->tokens, leader->tokens, (size_t)leader->n_prompt * sizeof *r->tokens);
    r->n_prompt = r->n_tokens = leader->n_prompt;
  }
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  if (p->sampler && (st = brisk_abi_read(&brisk_abi_sampler_params, p->sampler, &sp))) return st;
  sp.seed += (uint64_t)index;
  /* The sampler allocates its penalty window up front; a completion accepts
   * at most max_tokens tokens, so a longer window behaves exactly like one
   * of max_tokens (its tokens are counted, not ordered), and a request
   * asking for 2^31 costs no more than its own length. */
  if (sp.penalty_last_n > p->max_tokens) sp.penalty_last_n = p->max_tokens;
  if ((st = brisk_sampler_create(e->model, &sp, &r->sampler))) return st;
  /* Models without a vocabulary still generate token ids, without text.
   * The engine applies EOG and max_tokens itself; the stopper detokenizes
   * and watches the stop strings. */
  if (brisk_model_tokenizer(e->model)[0]) {
    brisk_stopper_params stp;
    brisk_stopper_params_init(&stp);
    stp.stop_at_eog = 0;
    stp.stop_strings = p->stop;
    stp.n_stop_strings = p->n_stop;
    if ((st = brisk_stopper_create(e->model, &stp, &r->stopper))) return st;
  }
  r->leader = leader;
  r->index = index;
  r->n_completions = p->n;
  r->priority = p->priority;
  r->user_data = p->user_data;
  r->stop_at_eog = p->stop_at_eog;
  r->n_logprobs = p->logprobs;
  r->max_tokens = p->max_tokens;
  r->spec_k = p->spec_n_draft;
  r->spec_g_min = p->spec_ngram_min;
  r->spec_g_max = p->spec_ngram_max;
  r->spec_adaptive = p->spec_adaptive;
  r->spec_cur = p->spec_n_draft;
  if (r->spec_k > 0 && !(r->draft = brisk_malloc((size_t)r->spec_k * sizeof *r->draft)))
    return brisk_error_oom();
  r->spec_use_draft = p->spec_draft_model != 0;
  r->n_sinks = p->n_sinks;
  r->window = p->window;
  size_t nq;
  if (r->spec_use_draft) {
    if (brisk_mul_overflow_size((size_t)r->spec_k, (size_t)brisk_model_n_vocab(e->model), &nq))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_engine_submit: spec_n_draft %d x n_vocab is too large", r->spec_k);
    if (!(r->q = brisk_calloc(nq, sizeof *r->q))) return brisk_error_oom();
  }
  r->seq = -1;
  r->state = index == 0 ? BRISK_REQ_WAITING : BRISK_REQ_FORK_WAIT;
  return BRISK_OK;
}

static void free_chain(brisk_engine_request *r) {
  for (brisk_engine_request *next; r; r = next) {
    next = r->next;
    brisk_engine_request_free(r);
  }
}

/* Makes the request's completions, linked in order; *last gets the last. */
static brisk_status make_request(brisk_engine *e, const brisk_request_params *p,
                                 brisk_engine_request **first, brisk_engine_request **last) {
  brisk_status st = check_request(e, p);
  if (st) return st;
  brisk_engine_request *head = NULL, *tail = NULL;
  for (int32_t i = 0; i < p->n; i++) {
    brisk_engine_request *r = brisk_calloc(1, sizeof *r);
    if (!r) {
      free_chain(head);
      return brisk_error_oom();
    }
    r->prev = tail;
    if (tail)
      tail->next = r;
    else
      head = r;
    tail = r;
    if ((st = make_completion(e, p, head, i, r))) {
      free_chain(head);
      return st;
    }
  }
  head->n_open = p->n;
  *first = head;
  *last = tail;
  return BRISK_OK;
}

BRISK_API brisk_status brisk_engine_submit(brisk_engine *e, const brisk_request_params *params,
                                           uint64_t *id) {
  return brisk_engine_submit_with(e, params, NULL, id);
}

static brisk_status submit_with(brisk_engine *e, const brisk_request_params *params,
                                const brisk_constraint_params *constraint, uint64_t *id);

brisk_status brisk_engine_submit_with(brisk_engine *e, const brisk_request_params *params,
                                      const brisk_constraint_params *constraint, uint64_t *id) {
  if (!e || !params || !id)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_submit: engine, params and id must be set");
  brisk_mem_account *outer = brisk_mem_enter(e->mem);
  brisk_status st = submit_with(e, params, constraint, id);
  brisk_mem_leave(outer);
  return st;
}

static brisk_status submit_with(brisk_engine *e, const brisk_request_params *params,
                                const brisk_constraint_params *constraint, uint64_t *id) {
  brisk_request_params p;
  brisk_request_params_init(&p);
  brisk_status st = brisk_abi_read(&brisk_abi_request_params, params, &p);
  if (st) return st;
  if (e->encoder_only)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_engine_submit: the engine's model is an encoder: it gives "
                       "embeddings (brisk_engine_submit_embed), not tokens");
  brisk_engine_request *first = NULL, *last = NULL;
  if ((st = make_request(e, &p, &first, &last))) return st;
  if (constraint && (st = brisk_engine_constrain(e, first, constraint))) {
    free_chain(first);
    return st;
  }
  uint64_t now = brisk_now_ns();
  pthread_mutex_lock(&e->mu);
  uint64_t rid = ++e->last_id;
  for (brisk_engine_request *r = first; r; r = r->next) {
    r->id = rid;
    r->t_submit = now;
  }
  first->prev = e->in_tail;
  if (e->in_tail)
    e->in_tail->next = first;
  else
    e->in_head = first;
  e->in_tail = last;
  e->n_submitted++;
  e->n_prompt_tokens += (uint64_t)first->n_prompt;
  brisk_metrics_on_submit(&e->metrics, now);
  *id = rid;
  pthread_mutex_unlock(&e->mu);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_engine_cancel(brisk_engine *e, uint64_t id) {
  if (!e) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_cancel: engine is NULL");
  brisk_mem_account *outer = brisk_mem_enter(e->mem);
  brisk_engine_cancel_node *c = brisk_calloc(1, sizeof *c);
  brisk_mem_leave(outer);
  if (!c) return brisk_error_oom();
  c->id = id;
  pthread_mutex_lock(&e->mu);
  int known = id != 0 && id <= e->last_id;
  if (known) {
    if (e->cancel_tail)
      e->cancel_tail->next = c;
    else
      e->cancel_head = c;
    e->cancel_tail = c;
  }
  pthread_mutex_unlock(&e->mu);
  if (!known) {
    brisk_free(c);
    return brisk_error(BRISK_E_NOT_FOUND, "brisk_engine_cancel: no request has id %llu",
                       (unsigned long long)id);
  }
  return BRISK_OK;
}

/* One request's timeline over its completions (leader first): first token
 * of any, last finish, tokens summed. */
void brisk_engine_request_timeline(const brisk_engine_request *leader, brisk_metrics_request *mr) {
  *mr = (brisk_metrics_request){.t_submit = leader->t_submit,
                                .t_admit = leader->t_admit,
                                .n_prompt = leader->n_prompt,
                                .reason = leader->reason};
  const brisk_engine_request *r = leader;
  for (int32_t i = 0; i < leader->n_completions; i++, r = r->next) {
    mr->n_generated += r->n_generated;
    if (r->t_first && (!mr->t_first || r->t_first < mr->t_first)) mr->t_first = r->t_first;
    if (r->t_finish > mr->t_finish) mr->t_finish = r->t_finish;
  }
  if (leader->n_open > 0) mr->t_finish = 0;
}

/* Sums and spans over the request's completions (leader first). */
static void fill_request_stats(const brisk_engine_request *leader, brisk_request_stats *s) {
  brisk_metrics_request mr;
  brisk_engine_request_timeline(leader, &mr);
  s->n_prompt_tokens = leader->n_prompt;
  s->n_generated_tokens = (int32_t)mr.n_generated;
  s->n_preemptions = 0;
  uint64_t drafted = 0, accepted = 0;
  const brisk_engine_request *r = leader;
  for (int32_t i = 0; i < leader->n_completions; i++, r = r->next) {
    s->n_preemptions += r->n_preemptions;
    drafted += r->n_spec_drafted;
    accepted += r->n_spec_accepted;
  }
  s->finished = leader->n_open == 0;
  s->reason = leader->reason;
  s->queue_ns = mr.t_admit ? mr.t_admit - mr.t_submit : 0;
  s->ttft_ns = mr.t_first ? mr.t_first - mr.t_submit : 0;
  s->e2e_ns = mr.t_finish ? mr.t_finish - mr.t_submit : 0;
  s->tpot_ns = brisk_metrics_tpot_ns(&mr);
  s->n_spec_drafted = drafted;
  s->n_spec_accepted = accepted;
  s->error[0] = 0;
  r = leader;
  for (int32_t i = 0; i < leader->n_completions && !s->error[0]; i++, r = r->next)
    memcpy(s->error, r->error, sizeof s->error);
  s->n_cached_tokens = leader->n_cached;
}

BRISK_API brisk_status brisk_engine_request_stats(brisk_engine *e, uint64_t id,
                                                  brisk_request_stats *s) {
  if (!e || !s)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_request_stats: engine and stats must be set");
  brisk_status st = brisk_abi_check_out(&brisk_abi_request_stats, s);
  if (st) return st;
  brisk_request_stats full = {.struct_size = sizeof full};
  for (const brisk_engine_request *r = e->head; r; r = r->next)
    if (r->id == id) {
      fill_request_stats(r, &full);
      return brisk_abi_write(&brisk_abi_request_stats, s, &full);
    }
  int found = 0;
  pthread_mutex_lock(&e->mu);
  for (const brisk_engine_request *r = e->in_head; r && !found; r = r->next)
    if (r->id == id) {
      fill_request_stats(r, &full);
      found = 1;
    }
  pthread_mutex_unlock(&e->mu);
  if (found) return brisk_abi_write(&brisk_abi_request_stats, s, &full);
  return brisk_error(BRISK_E_NOT_FOUND, "brisk_engine_request_stats: no live request has id %llu",
                     (unsigned long long)id);
}

BRISK_API brisk_status brisk_engine_stats(brisk_engine *e, brisk_engine_counters *out) {
  if (!e || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_stats: engine and stats must be set");
  brisk_engine_counters full = {.struct_size = sizeof full}, *s = &full;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  brisk_status st = e->ctx ? brisk_context_kv_stats(e->ctx, &ks) : BRISK_OK;
  if (st) return st;
  pthread_mutex_lock(&e->mu);
  s->n_submitted = e->n_submitted;
  s->n_prompt_tokens = e->n_prompt_tokens;
  int32_t incoming = 0;
  for (const brisk_engine_request *r = e->in_head; r; r = r->next) incoming++;
  pthread_mutex_unlock(&e->mu);
  s->n_finished = e->n_finished;
  s->n_cancelled = e->n_cancelled;
  s->n_generated_tokens = e->n_generated;
  s->n_computed_tokens = e->n_computed;
  s->n_preemptions = e->n_preemptions;
  s->n_steps = e->n_steps;
  s->n_running = e->n_running;
  s->n_waiting = e->n_waiting + e->n_embed_waiting + incoming;
  s->n_kv_blocks = ks.n_blocks;
  s->n_free_kv_blocks = ks.n_free_blocks;
  s->n_swapped_out = e->n_swapped_out;
  s->n_swapped_in = e->n_swapped_in;
  s->swap_out_bytes = e->swap_out_bytes;
  s->swap_in_bytes = e->swap_in_bytes;
  s->swap_bytes_used = e->swap_used;
  s->n_swap_fallbacks = e->n_swap_fallbacks;
  s->n_prefix_lookup_tokens = e->n_prefix_lookup_tokens;
  s->n_prefix_hit_tokens = e->n_prefix_hit_tokens;
  s->n_spec_drafted = e->n_spec_drafted;
  s->n_spec_accepted = e->n_spec_accepted;
  return brisk_abi_write(&brisk_abi_engine_counters, out, s);
}
