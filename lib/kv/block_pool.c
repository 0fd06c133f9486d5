#include "kv/block_pool.h"

#include "core/alloc.h"
#include "core/error.h"

#define NOT_CACHED (-2)

brisk_status brisk_block_pool_init(brisk_block_pool *pool, int32_t n_blocks) {
  *pool = (brisk_block_pool){.n_blocks = n_blocks, .lru_head = -1, .lru_tail = -1};
  size_t n = (size_t)n_blocks;
  pool->ref = brisk_calloc(n, sizeof *pool->ref);
  pool->free_stack = brisk_malloc(n * sizeof *pool->free_stack);
  pool->lru_prev = brisk_malloc(n * sizeof *pool->lru_prev);
  pool->lru_next = brisk_malloc(n * sizeof *pool->lru_next);
  if (!pool->ref || !pool->free_stack || !pool->lru_prev || !pool->lru_next) {
    brisk_block_pool_destroy(pool);
    return brisk_error_oom();
  }
  /* Low ids on top, so a fresh pool hands out 0, 1, 2, ... */
  for (int32_t i = 0; i < n_blocks; i++) {
    pool->free_stack[i] = n_blocks - 1 - i;
    pool->lru_prev[i] = NOT_CACHED;
    pool->lru_next[i] = -1;
  }
  pool->n_free = n_blocks;
  return BRISK_OK;
}

void brisk_block_pool_destroy(brisk_block_pool *pool) {
  brisk_free(pool->ref);
  brisk_free(pool->free_stack);
  brisk_free(pool->lru_prev);
  brisk_free(pool->lru_next);
  *pool = (brisk_block_pool){.lru_head = -1, .lru_tail = -1};
}

bool brisk_block_pool_is_cached(const brisk_block_pool *pool, int32_t block) {
  return pool->lru_prev[block] != NOT_CACHED;
}

static void lru_unlink(brisk_block_pool *pool, int32_t b) {
  int32_t p = pool->lru_prev[b], n = pool->lru_next[b];
  if (p >= 0)
    pool->lru_next[p] = n;
  else
    pool->lru_head = n;
  if (n >= 0)
    pool->lru_prev[n] = p;
  else
    pool->lru_tail = p;
  pool->lru_prev[b] = NOT_CACHED;
  pool->lru_next[b] = -1;
  pool->n_cached--;
}

static void lru_append(brisk_block_pool *pool, int32_t b) {
  pool->lru_prev[b] = pool->lru_tail;
  pool->lru_next[b] = -1;
  if (pool->lru_tail >= 0)
    pool->lru_next[pool->lru_tail] = b;
  else
    pool->lru_head = b;
  pool->lru_tail = b;
  pool->n_cached++;
}

int32_t brisk_block_pool_alloc(brisk_block_pool *pool, bool *evicted) {
  int32_t b;
  *evicted = false;
  if (pool->n_free > 0) {
    b = pool->free_stack[--pool->n_free];
  } else if (pool->lru_head >= 0) {
    b = pool->lru_head;
    lru_unlink(pool, b);
    *evicted = true;
  } else {
    return -1;
  }
  pool->ref[b] = 1;
  return b;
}

void brisk_block_pool_incref(brisk_block_pool *pool, int32_t block) {
  if (pool->ref[block] == 0 && brisk_block_pool_is_cached(pool, block)) lru_unlink(pool, block);
  pool->ref[block]++;
}

void brisk_block_pool_decref(brisk_block_pool *pool, int32_t block, bool keep) {
  if (--pool->ref[block] > 0) return;
  if (keep)
    lru_append(pool, block);
  else
    pool->free_stack[pool->n_free++] = block;
}
