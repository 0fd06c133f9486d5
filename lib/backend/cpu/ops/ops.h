/* Internals shared by the CPU backend's operations: the backend state, the
 * parallel-range helper, and one entry point per operation (same signature
 * as its slot in brisk_backend). */
#ifndef BRISK_BACKEND_CPU_OPS_OPS_H
#define BRISK_BACKEND_CPU_OPS_OPS_H

#include "backend/backend.h"
#include "backend/check.h"
#include "core/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_cpu_ctx {
  brisk_threadpool *pool; /* may be NULL: the caller's thread does the work */
  bool avx2;              /* AVX2 + FMA + F16C kernels chosen */
  bool neon;              /* aarch64 NEON kernels chosen */
  bool avx512;            /* AVX-512 F kernels chosen (level BRISK_ISA_AVX512) */
  bool avxvnni;           /* level BRISK_ISA_AVXVNNI on a CPU with AVX-VNNI (INT8 attention) */
  int mm_isa;             /* brisk_isa_level cap of the matmul kernels */
  void *workspace;        /* [workspace_size] bytes of matmul scratch, grown on demand */
  size_t workspace_size;
} brisk_cpu_ctx;

/* Processes items [begin, end). */
typedef void (*brisk_cpu_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs fn over [0, n) split into chunks whose boundaries are multiples of
 * `grain`, on the pool, or serially when `work` (about how many element
 * operations the whole range costs) is too small to pay for waking threads.
 * Callers keep results independent of the split. */
void brisk_cpu_ops_parallel(brisk_threadpool *pool, int64_t n, int64_t grain, double work,
                            brisk_cpu_range_fn fn, void *ctx);

brisk_status brisk_cpu_ops_embed(brisk_backend *be, uint32_t table_type, const void *table,
                                 int64_t n_vocab, int64_t n_embd, const int32_t *tokens,
                                 int32_t n_tokens, float *out);
brisk_status brisk_cpu_ops_gather_cols(brisk_backend *be, const float *x, int64_t n_rows,
                                       int64_t n_cols, const int32_t *cols, int64_t n_out,
                                       float *out);
brisk_status brisk_cpu_ops_rmsnorm(brisk_backend *be, const float *x, const float *weight,
                                   int64_t n_rows, int64_t n_cols, float eps, float *out);
brisk_status brisk_cpu_ops_rope(brisk_backend *be, float *x, int32_t n_tokens, int64_t token_stride,
                                int32_t n_heads, int32_t head_dim, const int32_t *positions,
                                const brisk_rope_params *p);
brisk_status brisk_cpu_ops_glu(brisk_backend *be, brisk_glu_kind kind, const float *gate,
                               const float *up, int64_t n, float *out);
brisk_status brisk_cpu_ops_add(brisk_backend *be, const float *a, const float *b, int64_t n_rows,
                               int64_t n_cols, bool broadcast_b, float *out);
brisk_status brisk_cpu_ops_scale(brisk_backend *be, const float *x, int64_t n, float s, float *out);
brisk_status brisk_cpu_ops_softcap(brisk_backend *be, const float *x, int64_t n, float cap,
                                   float *out);
brisk_status brisk_cpu_ops_sigmoid_gate(brisk_backend *be, const float *x, const float *g,
                                        int64_t n_rows, int64_t n_cols, float *out);
brisk_status brisk_cpu_ops_layernorm(brisk_backend *be, const float *x, const float *weight,
                                     const float *bias, int64_t n_rows, int64_t n_cols, float eps,
                                     float *out);
brisk_status brisk_cpu_ops_gelu(brisk_backend *be, const float *x, int64_t n, float *out);
brisk_status brisk_cpu_ops_softmax(brisk_backend *be, const float *x, int64_t n_rows,
                                   int64_t n_cols, float scale, float *out);
brisk_status brisk_cpu_ops_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                    void *v_cache, const float *k, const float *v,
                                    const int64_t *slots, int32_t n_tokens);
brisk_status brisk_cpu_ops_kv_copy_blocks(brisk_backend *be, const brisk_kv_layout *kv, void *cache,
                                          const int32_t *pairs, int32_t n_pairs);
brisk_status brisk_cpu_ops_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                     const void *k_cache, const void *v_cache, const float *q,
                                     const brisk_attn_batch *batch, const brisk_attn_params *params,
                                     float *out);
brisk_status brisk_cpu_ops_moe_route(brisk_backend *be, const float *logits, int32_t n_tokens,
                                     int32_t n_experts, int32_t k, bool renormalize, int32_t *ids,
                                     float *weights);
brisk_status brisk_cpu_ops_moe_route_group(brisk_backend *be, const float *logits, int32_t n_tokens,
                                           int32_t n_experts, int32_t k, int32_t n_group,
                                           int32_t topk_group, bool renormalize, int32_t *ids,
                                           float *weights);
brisk_status brisk_cpu_ops_mla_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                        void *v_cache, const float *latent, const float *k_rope,
                                        const int64_t *slots, int32_t n_tokens,
                                        const brisk_mla_params *params);
brisk_status brisk_cpu_ops_mla_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                         const void *k_cache, const void *v_cache, const float *q,
                                         const float *kv_b, const brisk_attn_batch *batch,
                                         const brisk_mla_params *params, float *out);
brisk_status brisk_cpu_ops_argmax(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                  int32_t *ids);
brisk_status brisk_cpu_ops_top_k(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                 int32_t k, int32_t *ids, float *vals);

#endif
