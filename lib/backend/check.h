/* Argument checks of the backend operations, shared by every backend so
 * that each rejects exactly the same calls with the same messages (the
 * conventions at the top of backend.h). Each check takes an operation's
 * arguments, minus the backend, and returns BRISK_OK or the status the
 * operation must return, with its message set. Backend-specific facts (which
 * weight types a backend reads) come in as arguments. */
#ifndef BRISK_BACKEND_CHECK_H
#define BRISK_BACKEND_CHECK_H

#include "backend/backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A [n_rows][n_cols] float operand: n_rows >= 0, n_cols >= 1, the byte size
 * fits in size_t and ptrdiff_t. `what` names the operation. */
brisk_status brisk_check_matrix(const char *what, int64_t n_rows, int64_t n_cols);

/* A KV layout; *cache_bytes (if not NULL) gets the size of one cache. */
brisk_status brisk_check_kv(const char *what, const brisk_kv_layout *kv, size_t *cache_bytes);

/* The first key position a query at p attends to with a sliding window
 * (0 = none). */
static inline int32_t brisk_attn_first_key(int32_t p, int32_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* type_readable: whether the backend reads table_type. */
brisk_status brisk_check_embed(bool type_readable, uint32_t table_type, const void *table,
                               int64_t n_vocab, int64_t n_embd, const int32_t *tokens,
                               int32_t n_tokens, const float *out, uint64_t *row_bytes);
/* Also that x and out do not overlap (both of n_rows rows). */
brisk_status brisk_check_gather_cols(const float *x, int64_t n_rows, int64_t n_cols,
                                     const int32_t *cols, int64_t n_out, const float *out);
brisk_status brisk_check_rmsnorm(const float *x, int64_t n_rows, int64_t n_cols, float eps,
                                 const float *out);
/* Also fills inv_freq ([n_rot / 2]) and *mscale (brisk_rope_frequencies). */
brisk_status brisk_check_rope(const float *x, int32_t n_tokens, int64_t token_stride,
                              int32_t n_heads, int32_t head_dim, const int32_t *positions,
                              const brisk_rope_params *p, double *inv_freq, double *mscale);
brisk_status brisk_check_glu(brisk_glu_kind kind, const float *gate, const float *up, int64_t n,
                             const float *out);
brisk_status brisk_check_add(const float *a, const float *b, int64_t n_rows, int64_t n_cols,
                             const float *out);
brisk_status brisk_check_scale(const float *x, int64_t n, const float *out);
brisk_status brisk_check_softcap(const float *x, int64_t n, float cap, const float *out);
brisk_status brisk_check_sigmoid_gate(const float *x, const float *g, int64_t n_rows,
                                      int64_t n_cols, const float *out);
brisk_status brisk_check_layernorm(const float *x, int64_t n_rows, int64_t n_cols, float eps,
                                   const float *out);
brisk_status brisk_check_gelu(const float *x, int64_t n, const float *out);
brisk_status brisk_check_softmax(const float *x, int64_t n_rows, int64_t n_cols, float scale,
                                 const float *out);
brisk_status brisk_check_kv_write(const brisk_kv_layout *kv, const void *k_cache,
                                  const void *v_cache, const float *k, const float *v,
                                  const int64_t *slots, int32_t n_tokens);
brisk_status brisk_check_kv_copy_blocks(const brisk_kv_layout *kv, const void *cache,
                                        const int32_t *pairs, int32_t n_pairs, size_t *block_bytes);
/* *n_keys: the keys all queries read together (a cost estimate). */
brisk_status brisk_check_attention(const brisk_kv_layout *kv, const void *k_cache,
                                   const void *v_cache, const float *q,
                                   const brisk_attn_batch *batch, const brisk_attn_params *params,
                                   const float *out, double *n_keys);
/* The latent pools of an MLA layer: F16 or F32, one head of D/2 values
 * with D = rank + rope_dim, and sane params (what names the operation). */
brisk_status brisk_check_mla(const char *what, const brisk_kv_layout *kv,
                             const brisk_mla_params *params);
brisk_status brisk_check_mla_kv_write(const brisk_kv_layout *kv, const void *k_cache,
                                      const void *v_cache, const float *latent, const float *k_rope,
                                      const int64_t *slots, int32_t n_tokens,
                                      const brisk_mla_params *params);
brisk_status brisk_check_mla_attention(const brisk_kv_layout *kv, const void *k_cache,
                                       const void *v_cache, const float *q, const float *kv_b,
                                       const brisk_attn_batch *batch,
                                       const brisk_mla_params *params, const float *out,
                                       double *n_keys);
/* moe_route_group: the select checks plus groups that divide the experts,
 * 1 <= topk_group <= n_group, and k no more than the experts they hold. */
brisk_status brisk_check_moe_route_group(const float *logits, int32_t n_tokens, int32_t n_experts,
                                         int32_t k, int32_t n_group, int32_t topk_group,
                                         const int32_t *ids, const float *weights);
/* argmax (k = 1, vals NULL), top_k and moe_route (what names which). */
brisk_status brisk_check_select(const char *what, const float *x, int64_t n_rows, int64_t n_cols,
                                int32_t k, const void *ids, bool need_vals, const float *vals);

#endif
