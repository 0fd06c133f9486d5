#include "core/alloc.h"

#include "core/abi.h"
#include "core/error.h"
#include "core/memcap.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Every block carries a 16-byte header with its size and the memory account
 * it is charged to (core/memcap.h), so that live bytes can be accounted
 * without the host allocator's help, a free on any thread uncharges the
 * right account, and user memory keeps malloc's 16-byte alignment. */
typedef struct alloc_header {
  uint64_t size;
  union {
    brisk_mem_account *account;
    uint64_t pad;
  } u;
} alloc_header;
_Static_assert(sizeof(alloc_header) == 16, "the header keeps 16-byte alignment");

static void *default_malloc(size_t size, void *user) { (void)user; return malloc(size); }
static void *default_realloc(void *p, size_t size, void *user) { (void)user; return realloc(p, size); }
static void default_free(void *p, void *user) { (void)user; free(p); }

static brisk_allocator hook = {sizeof(brisk_allocator), default_malloc, default_realloc,
                               default_free, NULL};

static _Atomic uint64_t live_count;
static _Atomic uint64_t live_bytes;
static _Atomic uint64_t attempts;
static _Atomic uint64_t fail_at;
static _Atomic int fail_sticky;

static int injected_failure(void) {
  uint64_t n = atomic_fetch_add(&attempts, 1) + 1;
  uint64_t at = atomic_load(&fail_at);
  if (at == 0) return 0;
  return n == at || (n > at && atomic_load(&fail_sticky));
}

uint64_t brisk_alloc_fail_at(uint64_t n, int sticky) {
  atomic_store(&fail_sticky, sticky);
  atomic_store(&fail_at, n);
  return atomic_exchange(&attempts, 0);
}

uint64_t brisk_alloc_live_count(void) { return atomic_load(&live_count); }
uint64_t brisk_alloc_live_bytes(void) { return atomic_load(&live_bytes); }
BRISK_API uint64_t brisk_memory_allocated(void) { return atomic_load(&live_bytes); }

BRISK_API brisk_status brisk_set_allocator(const brisk_allocator *allocator) {
  brisk_allocator a = {0};
  if (allocator) {
    brisk_status st = brisk_abi_read(&brisk_abi_allocator, allocator, &a);
    if (st) return st;
    allocator = &a;
    if (!allocator->malloc_fn || !allocator->realloc_fn || !allocator->free_fn)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_allocator has a NULL function");
  }
  if (atomic_load(&live_count) != 0)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "brisk_set_allocator: the library still holds %llu allocations",
                       (unsigned long long)atomic_load(&live_count));
  if (allocator) {
    hook = *allocator;
    hook.struct_size = sizeof(brisk_allocator);
  } else {
    hook = (brisk_allocator){sizeof(brisk_allocator), default_malloc, default_realloc,
                             default_free, NULL};
  }
  return BRISK_OK;
}

void *brisk_malloc(size_t size) {
  if (size > SIZE_MAX - sizeof(alloc_header) || injected_failure()) {
    brisk_mem_clear_hit();
    return NULL;
  }
  brisk_mem_account *a = brisk_mem_current();
  if (brisk_mem_charge(a, size + sizeof(alloc_header))) return NULL;
  alloc_header *h = hook.malloc_fn(size + sizeof *h, hook.user_data);
  if (!h) {
    brisk_mem_uncharge(a, size + sizeof(alloc_header));
    brisk_mem_clear_hit();
    return NULL;
  }
  h->size = size;
  h->u.account = a;
  atomic_fetch_add(&live_count, 1);
  atomic_fetch_add(&live_bytes, size + sizeof *h);
  return h + 1;
}

void *brisk_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return NULL;
  void *p = brisk_malloc(total);
  if (p) memset(p, 0, total);
  return p;
}

void *brisk_realloc(void *ptr, size_t size) {
  if (!ptr) return brisk_malloc(size);
  if (size > SIZE_MAX - sizeof(alloc_header) || injected_failure()) {
    brisk_mem_clear_hit();
    return NULL;
  }
  alloc_header *old = (alloc_header *)ptr - 1;
  uint64_t old_size = old->size;
  brisk_mem_account *a = old->u.account;
  if (brisk_mem_recharge(a, old_size, size)) return NULL;
  alloc_header *h = hook.realloc_fn(old, size + sizeof *h, hook.user_data);
  if (!h) {
    brisk_mem_recharge(a, size, old_size);
    brisk_mem_clear_hit();
    return NULL;
  }
  h->size = size;
  atomic_fetch_sub(&live_bytes, old_size);
  atomic_fetch_add(&live_bytes, size);
  return h + 1;
}

void brisk_free(void *ptr) {
  if (!ptr) return;
  alloc_header *h = (alloc_header *)ptr - 1;
  brisk_mem_account *a = h->u.account;
  uint64_t bytes = h->size + sizeof *h;
  atomic_fetch_sub(&live_count, 1);
  atomic_fetch_sub(&live_bytes, bytes);
  hook.free_fn(h, hook.user_data);
  /* Last: this may free the account, and with it call brisk_free again. */
  brisk_mem_uncharge(a, bytes);
}

char *brisk_strndup(const char *s, size_t n) {
  char *d = brisk_malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *brisk_strdup(const char *s) { return brisk_strndup(s, strlen(s)); }

void *brisk_aligned_alloc(size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || alignment > 4096 || (alignment & (alignment - 1))) return NULL;
  if (size > SIZE_MAX - alignment - sizeof(void *)) return NULL;
  unsigned char *raw = brisk_malloc(size + alignment + sizeof(void *));
  if (!raw) return NULL;
  uintptr_t p = ((uintptr_t)raw + sizeof(void *) + alignment - 1) & ~(uintptr_t)(alignment - 1);
  ((void **)p)[-1] = raw;
  return (void *)p;
}

void brisk_aligned_free(void *ptr) {
  if (ptr) brisk_free(((void **)ptr)[-1]);
}

int brisk_grow(void **items, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 8;
  while (n < need) {
    if (n > SIZE_MAX / 2) return -1;
    n *= 2;
  }
  size_t bytes;
  if (__builtin_mul_overflow(n, elem, &bytes)) return -1;
  void *p = brisk_realloc(*items, bytes);
  if (!p) return -1;
  *items = p;
  *cap = n;
  return 0;
}
