/* Shared helper of the CPU operations: splitting a range over the thread
 * pool (their argument checks are backend/check.c, shared by all backends). */
#include "backend/cpu/ops/ops.h"

/* Below this many element operations a loop runs on the calling thread:
 * waking the pool costs a few microseconds, about this much work. */
#define MIN_PARALLEL_WORK 32768.0
/* Tasks per thread: uneven rows (attention over different lengths) balance
 * better over several smaller tasks. */
#define TASKS_PER_THREAD 4

typedef struct range_job {
  brisk_cpu_range_fn fn;
  void *ctx;
  int64_t n, chunk;
} range_job;

static void run_chunk(void *p, size_t task) {
  const range_job *job = p;
  int64_t begin = (int64_t)task * job->chunk;
  int64_t end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
  job->fn(job->ctx, begin, end);
}

void brisk_cpu_ops_parallel(brisk_threadpool *pool, int64_t n, int64_t grain, double work,
                            brisk_cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = brisk_parallel_concurrency(pool);
  if (threads <= 1 || work < MIN_PARALLEL_WORK || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  int64_t tasks = (int64_t)threads * TASKS_PER_THREAD;
  int64_t chunk = (n + tasks - 1) / tasks;
  chunk = (chunk + grain - 1) / grain * grain;
  range_job job = {fn, ctx, n, chunk};
  brisk_parallel_for(pool, (size_t)((n + chunk - 1) / chunk), run_chunk, &job);
}
