/* Paged causal attention kernels (the `attention` operation of
 * lib/backend/backend.h): each query token t at position p of its sequence
 * attends to that sequence's cached keys in [lo, p], lo = max(0, p - window
 * + 1) with a sliding window, else 0; query head h reads kv head
 * h / (n_heads / n_kv_heads).
 *
 *  - Decode (split-KV, FlashDecoding): the keys are cut at fixed positions
 *    into chunks of BRISK_KATTN_CHUNK; one block per (query, kv head, chunk)
 *    loads each K/V row once for all query heads of the GQA group and writes
 *    a partial (max, sum, unnormalized output) into the caller's workspace;
 *    a combine kernel merges a query's chunks in order. The chunking depends
 *    on nothing but the key positions, so a query's result is the same
 *    whatever else is in the batch. Plan/run: the workspace size depends only
 *    on the launch bound (n_tokens, n_heads, head_dim, max_ctx), so a decode
 *    step can be captured once and replayed.
 *  - Prefill (flash-style): one block per (tile of consecutive query tokens,
 *    kv head): the tile's queries of all heads of the group share each K/V
 *    tile in shared memory, with an online softmax per query row. Queries of
 *    several sequences may share a call (and a tile).
 *
 * Launchers take device pointers (the descriptor is host memory), do not
 * validate (the host side checks as the CPU backend does), and return 0 or
 * the CUDA / emulation error code; 1 (cudaErrorInvalidValue) for a cache
 * dtype other than F16/F32/INT8/FP8 or a zero-sized workspace. */
#ifndef BRISK_KERNELS_ATTENTION_H
#define BRISK_KERNELS_ATTENTION_H

#include "kstream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Keys per split-KV chunk: a constant, never derived from the batch. */
#define BRISK_KATTN_CHUNK 256
#define BRISK_KATTN_MAX_HEAD_DIM 1024

/* One attention call (host memory). */
typedef struct brisk_kattn_desc {
  uint32_t kv_dtype; /* 1 (F16), 0 (F32), 0x1000 (INT8) or 0x1001 (FP8 E4M3): kernels/kv.h */
  int32_t n_kv_heads;
  int32_t block_size;     /* tokens per cache block */
  int32_t head_dim;       /* <= BRISK_KATTN_MAX_HEAD_DIM */
  int32_t n_heads;        /* a multiple of n_kv_heads */
  float scale;            /* logit scale, already resolved (not 0) */
  int32_t sliding_window; /* > 0: keys in (p - window, p]; 0: all of 0..p */
  int32_t n_tokens;
  int32_t max_blocks; /* row length of block_tables */
  float softcap;      /* > 0: scores become softcap * tanh(score / softcap) */
} brisk_kattn_desc;

/* Workspace bytes of brisk_kattn_decode for up to n_tokens queries of
 * n_heads heads whose positions are all < max_ctx; 0 when a size is < 1 or
 * the product overflows. */
size_t brisk_kattn_decode_workspace_bytes(int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                                          int32_t max_ctx);

/* Split-KV attention of d->n_tokens queries, every position < max_ctx.
 * workspace: device memory of brisk_kattn_decode_workspace_bytes(d->n_tokens,
 * d->n_heads, d->head_dim, max_ctx) bytes, 16-byte aligned, owned by the
 * caller and not shared with work running concurrently. */
int brisk_kattn_decode(const brisk_kattn_desc *d,
                       const void *k_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                       const void *v_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                       const float *q /* [n_tokens][n_heads][head_dim] */,
                       const int32_t *positions /* [n_tokens] */,
                       const int32_t *seq_of_token /* [n_tokens] */,
                       const int32_t *block_tables /* [n_seqs][max_blocks] */, int32_t max_ctx,
                       void *workspace, float *out /* [n_tokens][n_heads][head_dim] */,
                       brisk_kstream stream);

/* Flash-style attention of d->n_tokens queries (any positions; the prefill
 * path: runs of consecutive positions of a sequence share tiles best). */
int brisk_kattn_prefill(const brisk_kattn_desc *d,
                        const void *k_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                        const void *v_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                        const float *q /* [n_tokens][n_heads][head_dim] */,
                        const int32_t *positions /* [n_tokens] */,
                        const int32_t *seq_of_token /* [n_tokens] */,
                        const int32_t *block_tables /* [n_seqs][max_blocks] */,
                        float *out /* [n_tokens][n_heads][head_dim] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
