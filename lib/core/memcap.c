#include "core/memcap.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdatomic.h>
#include <stdio.h>

struct brisk_mem_account {
  _Atomic uint64_t used;
  _Atomic uint64_t limit; /* 0: none */
  /* The owner's reference, one per live block or charge, one per child. */
  _Atomic uint64_t refs;
  brisk_mem_account *parent; /* NULL only for the process-wide account */
  const char *what;          /* "process-wide", "handle's", for messages */
};

/* The process-wide account: every charge ends here. It is never freed. */
static brisk_mem_account root = {0, 0, 1, NULL, "process-wide"};

/* The account the calling thread's allocations are charged to; NULL means
 * the process-wide one. Set only for the duration of a public call. */
static _Thread_local brisk_mem_account *current;

/* The last limit a charge on this thread ran into (what = NULL: none). */
static _Thread_local struct {
  const char *what;
  uint64_t limit, used, asked;
} hit;

brisk_mem_account *brisk_mem_enter(brisk_mem_account *a) {
  brisk_mem_account *prev = current;
  current = a;
  return prev;
}

void brisk_mem_leave(brisk_mem_account *previous) { current = previous; }

brisk_mem_account *brisk_mem_current(void) { return current ? current : &root; }

static void unref(brisk_mem_account *a) {
  while (a && a != &root) {
    if (atomic_fetch_sub(&a->refs, 1) != 1) return;
    /* The last reference: free it, then drop its hold on the parent (read
     * first; the account's own block is charged to the parent too, so the
     * parent outlives this free). */
    brisk_mem_account *parent = a->parent;
    brisk_free(a);
    a = parent;
  }
}

/* Adds bytes along the chain, all or nothing. */
static int add(brisk_mem_account *a, uint64_t bytes) {
  brisk_mem_account *b = a;
  for (; b; b = b->parent) {
    uint64_t limit = atomic_load_explicit(&b->limit, memory_order_relaxed);
    uint64_t prev = atomic_fetch_add_explicit(&b->used, bytes, memory_order_relaxed);
    if (limit && (prev > limit || bytes > limit - prev)) {
      atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
      hit.what = b->what;
      hit.limit = limit;
      hit.used = prev;
      hit.asked = bytes;
      break;
    }
  }
  if (b) {
    for (brisk_mem_account *c = a; c != b; c = c->parent)
      atomic_fetch_sub_explicit(&c->used, bytes, memory_order_relaxed);
    return -1;
  }
  return 0;
}

static void sub(brisk_mem_account *a, uint64_t bytes) {
  for (brisk_mem_account *b = a; b; b = b->parent)
    atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
}

int brisk_mem_charge(brisk_mem_account *a, uint64_t bytes) {
  if (add(a, bytes)) return -1;
  if (a != &root) atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
  return 0;
}

void brisk_mem_uncharge(brisk_mem_account *a, uint64_t bytes) {
  sub(a, bytes);
  unref(a);
}

int brisk_mem_recharge(brisk_mem_account *a, uint64_t old_bytes, uint64_t new_bytes) {
  if (new_bytes > old_bytes) return add(a, new_bytes - old_bytes);
  sub(a, old_bytes - new_bytes);
  return 0;
}

brisk_status brisk_mem_account_create(uint64_t limit, const char *what, brisk_mem_account **out) {
  brisk_mem_account *parent = brisk_mem_current();
  brisk_mem_account *a = brisk_malloc(sizeof *a);
  if (!a) return brisk_error_oom();
  atomic_init(&a->used, 0);
  atomic_init(&a->limit, limit);
  atomic_init(&a->refs, 1);
  a->parent = parent;
  a->what = what;
  if (parent != &root) atomic_fetch_add(&parent->refs, 1);
  *out = a;
  return BRISK_OK;
}

void brisk_mem_account_release(brisk_mem_account *a) {
  if (a) unref(a);
}

uint64_t brisk_mem_account_used(const brisk_mem_account *a) {
  return a ? atomic_load_explicit(&((brisk_mem_account *)a)->used, memory_order_relaxed) : 0;
}

void brisk_mem_account_set_limit(brisk_mem_account *a, uint64_t limit) {
  atomic_store(&a->limit, limit);
}

void brisk_mem_clear_hit(void) { hit.what = NULL; }

int brisk_mem_describe_hit(char *buf, size_t cap) {
  if (!hit.what) return 0;
  snprintf(buf, cap, "the %s memory limit of %llu bytes (%llu in use, %llu more asked)", hit.what,
           (unsigned long long)hit.limit, (unsigned long long)hit.used,
           (unsigned long long)hit.asked);
  hit.what = NULL;
  return 1;
}

void brisk_mem_task_run(void *task, size_t index) {
  const brisk_mem_task *t = task;
  brisk_mem_account *prev = brisk_mem_enter(t->account);
  t->fn(t->ctx, index);
  brisk_mem_leave(prev);
}

/* ---- public ------------------------------------------------------------ */

BRISK_API brisk_status brisk_set_memory_limit(uint64_t bytes) {
  atomic_store(&root.limit, bytes);
  return BRISK_OK;
}

BRISK_API uint64_t brisk_memory_limit(void) { return atomic_load(&root.limit); }

BRISK_API uint64_t brisk_memory_used(void) { return atomic_load(&root.used); }
