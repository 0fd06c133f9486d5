/* The public sampler API: parameters, lifetime, the penalty window and the
 * log-probabilities of the last sample. The chain itself is in chain.c. */
#include "grammar/grammar.h"
#include "sample/sampler.h"

#include "core/abi.h"
#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

BRISK_API void brisk_sampler_params_init(brisk_sampler_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->temperature = 1.0f;
  p->top_p = 1.0f;
  p->typical_p = 1.0f;
  p->penalty_last_n = 64;
  p->repeat_penalty = 1.0f;
}

#define BAD(...) brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_params." __VA_ARGS__)

/* Copies *in over the defaults and checks every field against n_vocab. */
static brisk_status copy_params(const brisk_sampler_params *in, int32_t n_vocab,
                                brisk_sampler_params *p) {
  brisk_sampler_params_init(p);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_sampler_params, in, p);
  if (st) return st;
  /* Written so that NaN fails every test. */
  if (!(p->temperature >= 0 && isfinite(p->temperature)))
    return BAD("temperature %g is not a finite value >= 0", (double)p->temperature);
  if (p->top_k < 0) return BAD("top_k %d is negative", p->top_k);
  if (!(p->top_p > 0 && p->top_p <= 1)) return BAD("top_p %g is outside (0, 1]", (double)p->top_p);
  if (!(p->min_p >= 0 && p->min_p <= 1)) return BAD("min_p %g is outside [0, 1]", (double)p->min_p);
  if (!(p->typical_p > 0 && p->typical_p <= 1))
    return BAD("typical_p %g is outside (0, 1]", (double)p->typical_p);
  if (p->penalty_last_n < 0) return BAD("penalty_last_n %d is negative", p->penalty_last_n);
  if (!(p->repeat_penalty > 0 && isfinite(p->repeat_penalty)))
    return BAD("repeat_penalty %g is not a finite value > 0", (double)p->repeat_penalty);
  if (!isfinite(p->frequency_penalty))
    return BAD("frequency_penalty %g is not finite", (double)p->frequency_penalty);
  if (!isfinite(p->presence_penalty))
    return BAD("presence_penalty %g is not finite", (double)p->presence_penalty);
  if (p->n_logprobs < 0 || p->n_logprobs > n_vocab)
    return BAD("n_logprobs %d is outside [0, n_vocab = %d]", p->n_logprobs, n_vocab);
  if (p->n_logit_bias > 0 && !p->logit_bias)
    return BAD("logit_bias is NULL with n_logit_bias %zu", p->n_logit_bias);
  for (size_t i = 0; i < p->n_logit_bias; i++) {
    const brisk_logit_bias *b = &p->logit_bias[i];
    if (b->token < 0 || b->token >= n_vocab)
      return BAD("logit_bias[%zu].token %d is outside [0, n_vocab = %d)", i, b->token, n_vocab);
    if (!(isfinite(b->bias) || b->bias == -INFINITY))
      return BAD("logit_bias[%zu].bias %g (token %d) is neither finite nor -inf", i,
                 (double)b->bias, b->token);
  }
  return BRISK_OK;
}

BRISK_API void brisk_sampler_free(brisk_sampler *s) {
  if (!s) return;
  brisk_free(s->bias);
  brisk_free(s->window);
  brisk_free(s->window_sorted);
  brisk_free(s->cand);
  brisk_free(s->lp_tokens);
  brisk_free(s->lp_values);
  brisk_free(s);
}

brisk_status brisk_sample_create(int32_t n_vocab, const brisk_sampler_params *params,
                                 brisk_sampler **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_create: out is NULL");
  if (n_vocab < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_create: n_vocab %d < 1", n_vocab);
  brisk_sampler_params p;
  brisk_status st = copy_params(params, n_vocab, &p);
  if (st) return st;
  brisk_sampler *s = brisk_calloc(1, sizeof *s);
  if (!s) return brisk_error_oom();
  s->params = p;
  s->n_vocab = n_vocab;
  s->cand = brisk_calloc((size_t)n_vocab, sizeof *s->cand);
  if (!s->cand) goto oom;
  if (p.n_logit_bias > 0) {
    s->bias = brisk_calloc(p.n_logit_bias, sizeof *s->bias);
    if (!s->bias) goto oom;
    memcpy(s->bias, p.logit_bias, p.n_logit_bias * sizeof *s->bias);
  }
  s->params.logit_bias = s->bias;
  if (p.penalty_last_n > 0) {
    s->window = brisk_calloc((size_t)p.penalty_last_n, sizeof *s->window);
    s->window_sorted = brisk_calloc((size_t)p.penalty_last_n, sizeof *s->window_sorted);
    if (!s->window || !s->window_sorted) goto oom;
  }
  if (p.n_logprobs > 0) {
    s->lp_tokens = brisk_calloc((size_t)p.n_logprobs + 1, sizeof *s->lp_tokens);
    s->lp_values = brisk_calloc((size_t)p.n_logprobs + 1, sizeof *s->lp_values);
    if (!s->lp_tokens || !s->lp_values) goto oom;
  }
  brisk_sampler_reset(s);
  *out = s;
  return BRISK_OK;
oom:
  brisk_sampler_free(s);
  return brisk_error_oom();
}

BRISK_API brisk_status brisk_sampler_create(const brisk_model *model,
                                            const brisk_sampler_params *params,
                                            brisk_sampler **out) {
  if (!model) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_create: model is NULL");
  int32_t n_vocab = brisk_model_n_vocab(model);
  if (n_vocab < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_create: the model has n_vocab %d (no logits to sample)",
                       n_vocab);
  return brisk_sample_create(n_vocab, params, out);
}

BRISK_API void brisk_sampler_reset(brisk_sampler *s) {
  if (!s) return;
  s->window_len = 0;
  s->window_next = 0;
  s->have_logprobs = 0;
  brisk_sample_rng_seed(&s->rng, s->params.seed);
}

BRISK_API brisk_status brisk_sampler_accept(brisk_sampler *s, int32_t token) {
  if (!s) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_accept: sampler is NULL");
  if (token < 0 || token >= s->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_accept: token %d is outside [0, n_vocab = %d)", token,
                       s->n_vocab);
  int32_t cap = s->params.penalty_last_n;
  if (cap == 0) return BRISK_OK;
  s->window[s->window_next] = token;
  s->window_next = s->window_next + 1 == cap ? 0 : s->window_next + 1;
  if (s->window_len < cap) s->window_len++;
  return BRISK_OK;
}

BRISK_API brisk_status brisk_sampler_sample_logits(brisk_sampler *s, const float *logits,
                                                   int32_t n_vocab, int32_t *token) {
  if (!s || !logits || !token)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_sample_logits: sampler, logits or token is NULL");
  if (n_vocab != s->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_sample_logits: n_vocab %d differs from the sampler's %d",
                       n_vocab, s->n_vocab);
  return brisk_sample_row(s, logits, token);
}

BRISK_API brisk_status brisk_sampler_sample(brisk_sampler *s, const brisk_context *ctx, int32_t i,
                                            int32_t *token) {
  if (!s || !ctx || !token)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_sample: sampler, ctx or token is NULL");
  int32_t ctx_vocab = brisk_model_n_vocab(brisk_context_model(ctx));
  if (ctx_vocab != s->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_sample: the context's model has %d tokens, the sampler %d",
                       ctx_vocab, s->n_vocab);
  const float *logits = brisk_get_logits(ctx, i);
  if (!logits)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_sample: batch entry %d has no logits (out of range, "
                       "want_logits was 0, or no successful decode)",
                       i);
  return brisk_sample_row(s, logits, token);
}

BRISK_API brisk_status brisk_sampler_last_logprobs(const brisk_sampler *s, int32_t *tokens,
                                                   float *logprobs, size_t capacity, size_t *n) {
  if (!s || !n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_last_logprobs: sampler or n is NULL");
  if (capacity > 0 && (!tokens || !logprobs))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_last_logprobs: tokens or logprobs is NULL with capacity %zu",
                       capacity);
  if (s->params.n_logprobs == 0)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "brisk_sampler_last_logprobs: the sampler was created with n_logprobs 0");
  if (!s->have_logprobs)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "brisk_sampler_last_logprobs: nothing sampled since create or reset");
  size_t total = (size_t)s->params.n_logprobs + 1, k = capacity < total ? capacity : total;
  for (size_t j = 0; j < k; j++) {
    tokens[j] = s->lp_tokens[j];
    logprobs[j] = s->lp_values[j];
  }
  *n = total;
  if (capacity < total)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                       "brisk_sampler_last_logprobs: capacity %zu < %zu entries", capacity, total);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_sampler_set_constraint(brisk_sampler *s, brisk_constraint *c) {
  if (!s)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_sampler_set_constraint: sampler is NULL");
  if (c && c->k->v.n_vocab != s->n_vocab)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_sampler_set_constraint: the constraint's vocabulary has %d tokens, "
                       "the sampler's %d",
                       c->k->v.n_vocab, s->n_vocab);
  s->constraint = c;
  return BRISK_OK;
}
