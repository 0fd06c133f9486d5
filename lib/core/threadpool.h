/* Parallel loops: persistent worker threads released by a spin-then-sleep
 * barrier, or the host's parallel_for hook when one is installed. */
#ifndef BRISK_CORE_THREADPOOL_H
#define BRISK_CORE_THREADPOOL_H

#include "brisk.h"

#include <stddef.h>

typedef struct brisk_threadpool brisk_threadpool;

/* n_threads counts the calling thread: n_threads - 1 workers are started.
 * n_threads <= 0 means one per online processor. */
brisk_status brisk_threadpool_create(int n_threads, brisk_threadpool **out);
void brisk_threadpool_free(brisk_threadpool *pool);

/* How many tasks can run at once: the host hook's concurrency when a hook is
 * installed, else the pool's thread count (1 for a NULL pool). Split work
 * into about this many tasks; a task's index can select per-task scratch. */
int brisk_parallel_concurrency(const brisk_threadpool *pool);

/* Runs fn(ctx, i) exactly once for each i in [0, n_tasks) and returns when
 * all have finished. Uses the host hook if installed, else `pool` (which
 * may be NULL: then the calling thread runs everything). The caller takes
 * part in the work. Not reentrant on one pool. */
void brisk_parallel_for(brisk_threadpool *pool, size_t n_tasks, brisk_task_fn fn, void *ctx);

#endif
