#include "core/arena.h"

#include "core/alloc.h"

#include <stdint.h>
#include <string.h>

struct brisk_arena_chunk {
  brisk_arena_chunk *next;
  size_t size; /* usable bytes in data */
  size_t used;
  _Alignas(16) unsigned char data[];
};

void brisk_arena_init(brisk_arena *arena, size_t chunk_size) {
  arena->head = NULL;
  arena->chunk_size = chunk_size ? chunk_size : 64 * 1024;
  arena->used_bytes = 0;
}

void *brisk_arena_alloc(brisk_arena *arena, size_t size) {
  if (size > SIZE_MAX - 15) return NULL;
  size_t need = (size + 15) & ~(size_t)15;
  brisk_arena_chunk *c = arena->head;
  if (!c || c->size - c->used < need) {
    size_t cap = need > arena->chunk_size ? need : arena->chunk_size;
    if (cap > SIZE_MAX - sizeof *c) return NULL;
    c = brisk_malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->size = cap;
    c->used = 0;
    c->next = arena->head;
    arena->head = c;
  }
  void *p = c->data + c->used;
  c->used += need;
  arena->used_bytes += need;
  return p;
}

char *brisk_arena_strndup(brisk_arena *arena, const char *s, size_t n) {
  if (n == SIZE_MAX) return NULL;
  char *d = brisk_arena_alloc(arena, n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = 0;
  return d;
}

void brisk_arena_reset(brisk_arena *arena) {
  brisk_arena_chunk *c = arena->head;
  if (!c) return;
  brisk_arena_chunk *rest = c->next;
  while (rest) {
    brisk_arena_chunk *next = rest->next;
    brisk_free(rest);
    rest = next;
  }
  c->next = NULL;
  c->used = 0;
  arena->used_bytes = 0;
}

void brisk_arena_free(brisk_arena *arena) {
  brisk_arena_chunk *c = arena->head;
  while (c) {
    brisk_arena_chunk *next = c->next;
    brisk_free(c);
    c = next;
  }
  arena->head = NULL;
  arena->used_bytes = 0;
}
