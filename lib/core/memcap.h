/* The memory cap: accounts that allocations are charged to, each with an
 * optional byte limit, chained up to the process-wide account.
 *
 * A handle with a limit (model, context, engine) owns an account; the public
 * calls on it make it the calling thread's current account for their
 * duration (brisk_mem_enter/leave), and every block brisk_malloc hands out
 * while it is current is charged to it and to each account above it, up to
 * the process-wide one. The block's header remembers the account, so a free
 * on any thread uncharges the right one. An account lives until its owner
 * released it and the last block, charge and child charged to it are gone:
 * a block that outlives the handle it was allocated for (a model-wide cache
 * filled during a decode) never points at freed memory.
 *
 * The thread pool and the host parallel_for hook carry the current account
 * into their tasks, so work split over threads is charged like work done on
 * the calling thread. */
#ifndef BRISK_CORE_MEMCAP_H
#define BRISK_CORE_MEMCAP_H

#include "brisk.h"

#include <stdint.h>

typedef struct brisk_mem_account brisk_mem_account;

/* A new account below the current one (the process-wide account when none is
 * current), with `limit` bytes (0: none beyond its parents'). Its own memory
 * is charged to the parent. `what` ("context's", a static string) names it
 * in messages. BRISK_E_OUT_OF_MEMORY. */
brisk_status brisk_mem_account_create(uint64_t limit, const char *what, brisk_mem_account **out);
/* The owner's reference; NULL is a no-op. */
void brisk_mem_account_release(brisk_mem_account *a);
uint64_t brisk_mem_account_used(const brisk_mem_account *a);
void brisk_mem_account_set_limit(brisk_mem_account *a, uint64_t limit);

/* Makes `a` the calling thread's current account (NULL: the process-wide
 * one) and returns the previous one, for brisk_mem_leave. */
brisk_mem_account *brisk_mem_enter(brisk_mem_account *a);
void brisk_mem_leave(brisk_mem_account *previous);
/* The calling thread's current account, never NULL. */
brisk_mem_account *brisk_mem_current(void);

/* Charges `bytes` to `a` and every account above it, all or nothing:
 * returns 0, or -1 when that would take one of them past its limit (then
 * nothing is charged, and the thread remembers which limit it was, for
 * brisk_error_oom's message). A successful charge holds a reference on `a`
 * until brisk_mem_uncharge. For memory that is not a brisk_malloc block:
 * mapped weights rewritten in place, a parse tree json-c allocates. */
int brisk_mem_charge(brisk_mem_account *a, uint64_t bytes);
void brisk_mem_uncharge(brisk_mem_account *a, uint64_t bytes);
/* A charge of old_bytes (a block's) becomes one of new_bytes, under the same
 * rule; 0 or -1 (nothing changed). */
int brisk_mem_recharge(brisk_mem_account *a, uint64_t old_bytes, uint64_t new_bytes);

/* Forgets the last limit hit (an allocator failure is not a limit's). */
void brisk_mem_clear_hit(void);
/* Writes the last limit hit as "the <what> memory limit of N bytes (M in
 * use, K more asked)" into buf, or returns 0 when the last failure was not a
 * limit's; then forgets it. */
int brisk_mem_describe_hit(char *buf, size_t cap);

/* Runs fn(ctx, i) for i in [from, to) with `a` current: the trampoline the
 * thread pool and the host hook use. */
typedef struct brisk_mem_task {
  brisk_task_fn fn;
  void *ctx;
  brisk_mem_account *account;
} brisk_mem_task;
void brisk_mem_task_run(void *task, size_t index);

#endif
