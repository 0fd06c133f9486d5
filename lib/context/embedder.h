/* Embedding passes for a scheduler (lib/engine): several token sequences
 * packed into one forward pass, each pooled into its own vector. Encoders
 * run the encoder pass over the packed sequences; decoders run the causal
 * forward pass over a scratch F32 KV cache that lives only for the pass,
 * so nothing is left in the engine's KV pool. The arithmetic is
 * brisk_embed's (the same pass, KV element type and block size, pooling in
 * float64), and a sequence's rows do not depend on what else is in the
 * batch, so a vector is bitwise what brisk_embed gives for the same ids. */
#ifndef BRISK_CONTEXT_EMBEDDER_H
#define BRISK_CONTEXT_EMBEDDER_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct brisk_model;
struct brisk_backend;
typedef struct brisk_embedder brisk_embedder;

/* What a request asks, resolved against the model's defaults as
 * brisk_embed resolves them: pooling DEFAULT becomes the folder's or the
 * architecture's, normalize -1 the folder's, max_tokens 0 the folder's
 * max_seq_length or the training context (an encoder's capped at its
 * position table). Errors as brisk_embed's for the same values. */
typedef struct brisk_embed_choice {
  int32_t pooling; /* MEAN, CLS or LAST */
  bool normalize;
  uint32_t max_tokens; /* the most ids of one input */
} brisk_embed_choice;
brisk_status brisk_embed_choose(const struct brisk_model *m, int32_t pooling, int32_t normalize,
                                int32_t max_tokens, brisk_embed_choice *out);

/* Pools n hidden rows of d floats (every token's, or the one row LAST or
 * CLS needs) into out in float64, then L2-normalises if asked. */
void brisk_embed_pool(int32_t pooling, bool normalize, const float *rows, size_t n, size_t d,
                      float *out);

/* Whether brisk_embed and an embedder can run the model: the CPU only,
 * without tensor or pipeline parallelism (BRISK_E_UNSUPPORTED with a
 * message otherwise). */
brisk_status brisk_embed_check_model(const struct brisk_model *m);

/* An embedder for passes of up to max_tokens tokens on host backend `be`
 * (borrowed, e.g. a context's; NULL: the embedder makes its own CPU
 * backend with n_threads threads, 0 = one per core). Scratch memory (the
 * activations, an encoder's hidden rows, a decoder's KV) is allocated at
 * the first pass and kept. */
brisk_status brisk_embedder_create(const struct brisk_model *m, struct brisk_backend *be,
                                   int32_t n_threads, int32_t max_tokens, brisk_embedder **out);
void brisk_embedder_free(brisk_embedder *em);

/* One input of a pass: n_ids >= 1 ids, its choice, and out [n_embd]. */
typedef struct brisk_embed_item {
  const int32_t *ids;
  int32_t n_ids;
  int32_t pooling;
  bool normalize;
  float *out;
} brisk_embed_item;

/* Runs the n items (their ids summing to at most max_tokens) as one pass
 * and writes each vector. On error the vectors are unspecified and the
 * embedder stays usable. */
brisk_status brisk_embedder_run(brisk_embedder *em, const brisk_embed_item *items, int32_t n);

#endif
