/* Paged KV cache writes on the device (kernels/kv.cu). */
#ifndef BRISK_KERNELS_KV_H
#define BRISK_KERNELS_KV_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device pointers; arguments are not checked (the host side checks them like
 * the CPU backend); 0 or the CUDA (emulation) error code. Caches are
 * [n_blocks][n_kv_heads][block_size][head_dim] of cache_dtype (GGUF ids:
 * 0 F32, 1 F16), or [n_blocks][n_kv_heads][block_size] quantized rows
 * (0x1000 INT8, 0x1001 FP8 E4M3: lib/quant/kv_quant.h's ids and layout);
 * anything else is error 1, invalid value. */

/* Stores token t's k and v heads at global slot slots[t] of both caches,
 * rounded to the cache dtype (nearest even); a negative slot skips the token.
 * As backend.h's kv_write. */
int brisk_kkv_write(uint32_t cache_dtype, int32_t n_kv_heads, int32_t block_size, int32_t head_dim,
                    void *k_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                    void *v_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                    const float *k /* [n_tokens][n_kv_heads][head_dim] */,
                    const float *v /* [n_tokens][n_kv_heads][head_dim] */,
                    const int64_t *slots /* [n_tokens] device */, int32_t n_tokens,
                    brisk_kstream stream);

/* Copies whole blocks of one cache, pairs[i] = {src, dst}, with the result of
 * doing them in order (a later pair may read an earlier pair's dst). */
int brisk_kkv_copy_blocks(uint32_t cache_dtype, int32_t n_kv_heads, int32_t block_size,
                          int32_t head_dim,
                          void *cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                          const int32_t *pairs /* [n_pairs][2] device */, int32_t n_pairs,
                          brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
