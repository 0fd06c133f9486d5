/* Allocator hook, accounting, failure injection, aligned allocation, arena,
 * and growth helper. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

typedef struct counting {
  int mallocs, reallocs, frees;
} counting;

static void *c_malloc(size_t n, void *u) { ((counting *)u)->mallocs++; return malloc(n); }
static void *c_realloc(void *p, size_t n, void *u) { ((counting *)u)->reallocs++; return realloc(p, n); }
static void c_free(void *p, void *u) { ((counting *)u)->frees++; free(p); }

static void test_hook_routes_every_call(void **state) {
  (void)state;
  counting c = {0};
  brisk_allocator a = {sizeof a, c_malloc, c_realloc, c_free, &c};
  assert_int_equal(brisk_set_allocator(&a), BRISK_OK);
  void *p = brisk_malloc(10);
  assert_non_null(p);
  p = brisk_realloc(p, 1000);
  assert_non_null(p);
  void *q = brisk_aligned_alloc(64, 100);
  assert_non_null(q);
  assert_int_equal((uintptr_t)q % 64, 0);
  assert_int_equal(c.mallocs, 2);
  assert_int_equal(c.reallocs, 1);
  /* While memory is held, the hook cannot change. */
  assert_int_equal(brisk_set_allocator(NULL), BRISK_E_INVALID_STATE);
  assert_non_null(strstr(brisk_last_error(), "still holds"));
  brisk_free(p);
  brisk_aligned_free(q);
  assert_int_equal(c.frees, 2);
  assert_int_equal(brisk_set_allocator(NULL), BRISK_OK);
  void *r = brisk_malloc(1);
  brisk_free(r);
  assert_int_equal(c.mallocs, 2); /* back on the C library */
}

static void test_hook_validation(void **state) {
  (void)state;
  brisk_allocator a = {sizeof a, c_malloc, NULL, c_free, NULL};
  assert_int_equal(brisk_set_allocator(&a), BRISK_E_INVALID_ARGUMENT);
  a.realloc_fn = c_realloc;
  a.struct_size = 12; /* ends inside malloc_fn: no header declares it */
  assert_int_equal(brisk_set_allocator(&a), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "struct_size"));
}

static void test_accounting(void **state) {
  (void)state;
  uint64_t bytes0 = brisk_memory_allocated(), count0 = brisk_alloc_live_count();
  void *p = brisk_malloc(1000);
  assert_true(brisk_memory_allocated() >= bytes0 + 1000);
  assert_int_equal(brisk_alloc_live_count(), count0 + 1);
  p = brisk_realloc(p, 5000);
  assert_true(brisk_memory_allocated() >= bytes0 + 5000);
  brisk_free(p);
  assert_int_equal(brisk_memory_allocated(), bytes0);
  assert_int_equal(brisk_alloc_live_count(), count0);
}

static void test_failure_injection(void **state) {
  (void)state;
  brisk_alloc_fail_at(2, 0);
  void *a = brisk_malloc(8);
  void *b = brisk_malloc(8);
  void *c = brisk_malloc(8);
  assert_non_null(a);
  assert_null(b);
  assert_non_null(c);
  /* Sticky: the 1st and every later attempt fail. */
  brisk_alloc_fail_at(1, 1);
  assert_null(brisk_malloc(8));
  assert_null(brisk_calloc(2, 8));
  assert_null(brisk_realloc(a, 100)); /* a stays valid */
  assert_int_equal(brisk_alloc_fail_at(0, 0), 3);
  memset(a, 1, 8);
  brisk_free(a);
  brisk_free(c);
}

static void test_overflow_and_edge_sizes(void **state) {
  (void)state;
  assert_null(brisk_calloc(SIZE_MAX / 2, 3));
  assert_null(brisk_malloc(SIZE_MAX));
  assert_null(brisk_aligned_alloc(3, 10)); /* not a power of two */
  assert_null(brisk_aligned_alloc(8192, 10));
  char *z = brisk_calloc(100, 3);
  for (int i = 0; i < 300; i++) assert_int_equal(z[i], 0);
  brisk_free(z);
  brisk_free(NULL);
  brisk_aligned_free(NULL);
  char *s = brisk_strdup("hello");
  assert_string_equal(s, "hello");
  brisk_free(s);
  s = brisk_strndup("hello", 3);
  assert_string_equal(s, "hel");
  brisk_free(s);
  for (size_t al = 8; al <= 4096; al *= 2) {
    unsigned char *p = brisk_aligned_alloc(al, 77);
    assert_int_equal((uintptr_t)p % al, 0);
    memset(p, 0xab, 77);
    brisk_aligned_free(p);
  }
}

static void test_grow(void **state) {
  (void)state;
  int *items = NULL;
  size_t cap = 0;
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(brisk_grow((void **)&items, &cap, (size_t)i + 1, sizeof(int)), 0);
    items[i] = i;
  }
  assert_true(cap >= 1000);
  for (int i = 0; i < 1000; i++) assert_int_equal(items[i], i);
  assert_int_equal(brisk_grow((void **)&items, &cap, SIZE_MAX / 2, sizeof(int)), -1);
  brisk_free(items);
}

static void test_arena(void **state) {
  (void)state;
  uint64_t live0 = brisk_alloc_live_count();
  brisk_arena a;
  brisk_arena_init(&a, 256);
  char *strs[100];
  for (int i = 0; i < 100; i++) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "string-%d", i);
    strs[i] = brisk_arena_strndup(&a, tmp, (size_t)n);
    assert_non_null(strs[i]);
    assert_int_equal((uintptr_t)strs[i] % 16, 0);
  }
  void *big = brisk_arena_alloc(&a, 10000); /* larger than a chunk */
  assert_non_null(big);
  memset(big, 0, 10000);
  for (int i = 0; i < 100; i++) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "string-%d", i);
    assert_string_equal(strs[i], tmp);
  }
  assert_true(a.used_bytes >= 10000);
  brisk_arena_reset(&a);
  assert_int_equal(a.used_bytes, 0);
  assert_non_null(brisk_arena_alloc(&a, 8));
  assert_null(brisk_arena_alloc(&a, SIZE_MAX - 3));
  brisk_arena_free(&a);
  assert_int_equal(brisk_alloc_live_count(), live0);
}

/* An operation that allocates several times and must unwind on any failure. */
static brisk_status three_allocs(void *ctx) {
  (void)ctx;
  brisk_arena a;
  brisk_arena_init(&a, 64);
  void *x = brisk_malloc(10);
  if (!x) return BRISK_E_OUT_OF_MEMORY;
  if (!brisk_arena_alloc(&a, 100) || !brisk_arena_alloc(&a, 100)) {
    brisk_arena_free(&a);
    brisk_free(x);
    return BRISK_E_OUT_OF_MEMORY;
  }
  brisk_arena_free(&a);
  brisk_free(x);
  return BRISK_OK;
}

static void test_every_allocation_helper(void **state) {
  (void)state;
  assert_int_equal(test_every_allocation_fails(three_allocs, NULL), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hook_routes_every_call),
      cmocka_unit_test(test_hook_validation),
      cmocka_unit_test(test_accounting),
      cmocka_unit_test(test_failure_injection),
      cmocka_unit_test(test_overflow_and_edge_sizes),
      cmocka_unit_test(test_grow),
      cmocka_unit_test(test_arena),
      cmocka_unit_test(test_every_allocation_helper),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
