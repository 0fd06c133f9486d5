/* The memory cap's accounts: the process-wide limit, limits that nest,
 * all-or-nothing charges, frees on other threads, an account outliving its
 * owner until its last block is freed, realloc over a limit, and the thread
 * pool and the host parallel_for hook charging the caller's account. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/memcap.h"
#include "core/threadpool.h"
#include "format/json.h"

#include <pthread.h>
#include <string.h>

static int teardown(void **state) {
  (void)state;
  brisk_set_memory_limit(0);
  return 0;
}

static void test_process_limit(void **state) {
  (void)state;
  const uint64_t base = brisk_memory_used();
  assert_int_equal(brisk_set_memory_limit(base + 4096), BRISK_OK);
  assert_int_equal(brisk_memory_limit(), base + 4096);
  void *big = brisk_malloc(8192);
  assert_null(big);
  assert_int_equal(brisk_error_oom(), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "process-wide memory limit"));
  assert_int_equal(brisk_memory_used(), base); /* nothing charged by the failure */
  void *small = brisk_malloc(1000);
  assert_non_null(small);
  assert_int_equal(brisk_memory_used(), base + 1000 + 16);
  /* A failure of the allocator itself is not a limit's. */
  brisk_alloc_fail_at(1, 0);
  assert_null(brisk_malloc(8));
  brisk_alloc_fail_at(0, 0);
  brisk_error_oom();
  assert_string_equal(brisk_last_error(), "out of memory");
  brisk_free(small);
  assert_int_equal(brisk_memory_used(), base);
  assert_int_equal(brisk_set_memory_limit(0), BRISK_OK);
  void *p = brisk_malloc(1 << 20);
  assert_non_null(p);
  brisk_free(p);
}

static void test_nested_accounts(void **state) {
  (void)state;
  const uint64_t base = brisk_memory_used();
  brisk_mem_account *outer = NULL, *inner = NULL;
  assert_int_equal(brisk_mem_account_create(10000, "outer", &outer), BRISK_OK);
  brisk_mem_account *prev = brisk_mem_enter(outer);
  assert_int_equal(brisk_mem_account_create(0, "inner", &inner), BRISK_OK);
  /* The inner account's own memory is charged to the outer one. */
  const uint64_t outer0 = brisk_mem_account_used(outer);
  assert_true(outer0 > 0);
  brisk_mem_enter(inner);
  void *a = brisk_malloc(4000);
  assert_non_null(a);
  assert_int_equal(brisk_mem_account_used(inner), 4016);
  assert_int_equal(brisk_mem_account_used(outer), outer0 + 4016);
  /* The inner account has no limit of its own, the outer one stops it. */
  void *b = brisk_malloc(8000);
  assert_null(b);
  brisk_error_oom();
  assert_non_null(strstr(brisk_last_error(), "the outer memory limit of 10000 bytes"));
  assert_int_equal(brisk_mem_account_used(inner), 4016); /* all or nothing */
  /* realloc past the limit keeps the block, growing within it moves the charge. */
  assert_null(brisk_realloc(a, 11000));
  void *a2 = brisk_realloc(a, 5000);
  assert_non_null(a2);
  assert_int_equal(brisk_mem_account_used(inner), 5016);
  a2 = brisk_realloc(a2, 100);
  assert_non_null(a2);
  assert_int_equal(brisk_mem_account_used(inner), 116);
  brisk_mem_leave(prev);
  /* Outside the scope, allocations are the process-wide account's only. */
  void *c = brisk_malloc(100000);
  assert_non_null(c);
  assert_int_equal(brisk_mem_account_used(outer), outer0 + 116);
  brisk_free(c);
  /* The owners let go first; the accounts live on until their last block. */
  brisk_mem_account_release(outer);
  brisk_mem_account_release(inner);
  assert_int_equal(brisk_mem_account_used(inner), 116);
  brisk_free(a2); /* frees inner, then outer (ASan checks both) */
  assert_int_equal(brisk_memory_used(), base);
}

static void test_charge(void **state) {
  (void)state;
  brisk_mem_account *a = NULL;
  assert_int_equal(brisk_mem_account_create(1000, "test's", &a), BRISK_OK);
  assert_int_equal(brisk_mem_charge(a, 600), 0);
  assert_int_equal(brisk_mem_charge(a, 600), -1);
  assert_int_equal(brisk_mem_charge(a, UINT64_MAX), -1); /* no wrap-around */
  assert_int_equal(brisk_mem_account_used(a), 600);
  brisk_mem_account_set_limit(a, 100); /* below what is held: later charges fail */
  assert_int_equal(brisk_mem_charge(a, 1), -1);
  brisk_mem_account_set_limit(a, 0);
  assert_int_equal(brisk_mem_charge(a, 1), 0);
  brisk_mem_account_release(a); /* the charges keep it */
  brisk_mem_uncharge(a, 1);
  brisk_mem_uncharge(a, 600); /* the last reference */
}

typedef struct freer {
  void *p;
} freer;

static void *free_elsewhere(void *arg) {
  brisk_free(((freer *)arg)->p);
  return NULL;
}

static void test_free_on_another_thread(void **state) {
  (void)state;
  brisk_mem_account *a = NULL;
  assert_int_equal(brisk_mem_account_create(0, "test's", &a), BRISK_OK);
  brisk_mem_account *prev = brisk_mem_enter(a);
  freer f = {brisk_malloc(5000)};
  brisk_mem_leave(prev);
  assert_int_equal(brisk_mem_account_used(a), 5016);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, free_elsewhere, &f), 0);
  pthread_join(t, NULL);
  assert_int_equal(brisk_mem_account_used(a), 0);
  brisk_mem_account_release(a);
}

typedef struct task_ctx {
  void *blocks[64];
} task_ctx;

static void alloc_task(void *ctx, size_t i) { ((task_ctx *)ctx)->blocks[i] = brisk_malloc(1000); }

typedef struct host_job {
  size_t n;
  brisk_task_fn task;
  void *ctx;
} host_job;

static void *host_thread(void *arg) {
  host_job *j = arg;
  for (size_t i = 0; i < j->n; i++) j->task(j->ctx, i);
  return NULL;
}

/* The host's job system: every task on a thread of its own. */
static void host_loop(void *user, size_t n, brisk_task_fn task, void *ctx) {
  (void)user;
  host_job j = {n, task, ctx};
  pthread_t t;
  if (pthread_create(&t, NULL, host_thread, &j) == 0) pthread_join(t, NULL);
}

static void parallel_charges(int host) {
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(4, &pool), BRISK_OK);
  if (host) assert_int_equal(brisk_set_parallel_for(host_loop, NULL, 4), BRISK_OK);
  brisk_mem_account *a = NULL;
  assert_int_equal(brisk_mem_account_create(0, "test's", &a), BRISK_OK);
  brisk_mem_account *prev = brisk_mem_enter(a);
  task_ctx tc = {{0}};
  brisk_parallel_for(pool, 64, alloc_task, &tc);
  brisk_mem_leave(prev);
  /* Every task's block is charged to the caller's account, whichever
   * thread ran it. */
  assert_int_equal(brisk_mem_account_used(a), 64 * 1016);
  for (int i = 0; i < 64; i++) brisk_free(tc.blocks[i]);
  assert_int_equal(brisk_mem_account_used(a), 0);
  brisk_mem_account_release(a);
  if (host) assert_int_equal(brisk_set_parallel_for(NULL, NULL, 1), BRISK_OK);
  brisk_threadpool_free(pool);
}

static void test_pool_charges_caller(void **state) {
  (void)state;
  parallel_charges(0);
}

static void test_host_hook_charges_caller(void **state) {
  (void)state;
  parallel_charges(1);
}

/* json-c allocates its trees with malloc; a parse charges a bound of the
 * tree to the current account while the tree lives. */
static void test_json_tree_charged(void **state) {
  (void)state;
  const char text[] = "{\"vocab\": {\"a\": 1, \"b\": 2, \"c\": 3}, \"merges\": [\"a b\", \"b c\"]}";
  const size_t len = sizeof text - 1;
  brisk_mem_account *a = NULL;
  assert_int_equal(brisk_mem_account_create(0, "test's", &a), BRISK_OK);
  brisk_mem_account *prev = brisk_mem_enter(a);
  struct json_object *tree = NULL;
  assert_int_equal(brisk_json_parse(text, len, true, "test", &tree), BRISK_OK);
  const uint64_t held = brisk_mem_account_used(a);
  assert_true(held >= 16 * len);
  brisk_mem_leave(prev);
  brisk_json_free(tree); /* on "another thread's" scope: the charge goes back all the same */
  assert_int_equal(brisk_mem_account_used(a), 0);
  /* Under a limit the bound does not fit in, the parse is refused. */
  brisk_mem_account_set_limit(a, held / 2);
  prev = brisk_mem_enter(a);
  tree = NULL;
  assert_int_equal(brisk_json_parse(text, len, true, "test", &tree), BRISK_E_OUT_OF_MEMORY);
  assert_null(tree);
  assert_non_null(strstr(brisk_last_error(), "test's memory limit"));
  brisk_mem_leave(prev);
  assert_int_equal(brisk_mem_account_used(a), 0);
  brisk_mem_account_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_process_limit, teardown),
      cmocka_unit_test_teardown(test_nested_accounts, teardown),
      cmocka_unit_test_teardown(test_charge, teardown),
      cmocka_unit_test_teardown(test_free_on_another_thread, teardown),
      cmocka_unit_test_teardown(test_pool_charges_caller, teardown),
      cmocka_unit_test_teardown(test_host_hook_charges_caller, teardown),
      cmocka_unit_test_teardown(test_json_tree_charged, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
