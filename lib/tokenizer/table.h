/* Hash tables for the tokenizers: an interning string table (token texts and
 * the extra strings BPE merges name, each with a dense id) and a map from
 * 64-bit keys (pairs of ids) to int32 values. Open addressing, linear
 * probing, sized to at most half full; all memory through brisk_malloc. */
#ifndef BRISK_TOKENIZER_TABLE_H
#define BRISK_TOKENIZER_TABLE_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_strtab {
  char *pool; /* [pool_len] all strings, each followed by a NUL */
  size_t pool_len, pool_cap;
  size_t *off;    /* [n] start of string i in pool */
  uint32_t *len;  /* [n] its length in bytes */
  uint32_t *hash; /* [n] its hash */
  size_t n, cap;
  int32_t *slots; /* [n_slots] string id or -1 */
  size_t n_slots;
} brisk_strtab;

void brisk_strtab_init(brisk_strtab *t);
void brisk_strtab_free(brisk_strtab *t);
/* Appends a string as id t->n, even if equal text exists; lookups then find
 * the newest (the last duplicate wins, as in llama.cpp). */
brisk_status brisk_strtab_append(brisk_strtab *t, const char *s, size_t len, int32_t *id);
/* Returns the id of an equal string, adding it if absent. */
brisk_status brisk_strtab_intern(brisk_strtab *t, const char *s, size_t len, int32_t *id);
/* -1 if absent. */
int32_t brisk_strtab_find(const brisk_strtab *t, const char *s, size_t len);
static inline const char *brisk_strtab_str(const brisk_strtab *t, int32_t id) {
  return t->pool + t->off[id];
}

typedef struct brisk_u64map {
  uint64_t *keys; /* [n_slots] */
  int32_t *vals;  /* [n_slots] value, -1 = empty slot */
  size_t n, n_slots;
} brisk_u64map;

void brisk_u64map_init(brisk_u64map *m);
void brisk_u64map_free(brisk_u64map *m);
/* Sets key -> val (val >= 0); replaces an existing value unless keep_first. */
brisk_status brisk_u64map_put(brisk_u64map *m, uint64_t key, int32_t val, bool keep_first);
/* -1 if absent. */
int32_t brisk_u64map_get(const brisk_u64map *m, uint64_t key);

static inline uint64_t brisk_pair_key(int32_t a, int32_t b) {
  return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

#endif
