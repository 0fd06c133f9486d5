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
/* Blocks available to new tokens: free plus cached (evicted on demand);
 * spare blocks a sequence holds (brisk_kv_seq_reserve) are not. */
int32_t brisk_kv_n_free_blocks(const brisk_kv *kv);
/* Blocks no sequence holds that the prefix cache keeps. */
int32_t brisk_kv_n_cached_blocks(const brisk_kv *kv);
/* Holders of a block, and whether it is published (never written again). */
int32_t brisk_kv_block_ref(const brisk_kv *kv, int32_t block);
bool brisk_kv_block_is_published(const brisk_kv *kv, int32_t block);
int32_t brisk_kv_n_seq_max(const brisk_kv *kv);

/* The length of `seq` in positions: the next token goes to this position
 * (0 for an unused id). Without a window, the tokens it holds. */
int32_t brisk_kv_seq_len(const brisk_kv *kv, int32_t seq);
/* Tokens seq holds (its table positions); fewer than its length once a
 * window evicted some. */
int32_t brisk_kv_seq_held(const brisk_kv *kv, int32_t seq);
/* Positions a window evicted: position p past the sinks is at table
 * position p - evicted. 0 without a window. */
int32_t brisk_kv_seq_evicted(const brisk_kv *kv, int32_t seq);
/* Of those, the positions evicted by batches reserved and not yet
 * committed or aborted. */
int32_t brisk_kv_seq_evicting(const brisk_kv *kv, int32_t seq);
/* Whether seq has a window, its sink tokens (n_sinks rounded up to whole
 * blocks) and window; either pointer may be NULL. */
bool brisk_kv_seq_windowed(const brisk_kv *kv, int32_t seq, int32_t *sink_tokens, int32_t *window);
/* Attention sinks + sliding window (StreamingLLM) for the empty sequence
 * seq: it keeps its first n_sinks tokens, rounded up to whole blocks, and
 * at least its last `window` tokens (fewer than window + block_size); each
 * batch evicts the oldest whole blocks between them that it can (never its
 * own tokens), so the sequence grows without bound in bounded blocks.
 * Positions stay those the caller feeds; brisk_kv_seq_evicted maps them to
 * table positions. Such a sequence is never published to the prefix
 * cache, attaches no prefix, and cannot be forked (BRISK_E_UNSUPPORTED).
 * 0, 0 turns it off. BRISK_E_INVALID_ARGUMENT for bad counts or a
 * sequence that is not empty. */
brisk_status brisk_kv_seq_set_window(brisk_kv *kv, int32_t seq, int32_t n_sinks, int32_t window);
/* The token ids of positions [0, len) of (valid) sequence seq into tokens. */
void brisk_kv_seq_tokens(const brisk_kv *kv, int32_t seq, int32_t *tokens);
/* The sequence's block table: block ids for positions 0, bs, 2 bs, ... */
const int32_t *brisk_kv_block_table(const brisk_kv *kv, int32_t seq, int32_t *n_blocks);

/* What a scheduler asks for one sequence of length len (vLLM's
 * allocate_slots): blocks held now for n_tokens more tokens, and room
 * promised for n_known more after those (tokens it already has, such as the
 * rest of a prompt fed in chunks), then n_grow more of output. n_forks
 * copies of the sequence are to be made (brisk_kv_seq_fork) at
 * len + n_tokens + n_known; each is promised its own n_grow tokens and the
 * copy of a shared, partly filled last block. */
typedef struct brisk_kv_ask {
  int32_t n_tokens, n_known, n_grow, n_forks;
  /* Admission: also refuse unless the pool still covers every sequence's
   * promise afterwards (this one's capped at the pool, so that a sequence
   * larger than the pool is admitted into an empty one). Without it the
   * held blocks may use room promised to others: growth of running
   * sequences goes first, and the scheduler preempts when it runs out. */
  bool admit;
} brisk_kv_ask;

/* Holds the blocks seq needs for ask->n_tokens more tokens, the copy of a
 * shared or published partly filled last block included, as spare blocks
 * the next brisk_kv_reserve of those tokens uses (so it cannot fail for
 * lack of blocks), and records seq's promise (replacing its previous one).
 * All or nothing: BRISK_E_KV_FULL (the pool cannot hold them, or with
 * admit, the promises would not fit), BRISK_E_INVALID_ARGUMENT or
 * BRISK_E_OUT_OF_MEMORY leave everything as it was. Spare blocks are
 * released by brisk_kv_seq_truncate (any length, its current one
 * included), fork onto the sequence, match_prefix and free; a promise ends
 * when the sequence is freed. A windowed sequence (brisk_kv_seq_set_window)
 * is promised at most what it can hold fed in batches of at most its
 * window: its sink blocks, two windows' and three more blocks. */
brisk_status brisk_kv_seq_reserve(brisk_kv *kv, int32_t seq, const brisk_kv_ask *ask);
/* Tokens seq can take now: the rest of its last block (unless that must be
 * copied first, which takes a block), its spare blocks and every available
 * block; 0 for a bad id. Promises do not count against it. */
int64_t brisk_kv_seq_room(const brisk_kv *kv, int32_t seq);
/* Blocks promised to all sequences (brisk_kv_ask). */
int64_t brisk_kv_n_promised(const brisk_kv *kv);

/* Reserves room for a batch of n tokens, token i being token id token[i] at
 * position pos[i] of sequence seq[i]. Each sequence's tokens must continue it: positions
 * len, len+1, ... in batch order. All or nothing: on BRISK_E_KV_FULL or
 * BRISK_E_INVALID_ARGUMENT nothing changes. On success slot[i] is the
 * global slot (block * block_size + offset) where token i's K/V goes, and
 * copies[0 .. *n_copies) (capacity: the number of distinct sequences in the
 * batch, at most n) are the block copies to perform first. A sequence's
 * spare blocks (brisk_kv_seq_reserve) are used before the pool's. */
brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t n, const int32_t *seq, const int32_t *pos,
                              const int32_t *token, int64_t *slot, brisk_kv_copy *copies,
                              int32_t *n_copies);
/* After the K/V of a reserved batch is written: releases the blocks its
 * window evicted and publishes the blocks of seq that became full at or
 * after position from_len (its length before the batch). A batch that
 * failed is rolled back with brisk_kv_abort instead, so no block is
 * published without its K/V. */
void brisk_kv_commit(brisk_kv *kv, int32_t seq, int32_t from_len);
/* Rolls seq back to its length from_len before a failed batch: blocks its
 * window evicted return to their places, then it is truncated. */
void brisk_kv_abort(brisk_kv *kv, int32_t seq, int32_t from_len);

/* The caller's copies of one block's K/V (every layer, K and V: the host
 * tier's block_bytes) out of the pool into host memory and back. A failed
 * copy only drops that block from the host tier. */
typedef struct brisk_kv_host_io {
  brisk_status (*download)(void *user, int32_t block, void *host);
  brisk_status (*upload)(void *user, int32_t block, const void *host);
  void *user;
} brisk_kv_host_io;

/* The prefix cache's host tier (kv/host_tier.h), emptied and set to
 * `budget` bytes (0: off; always off without the prefix cache): a
 * published block the pool evicts is first copied out through io (unless
 * the tier has it), and brisk_kv_match_prefix brings back blocks the pool
 * lacks but the tier holds. A copy out that cannot be made (no memory, the
 * budget, a failed download) drops the block, as without the tier: no call
 * fails because of the tier. */
void brisk_kv_set_host_tier(brisk_kv *kv, uint64_t budget, size_t block_bytes,
                            const brisk_kv_host_io *io);
/* Its counters and sizes (read only). */
const struct brisk_host_tier *brisk_kv_host_tier(const brisk_kv *kv);

/* Attaches to empty sequence seq the longest run of published blocks that
 * hold tokens[0 .. k * block_size) with k * block_size <= n - 1, sharing
 * them (cached ones leave the cache); blocks the pool lacks come back from
 * the host tier into available blocks (evicting cached ones), published as
 * if decoded; *reused = k * block_size. 0 when the
 * prefix cache is off. BRISK_E_INVALID_ARGUMENT for a bad or non-empty
 * sequence, BRISK_E_OUT_OF_MEMORY with nothing changed. */
brisk_status brisk_kv_match_prefix(brisk_kv *kv, int32_t seq, const int32_t *tokens, int32_t n,
                                   int32_t *reused);

/* Keeps positions [0, len) of seq; later blocks are released. A windowed
 * sequence that evicted keeps 0, or at least its sinks plus what it still
 * holds (else BRISK_E_INVALID_ARGUMENT). Its window stays set. */
brisk_status brisk_kv_seq_truncate(brisk_kv *kv, int32_t seq, int32_t len);
/* dst (which must be empty) shares all of src's blocks copy-on-write;
 * BRISK_E_UNSUPPORTED for windowed sequences. */
brisk_status brisk_kv_seq_fork(brisk_kv *kv, int32_t src, int32_t dst);
/* Releases all of seq's blocks. */
brisk_status brisk_kv_seq_free(brisk_kv *kv, int32_t seq);

#endif
