/* The engine's internals: requests, the submission and cancel queues (the
 * only state shared with other threads, under `mu`), the scheduler's view of
 * requests and the event queue. */
#ifndef BRISK_ENGINE_ENGINE_INTERNAL_H
#define BRISK_ENGINE_ENGINE_INTERNAL_H

#include "brisk.h"
#include "engine/metrics.h"
#include "context/swap.h"
#include "engine/budget.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct brisk_constraint; /* brisk.h's experimental section */
struct brisk_constraint_params;

typedef enum brisk_engine_req_state {
  BRISK_REQ_FORK_WAIT = -1, /* a completion i > 0 waiting for completion 0's prefill */
  BRISK_REQ_WAITING = 0,    /* queued for admission (new or preempted) */
  BRISK_REQ_RUNNING = 1,    /* holds a KV sequence */
  BRISK_REQ_DONE = 2,       /* finished; its finished event is queued */
  BRISK_REQ_RETIRED = 3     /* finished event delivered; freed at the next poll */
} brisk_engine_req_state;

/* One completion of a request. A request with n completions is n of these,
 * adjacent in the lists (index 0 first), sharing the id; completion 0
 * (the leader) prefills the prompt and the others fork its sequence. */
typedef struct brisk_engine_request {
  struct brisk_engine_request *prev, *next; /* incoming queue, then the engine's list */
  struct brisk_engine_request *leader;      /* completion 0 (itself for it) */
  uint64_t id;
  int32_t index, n_completions;
  int32_t n_open; /* leader only: completions not yet finished */
  int32_t priority;
  void *user_data;
  int stop_at_eog;
  int32_t n_logprobs; /* top alternatives per token event; 0 = off */
  /* The prompt followed by the generated tokens: [n_prompt + max_tokens].
   * tokens[0 .. n_computed) are in the KV cache; the rest are fed next, and
   * the logits of the last one give the next token. */
  int32_t *tokens;
  int32_t n_tokens, n_prompt, n_generated, max_tokens, n_computed;
  int32_t seq;          /* KV sequence id while running, else -1 */
  uint64_t sched_stamp; /* step number in which it was last scheduled */
  brisk_sampler *sampler;
  struct brisk_constraint *constraint; /* its output's constraint (set on the sampler), or NULL */
  brisk_stopper *stopper; /* text and stop strings; NULL for a model without vocabulary */
  brisk_engine_req_state state;
  brisk_finish_reason reason;
  int32_t n_preemptions;
  /* Speculation: k (0 = off), n-gram sizes (prompt lookup), and the drafts
   * of the step in flight (with the draft model's q rows). */
  int32_t spec_k, spec_g_min, spec_g_max;
  int spec_adaptive;
  int32_t spec_cur;   /* the draft length now: spec_k, or adapted in [1, spec_k] */
  int32_t *draft;     /* [spec_k] */
  int spec_use_draft; /* draft with the engine's draft model, not prompt lookup */
  double *q;          /* [spec_k][n_vocab] the draft model's distributions; else NULL */
  uint64_t n_spec_drafted, n_spec_accepted;
  brisk_seq_swap swap; /* its KV in host memory while swapped out, else empty */
  uint64_t t_submit, t_admit, t_first, t_finish; /* brisk_now_ns; 0 = not yet */
  /* Why it finished with BRISK_FINISH_ERROR ("" otherwise): a fixed buffer,
   * so recording a failure cannot itself fail. */
  char error[sizeof(((brisk_request_stats *)0)->error)];
  int32_t n_cached; /* tokens its first admission reused from the prefix cache */
  /* An embedding request (engine/embed.c): tokens[0 .. n_prompt) is its
   * input, run whole in one step's embedding pass into `embedding`
   * ([n_embd], allocated at submit); it never holds a KV sequence. */
  bool embed;
  bool embed_normalize;
  bool embed_ready; /* the vector is in `embedding` */
  int32_t embed_pooling;
  float *embedding;
  /* Attention sinks + sliding window of its sequence (window 0: none),
   * set on the sequence at each admission. */
  int32_t n_sinks, window;
} brisk_engine_request;

typedef struct brisk_engine_cancel_node {
  struct brisk_engine_cancel_node *next;
  uint64_t id;
} brisk_engine_cancel_node;

/* A queued event; its text is pending_text[text_off, text_off + text_len),
 * its alternatives pending_lp[lp_off, lp_off + lp_len). */
typedef struct brisk_engine_event_slot {
  brisk_engine_request *req;
  int32_t token;
  int32_t finished;
  brisk_finish_reason reason;
  size_t text_off, text_len;
  float logprob;
  size_t lp_off, lp_len;
} brisk_engine_event_slot;

/* What a token event carries besides its token. */
typedef struct brisk_engine_event_extra {
  size_t text_off, text_len;
  float logprob;
  size_t lp_off, lp_len;
} brisk_engine_event_extra;

/* One request's share of the step's batch. */
typedef struct brisk_engine_sched {
  brisk_engine_request *req;
  int32_t first, count; /* batch entries [first, first + count) */
  int32_t n_draft;      /* of which the last n_draft are drafts (r->draft) */
} brisk_engine_sched;

struct brisk_engine {
  const brisk_model *model;
  brisk_context *ctx;
  brisk_batch *batch;
  int32_t max_batch_tokens, max_running, prefill_chunk;
  int32_t reserve_blocks; /* growth kept free per running request at admission */
  int32_t block_size, n_blocks;
  int prefix_cache; /* the context's prefix cache is on */

  /* Shared with submit/cancel on other threads. */
  pthread_mutex_t mu;
  brisk_engine_request *in_head, *in_tail; /* submitted, not yet seen by a step */
  brisk_engine_cancel_node *cancel_head, *cancel_tail;
  uint64_t last_id;
  uint64_t n_submitted, n_prompt_tokens;

  /* Owned by the stepping thread. */
  brisk_engine_request *head, *tail; /* every request taken in and not yet freed */
  brisk_engine_request **running;    /* [max_running] by rank, best first */
  int32_t n_running, n_waiting;
  int32_t *free_seqs; /* [max_running] unused KV sequence ids */
  int32_t n_free_seqs;
  brisk_engine_sched *sched; /* [max_running] */
  uint64_t n_steps_total;    /* every step call; stamps scheduling */

  brisk_engine_event_slot *events; /* [events_cap] queued, oldest first */
  size_t n_events, events_cap;
  char *pending_text; /* [text_cap] texts of queued events, in order */
  size_t text_n, text_cap;
  char *out_text; /* [out_cap] texts of the events last polled */
  size_t out_cap;
  brisk_token_logprob *pending_lp; /* [lp_cap] alternatives of queued events, in order */
  size_t lp_n, lp_cap;
  brisk_token_logprob *out_lp; /* [out_lp_cap] alternatives of the events last polled */
  size_t out_lp_cap;

  uint64_t n_finished, n_cancelled, n_generated, n_computed, n_preemptions, n_steps;
  brisk_metrics metrics; /* t_first_submit under mu, the rest the stepping thread's */

  /* Swap preemption (engine/swap.c). */
  brisk_preempt_mode preempt_mode;
  uint64_t swap_limit, swap_used; /* host bytes allowed, held */
  uint64_t n_swapped_out, n_swapped_in, swap_out_bytes, swap_in_bytes, n_swap_fallbacks;

  /* Step time budget (engine/budget.c); budget_ns 0 = off. */
  double budget_ns;
  brisk_step_cost cost;
  brisk_step_plan plan; /* the batch being scheduled */
  uint64_t n_prefix_lookup_tokens, n_prefix_hit_tokens;
  uint64_t n_spec_drafted, n_spec_accepted;
  /* The draft model's context and its per-sequence mirrors (lib/spec);
   * NULL without a draft model. Its sequence ids are the target's. */
  brisk_spec *spec;
  /* What the engine allocates, its context's memory included, is charged
   * here (core/memcap.h); every public call on the engine enters it. */
  struct brisk_mem_account *mem;
  /* Constraints by their text (engine/constraint.c), under mu: requests
   * with the same constraint share one mask cache. */
  struct brisk_engine_cconst *cconst; /* [BRISK_ENGINE_CCONST] or NULL */
  uint64_t cconst_clock;
  /* Embedding requests (engine/embed.c): an encoder-only model's engine has
   * no context (ctx NULL) and serves only those. The embedder is made at
   * the first embedding pass; a step's pass takes emb_sched[0 .. n_emb). */
  bool encoder_only;
  int32_t n_threads; /* the params', for an encoder-only engine's embedder */
  struct brisk_embedder *embedder;
  int32_t n_embed_waiting;
  brisk_engine_request **emb_sched;   /* [max_batch_tokens] */
  struct brisk_embed_item *emb_items; /* [max_batch_tokens] */
  int32_t n_emb, n_emb_tokens;
  /* Steps in which the time budget alone held back the first waiting
   * embedding request (engine/embed.c), and the last of them. */
  int32_t emb_held_steps;
  uint64_t emb_held_stamp;
};

/* Steps the time budget may hold back an embedding request that the token
 * budget lets in; after them it runs in the next step with room. */
enum { BRISK_ENGINE_EMBED_PATIENCE = 8 };

/* Distinct constraints an engine keeps compiled (engine/constraint.c):
 * each a template constraint its requests clone. used: 0 = empty slot,
 * else the engine's clock at the last use. */
enum { BRISK_ENGINE_CCONST = 8 };
struct brisk_engine_cconst {
  uint64_t hash, used;
  int kind;
  char *text, *root;
  struct brisk_constraint *tmpl;
};

/* Limits of brisk_request_params's speculation fields (those of brisk_spec). */
enum { BRISK_ENGINE_SPEC_MAX_DRAFT = 64, BRISK_ENGINE_SPEC_MAX_NGRAM = 16 };

/* Rank order: higher priority first, then older (smaller id), then the
 * lower completion index. */
static inline int brisk_engine_ranks_before(const brisk_engine_request *a,
                                            const brisk_engine_request *b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  return a->id != b->id ? a->id < b->id : a->index < b->index;
}

void brisk_engine_request_free(brisk_engine_request *r);

/* brisk_engine_submit with an optional constraint (NULL: none). */
brisk_status brisk_engine_submit_with(brisk_engine *e, const brisk_request_params *params,
                                      const struct brisk_constraint_params *constraint,
                                      uint64_t *id);
/* Gives each completion of the request starting at `first` a constraint
 * compiled from cp (engine/constraint.c); errors as brisk_grammar_compile. */
brisk_status brisk_engine_constrain(brisk_engine *e, brisk_engine_request *first,
                                    const struct brisk_constraint_params *cp);
/* Before sampling completion r (which has a constraint): BRISK_FINISH_NONE
 * if some token is allowed, else the reason to finish with. */
/* Drops the engine's cached constraints (at brisk_engine_free). */
void brisk_engine_constraints_free(brisk_engine *e);
brisk_finish_reason brisk_engine_constraint_blocked(brisk_engine_request *r);
/* A whole request's timeline (completion 0 = leader, then the others):
 * first token of any completion, last finish (0 while one is open), tokens
 * summed; for the stats and the metrics. */
void brisk_engine_request_timeline(const brisk_engine_request *leader, brisk_metrics_request *mr);
/* Unlinks r from the engine's list and frees it. */
void brisk_engine_forget(brisk_engine *e, brisk_engine_request *r);

/* Swap preemption (engine/swap.c). Before r's KV is freed for preemption:
 * in swap mode, keeps a host copy of it if the host tier has room (else
 * counts a fallback to recompute). */
void brisk_engine_swap_out(brisk_engine *e, brisk_engine_request *r);
/* After r was admitted into the empty sequence r->seq: restores its host
 * copy if it has one. Sets r->n_computed to the tokens restored (0 when
 * there was no copy or restoring failed: it is recomputed). */
void brisk_engine_swap_in(brisk_engine *e, brisk_engine_request *r);
/* Frees r's host copy, if any (a request finished or cancelled). */
void brisk_engine_swap_drop(brisk_engine *e, brisk_engine_request *r);

/* Embedding requests (engine/embed.c). Schedules waiting embedding
 * requests ranked before `before` (NULL: all) into e->emb_sched while the
 * step's token budget (and time budget) lets them fit whole; the first that
 * does not fit stops them for this step (*blocked set). */
void brisk_engine_schedule_embeds(brisk_engine *e, const brisk_engine_request *before,
                                  int32_t *budget, bool *blocked);
/* Runs the step's embedding pass and finishes its requests (events
 * reserved before): each with its vector, or, when the pass fails and
 * the request fails alone too, with BRISK_FINISH_ERROR. */
void brisk_engine_run_embeds(brisk_engine *e);
/* Ends a waiting or running request (room for its event reserved). */
void brisk_engine_finish(brisk_engine *e, brisk_engine_request *r, int32_t token,
                         const brisk_engine_event_extra *x, brisk_finish_reason reason);
/* finish with BRISK_FINISH_ERROR, the thread's last error as the reason. */
void brisk_engine_fail(brisk_engine *e, brisk_engine_request *r, int32_t token);

/* Makes room for `more` queued events; -1 on OOM with nothing changed. */
int brisk_engine_reserve_events(brisk_engine *e, size_t more);
/* Appends text for the next event to the pending text; *off receives its
 * offset. -1 on OOM with nothing changed. */
int brisk_engine_append_text(brisk_engine *e, const char *text, size_t len, size_t *off);
/* Appends the log-softmax top-n alternatives of `logits` [n_vocab] to the
 * pending alternatives and sets x's logprob (of `token`) and lp range. -1 on
 * OOM with nothing changed. */
int brisk_engine_append_logprobs(brisk_engine *e, const float *logits, int32_t n_vocab,
                                 int32_t token, int32_t n, brisk_engine_event_extra *x);
/* Queues an event, in room reserved before; reason BRISK_FINISH_NONE for a
 * token that does not finish the completion. x: NULL for none. */
void brisk_engine_push_event(brisk_engine *e, brisk_engine_request *r, int32_t token,
                             const brisk_engine_event_extra *x, brisk_finish_reason reason);

#endif
