/* The prefix cache's index: which full KV blocks hold which tokens after
 * which prefix. A full block's chain hash is XXH64 of its token ids seeded
 * with its parent block's chain hash (a fixed root for the first block), so
 * equal hashes mean equal tokens at equal positions. Published blocks are
 * in a hash table and are never written again; the block pool keeps them
 * (ref 0, LRU) after their last holder lets go, until evicted. Token ids are
 * kept per slot so a lookup compares them and never trusts the hash alone. */
#ifndef BRISK_KV_PREFIX_CACHE_H
#define BRISK_KV_PREFIX_CACHE_H

#include "brisk.h"

#include <stdbool.h>
#include <stdint.h>

#define BRISK_PREFIX_ROOT_HASH UINT64_C(0x9e3779b97f4a7c15)

typedef struct brisk_prefix_cache {
  int32_t n_blocks, block_size;
  int32_t *tokens;          /* [n_blocks][block_size] token id written in each slot */
  uint64_t *hash;           /* [n_blocks] chain hash of a full block */
  uint64_t *parent;         /* [n_blocks] its parent's chain hash */
  unsigned char *published; /* [n_blocks] in the table, immutable */
  int32_t *bucket;          /* [n_buckets] first published block per hash bucket, -1 none */
  int32_t *chain;           /* [n_blocks] next published block in the same bucket */
  uint32_t n_buckets;       /* power of two */
} brisk_prefix_cache;

brisk_status brisk_prefix_cache_init(brisk_prefix_cache *pc, int32_t n_blocks, int32_t block_size);
void brisk_prefix_cache_destroy(brisk_prefix_cache *pc);

/* Chain hash of a block of block_size tokens after a block hashed `parent`. */
uint64_t brisk_prefix_cache_chain(const brisk_prefix_cache *pc, uint64_t parent,
                                  const int32_t *tokens);
/* Hashes full block `block` (its tokens are written) after `parent` and
 * publishes it, unless an equal block is published already: then it only
 * keeps the hash (the cached copy wins; duplicates are harmless). */
void brisk_prefix_cache_publish(brisk_prefix_cache *pc, int32_t block, uint64_t parent);
/* Removes a published block from the table (it is being reused). */
void brisk_prefix_cache_unpublish(brisk_prefix_cache *pc, int32_t block);
/* The published block holding `tokens` (block_size of them) after a block
 * hashed `parent`, or -1; *hash receives the chain hash either way. */
int32_t brisk_prefix_cache_find(const brisk_prefix_cache *pc, uint64_t parent,
                                const int32_t *tokens, uint64_t *hash);

static inline bool brisk_prefix_cache_is_published(const brisk_prefix_cache *pc, int32_t block) {
  return pc->published && pc->published[block];
}

#endif
