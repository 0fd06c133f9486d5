/* The sampler chain behind the public brisk_sampler_* API. */
#ifndef BRISK_SAMPLE_SAMPLER_H
#define BRISK_SAMPLE_SAMPLER_H

#include "brisk.h"
#include "sample/rng.h"
#include "sample/select.h"

struct brisk_sampler {
  brisk_sampler_params params; /* validated; logit_bias points at `bias` */
  int32_t n_vocab;
  brisk_logit_bias *bias;  /* [params.n_logit_bias] */
  int32_t *window;         /* [penalty_last_n] ring of accepted tokens */
  int32_t *window_sorted;  /* [penalty_last_n] scratch for counting */
  int32_t window_len;      /* tokens in the ring */
  int32_t window_next;     /* ring slot the next token goes to */
  brisk_sample_cand *cand; /* [n_vocab] every token, permuted per step */
  brisk_sample_rng rng;
  int32_t *lp_tokens; /* [n_logprobs + 1] of the last sample */
  float *lp_values;   /* [n_logprobs + 1] */
  int have_logprobs;
  struct brisk_constraint *constraint; /* borrowed; NULL = none */
};

/* brisk_sampler_create for a vocabulary size instead of a model: what the
 * public create does once it has n_vocab; tests use it without a model. */
brisk_status brisk_sample_create(int32_t n_vocab, const brisk_sampler_params *params,
                                 brisk_sampler **out);

/* Runs the whole chain on logits[n_vocab] (which must be the sampler's
 * size) and stores the token; the shared body of both public samples. */
brisk_status brisk_sample_row(brisk_sampler *s, const float *logits, int32_t *token);

/* The distribution the draw would use for these logits, without drawing:
 * probs[n_vocab] receives each token's probability after the whole chain
 * (0 for truncated tokens; one-hot for temperature 0). Changes nothing but
 * scratch, so the next sample is unaffected. For tests. */
brisk_status brisk_sample_distribution(brisk_sampler *s, const float *logits, double *probs);

#endif
