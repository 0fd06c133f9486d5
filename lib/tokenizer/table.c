#include "tokenizer/table.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

static uint32_t str_hash(const char *s, size_t len) {
  return (uint32_t)brisk_hash64(s, len, 0x9E3779B97F4A7C15ull);
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

void brisk_strtab_init(brisk_strtab *t) { memset(t, 0, sizeof *t); }

void brisk_strtab_free(brisk_strtab *t) {
  brisk_free(t->pool);
  brisk_free(t->off);
  brisk_free(t->len);
  brisk_free(t->hash);
  brisk_free(t->slots);
  memset(t, 0, sizeof *t);
}

static int32_t strtab_lookup(const brisk_strtab *t, const char *s, size_t len, uint32_t h,
                             size_t *slot_out) {
  size_t mask = t->n_slots - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    int32_t id = t->slots[i];
    if (id < 0) {
      if (slot_out) *slot_out = i;
      return -1;
    }
    if (t->hash[id] == h && t->len[id] == len && memcmp(t->pool + t->off[id], s, len) == 0) {
      if (slot_out) *slot_out = i;
      return id;
    }
  }
}

static brisk_status strtab_rehash(brisk_strtab *t, size_t n_slots) {
  int32_t *slots = brisk_malloc(n_slots * sizeof *slots);
  if (!slots) return brisk_error_oom();
  memset(slots, 0xFF, n_slots * sizeof *slots);
  brisk_free(t->slots);
  t->slots = slots;
  t->n_slots = n_slots;
  /* Re-insert in id order so that, among duplicates, the newest wins. */
  for (size_t id = 0; id < t->n; id++) {
    size_t slot;
    strtab_lookup(t, t->pool + t->off[id], t->len[id], t->hash[id], &slot);
    t->slots[slot] = (int32_t)id;
  }
  return BRISK_OK;
}

int32_t brisk_strtab_find(const brisk_strtab *t, const char *s, size_t len) {
  if (t->n_slots == 0) return -1;
  return strtab_lookup(t, s, len, str_hash(s, len), NULL);
}

static brisk_status strtab_add(brisk_strtab *t, const char *s, size_t len, uint32_t h,
                               int32_t *id) {
  if (len > UINT32_MAX || t->n >= INT32_MAX - 1)
    return brisk_error(BRISK_E_FORMAT, "tokenizer: string table too large (%zu strings)", t->n);
  if ((t->n + 1) * 2 > t->n_slots) {
    size_t want = t->n_slots ? t->n_slots * 2 : 64;
    if (want < t->n_slots) return brisk_error_oom();
    brisk_status st = strtab_rehash(t, want);
    if (st != BRISK_OK) return st;
  }
  size_t need;
  if (brisk_add_overflow_size(t->pool_len, len + 1, &need)) return brisk_error_oom();
  if (brisk_grow((void **)&t->pool, &t->pool_cap, need, 1) != 0) return brisk_error_oom();
  /* Grow the three parallel arrays to one shared capacity. */
  if (t->n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    size_t *off = brisk_realloc(t->off, cap * sizeof *off);
    if (!off) return brisk_error_oom();
    t->off = off;
    uint32_t *ln = brisk_realloc(t->len, cap * sizeof *ln);
    if (!ln) return brisk_error_oom();
    t->len = ln;
    uint32_t *hs = brisk_realloc(t->hash, cap * sizeof *hs);
    if (!hs) return brisk_error_oom();
    t->hash = hs;
    t->cap = cap;
  }
  if (len) memcpy(t->pool + t->pool_len, s, len);
  t->pool[t->pool_len + len] = '\0';
  t->off[t->n] = t->pool_len;
  t->len[t->n] = (uint32_t)len;
  t->hash[t->n] = h;
  t->pool_len = need;
  size_t slot;
  strtab_lookup(t, s, len, h, &slot);
  t->slots[slot] = (int32_t)t->n;
  *id = (int32_t)t->n++;
  return BRISK_OK;
}

brisk_status brisk_strtab_append(brisk_strtab *t, const char *s, size_t len, int32_t *id) {
  return strtab_add(t, s, len, str_hash(s, len), id);
}

brisk_status brisk_strtab_intern(brisk_strtab *t, const char *s, size_t len, int32_t *id) {
  uint32_t h = str_hash(s, len);
  if (t->n_slots) {
    int32_t found = strtab_lookup(t, s, len, h, NULL);
    if (found >= 0) {
      *id = found;
      return BRISK_OK;
    }
  }
  return strtab_add(t, s, len, h, id);
}

void brisk_u64map_init(brisk_u64map *m) { memset(m, 0, sizeof *m); }

void brisk_u64map_free(brisk_u64map *m) {
  brisk_free(m->keys);
  brisk_free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t u64map_slot(const brisk_u64map *m, uint64_t key) {
  size_t mask = m->n_slots - 1;
  size_t i = (size_t)mix64(key) & mask;
  while (m->vals[i] >= 0 && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

static brisk_status u64map_resize(brisk_u64map *m, size_t n_slots) {
  uint64_t *keys = brisk_malloc(n_slots * sizeof *keys);
  int32_t *vals = brisk_malloc(n_slots * sizeof *vals);
  if (!keys || !vals) {
    brisk_free(keys);
    brisk_free(vals);
    return brisk_error_oom();
  }
  memset(vals, 0xFF, n_slots * sizeof *vals);
  brisk_u64map old = *m;
  m->keys = keys;
  m->vals = vals;
  m->n_slots = n_slots;
  for (size_t i = 0; i < old.n_slots; i++) {
    if (old.vals[i] < 0) continue;
    size_t s = u64map_slot(m, old.keys[i]);
    m->keys[s] = old.keys[i];
    m->vals[s] = old.vals[i];
  }
  brisk_free(old.keys);
  brisk_free(old.vals);
  return BRISK_OK;
}

brisk_status brisk_u64map_put(brisk_u64map *m, uint64_t key, int32_t val, bool keep_first) {
  if ((m->n + 1) * 2 > m->n_slots) {
    size_t want = m->n_slots ? m->n_slots * 2 : 64;
    if (want < m->n_slots || want > SIZE_MAX / sizeof(uint64_t)) return brisk_error_oom();
    brisk_status st = u64map_resize(m, want);
    if (st != BRISK_OK) return st;
  }
  size_t s = u64map_slot(m, key);
  if (m->vals[s] >= 0) {
    if (!keep_first) m->vals[s] = val;
    return BRISK_OK;
  }
  m->keys[s] = key;
  m->vals[s] = val;
  m->n++;
  return BRISK_OK;
}

int32_t brisk_u64map_get(const brisk_u64map *m, uint64_t key) {
  if (m->n_slots == 0) return -1;
  return m->vals[u64map_slot(m, key)];
}
