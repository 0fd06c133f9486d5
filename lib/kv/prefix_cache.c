#include "kv/prefix_cache.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

brisk_status brisk_prefix_cache_init(brisk_prefix_cache *pc, int32_t n_blocks, int32_t block_size) {
  *pc = (brisk_prefix_cache){.n_blocks = n_blocks, .block_size = block_size};
  /* About two buckets per block keeps chains short. */
  uint32_t nb = 1;
  while (nb < (uint32_t)n_blocks * 2u && nb < (1u << 30)) nb <<= 1;
  pc->n_buckets = nb;
  size_t n = (size_t)n_blocks;
  pc->tokens = brisk_malloc(n * (size_t)block_size * sizeof *pc->tokens);
  pc->hash = brisk_calloc(n, sizeof *pc->hash);
  pc->parent = brisk_calloc(n, sizeof *pc->parent);
  pc->published = brisk_calloc(n, sizeof *pc->published);
  pc->chain = brisk_malloc(n * sizeof *pc->chain);
  pc->bucket = brisk_malloc((size_t)nb * sizeof *pc->bucket);
  if (!pc->tokens || !pc->hash || !pc->parent || !pc->published || !pc->chain || !pc->bucket) {
    brisk_prefix_cache_destroy(pc);
    return brisk_error_oom();
  }
  for (uint32_t i = 0; i < nb; i++) pc->bucket[i] = -1;
  for (int32_t b = 0; b < n_blocks; b++) pc->chain[b] = -1;
  return BRISK_OK;
}

void brisk_prefix_cache_destroy(brisk_prefix_cache *pc) {
  brisk_free(pc->tokens);
  brisk_free(pc->hash);
  brisk_free(pc->parent);
  brisk_free(pc->published);
  brisk_free(pc->chain);
  brisk_free(pc->bucket);
  *pc = (brisk_prefix_cache){0};
}

uint64_t brisk_prefix_cache_chain(const brisk_prefix_cache *pc, uint64_t parent,
                                  const int32_t *tokens) {
  return brisk_hash64(tokens, (size_t)pc->block_size * sizeof *tokens, parent);
}

static uint32_t bucket_of(const brisk_prefix_cache *pc, uint64_t hash) {
  return (uint32_t)(hash ^ (hash >> 32)) & (pc->n_buckets - 1);
}

static const int32_t *block_tokens(const brisk_prefix_cache *pc, int32_t block) {
  return pc->tokens + (size_t)block * (size_t)pc->block_size;
}

int32_t brisk_prefix_cache_find(const brisk_prefix_cache *pc, uint64_t parent,
                                const int32_t *tokens, uint64_t *hash) {
  uint64_t h = brisk_prefix_cache_chain(pc, parent, tokens);
  *hash = h;
  for (int32_t b = pc->bucket[bucket_of(pc, h)]; b >= 0; b = pc->chain[b])
    if (pc->hash[b] == h && pc->parent[b] == parent &&
        !memcmp(block_tokens(pc, b), tokens, (size_t)pc->block_size * sizeof *tokens))
      return b;
  return -1;
}

void brisk_prefix_cache_publish(brisk_prefix_cache *pc, int32_t block, uint64_t parent) {
  uint64_t h;
  int32_t twin = brisk_prefix_cache_find(pc, parent, block_tokens(pc, block), &h);
  pc->hash[block] = h;
  pc->parent[block] = parent;
  if (twin >= 0) return;
  uint32_t k = bucket_of(pc, h);
  pc->chain[block] = pc->bucket[k];
  pc->bucket[k] = block;
  pc->published[block] = 1;
}

void brisk_prefix_cache_unpublish(brisk_prefix_cache *pc, int32_t block) {
  if (!pc->published[block]) return;
  int32_t *link = &pc->bucket[bucket_of(pc, pc->hash[block])];
  while (*link != block) link = &pc->chain[*link];
  *link = pc->chain[block];
  pc->chain[block] = -1;
  pc->published[block] = 0;
}
