#include "ref_sample.h"

#include <math.h>
#include <stdlib.h>

void ref_sample_adjusted(const brisk_sampler_params *p, const float *logits, int32_t n_vocab,
                         const int32_t *window, int32_t n_window, double *out) {
  for (int32_t t = 0; t < n_vocab; t++) out[t] = logits[t];
  for (size_t b = 0; b < p->n_logit_bias; b++) out[p->logit_bias[b].token] += p->logit_bias[b].bias;
  int32_t first = n_window > p->penalty_last_n ? n_window - p->penalty_last_n : 0;
  int32_t *count = calloc((size_t)n_vocab, sizeof *count);
  for (int32_t j = first; j < n_window; j++) count[window[j]]++;
  for (int32_t t = 0; t < n_vocab; t++) {
    if (!count[t]) continue;
    out[t] = out[t] > 0 ? out[t] / p->repeat_penalty : out[t] * p->repeat_penalty;
    out[t] -= count[t] * (double)p->frequency_penalty + p->presence_penalty;
  }
  free(count);
}

typedef struct item {
  double key, p;
  int32_t id;
} item;

static int by_key(const void *pa, const void *pb) {
  const item *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

static void normalize(item *v, int32_t n) {
  double z = 0;
  for (int32_t i = 0; i < n; i++) z += v[i].p;
  for (int32_t i = 0; i < n; i++) v[i].p /= z;
}

/* Sorts v[0, n) by key and keeps the shortest prefix with mass >= m. */
static int32_t keep_prefix(item *v, int32_t n, double m) {
  qsort(v, (size_t)n, sizeof *v, by_key);
  double cum = 0;
  for (int32_t i = 0; i < n; i++) {
    cum += v[i].p;
    if (cum >= m) return i + 1;
  }
  return n;
}

void ref_sample_distribution(const brisk_sampler_params *p, const float *logits, int32_t n_vocab,
                             const int32_t *window, int32_t n_window, double *probs) {
  double *l = malloc((size_t)n_vocab * sizeof *l); // [n_vocab]
  ref_sample_adjusted(p, logits, n_vocab, window, n_window, l);
  for (int32_t t = 0; t < n_vocab; t++) probs[t] = 0;
  item *v = malloc((size_t)n_vocab * sizeof *v); // [n_vocab]
  for (int32_t t = 0; t < n_vocab; t++) v[t] = (item){-l[t], 0, t};
  qsort(v, (size_t)n_vocab, sizeof *v, by_key);
  if (p->temperature == 0) {
    probs[v[0].id] = 1;
    free(v);
    free(l);
    return;
  }
  int32_t n = n_vocab;
  if (p->top_k > 0 && p->top_k < n) n = p->top_k;
  for (int32_t i = 0; i < n; i++) v[i].p = exp((-v[i].key + v[0].key) / p->temperature);
  normalize(v, n);
  if (p->top_p < 1) n = keep_prefix(v, n, p->top_p);
  normalize(v, n);
  if (p->min_p > 0) {
    double pmax = 0;
    for (int32_t i = 0; i < n; i++) pmax = v[i].p > pmax ? v[i].p : pmax;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
      if (v[i].p >= p->min_p * pmax) v[k++] = v[i];
    n = k;
    normalize(v, n);
  }
  if (p->typical_p < 1) {
    double h = 0;
    for (int32_t i = 0; i < n; i++)
      if (v[i].p > 0) h -= v[i].p * log(v[i].p);
    for (int32_t i = 0; i < n; i++) v[i].key = v[i].p > 0 ? fabs(-log(v[i].p) - h) : INFINITY;
    n = keep_prefix(v, n, p->typical_p);
    normalize(v, n);
  }
  for (int32_t i = 0; i < n; i++) probs[v[i].id] = v[i].p;
  free(v);
  free(l);
}
