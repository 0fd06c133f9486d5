/* The brisk_spec object behind the public speculative-decoding calls. */
#ifndef BRISK_SPEC_SPEC_INTERNAL_H
#define BRISK_SPEC_SPEC_INTERNAL_H

#include "spec/spec.h"

/* What the drafter keeps per sequence id. */
typedef struct brisk_spec_seq {
  int32_t *held; /* [cap] the tokens the draft context holds for the sequence */
  size_t n_held; /* == brisk_seq_len(draft context, id) */
  size_t cap;
  int32_t k; /* the sequence's current draft length */
} brisk_spec_seq;

struct brisk_spec {
  brisk_context *target;
  brisk_spec_params params;
  int32_t n_vocab, n_seq_max, max_batch;
  brisk_batch *batch;   /* [max_batch] the target's verification chunk */
  int32_t *draft;       /* [n_draft] */
  const float **rows;   /* [n_draft + 1] target logits of the chunk */
  double *scratch;      /* [2][n_vocab] */
  brisk_spec_seq *seqs; /* [n_seq_max] */
  brisk_spec_sampler_state saved;
  brisk_spec_stats stats;
  /* BRISK_SPEC_DRAFT_MODEL only. */
  brisk_context *dctx;
  int32_t d_max_batch;
  brisk_batch *dbatch;     /* [d_max_batch] */
  double *q;               /* [n_draft][n_vocab] the draft's distributions */
  brisk_sampler *dsampler; /* q's chain, rebuilt when the target's parameters change */
  brisk_sampler_params dkey;
};

/* BRISK_E_INVALID_ARGUMENT naming the sizes or the first differing token. */
brisk_status brisk_spec_check_vocab(const brisk_model *target, const brisk_model *draft);

/* Draft model: brings the draft context's copy of seq up to tokens[0, n)
 * and drafts up to k tokens into spec->draft with their distributions in
 * spec->q, drawn with a sampler shaped like `target_sampler`. *m receives
 * the count; a full draft KV pool shortens the draft instead of failing. */
brisk_status brisk_spec_draft_model(brisk_spec *spec, int32_t seq,
                                    const brisk_sampler *target_sampler, const int32_t *tokens,
                                    size_t n, size_t k, size_t *m);

/* Draft model: feeds tokens[0, n) into the draft's copy of seq (keeping
 * what it already holds of them). */
brisk_status brisk_spec_draft_prefill(brisk_spec *spec, int32_t seq, const int32_t *tokens,
                                      size_t n);

/* Draft model: the sequence now continues with `kept` of the drafted
 * tokens after tokens[0, n); releases the draft KV of the rest. */
void brisk_spec_draft_keep(brisk_spec *spec, int32_t seq, size_t n, size_t kept);

#endif
