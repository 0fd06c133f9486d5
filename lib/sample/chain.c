/* One sampling step over a row of logits: bias, penalties, temperature,
 * truncation (top-k, top-p, min-p, typical-p), the draw, and the
 * log-probabilities. Probabilities are computed in double. */
#include "grammar/grammar.h"

#include "core/error.h"
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>

static int cmp_i32(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  return (a > b) - (a < b);
}

/* The penalties of one token seen `count` (> 0) times. */
static float penalize(const brisk_sampler_params *p, float logit, int32_t count) {
  logit = logit > 0 ? logit / p->repeat_penalty : logit * p->repeat_penalty;
  return logit - (float)count * p->frequency_penalty - p->presence_penalty;
}

static brisk_status check_adjusted(const brisk_sample_cand *c, const char *what) {
  if (isnan(c->logit) || c->logit == INFINITY)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "sampler: token %d: logit is %g after %s (parameters too large?)", c->id,
                       (double)c->logit, what);
  return BRISK_OK;
}

/* Fills s->cand in id order from the logits with bias and penalties
 * applied; *lmax receives the largest resulting logit (finite). */
static brisk_status prepare(brisk_sampler *s, const float *logits, double *lmax) {
  brisk_sample_cand *c = s->cand; // [n_vocab], in id order here
  for (int32_t t = 0; t < s->n_vocab; t++) {
    float l = logits[t];
    if (isnan(l) || l == INFINITY)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "sampler: logit of token %d is %g", t,
                         (double)l);
    c[t].logit = l;
    c[t].id = t;
  }
  if (s->constraint) {
    /* The constraint's mask first: forbidden tokens stay -inf through
     * bias and penalties. */
    const uint32_t *mask;
    int32_t n_allowed;
    brisk_status st = brisk_constraint_mask(s->constraint, &mask, &n_allowed);
    if (st) return st;
    if (n_allowed == 0)
      return brisk_error(BRISK_E_INVALID_STATE,
                         "sampler: the constraint allows no token (it cannot go on with this "
                         "vocabulary)");
    for (int32_t w = 0; w < (s->n_vocab + 31) / 32; w++) {
      uint32_t bits = mask[w];
      if (bits == UINT32_MAX) continue;
      for (int32_t t = w * 32; t < w * 32 + 32 && t < s->n_vocab; t++)
        if (!(bits >> (t % 32) & 1)) c[t].logit = -INFINITY;
    }
  }
  for (size_t b = 0; b < s->params.n_logit_bias; b++) {
    brisk_sample_cand *e = &c[s->bias[b].token];
    e->logit += s->bias[b].bias;
    brisk_status st = check_adjusted(e, "logit bias");
    if (st) return st;
  }
  if (s->window_len > 0) {
    /* Count by sorting a copy: the window is short next to the vocabulary. */
    int32_t n = s->window_len, *w = s->window_sorted; // [window_len]
    for (int32_t j = 0; j < n; j++) w[j] = s->window[j];
    qsort(w, (size_t)n, sizeof *w, cmp_i32);
    for (int32_t j = 0; j < n;) {
      int32_t k = j;
      while (k < n && w[k] == w[j]) k++;
      brisk_sample_cand *e = &c[w[j]];
      e->logit = penalize(&s->params, e->logit, k - j);
      brisk_status st = check_adjusted(e, "penalties");
      if (st) return st;
      j = k;
    }
  }
  double m = -INFINITY;
  for (int32_t t = 0; t < s->n_vocab; t++)
    if (c[t].logit > m) m = c[t].logit;
  if (m == -INFINITY)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "sampler: every logit is -inf after bias and penalties (%d tokens)",
                       s->n_vocab);
  *lmax = m;
  return BRISK_OK;
}

/* Index of the largest logit, ties to the lowest id. */
static size_t argmax(const brisk_sample_cand *c, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (c[i].logit > c[best].logit || (c[i].logit == c[best].logit && c[i].id < c[best].id))
      best = i;
  return best;
}

static double total_weight(const brisk_sample_cand *c, size_t n) {
  double z = 0;
  for (size_t i = 0; i < n; i++) z += c[i].w;
  return z;
}

/* Keeps the shortest prefix, in key order, whose weights sum to at least
 * mass * (total of c[0, n)); c[0, *sorted) is already in key order and
 * the prefix is extended by partial selection, so a small nucleus of a
 * large vocabulary costs O(n log m), not a full sort. Returns the new n. */
static size_t keep_mass(brisk_sample_cand *c, size_t n, size_t *sorted, double mass) {
  double target = mass * total_weight(c, n), cum = 0;
  size_t i = 0, chunk = 64;
  while (i < n) {
    if (i == *sorted) {
      size_t more = n - *sorted < chunk ? n - *sorted : chunk;
      brisk_sample_select(c + *sorted, n - *sorted, more);
      *sorted += more;
      chunk *= 8;
    }
    cum += c[i++].w;
    if (cum >= target) break;
  }
  if (*sorted > i) *sorted = i;
  return i;
}

/* Truncates s->cand to the candidates the draw chooses among (temperature
 * > 0), with their weights; returns how many are left (>= 1). */
static size_t truncate_cands(brisk_sampler *s, double lmax) {
  const brisk_sampler_params *p = &s->params;
  brisk_sample_cand *c = s->cand; // [n_vocab]
  size_t n = (size_t)s->n_vocab, sorted = 0;
  double temp = p->temperature;
  for (size_t i = 0; i < n; i++) c[i].key = -(double)c[i].logit;
  if (p->top_k > 0 && (size_t)p->top_k < n) {
    brisk_sample_select(c, n, (size_t)p->top_k);
    n = sorted = (size_t)p->top_k;
  }
  for (size_t i = 0; i < n; i++) c[i].w = exp(((double)c[i].logit - lmax) / temp);
  if (p->top_p < 1) n = keep_mass(c, n, &sorted, p->top_p);
  if (p->min_p > 0) {
    double wmax = 0;
    for (size_t i = 0; i < n; i++)
      if (c[i].w > wmax) wmax = c[i].w;
    /* Kept entries move forward in order; the others stay in the array
     * (swapped behind) because the log-probabilities need every token. */
    size_t kept = 0, kept_sorted = 0;
    for (size_t i = 0; i < n; i++) {
      if (c[i].w >= p->min_p * wmax) {
        brisk_sample_cand t = c[kept];
        c[kept] = c[i];
        c[i] = t;
        if (i < sorted) kept_sorted++;
        kept++;
      }
    }
    n = kept;
    sorted = kept_sorted;
  }
  if (p->typical_p < 1) {
    double z = total_weight(c, n), logz = log(z), entropy = 0;
    /* -log p = log z - (logit - max) / T, exact even where w underflows. */
    for (size_t i = 0; i < n; i++) {
      c[i].key = logz - ((double)c[i].logit - lmax) / temp;
      if (c[i].w > 0) entropy += c[i].w / z * c[i].key;
    }
    for (size_t i = 0; i < n; i++) c[i].key = fabs(c[i].key - entropy);
    sorted = 0;
    n = keep_mass(c, n, &sorted, p->typical_p);
  }
  return n;
}

/* Index in c[0, n) of the token the uniform number u in [0, 1) picks. */
static size_t draw(const brisk_sample_cand *c, size_t n, double u) {
  double r = u * total_weight(c, n), cum = 0;
  size_t last = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].w <= 0) continue;
    cum += c[i].w;
    last = i;
    if (cum > r) return i;
  }
  return last; /* r rounded up to the total */
}

/* The log-softmax (temperature 1) of the prepared logits: the sampled
 * token's first, then the n_logprobs largest. */
static void record_logprobs(brisk_sampler *s, double lmax, int32_t token, float token_logit) {
  brisk_sample_cand *c = s->cand; // [n_vocab], any order
  size_t n = (size_t)s->n_vocab, top = (size_t)s->params.n_logprobs;
  double z = 0;
  for (size_t i = 0; i < n; i++) z += exp((double)c[i].logit - lmax);
  double lse = lmax + log(z);
  s->lp_tokens[0] = token;
  s->lp_values[0] = (float)((double)token_logit - lse);
  for (size_t i = 0; i < n; i++) c[i].key = -(double)c[i].logit;
  brisk_sample_select(c, n, top);
  for (size_t i = 0; i < top; i++) {
    s->lp_tokens[i + 1] = c[i].id;
    s->lp_values[i + 1] = (float)((double)c[i].logit - lse);
  }
  s->have_logprobs = 1;
}

brisk_status brisk_sample_row(brisk_sampler *s, const float *logits, int32_t *token) {
  double lmax;
  brisk_status st = prepare(s, logits, &lmax);
  if (st) return st;
  size_t pick;
  if (s->params.temperature == 0) {
    pick = argmax(s->cand, (size_t)s->n_vocab);
  } else {
    size_t n = truncate_cands(s, lmax);
    pick = draw(s->cand, n, brisk_sample_rng_uniform(&s->rng));
  }
  int32_t id = s->cand[pick].id;
  if (s->params.n_logprobs > 0) record_logprobs(s, lmax, id, s->cand[pick].logit);
  *token = id;
  return BRISK_OK;
}

brisk_status brisk_sample_distribution(brisk_sampler *s, const float *logits, double *probs) {
  double lmax;
  brisk_status st = prepare(s, logits, &lmax);
  if (st) return st;
  for (int32_t t = 0; t < s->n_vocab; t++) probs[t] = 0;
  if (s->params.temperature == 0) {
    probs[s->cand[argmax(s->cand, (size_t)s->n_vocab)].id] = 1;
    return BRISK_OK;
  }
  size_t n = truncate_cands(s, lmax);
  double z = total_weight(s->cand, n);
  for (size_t i = 0; i < n; i++) probs[s->cand[i].id] = s->cand[i].w / z;
  return BRISK_OK;
}
