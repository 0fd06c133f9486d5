/* Private to lib/format/gguf_*.c: the reader's handle and the name index
 * shared by the reader (keys, tensor names) and the writer (duplicates). */
#ifndef BRISK_FORMAT_GGUF_INTERNAL_H
#define BRISK_FORMAT_GGUF_INTERNAL_H

#include "format/gguf.h"

#include "core/arena.h"

#include <stddef.h>
#include <stdint.h>

/* Open-addressing hash index from a name to its position in some array.
 * The names themselves stay in that array; name_of reads them back. */
typedef const char *(*brisk_gguf_name_fn)(const void *ctx, int64_t i);
typedef struct brisk_gguf_slot {
  uint64_t hash;
  int64_t index; /* -1: empty */
} brisk_gguf_slot;
typedef struct brisk_gguf_index {
  brisk_gguf_slot *slots; /* [cap], cap a power of two or 0 */
  size_t cap;
  size_t count;
} brisk_gguf_index;

uint64_t brisk_gguf_name_hash(const char *name);
/* Makes room for `n` names in total (load factor <= 1/2); 0, or -1 on OOM
 * or overflow with the index unchanged. */
int brisk_gguf_index_reserve(brisk_gguf_index *idx, size_t n);
/* Position of `name`, or -1. */
int64_t brisk_gguf_index_find(const brisk_gguf_index *idx, const char *name, uint64_t hash,
                              brisk_gguf_name_fn name_of, const void *ctx);
/* Adds position i under `hash`; room must have been reserved. */
void brisk_gguf_index_put(brisk_gguf_index *idx, uint64_t hash, int64_t i);
void brisk_gguf_index_free(brisk_gguf_index *idx);

/* One metadata entry. Strings are NUL-terminated copies in the arena;
 * numeric arrays point into the file. */
typedef struct brisk_gguf_kv {
  const char *key;
  brisk_gguf_type type;
  brisk_gguf_type elem_type;  /* arrays only */
  uint64_t n;                 /* arrays only: element count */
  unsigned char scalar[8];    /* scalars: raw little-endian bytes, zero-padded */
  brisk_gguf_str str;         /* STRING */
  const unsigned char *arr;   /* numeric arrays: [n][type size] in the file */
  const brisk_gguf_str *strs; /* string arrays: [n], in the arena */
} brisk_gguf_kv;

typedef enum brisk_gguf_storage {
  BRISK_GGUF_STORAGE_CALLER = 0, /* open_memory: the caller's buffer */
  BRISK_GGUF_STORAGE_MAPPED = 1, /* mmap of the file */
  BRISK_GGUF_STORAGE_HEAP = 2,   /* brisk_aligned_alloc'ed copy of the file */
} brisk_gguf_storage;

struct brisk_gguf {
  const unsigned char *base; /* [size] the whole file */
  uint64_t size;
  brisk_gguf_storage storage;
  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset;
  brisk_gguf_kv *kvs; /* [n_kv] in file order */
  size_t n_kv, kv_cap;
  brisk_gguf_tensor *tensors; /* [n_tensors] in file order */
  size_t n_tensors, tensor_cap;
  brisk_gguf_index key_index;
  brisk_gguf_index tensor_index;
  brisk_arena arena; /* keys, names, strings */
};

const char *brisk_gguf_kv_name(const void *g, int64_t i);
const char *brisk_gguf_tensor_name(const void *g, int64_t i);

#endif
