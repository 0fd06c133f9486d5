/* The thread pool runs every index exactly once, for many sizes and thread
 * counts, back to back (the generation handoff), and the host hook replaces
 * it when installed. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct counts {
  _Atomic int *hits;
  _Atomic long sum;
} counts;

static void count_task(void *ctx, size_t i) {
  counts *c = ctx;
  atomic_fetch_add(&c->hits[i], 1);
  atomic_fetch_add(&c->sum, (long)i);
}

static void check_exactly_once(brisk_threadpool *pool, size_t n) {
  counts c;
  c.hits = calloc(n ? n : 1, sizeof *c.hits);
  atomic_store(&c.sum, 0);
  brisk_parallel_for(pool, n, count_task, &c);
  for (size_t i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
  assert_int_equal(atomic_load(&c.sum), (long)(n ? n * (n - 1) / 2 : 0));
  free(c.hits);
}

static void test_exactly_once(void **state) {
  (void)state;
  const int threads[] = {1, 2, 3, 4, 8};
  const size_t sizes[] = {0, 1, 2, 3, 7, 8, 64, 1000, 4097};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    brisk_threadpool *pool = NULL;
    assert_int_equal(brisk_threadpool_create(threads[t], &pool), BRISK_OK);
    assert_int_equal(brisk_parallel_concurrency(pool), threads[t]);
    for (int rep = 0; rep < 50; rep++)
      for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) check_exactly_once(pool, sizes[s]);
    brisk_threadpool_free(pool);
  }
  check_exactly_once(NULL, 100); /* no pool: the caller runs it all */
  assert_int_equal(brisk_parallel_concurrency(NULL), 1);
}

/* Workers fall asleep after spinning; a job after a pause must still run. */
static void test_wakes_after_sleep(void **state) {
  (void)state;
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(4, &pool), BRISK_OK);
  for (int rep = 0; rep < 3; rep++) {
    usleep(50 * 1000);
    check_exactly_once(pool, 333);
  }
  brisk_threadpool_free(pool);
}

typedef struct spread {
  _Atomic int distinct;
  pthread_t seen[64];
  pthread_mutex_t mu;
} spread;

static void record_thread(void *ctx, size_t i) {
  (void)i;
  spread *s = ctx;
  pthread_t self = pthread_self();
  usleep(2000); /* long enough that one thread cannot take every task */
  pthread_mutex_lock(&s->mu);
  int n = atomic_load(&s->distinct), found = 0;
  for (int k = 0; k < n; k++) found |= pthread_equal(s->seen[k], self);
  if (!found && n < 64) s->seen[atomic_fetch_add(&s->distinct, 1)] = self;
  pthread_mutex_unlock(&s->mu);
}

static void test_uses_workers(void **state) {
  (void)state;
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(3, &pool), BRISK_OK);
  spread s = {.distinct = 0};
  pthread_mutex_init(&s.mu, NULL);
  brisk_parallel_for(pool, 60, record_thread, &s);
  assert_true(atomic_load(&s.distinct) >= 2);
  pthread_mutex_destroy(&s.mu);
  brisk_threadpool_free(pool);
}

typedef struct host {
  int calls;
  size_t last_n;
} host;

static void host_parallel_for(void *user, size_t n, brisk_task_fn task, void *ctx) {
  host *h = user;
  h->calls++;
  h->last_n = n;
  for (size_t i = n; i-- > 0;) task(ctx, i); /* any order is allowed */
}

static void test_host_hook(void **state) {
  (void)state;
  host h = {0};
  assert_int_equal(brisk_set_parallel_for(host_parallel_for, &h, 0), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_set_parallel_for(host_parallel_for, &h, 6), BRISK_OK);
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(2, &pool), BRISK_OK);
  assert_int_equal(brisk_parallel_concurrency(pool), 6);
  check_exactly_once(pool, 50);
  assert_int_equal(h.calls, 1);
  assert_int_equal(h.last_n, 50);
  assert_int_equal(brisk_set_parallel_for(NULL, NULL, 0), BRISK_OK);
  check_exactly_once(pool, 50);
  assert_int_equal(h.calls, 1);
  assert_int_equal(brisk_parallel_concurrency(pool), 2);
  brisk_threadpool_free(pool);
}

static void test_create_errors(void **state) {
  (void)state;
  assert_int_equal(brisk_threadpool_create(2, NULL), BRISK_E_INVALID_ARGUMENT);
  brisk_threadpool *pool = NULL;
  assert_int_equal(brisk_threadpool_create(5000, &pool), BRISK_E_INVALID_ARGUMENT);
  assert_null(pool);
  assert_int_equal(brisk_threadpool_create(0, &pool), BRISK_OK); /* one per processor */
  assert_true(brisk_parallel_concurrency(pool) >= 1);
  brisk_threadpool_free(pool);
  brisk_threadpool_free(NULL);
}

static brisk_status create_and_free(void *ctx) {
  (void)ctx;
  brisk_threadpool *pool = NULL;
  brisk_status st = brisk_threadpool_create(3, &pool);
  if (st != BRISK_OK) return st;
  check_exactly_once(pool, 10);
  brisk_threadpool_free(pool);
  return BRISK_OK;
}

static void test_create_oom(void **state) {
  (void)state;
  assert_int_equal(test_every_allocation_fails(create_and_free, NULL), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exactly_once),   cmocka_unit_test(test_wakes_after_sleep),
      cmocka_unit_test(test_uses_workers),   cmocka_unit_test(test_host_hook),
      cmocka_unit_test(test_create_errors),  cmocka_unit_test(test_create_oom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
