/* The KV cache manager: which blocks each sequence owns, where each new
 * token's K/V goes, copy-on-write for shared blocks, and (optionally) the
 * prefix cache: full blocks are published under a chain hash once their K/V
 * is written, kept after their last holder lets go, reattached by
 * brisk_kv_match_prefix and evicted least recently released first. It holds no K/V
 * data itself: the context owns the per-layer block storage
 * ([n_blocks][n_kv_heads][block_size][head_dim]) and performs the block
 * copies this manager asks for. */
#ifndef BRISK_KV_KV_H
#define BRISK_KV_KV_H

#include "brisk.h"
#include "kv/block_pool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct brisk_kv brisk_kv;

/* A block copy the caller must perform (all layers, K and V) before writing
 * the batch: the destination replaces a shared source in one sequence. */
typedef struct brisk_kv_copy {
  int32_t src, dst;
} brisk_kv_copy;

brisk_status brisk_kv_create(int32_t n_blocks, int32_t block_size, int32_t n_seq_max,
                             bool prefix_cache, brisk_kv **out);
void brisk_kv_free(brisk_kv *kv);

int32_t brisk_kv_block_size(const brisk_kv *kv);
int32_t brisk_kv_n_blocks(const brisk_kv *kv);
/* Blocks available to new tokens: free plus cached (evicted on demand). */
int32_t brisk_kv_n_free_blocks(const brisk_kv *kv);
/* Blocks no sequence holds that the prefix cache keeps. */
int32_t brisk_kv_n_cached_blocks(const brisk_kv *kv);
/* Holders of a block, and whether it is published (never written again). */
int32_t brisk_kv_block_ref(const brisk_kv *kv, int32_t block);
bool brisk_kv_block_is_published(const brisk_kv *kv, int32_t block);
int32_t brisk_kv_n_seq_max(const brisk_kv *kv);

/* Tokens held by `seq` (0 for an unused id). */
int32_t brisk_kv_seq_len(const brisk_kv *kv, int32_t seq);
/* The token ids of positions [0, len) of (valid) sequence seq into tokens. */
void brisk_kv_seq_tokens(const brisk_kv *kv, int32_t seq, int32_t *tokens);
/* The sequence's block table: block ids for positions 0, bs, 2 bs, ... */
const int32_t *brisk_kv_block_table(const brisk_kv *kv, int32_t seq, int32_t *n_blocks);

/* Reserves room for a batch of n tokens, token i being token id token[i] at
 * position pos[i] of sequence seq[i]. Each sequence's tokens must continue it: positions
 * len, len+1, ... in batch order. All or nothing: on BRISK_E_KV_FULL or
 * BRISK_E_INVALID_ARGUMENT nothing changes. On success slot[i] is the
 * global slot (block * block_size + offset) where token i's K/V goes, and
 * copies[0 .. *n_copies) (capacity: the number of distinct sequences in the
 * batch, at most n) are the block copies to perform first. */
brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t n, const int32_t *seq, const int32_t *pos,
                              const int32_t *token, int64_t *slot, brisk_kv_copy *copies,
                              int32_t *n_copies);
/* After the K/V of a reserved batch is written: publishes the blocks of seq
 * that became full at or after position from_len (its length before the
 * batch). A batch that failed is rolled back with brisk_kv_seq_truncate
 * instead, so no block is published without its K/V. */
void brisk_kv_commit(brisk_kv *kv, int32_t seq, int32_t from_len);

/* Attaches to empty sequence seq the longest run of published blocks that
 * hold tokens[0 .. k * block_size) with k * block_size <= n - 1, sharing
 * them (cached ones leave the cache); *reused = k * block_size. 0 when the
 * prefix cache is off. BRISK_E_INVALID_ARGUMENT for a bad or non-empty
 * sequence, BRISK_E_OUT_OF_MEMORY with nothing changed. */
brisk_status brisk_kv_match_prefix(brisk_kv *kv, int32_t seq, const int32_t *tokens, int32_t n,
                                   int32_t *reused);

/* Keeps positions [0, len) of seq; later blocks are released. */
brisk_status brisk_kv_seq_truncate(brisk_kv *kv, int32_t seq, int32_t len);
/* dst (which must be empty) shares all of src's blocks copy-on-write. */
brisk_status brisk_kv_seq_fork(brisk_kv *kv, int32_t src, int32_t dst);
/* Releases all of seq's blocks. */
brisk_status brisk_kv_seq_free(brisk_kv *kv, int32_t seq);

#endif
