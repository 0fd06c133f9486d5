/* What one forward pass costs in memory traffic and arithmetic, from the
 * model's shapes and weight types: the numbers behind MBU and MFU. */
#ifndef BRISK_MODEL_COST_H
#define BRISK_MODEL_COST_H

#include "model/model.h"

#include <stdint.h>

typedef struct brisk_model_cost {
  double bytes; /* weights and KV read, KV written */
  double flops; /* matrix products and attention, 2 per multiply-add */
} brisk_model_cost;

/*
 * Adds the cost of the weights of one pass over n_tokens tokens of which
 * n_out produce logits: every layer's matrices and norms are read once (a
 * mixture-of-experts layer reads the experts its tokens can touch, at most
 * all of them), n_tokens rows of the embedding table, and the output matrix
 * once when n_out > 0. FLOPs: 2 * n_tokens * (elements of the matrices
 * each token goes through, its n_expert_used experts for MoE) plus
 * 2 * n_out * (elements of the output matrix). Elementwise work (norms,
 * RoPE, activations, softmax) is not counted.
 */
void brisk_model_cost_weights(const brisk_model *m, int64_t n_tokens, int64_t n_out,
                              brisk_model_cost *c);

/*
 * Adds the attention cost of one sequence feeding n_new tokens after n_past
 * cached ones, with KV elements of kv_elem_bytes bytes. Per layer, the
 * token at position p attends to a = min(p + 1, window) positions (window
 * = the layer's sliding window, or unbounded): 4 * n_head * head_dim * a
 * FLOPs (scores and weighted values). Bytes: the K and V of every position
 * any new token attends to, read once per pass, plus the new tokens' K and
 * V written.
 */
void brisk_model_cost_attention(const brisk_model *m, uint32_t kv_elem_bytes, int64_t n_past,
                                int64_t n_new, brisk_model_cost *c);

#endif
