/* A pool of fixed-size KV blocks with reference counts: blocks shared by
 * forked sequences (copy-on-write) are freed when the last holder lets go. */
#ifndef BRISK_KV_BLOCK_POOL_H
#define BRISK_KV_BLOCK_POOL_H

#include "brisk.h"

#include <stdint.h>

typedef struct brisk_block_pool {
  int32_t n_blocks;
  int32_t n_free;
  int32_t *ref;        /* [n_blocks] holders of each block; 0 = free */
  int32_t *free_stack; /* [n_blocks] ids of free blocks, top at n_free - 1 */
} brisk_block_pool;

brisk_status brisk_block_pool_init(brisk_block_pool *pool, int32_t n_blocks);
void brisk_block_pool_destroy(brisk_block_pool *pool);
/* A free block with reference count 1, or -1 when none is free. */
int32_t brisk_block_pool_alloc(brisk_block_pool *pool);
void brisk_block_pool_incref(brisk_block_pool *pool, int32_t block);
void brisk_block_pool_decref(brisk_block_pool *pool, int32_t block);

#endif
