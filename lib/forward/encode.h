/* The encoder forward pass (BERT family), written once over the backend's
 * operation table like forward.c: every token of a sequence attends to
 * every token of that sequence, the whole sequence is run at once, and
 * nothing is cached between calls. */
#ifndef BRISK_FORWARD_ENCODE_H
#define BRISK_FORWARD_ENCODE_H

#include "backend/backend.h"
#include "model/model.h"

#include <stdint.h>

/* Sequences packed into one batch, host memory: sequence s is tokens
 * [start[s], start[s] + len[s]) in order (positions 0..len[s]-1). */
typedef struct brisk_encode_batch {
  int32_t n_tokens;
  const int32_t *tokens; /* [n_tokens] */
  int32_t n_seqs;
  const int32_t *start; /* [n_seqs] */
  const int32_t *len;   /* [n_seqs], each >= 1 */
} brisk_encode_batch;

/* Runs the encoder `m` (an architecture whose info says encoder) on the
 * batch with backend `be` (a host-memory backend: the model's weights are
 * host memory) and writes each token's final hidden state into hidden
 * (host, [n_tokens][n_embd]). Scratch buffers are allocated on `be` for the
 * call and freed before it returns. */
brisk_status brisk_encode_run(const brisk_model *m, brisk_backend *be, const brisk_encode_batch *b,
                              float *hidden);

#endif
