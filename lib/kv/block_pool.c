#include "kv/block_pool.h"

#include "core/alloc.h"
#include "core/error.h"

brisk_status brisk_block_pool_init(brisk_block_pool *pool, int32_t n_blocks) {
  pool->n_blocks = n_blocks;
  pool->ref = brisk_calloc((size_t)n_blocks, sizeof *pool->ref);
  pool->free_stack = brisk_malloc((size_t)n_blocks * sizeof *pool->free_stack);
  if (!pool->ref || !pool->free_stack) {
    brisk_block_pool_destroy(pool);
    return brisk_error_oom();
  }
  /* Low ids on top, so a fresh pool hands out 0, 1, 2, ... */
  for (int32_t i = 0; i < n_blocks; i++) pool->free_stack[i] = n_blocks - 1 - i;
  pool->n_free = n_blocks;
  return BRISK_OK;
}

void brisk_block_pool_destroy(brisk_block_pool *pool) {
  brisk_free(pool->ref);
  brisk_free(pool->free_stack);
  pool->ref = pool->free_stack = NULL;
  pool->n_blocks = pool->n_free = 0;
}

int32_t brisk_block_pool_alloc(brisk_block_pool *pool) {
  if (pool->n_free == 0) return -1;
  int32_t b = pool->free_stack[--pool->n_free];
  pool->ref[b] = 1;
  return b;
}

void brisk_block_pool_incref(brisk_block_pool *pool, int32_t block) { pool->ref[block]++; }

void brisk_block_pool_decref(brisk_block_pool *pool, int32_t block) {
  if (--pool->ref[block] == 0) pool->free_stack[pool->n_free++] = block;
}
