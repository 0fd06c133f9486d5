/* Multi-head latent attention kernels (kernels/mla.cu): the mla_kv_write and
 * mla_attention operations of lib/backend/backend.h (brisk_mla_params). A
 * token's latent row [c (rank) | k_rope (rope_dim)] of D values lives in two
 * pools of D/2 values per slot, [n_blocks][block_size][D/2] each, of
 * cache_dtype (0 F32, 1 F16; anything else is error 1, invalid value).
 * Device pointers except where marked; arguments are not checked (the host
 * side checks them as the CPU backend does); 0 or the CUDA (emulation)
 * error code. */
#ifndef BRISK_KERNELS_MLA_H
#define BRISK_KERNELS_MLA_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brisk_kmla_desc {
  uint32_t cache_dtype;
  int32_t block_size;
  int32_t n_heads, rank, nope_dim, rope_dim, v_dim;
  float scale;
  int32_t n_tokens;
  int32_t max_blocks; /* row length of block_tables */
} brisk_kmla_desc;

/* Stores [latent[t] | k_rope[t]] at slot slots[t] (negative: skipped),
 * rounded to the cache dtype (nearest even). */
int brisk_kmla_kv_write(const brisk_kmla_desc *d, void *k_cache, void *v_cache,
                        const float *latent /* [n_tokens][rank] */,
                        const float *k_rope /* [n_tokens][rope_dim] */,
                        const int64_t *slots /* [n_tokens] */, brisk_kstream stream);

/* out[t][h] = V_h sum_j softmax_j(scale (K_h^T q_n . c_j + q_r . k_rope_j)) c_j
 * over keys j in 0..positions[t] of sequence seq_of_token[t] (backend.h). */
int brisk_kmla_attention(const brisk_kmla_desc *d, const void *k_cache, const void *v_cache,
                         const float *q /* [n_tokens][n_heads][nope_dim + rope_dim] */,
                         const float *kv_b /* [n_heads][nope_dim + v_dim][rank] */,
                         const int32_t *positions /* [n_tokens] */,
                         const int32_t *seq_of_token /* [n_tokens] */,
                         const int32_t *block_tables /* [n_seqs][max_blocks] */,
                         float *out /* [n_tokens][n_heads][v_dim] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
