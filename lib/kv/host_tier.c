#include "kv/host_tier.h"

#include "core/alloc.h"
#include "core/checked.h"

#include <string.h>

/* One entry, allocated in one piece: this record, the block's token ids,
 * then its K/V bytes (at data_offset). */
struct brisk_host_block {
  uint64_t hash, parent;
  brisk_host_block *lru_prev, *lru_next; /* toward the head (older), the tail (newer) */
  brisk_host_block *chain;               /* next entry in the same bucket */
};

#define FIRST_BUCKETS 64u

/* The data starts 16-byte aligned after the token ids. */
static size_t data_offset(const brisk_host_tier *t) {
  size_t end = sizeof(brisk_host_block) + (size_t)t->block_size * sizeof(int32_t);
  return (end + 15) & ~(size_t)15;
}

static int32_t *block_tokens(brisk_host_block *b) { return (int32_t *)(b + 1); }

unsigned char *brisk_host_tier_data(const brisk_host_tier *t, brisk_host_block *b) {
  return (unsigned char *)b + data_offset(t);
}

void brisk_host_tier_init(brisk_host_tier *t, int32_t block_size, size_t data_bytes,
                          uint64_t budget) {
  *t = (brisk_host_tier){.block_size = block_size, .data_bytes = data_bytes, .budget = budget};
  size_t entry;
  /* A block too large to address is never kept: the budget check drops it. */
  t->entry_bytes = brisk_add_overflow_size(data_offset(t), data_bytes, &entry) ? SIZE_MAX : entry;
}

void brisk_host_tier_destroy(brisk_host_tier *t) {
  for (brisk_host_block *b = t->lru_head, *next; b; b = next) {
    next = b->lru_next;
    brisk_free(b);
  }
  brisk_free(t->bucket);
  brisk_host_tier_init(t, t->block_size, t->data_bytes, t->budget);
}

uint64_t brisk_host_tier_index_bytes(const brisk_host_tier *t) {
  return t->n_blocks * (uint64_t)data_offset(t) + (uint64_t)t->n_buckets * sizeof *t->bucket;
}

static uint32_t bucket_of(const brisk_host_tier *t, uint64_t hash) {
  return (uint32_t)(hash ^ (hash >> 32)) & (t->n_buckets - 1);
}

brisk_host_block *brisk_host_tier_find(const brisk_host_tier *t, uint64_t hash, uint64_t parent,
                                       const int32_t *tokens) {
  if (t->n_buckets == 0) return NULL;
  for (brisk_host_block *b = t->bucket[bucket_of(t, hash)]; b; b = b->chain)
    if (b->hash == hash && b->parent == parent &&
        !memcmp(block_tokens(b), tokens, (size_t)t->block_size * sizeof *tokens))
      return b;
  return NULL;
}

static void lru_unlink(brisk_host_tier *t, brisk_host_block *b) {
  if (b->lru_prev)
    b->lru_prev->lru_next = b->lru_next;
  else
    t->lru_head = b->lru_next;
  if (b->lru_next)
    b->lru_next->lru_prev = b->lru_prev;
  else
    t->lru_tail = b->lru_prev;
  b->lru_prev = b->lru_next = NULL;
}

static void lru_append(brisk_host_tier *t, brisk_host_block *b) {
  b->lru_prev = t->lru_tail;
  b->lru_next = NULL;
  if (t->lru_tail)
    t->lru_tail->lru_next = b;
  else
    t->lru_head = b;
  t->lru_tail = b;
}

void brisk_host_tier_touch(brisk_host_tier *t, brisk_host_block *b) {
  lru_unlink(t, b);
  lru_append(t, b);
}

void brisk_host_tier_detach(brisk_host_tier *t, brisk_host_block *b) {
  brisk_host_block **link = &t->bucket[bucket_of(t, b->hash)];
  while (*link != b) link = &(*link)->chain;
  *link = b->chain;
  b->chain = NULL;
  lru_unlink(t, b);
  t->n_blocks--;
  t->used -= t->entry_bytes;
}

void brisk_host_tier_release(brisk_host_block *b) { brisk_free(b); }

void brisk_host_tier_remove(brisk_host_tier *t, brisk_host_block *b) {
  brisk_host_tier_detach(t, b);
  brisk_host_tier_release(b);
}

/* Links a record into the table and the LRU's tail and counts it. */
static void link_in(brisk_host_tier *t, brisk_host_block *b) {
  uint32_t k = bucket_of(t, b->hash);
  b->chain = t->bucket[k];
  t->bucket[k] = b;
  lru_append(t, b);
  t->n_blocks++;
  t->used += t->entry_bytes;
}

void brisk_host_tier_attach(brisk_host_tier *t, brisk_host_block *b) {
  if (t->used + t->entry_bytes > t->budget) {
    brisk_free(b);
    t->n_dropped++;
    return;
  }
  link_in(t, b);
}

/* Doubles the hash table (or makes the first) when entries outnumber
 * buckets, if the budget and the allocator allow; otherwise chains just
 * grow longer. */
static void grow_table(brisk_host_tier *t) {
  if (t->n_blocks < t->n_buckets || t->n_buckets >= (1u << 30)) return;
  uint32_t nb = t->n_buckets ? 2 * t->n_buckets : FIRST_BUCKETS;
  uint64_t extra = (uint64_t)(nb - t->n_buckets) * sizeof *t->bucket;
  if (t->used + extra > t->budget) return;
  brisk_host_block **bucket = brisk_calloc(nb, sizeof *bucket);
  if (!bucket) return;
  for (uint32_t i = 0; i < t->n_buckets; i++)
    for (brisk_host_block *b = t->bucket[i], *next; b; b = next) {
      next = b->chain;
      uint32_t k = (uint32_t)(b->hash ^ (b->hash >> 32)) & (nb - 1);
      b->chain = bucket[k];
      bucket[k] = b;
    }
  brisk_free(t->bucket);
  t->bucket = bucket;
  t->used += extra;
  t->n_buckets = nb;
}

brisk_host_block *brisk_host_tier_add(brisk_host_tier *t, uint64_t hash, uint64_t parent,
                                      const int32_t *tokens) {
  /* Room for the entry, and for a first table if there is none. */
  uint64_t table = t->n_buckets ? 0 : (uint64_t)FIRST_BUCKETS * sizeof *t->bucket;
  if (t->entry_bytes == SIZE_MAX || (uint64_t)t->entry_bytes + table > t->budget) {
    t->n_dropped++;
    return NULL;
  }
  while (t->used + table + t->entry_bytes > t->budget && t->lru_head) {
    brisk_host_tier_remove(t, t->lru_head);
    t->n_evictions++;
  }
  if (t->used + table + t->entry_bytes > t->budget) { /* the table alone is too large */
    t->n_dropped++;
    return NULL;
  }
  grow_table(t);
  brisk_host_block *b = t->n_buckets ? brisk_malloc(t->entry_bytes) : NULL;
  if (!b) {
    t->n_dropped++;
    return NULL;
  }
  b->hash = hash;
  b->parent = parent;
  memcpy(block_tokens(b), tokens, (size_t)t->block_size * sizeof *tokens);
  link_in(t, b);
  return b;
}
