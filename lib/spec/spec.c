/* The public speculative-decoding round: draft, verify in one target
 * chunk, roll back what was rejected. */
#include "spec/spec_internal.h"

#include "context/context.h"
#include "core/abi.h"
#include "core/alloc.h"
#include "core/error.h"
#include "sample/sampler.h"

#include <string.h>

#define MAX_DRAFT 64

BRISK_API void brisk_spec_params_init(brisk_spec_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->drafter = BRISK_SPEC_PROMPT_LOOKUP;
  p->n_draft = 8;
  p->n_draft_min = 1;
  p->ngram_min = 2;
  p->ngram_max = 3;
}

#define BAD(...) brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_params." __VA_ARGS__)

static brisk_status copy_params(const brisk_spec_params *in, brisk_spec_params *p) {
  brisk_spec_params_init(p);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_spec_params, in, p);
  if (st) return st;
  if (p->drafter != BRISK_SPEC_PROMPT_LOOKUP && p->drafter != BRISK_SPEC_DRAFT_MODEL)
    return BAD("drafter %d is not a brisk_spec_drafter", (int)p->drafter);
  if (p->n_draft < 1 || p->n_draft > MAX_DRAFT)
    return BAD("n_draft %d is outside [1, %d]", p->n_draft, MAX_DRAFT);
  if (p->n_draft_min < 1 || p->n_draft_min > p->n_draft)
    return BAD("n_draft_min %d is outside [1, n_draft = %d]", p->n_draft_min, p->n_draft);
  if (p->ngram_min < 1 || p->ngram_max < p->ngram_min || p->ngram_max > 16)
    return BAD("ngram_min %d / ngram_max %d: need 1 <= ngram_min <= ngram_max <= 16", p->ngram_min,
               p->ngram_max);
  if (p->drafter == BRISK_SPEC_DRAFT_MODEL && !p->draft_model)
    return BAD("draft_model is NULL with drafter BRISK_SPEC_DRAFT_MODEL");
  if (p->drafter != BRISK_SPEC_DRAFT_MODEL) p->draft_model = NULL;
  return BRISK_OK;
}

BRISK_API void brisk_spec_free(brisk_spec *sp) {
  if (!sp) return;
  if (sp->seqs)
    for (int32_t i = 0; i < sp->n_seq_max; i++) brisk_free(sp->seqs[i].held);
  brisk_free(sp->seqs);
  brisk_batch_free(sp->batch);
  brisk_free(sp->draft);
  brisk_free(sp->rows);
  brisk_free(sp->scratch);
  brisk_free(sp->saved.window);
  brisk_context_free(sp->dctx);
  brisk_batch_free(sp->dbatch);
  brisk_free(sp->q);
  brisk_sampler_free(sp->dsampler);
  brisk_free(sp);
}

static brisk_status create_draft(brisk_spec *sp, const brisk_context_params *dparams) {
  const brisk_context_params *tp = brisk_context_get_params(sp->target);
  brisk_status st = brisk_context_create(sp->params.draft_model, dparams ? dparams : tp, &sp->dctx);
  if (st) return st;
  const brisk_context_params *dp = brisk_context_get_params(sp->dctx);
  if (dp->n_seq_max < tp->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_create: the draft context's n_seq_max %d is less than the "
                       "target's %d",
                       dp->n_seq_max, tp->n_seq_max);
  sp->d_max_batch = dp->max_batch_tokens;
  if ((st = brisk_batch_create(sp->d_max_batch, &sp->dbatch))) return st;
  sp->q = brisk_calloc((size_t)sp->params.n_draft * (size_t)sp->n_vocab, sizeof *sp->q);
  return sp->q ? BRISK_OK : brisk_error_oom();
}

BRISK_API brisk_status brisk_spec_create(brisk_context *target, const brisk_spec_params *params,
                                         brisk_spec **out) {
  if (!target || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_create: target and out must be set");
  brisk_spec_params p;
  brisk_status st = copy_params(params, &p);
  if (st) return st;
  /* Read from the copy: a caller's struct may end before the field. */
  const brisk_context_params *draft_params = p.draft_context_params;
  p.draft_context_params = NULL; /* used during create only */
  const brisk_model *tm = brisk_context_model(target);
  int32_t n_vocab = brisk_model_n_vocab(tm);
  if (p.draft_model && (st = brisk_spec_check_vocab(tm, p.draft_model))) return st;
  brisk_spec *sp = brisk_calloc(1, sizeof *sp);
  if (!sp) return brisk_error_oom();
  const brisk_context_params *tp = brisk_context_get_params(target);
  sp->target = target;
  sp->params = p;
  sp->n_vocab = n_vocab;
  sp->n_seq_max = tp->n_seq_max;
  sp->max_batch = tp->max_batch_tokens;
  sp->stats.struct_size = sizeof sp->stats;
  size_t k = (size_t)p.n_draft;
  sp->seqs = brisk_calloc((size_t)sp->n_seq_max, sizeof *sp->seqs);
  sp->draft = brisk_calloc(k, sizeof *sp->draft);
  sp->rows = brisk_calloc(k + 1, sizeof *sp->rows);
  sp->scratch = brisk_calloc(2 * (size_t)n_vocab, sizeof *sp->scratch);
  if (!sp->seqs || !sp->draft || !sp->rows || !sp->scratch) {
    st = brisk_error_oom();
    goto fail;
  }
  for (int32_t i = 0; i < sp->n_seq_max; i++) sp->seqs[i].k = p.n_draft;
  int32_t cap = sp->max_batch < p.n_draft + 1 ? sp->max_batch : p.n_draft + 1;
  if ((st = brisk_batch_create(cap, &sp->batch))) goto fail;
  if (p.draft_model && (st = create_draft(sp, draft_params))) goto fail;
  *out = sp;
  return BRISK_OK;
fail:
  brisk_spec_free(sp);
  return st;
}

static brisk_status check_round(const brisk_spec *sp, int32_t seq, const brisk_sampler *s,
                                const int32_t *tokens, size_t n, const int32_t *out,
                                size_t capacity, const size_t *n_out) {
  if (!sp || !s || !tokens || !out || !n_out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_round: spec, sampler, tokens, out and n_out must be set");
  if (n == 0 || capacity == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_round: n_tokens %zu and capacity %zu must be >= 1", n, capacity);
  if (seq < 0 || seq >= sp->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_round: seq_id %d is outside [0, %d)",
                       seq, sp->n_seq_max);
  if (n > (size_t)INT32_MAX - MAX_DRAFT - 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_round: n_tokens %zu is too large", n);
  int32_t len = brisk_seq_len(sp->target, seq);
  if ((size_t)len != n - 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_round: sequence %d holds %d tokens; with n_tokens %zu it "
                       "must hold n_tokens - 1 = %zu (the last token is the pending one)",
                       seq, len, n, n - 1);
  if (s->n_vocab != sp->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_round: the sampler has %d tokens, the target model %d",
                       s->n_vocab, sp->n_vocab);
  for (size_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= sp->n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_spec_round: tokens[%zu] = %d is outside [0, %d)", i, tokens[i],
                         sp->n_vocab);
  return BRISK_OK;
}

/* Decodes the pending token and m drafted ones on the target; a draft the
 * KV pool has no room for is dropped and the pending token decoded alone. */
static brisk_status score(brisk_spec *sp, int32_t seq, int32_t pending, size_t n, size_t *m) {
  for (;;) {
    brisk_batch_clear(sp->batch);
    brisk_batch_add(sp->batch, pending, (int32_t)(n - 1), seq, 1);
    for (size_t i = 0; i < *m; i++)
      brisk_batch_add(sp->batch, sp->draft[i], (int32_t)(n + i), seq, 1);
    brisk_status st = brisk_decode(sp->target, sp->batch);
    if (st != BRISK_E_KV_FULL || *m == 0) return st;
    *m = 0;
  }
}

BRISK_API brisk_status brisk_spec_round(brisk_spec *sp, int32_t seq, brisk_sampler *s,
                                        const int32_t *tokens, size_t n, int32_t *out,
                                        size_t capacity, size_t *n_out) {
  brisk_status st = check_round(sp, seq, s, tokens, n, out, capacity, n_out);
  if (st) return st;
  /* A round produces several tokens without a chance to advance the
   * sampler's constraint between them. */
  if (s->constraint)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_spec_round: the sampler has a constraint (use the engine's "
                       "prompt-lookup speculation with brisk_engine_submit_constrained)");
  brisk_spec_seq *ss = &sp->seqs[seq];
  size_t k = (size_t)(sp->params.adaptive ? ss->k : sp->params.n_draft);
  if (k > capacity - 1) k = capacity - 1;
  if (k > (size_t)sp->max_batch - 1) k = (size_t)sp->max_batch - 1;
  size_t m = 0;
  if (sp->dctx) {
    st = brisk_spec_draft_model(sp, seq, s, tokens, n, k, &m);
  } else {
    m = brisk_spec_lookup(tokens, n, sp->params.ngram_min, sp->params.ngram_max, k, sp->draft);
  }
  if (!st) st = brisk_spec_sampler_save(s, &sp->saved);
  if (!st) st = score(sp, seq, tokens[n - 1], n, &m);
  if (st) {
    if (sp->dctx) brisk_spec_draft_keep(sp, seq, n, 0);
    return st;
  }
  for (size_t i = 0; i <= m; i++) sp->rows[i] = brisk_get_logits(sp->target, (int32_t)i);
  size_t produced = 0;
  /* The verification writes at most m + 1 <= capacity tokens. */
  st = brisk_spec_verify(s, sp->rows, sp->draft, m, sp->dctx ? sp->q : NULL, sp->scratch, out,
                         &produced);
  if (st) {
    brisk_spec_sampler_restore(s, &sp->saved);
    brisk_seq_truncate(sp->target, seq, (int32_t)(n - 1));
    if (sp->dctx) brisk_spec_draft_keep(sp, seq, n, 0);
    return st;
  }
  size_t accepted = produced - 1;
  /* Keep the pending token and the accepted drafts; the last produced
   * token is the next round's pending one. */
  brisk_seq_truncate(sp->target, seq, (int32_t)(n + accepted));
  if (sp->dctx) brisk_spec_draft_keep(sp, seq, n, accepted);
  if (sp->params.adaptive && m > 0) {
    int32_t next = accepted == m ? ss->k + 1 : (int32_t)accepted + 1;
    if (next > sp->params.n_draft) next = sp->params.n_draft;
    if (next < sp->params.n_draft_min) next = sp->params.n_draft_min;
    ss->k = next;
  }
  sp->stats.n_rounds++;
  sp->stats.n_drafted += m;
  sp->stats.n_accepted += accepted;
  sp->stats.n_produced += produced;
  *n_out = produced;
  return BRISK_OK;
}

BRISK_API brisk_status brisk_spec_prefill(brisk_spec *sp, int32_t seq, const int32_t *tokens,
                                          size_t n) {
  if (!sp || (!tokens && n))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_prefill: spec NULL, or tokens NULL with n_tokens %zu", n);
  if (seq < 0 || seq >= sp->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_prefill: seq_id %d is outside [0, %d)",
                       seq, sp->n_seq_max);
  if (n > (size_t)INT32_MAX - MAX_DRAFT - 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_prefill: n_tokens %zu is too large",
                       n);
  for (size_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= sp->n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_spec_prefill: tokens[%zu] = %d is outside [0, %d)", i, tokens[i],
                         sp->n_vocab);
  return sp->dctx ? brisk_spec_draft_prefill(sp, seq, tokens, n) : BRISK_OK;
}

BRISK_API brisk_status brisk_spec_seq_reset(brisk_spec *sp, int32_t seq) {
  if (!sp) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_spec_seq_reset: spec is NULL");
  if (seq < 0 || seq >= sp->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_seq_reset: seq_id %d is outside [0, %d)", seq, sp->n_seq_max);
  if (sp->dctx) brisk_seq_free(sp->dctx, seq);
  sp->seqs[seq].n_held = 0;
  sp->seqs[seq].k = sp->params.n_draft;
  return BRISK_OK;
}

BRISK_API brisk_status brisk_spec_get_stats(const brisk_spec *sp, brisk_spec_stats *stats) {
  if (!sp || !stats)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_get_stats: spec and stats must be set");
  return brisk_abi_write(&brisk_abi_spec_stats, stats, &sp->stats);
}
