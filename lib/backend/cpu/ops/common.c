/* Shared helpers of the CPU operations: splitting a range over the thread
 * pool, and argument checks. */
#include "backend/cpu/ops/ops.h"

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"

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

brisk_status brisk_cpu_ops_check_matrix(const char *what, int64_t n_rows, int64_t n_cols) {
  size_t bytes;
  if (n_rows < 0 || n_cols < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: shape [%lld][%lld] needs rows >= 0, cols >= 1", what, (long long)n_rows,
                       (long long)n_cols);
  if ((uint64_t)n_rows > SIZE_MAX || (uint64_t)n_cols > SIZE_MAX ||
      brisk_mul_overflow_size((size_t)n_rows, (size_t)n_cols, &bytes) ||
      brisk_mul_overflow_size(bytes, sizeof(float), &bytes) || bytes > PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: shape [%lld][%lld] is too large", what,
                       (long long)n_rows, (long long)n_cols);
  return BRISK_OK;
}

brisk_status brisk_cpu_ops_check_kv(const char *what, const brisk_kv_layout *kv,
                                    size_t *cache_bytes) {
  if (!kv) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: kv layout is NULL", what);
  if (kv->dtype != BRISK_DTYPE_F16 && kv->dtype != BRISK_DTYPE_F32)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: kv cache dtype %s (%u) is not f16 or f32", what,
                       brisk_dtype_name(kv->dtype), (unsigned)kv->dtype);
  if (kv->n_blocks < 1 || kv->n_kv_heads < 1 || kv->block_size < 1 || kv->head_dim < 1 ||
      kv->head_dim > BRISK_MAX_HEAD_DIM)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: kv layout [%d blocks][%d kv heads][%d block size][%d head dim] needs "
                       "all >= 1 and head dim <= %d",
                       what, (int)kv->n_blocks, (int)kv->n_kv_heads, (int)kv->block_size,
                       (int)kv->head_dim, BRISK_MAX_HEAD_DIM);
  size_t b = kv->dtype == BRISK_DTYPE_F16 ? 2 : 4;
  if (brisk_mul_overflow_size(b, (size_t)kv->n_blocks, &b) ||
      brisk_mul_overflow_size(b, (size_t)kv->n_kv_heads, &b) ||
      brisk_mul_overflow_size(b, (size_t)kv->block_size, &b) ||
      brisk_mul_overflow_size(b, (size_t)kv->head_dim, &b) || b > PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: kv cache of %d blocks is too large", what,
                       (int)kv->n_blocks);
  if (cache_bytes) *cache_bytes = b;
  return BRISK_OK;
}
