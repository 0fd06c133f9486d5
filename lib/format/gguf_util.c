/* GGUF value-type table and the name hash index. */
#include "format/gguf_internal.h"
#include "core/utf8.h"

#include "core/alloc.h"
#include "core/hash.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size;
} value_types[] = {
    [BRISK_GGUF_UINT8] = {"u8", 1},      [BRISK_GGUF_INT8] = {"i8", 1},
    [BRISK_GGUF_UINT16] = {"u16", 2},    [BRISK_GGUF_INT16] = {"i16", 2},
    [BRISK_GGUF_UINT32] = {"u32", 4},    [BRISK_GGUF_INT32] = {"i32", 4},
    [BRISK_GGUF_FLOAT32] = {"f32", 4},   [BRISK_GGUF_BOOL] = {"bool", 1},
    [BRISK_GGUF_STRING] = {"string", 0}, [BRISK_GGUF_ARRAY] = {"array", 0},
    [BRISK_GGUF_UINT64] = {"u64", 8},    [BRISK_GGUF_INT64] = {"i64", 8},
    [BRISK_GGUF_FLOAT64] = {"f64", 8},
};
#define N_VALUE_TYPES (sizeof value_types / sizeof value_types[0])

size_t brisk_gguf_type_size(brisk_gguf_type type) {
  return (unsigned)type < N_VALUE_TYPES ? value_types[type].size : 0;
}

const char *brisk_gguf_type_name(brisk_gguf_type type) {
  return (unsigned)type < N_VALUE_TYPES ? value_types[type].name : "unknown";
}


bool brisk_gguf_name_valid(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
  return brisk_utf8_valid(s, len);
}

uint64_t brisk_gguf_name_hash(const char *name) { return brisk_hash64(name, strlen(name), 0); }

int brisk_gguf_index_reserve(brisk_gguf_index *idx, size_t n) {
  if (n <= idx->cap / 2) return 0;
  size_t cap = idx->cap ? idx->cap : 16;
  while (cap / 2 < n) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  if (cap > SIZE_MAX / sizeof(brisk_gguf_slot)) return -1;
  brisk_gguf_slot *slots = brisk_malloc(cap * sizeof *slots); /* [cap] */
  if (!slots) return -1;
  for (size_t i = 0; i < cap; i++) slots[i].index = -1;
  /* Rehash what is there: positions move, names do not. */
  for (size_t i = 0; i < idx->cap; i++) {
    if (idx->slots[i].index < 0) continue;
    size_t j = idx->slots[i].hash & (cap - 1);
    while (slots[j].index >= 0) j = (j + 1) & (cap - 1);
    slots[j] = idx->slots[i];
  }
  brisk_free(idx->slots);
  idx->slots = slots;
  idx->cap = cap;
  return 0;
}

int64_t brisk_gguf_index_find(const brisk_gguf_index *idx, const char *name, uint64_t hash,
                              brisk_gguf_name_fn name_of, const void *ctx) {
  if (!idx->cap) return -1;
  for (size_t j = hash & (idx->cap - 1);; j = (j + 1) & (idx->cap - 1)) {
    const brisk_gguf_slot *s = &idx->slots[j];
    if (s->index < 0) return -1;
    if (s->hash == hash && strcmp(name_of(ctx, s->index), name) == 0) return s->index;
  }
}

void brisk_gguf_index_put(brisk_gguf_index *idx, uint64_t hash, int64_t i) {
  size_t j = hash & (idx->cap - 1);
  while (idx->slots[j].index >= 0) j = (j + 1) & (idx->cap - 1);
  idx->slots[j].hash = hash;
  idx->slots[j].index = i;
  idx->count++;
}

void brisk_gguf_index_free(brisk_gguf_index *idx) {
  brisk_free(idx->slots);
  idx->slots = NULL;
  idx->cap = idx->count = 0;
}
