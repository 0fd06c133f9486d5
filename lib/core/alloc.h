/* All library allocations go through here, and so through the host's
 * allocator hook. Live bytes are counted so memory is attributable. */
#ifndef BRISK_CORE_ALLOC_H
#define BRISK_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* NULL on failure or size 0 overflow; never sets the last error. */
void *brisk_malloc(size_t size);
/* Zeroed; NULL if count * size overflows. */
void *brisk_calloc(size_t count, size_t size);
/* Like realloc; on failure returns NULL and `ptr` stays valid. */
void *brisk_realloc(void *ptr, size_t size);
void brisk_free(void *ptr);
char *brisk_strdup(const char *s);
char *brisk_strndup(const char *s, size_t n);

/* `alignment` is a power of two up to 4096. Free with brisk_aligned_free. */
void *brisk_aligned_alloc(size_t alignment, size_t size);
void brisk_aligned_free(void *ptr);

/* Growth helper for arrays: makes room for `need` elements of `elem` bytes
 * in *items (capacity in *cap), doubling. Returns 0, or -1 on overflow/OOM
 * with *items unchanged. */
int brisk_grow(void **items, size_t *cap, size_t need, size_t elem);

/* Accounting: live allocations and bytes (header included). */
uint64_t brisk_alloc_live_count(void);
uint64_t brisk_alloc_live_bytes(void);

/* Test support: make the n-th allocation attempt from now (1-based) fail,
 * and every one after it too if `sticky`; n = 0 turns injection off.
 * Returns how many allocation attempts were made since the last call, so a
 * test can learn how many allocations an operation makes. */
uint64_t brisk_alloc_fail_at(uint64_t n, int sticky);

#endif
