/* The prefix cache's host-memory tier: copies of published KV blocks the
 * pool evicted, kept in host memory under their chain hash within a byte
 * budget, least recently used first out. A block's copy is made when the
 * pool evicts it and moves back when a prefix lookup misses the pool, so a
 * prefix larger than the pool comes back by copying instead of being
 * recomputed. The tier is exclusive of the pool (a block moved back leaves
 * it), so pool and tier together hold as many blocks as they have room
 * for, and moving a block back always has room for the one the pool
 * evicts for it. Blocks are immutable once published and equal chain
 * hashes (with equal parent and tokens, compared) mean equal K/V, so the
 * tier holds one copy per chain position however many times it was
 * computed. The budget covers everything the tier holds: each entry's K/V
 * bytes, its index record (hashes, links, token ids) and the hash table.
 * This file keeps the index only; the K/V bytes are copied by the KV
 * manager's caller. */
#ifndef BRISK_KV_HOST_TIER_H
#define BRISK_KV_HOST_TIER_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_host_block brisk_host_block;

typedef struct brisk_host_tier {
  int32_t block_size;
  size_t data_bytes;  /* K/V bytes of one block, all layers */
  size_t entry_bytes; /* one entry: its record, token ids and data */
  uint64_t budget;    /* 0: the tier is off */
  uint64_t used;      /* entries plus the hash table, in bytes */
  uint64_t n_blocks;
  brisk_host_block **bucket;             /* [n_buckets] chains of entries, NULL ends one */
  uint32_t n_buckets;                    /* 0 or a power of two */
  brisk_host_block *lru_head, *lru_tail; /* head: the next one evicted */
  uint64_t n_hits;                       /* blocks brought back into the pool */
  uint64_t n_misses;    /* lookups of a block the pool lacked that the tier lacked too */
  uint64_t n_evictions; /* entries dropped to make room */
  uint64_t n_stored;    /* blocks copied in */
  uint64_t n_dedup;     /* evicted blocks the tier already held */
  uint64_t n_dropped;   /* blocks not kept: no memory, too large, a failed copy */
} brisk_host_tier;

/* A tier for blocks of block_size tokens and data_bytes of K/V within
 * `budget` bytes (0: off). Allocates nothing. */
void brisk_host_tier_init(brisk_host_tier *t, int32_t block_size, size_t data_bytes,
                          uint64_t budget);
void brisk_host_tier_destroy(brisk_host_tier *t);
static inline bool brisk_host_tier_on(const brisk_host_tier *t) { return t->budget > 0; }

/* The entry holding tokens[0 .. block_size) under chain hash `hash` after a
 * block hashed `parent`, or NULL. */
brisk_host_block *brisk_host_tier_find(const brisk_host_tier *t, uint64_t hash, uint64_t parent,
                                       const int32_t *tokens);
/* A new entry for that block, most recently used, whose data the caller
 * fills (brisk_host_tier_data); least recently used entries are evicted to
 * make room. NULL when it cannot be kept (an entry larger than the budget,
 * or no memory): the block is simply not kept. The caller checked that no
 * such entry exists. */
brisk_host_block *brisk_host_tier_add(brisk_host_tier *t, uint64_t hash, uint64_t parent,
                                      const int32_t *tokens);
/* Drops an entry (its copy failed). */
void brisk_host_tier_remove(brisk_host_tier *t, brisk_host_block *b);
/* Takes an entry out of the tier (its bytes no longer count) for the caller
 * to copy back, then brisk_host_tier_release it, or brisk_host_tier_attach
 * it again (a failed copy): most recently used, if it still fits, else it
 * is freed (dropped). */
void brisk_host_tier_detach(brisk_host_tier *t, brisk_host_block *b);
void brisk_host_tier_attach(brisk_host_tier *t, brisk_host_block *b);
void brisk_host_tier_release(brisk_host_block *b);
/* Makes it the most recently used. */
void brisk_host_tier_touch(brisk_host_tier *t, brisk_host_block *b);
/* The K/V bytes of an entry (data_bytes of them). */
unsigned char *brisk_host_tier_data(const brisk_host_tier *t, brisk_host_block *b);
/* Bytes of the index: entry records, token ids and the hash table. */
uint64_t brisk_host_tier_index_bytes(const brisk_host_tier *t);

#endif
