/* A pool of fixed-size KV blocks with reference counts. A block is free
 * (never used, or released unpublished), held (ref > 0) or cached (ref 0
 * but kept for the prefix cache, in least-recently-released order). Blocks
 * shared by forked sequences (copy-on-write) are released when the last
 * holder lets go. Allocation takes a free block first, else evicts the least
 * recently released cached block. Invariant: n_free + n_cached + held ==
 * n_blocks. */
#ifndef BRISK_KV_BLOCK_POOL_H
#define BRISK_KV_BLOCK_POOL_H

#include "brisk.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct brisk_block_pool {
  int32_t n_blocks;
  int32_t n_free;
  int32_t n_cached;
  int32_t *ref;        /* [n_blocks] holders of each block; 0 = free or cached */
  int32_t *free_stack; /* [n_blocks] ids of free blocks, top at n_free - 1 */
  /* Cached blocks as a doubly linked list, oldest (next evicted) at head;
   * -1 ends it. lru_prev[b] == -2 marks a block that is not cached. */
  int32_t *lru_prev, *lru_next; /* [n_blocks] */
  int32_t lru_head, lru_tail;
} brisk_block_pool;

brisk_status brisk_block_pool_init(brisk_block_pool *pool, int32_t n_blocks);
void brisk_block_pool_destroy(brisk_block_pool *pool);
/* Blocks a new allocation can take: free plus cached. */
static inline int32_t brisk_block_pool_available(const brisk_block_pool *pool) {
  return pool->n_free + pool->n_cached;
}
/* A block with reference count 1, or -1 when none is available. *evicted is
 * set when it was a cached block (the caller then forgets its contents). */
int32_t brisk_block_pool_alloc(brisk_block_pool *pool, bool *evicted);
/* One more holder; a cached block leaves the cache. */
void brisk_block_pool_incref(brisk_block_pool *pool, int32_t block);
/* One holder fewer; when none is left the block becomes cached (keep) or
 * free. */
void brisk_block_pool_decref(brisk_block_pool *pool, int32_t block, bool keep);
bool brisk_block_pool_is_cached(const brisk_block_pool *pool, int32_t block);

#endif
