#include "core/threadpool.h"

#include "core/alloc.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/memcap.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before sleeping: long enough to bridge the
 * gap between two layers' loops in a decode step, short enough not to burn a
 * core when the host stops ticking. */
#define SPIN_ROUNDS 200000

/* The ticket packs (generation << 32 | next task index). A job is published
 * by an even generation; odd generations mark "fields being rewritten", so a
 * worker that read stale job fields can never claim a task with them (its
 * claim CAS names the old generation and fails). */
#define IDX_MASK 0xffffffffull
#define IDX_CLOSED 0xffffffffull

struct brisk_threadpool {
  int n_threads;
  pthread_t *workers; /* [n_threads - 1] */
  _Atomic uint64_t ticket;
  _Atomic(brisk_task_fn) fn;
  _Atomic(void *) ctx;
  _Atomic uint64_t n_tasks;
  _Atomic uint64_t done;
  _Atomic int stop;
  _Atomic int sleepers;
  pthread_mutex_t mu;
  pthread_cond_t wake;
};

static struct {
  brisk_parallel_for_fn fn;
  void *user;
  int concurrency;
} host_hook;

BRISK_API brisk_status brisk_set_parallel_for(brisk_parallel_for_fn fn, void *host_user_data,
                                              int concurrency) {
  if (fn && concurrency < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_set_parallel_for: concurrency %d must be >= 1", concurrency);
  host_hook.fn = fn;
  host_hook.user = fn ? host_user_data : NULL;
  host_hook.concurrency = fn ? concurrency : 0;
  return BRISK_OK;
}

/* Claims and runs tasks of generation `gen` until none are left. */
static void run_tasks(brisk_threadpool *pool, uint64_t gen) {
  brisk_task_fn fn = atomic_load(&pool->fn);
  void *ctx = atomic_load(&pool->ctx);
  uint64_t n = atomic_load(&pool->n_tasks);
  uint64_t cur = atomic_load(&pool->ticket);
  while ((cur >> 32) == gen && (cur & IDX_MASK) < n) {
    if (atomic_compare_exchange_weak(&pool->ticket, &cur, cur + 1)) {
      fn(ctx, (size_t)(cur & IDX_MASK));
      atomic_fetch_add(&pool->done, 1);
      cur = atomic_load(&pool->ticket);
    }
  }
}

static void *worker_main(void *arg) {
  brisk_threadpool *pool = arg;
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = atomic_load(&pool->ticket) >> 32;
    for (int i = 0; i < SPIN_ROUNDS && (gen == seen || (gen & 1)) && !atomic_load(&pool->stop);
         i++) {
      cpu_relax();
      gen = atomic_load(&pool->ticket) >> 32;
    }
    if ((gen == seen || (gen & 1)) && !atomic_load(&pool->stop)) {
      pthread_mutex_lock(&pool->mu);
      atomic_fetch_add(&pool->sleepers, 1);
      while (((gen = atomic_load(&pool->ticket) >> 32) == seen || (gen & 1)) &&
             !atomic_load(&pool->stop))
        pthread_cond_wait(&pool->wake, &pool->mu);
      atomic_fetch_sub(&pool->sleepers, 1);
      pthread_mutex_unlock(&pool->mu);
    }
    if (atomic_load(&pool->stop)) return NULL;
    seen = gen;
    run_tasks(pool, gen);
  }
}

static void wake_sleepers(brisk_threadpool *pool) {
  if (atomic_load(&pool->sleepers) > 0) {
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
  }
}

brisk_status brisk_threadpool_create(int n_threads, brisk_threadpool **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_threadpool_create: out is NULL");
  if (n_threads <= 0) n_threads = brisk_cpu_count();
  if (n_threads > 1024)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "thread count %d is above 1024", n_threads);
  brisk_threadpool *pool = brisk_calloc(1, sizeof *pool);
  if (!pool) return brisk_error_oom();
  pool->n_threads = n_threads;
  if (n_threads > 1) {
    pool->workers = brisk_calloc((size_t)n_threads - 1, sizeof(pthread_t));
    if (!pool->workers) {
      brisk_free(pool);
      return brisk_error_oom();
    }
  }
  pthread_mutex_init(&pool->mu, NULL);
  pthread_cond_init(&pool->wake, NULL);
  for (int i = 0; i < n_threads - 1; i++) {
    if (pthread_create(&pool->workers[i], NULL, worker_main, pool) != 0) {
      pool->n_threads = i + 1; /* free() joins the ones that started */
      brisk_threadpool_free(pool);
      return brisk_error(BRISK_E_OUT_OF_MEMORY, "could not start worker thread %d of %d", i + 1,
                         n_threads - 1);
    }
  }
  *out = pool;
  return BRISK_OK;
}

void brisk_threadpool_free(brisk_threadpool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mu);
  atomic_store(&pool->stop, 1);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mu);
  for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->workers[i], NULL);
  pthread_mutex_destroy(&pool->mu);
  pthread_cond_destroy(&pool->wake);
  brisk_free(pool->workers);
  brisk_free(pool);
}

int brisk_parallel_concurrency(const brisk_threadpool *pool) {
  if (host_hook.fn) return host_hook.concurrency;
  return pool ? pool->n_threads : 1;
}

static void run_on_pool(brisk_threadpool *pool, size_t n_tasks, brisk_task_fn fn, void *ctx) {
  uint64_t gen = atomic_load(&pool->ticket) >> 32;
  /* Close the old generation before touching the job fields. */
  atomic_store(&pool->ticket, ((gen + 1) << 32) | IDX_CLOSED);
  atomic_store(&pool->fn, fn);
  atomic_store(&pool->ctx, ctx);
  atomic_store(&pool->n_tasks, (uint64_t)n_tasks);
  atomic_store(&pool->done, 0);
  uint64_t next = gen + 2;
  atomic_store(&pool->ticket, next << 32);
  wake_sleepers(pool);
  run_tasks(pool, next);
  for (unsigned spins = 0; atomic_load(&pool->done) < n_tasks; spins++) {
    if (spins < SPIN_ROUNDS) cpu_relax();
    else sched_yield();
  }
}

void brisk_parallel_for(brisk_threadpool *pool, size_t n_tasks, brisk_task_fn fn, void *ctx) {
  if (n_tasks == 0) return;
  /* Tasks on other threads charge their allocations to the caller's memory
   * account, as if the caller had made them. */
  brisk_mem_task charged = {fn, ctx, brisk_mem_current()};
  if (host_hook.fn || (pool && pool->n_threads > 1 && n_tasks > 1)) {
    fn = brisk_mem_task_run;
    ctx = &charged;
  }
  if (host_hook.fn) {
    host_hook.fn(host_hook.user, n_tasks, fn, ctx);
    return;
  }
  if (!pool || pool->n_threads == 1 || n_tasks == 1) {
    for (size_t i = 0; i < n_tasks; i++) fn(ctx, i);
    return;
  }
  /* Task indices live in 32 bits of the ticket; callers split work into about
   * brisk_parallel_concurrency() tasks, so a loop this long is a caller bug we
   * still finish correctly, serially. */
  size_t pooled = n_tasks < (size_t)IDX_CLOSED ? n_tasks : (size_t)IDX_CLOSED - 1;
  run_on_pool(pool, pooled, fn, ctx);
  for (size_t i = pooled; i < n_tasks; i++) fn(ctx, i);
}
