/* A naive float64 reference forward pass (tests only). */
#ifndef BRISK_TEST_REF_FORWARD_H
#define BRISK_TEST_REF_FORWARD_H

#include "model/model.h"

typedef struct ref_model ref_model;

/* A reference run of `m` for up to n_ctx positions of one sequence. */
ref_model *ref_create(const brisk_model *m, int64_t n_ctx);
void ref_free(ref_model *r);
/* StreamingLLM (attention sinks + sliding window) as its paper states it:
 * keys are kept before RoPE and rotated at attention time by their index
 * within the cache. The cache keeps positions [0, sink_tokens) and a
 * window starting at a multiple of block_size past them that moves a block
 * at a time while the rest still holds `window` tokens (brisk's rule,
 * counted here on its own). Set before the first ref_eval. */
void ref_set_stream(ref_model *r, int64_t sink_tokens, int64_t window, int64_t block_size);
/* The layer whose K/V `layer` attends to (cross-layer KV sharing,
 * hp.n_kv_shared), by the reference's own reading of transformers' rule. */
int64_t ref_kv_source(const brisk_model *m, uint32_t layer);
/* Feeds the next token; writes n_vocab logits. */
void ref_eval(ref_model *r, int32_t token, double *logits);

#endif
