/* The acceptance rule of speculative sampling (Leviathan et al. 2023, Chen
 * et al. 2023): accept drafted x with probability min(1, p(x) / q(x)), at
 * the first rejection draw from normalize(max(0, p - q)), after a fully
 * accepted draft draw a bonus token from p. */
#include "spec/spec.h"

#include "core/alloc.h"
#include "core/error.h"
#include "sample/sampler.h"

#include <string.h>

double brisk_spec_residual(const double *p, const double *q, size_t n, double *r) {
  double z = 0;
  for (size_t t = 0; t < n; t++) {
    double d = p[t] - q[t];
    r[t] = d > 0 ? d : 0;
    z += r[t];
  }
  if (z > 0) {
    for (size_t t = 0; t < n; t++) r[t] /= z;
  } else {
    memcpy(r, p, n * sizeof *r);
  }
  return z;
}

int32_t brisk_spec_draw(const double *probs, size_t n, double u) {
  double total = 0;
  for (size_t t = 0; t < n; t++) total += probs[t];
  double target = u * total, cum = 0;
  size_t last = 0;
  for (size_t t = 0; t < n; t++) {
    if (probs[t] <= 0) continue;
    cum += probs[t];
    last = t;
    if (cum > target) return (int32_t)t;
  }
  return (int32_t)last; /* target rounded up to the total */
}

/* The token p puts all its mass on (temperature 0 makes p one-hot). */
static int32_t one_hot(const double *p, size_t n) {
  for (size_t t = 0; t < n; t++)
    if (p[t] > 0) return (int32_t)t;
  return 0;
}

brisk_status brisk_spec_verify(brisk_sampler *s, const float *const *logits, const int32_t *draft,
                               size_t m, const double *q, double *scratch, int32_t *out,
                               size_t *n_out) {
  size_t nv = (size_t)s->n_vocab, n = 0;
  int greedy = s->params.temperature == 0;
  double *p = scratch, *r = scratch + nv; // [n_vocab] each
  brisk_status st;
  int rejected = 0;
  for (size_t i = 0; i < m && !rejected; i++) {
    int32_t x = draft[i], y;
    if (!q) {
      /* A point mass at x: accepting with probability p(x) and otherwise
       * drawing from p without x is drawing y from p and keeping it. The
       * sampler's own draw keeps the output equal to plain sampling. */
      if ((st = brisk_sample_row(s, logits[i], &y))) return st;
      if ((st = brisk_sampler_accept(s, y))) return st;
      out[n++] = y;
      rejected = y != x;
      continue;
    }
    const double *qi = q + i * nv; // [n_vocab]
    if ((st = brisk_sample_distribution(s, logits[i], p))) return st;
    int accept;
    if (greedy) {
      accept = p[x] > 0;
    } else {
      double u = brisk_sample_rng_uniform(&s->rng);
      accept = u * qi[x] < p[x];
    }
    if (accept) {
      y = x;
    } else if (greedy) {
      y = one_hot(p, nv);
    } else {
      brisk_spec_residual(p, qi, nv, r);
      y = brisk_spec_draw(r, nv, brisk_sample_rng_uniform(&s->rng));
    }
    if ((st = brisk_sampler_accept(s, y))) return st;
    out[n++] = y;
    rejected = !accept;
  }
  if (!rejected) {
    /* Every draft token accepted: the bonus token from the last row. */
    int32_t y;
    if ((st = brisk_sample_row(s, logits[m], &y))) return st;
    if ((st = brisk_sampler_accept(s, y))) return st;
    out[n++] = y;
  }
  *n_out = n;
  return BRISK_OK;
}

brisk_status brisk_spec_sampler_save(const brisk_sampler *s, brisk_spec_sampler_state *st) {
  size_t need = (size_t)s->params.penalty_last_n;
  if (need > st->cap && brisk_grow((void **)&st->window, &st->cap, need, sizeof *st->window))
    return brisk_error_oom();
  memcpy(st->rng, s->rng.s, sizeof st->rng);
  st->window_len = s->window_len;
  st->window_next = s->window_next;
  if (need) memcpy(st->window, s->window, need * sizeof *st->window);
  return BRISK_OK;
}

void brisk_spec_sampler_restore(brisk_sampler *s, const brisk_spec_sampler_state *st) {
  memcpy(s->rng.s, st->rng, sizeof st->rng);
  s->window_len = st->window_len;
  s->window_next = st->window_next;
  size_t n = (size_t)s->params.penalty_last_n;
  if (n) memcpy(s->window, st->window, n * sizeof *s->window);
}
