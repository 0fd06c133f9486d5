/* The CUDA backend's multi-head latent attention operations (backend.h's
 * mla_kv_write and mla_attention): the checks of the CPU backend, the
 * per-step metadata mirrored to the device, then the kernels of
 * kernels/mla.cu. */
#include "backend/check.h"
#include "backend/cuda/cuda_priv.h"

#include "core/dtype.h"
#include "mla.h"

static brisk_kmla_desc desc_of(const brisk_kv_layout *kv, const brisk_mla_params *p,
                               int32_t n_tokens, int32_t max_blocks) {
  return (brisk_kmla_desc){kv->dtype == BRISK_DTYPE_F32 ? 0u : 1u,
                           kv->block_size,
                           p->n_heads,
                           p->rank,
                           p->nope_dim,
                           p->rope_dim,
                           p->v_dim,
                           p->scale,
                           n_tokens,
                           max_blocks};
}

brisk_status brisk_cuda_mla_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                     void *v_cache, const float *latent, const float *k_rope,
                                     const int64_t *slots, int32_t n_tokens,
                                     const brisk_mla_params *params) {
  cuda_backend *cb = (cuda_backend *)be;
  brisk_status st =
      brisk_check_mla_kv_write(kv, k_cache, v_cache, latent, k_rope, slots, n_tokens, params);
  if (st || n_tokens == 0) return st;
  const void *src[] = {slots};
  size_t bytes[] = {(size_t)n_tokens * sizeof *slots};
  void *dev[1];
  if ((st = mirror(cb, 1, src, bytes, dev))) return st;
  brisk_kmla_desc d = desc_of(kv, params, n_tokens, 1);
  return launched(cb, brisk_kmla_kv_write(&d, k_cache, v_cache, latent, k_rope, dev[0], cb->stream),
                  "mla_kv_write");
}

brisk_status brisk_cuda_mla_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                      const void *k_cache, const void *v_cache, const float *q,
                                      const float *kv_b, const brisk_attn_batch *b,
                                      const brisk_mla_params *params, float *out) {
  cuda_backend *cb = (cuda_backend *)be;
  double n_keys = 0;
  brisk_status st =
      brisk_check_mla_attention(kv, k_cache, v_cache, q, kv_b, b, params, out, &n_keys);
  if (st || b->n_tokens == 0) return st;
  const void *src[] = {b->positions, b->seq_of_token, b->block_tables};
  size_t bytes[] = {(size_t)b->n_tokens * sizeof(int32_t), (size_t)b->n_tokens * sizeof(int32_t),
                    (size_t)b->n_seqs * (size_t)b->max_blocks * sizeof(int32_t)};
  void *dev[3];
  if ((st = mirror(cb, 3, src, bytes, dev))) return st;
  brisk_kmla_desc d = desc_of(kv, params, b->n_tokens, b->max_blocks);
  return launched(
      cb,
      brisk_kmla_attention(&d, k_cache, v_cache, q, kv_b, dev[0], dev[1], dev[2], out, cb->stream),
      "mla_attention");
}
