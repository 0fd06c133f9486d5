/* A bump allocator for many small objects freed together (metadata strings,
 * parsed tables). Chunks come from brisk_malloc. */
#ifndef BRISK_CORE_ARENA_H
#define BRISK_CORE_ARENA_H

#include <stddef.h>

typedef struct brisk_arena_chunk brisk_arena_chunk;

typedef struct brisk_arena {
  brisk_arena_chunk *head; /* newest chunk first */
  size_t chunk_size;       /* default size of a new chunk */
  size_t used_bytes;       /* bytes handed out, for accounting */
} brisk_arena;

/* chunk_size 0 picks 64 KiB. Allocates nothing until first use. */
void brisk_arena_init(brisk_arena *arena, size_t chunk_size);
/* 16-byte aligned, uninitialized; NULL on OOM or overflow. */
void *brisk_arena_alloc(brisk_arena *arena, size_t size);
/* Copies n bytes and appends a NUL. */
char *brisk_arena_strndup(brisk_arena *arena, const char *s, size_t n);
/* Frees all chunks but the newest and rewinds it; pointers become invalid. */
void brisk_arena_reset(brisk_arena *arena);
void brisk_arena_free(brisk_arena *arena);

#endif
