/* NCCL communicators (comm_nccl.h) over the brisk_nccl_rt table.
 *
 * Each rank has its NCCL communicator, its device, one stream and a device
 * scratch for the all-gathers that all_reduce_sum and barrier are made of.
 * A call queues its NCCL operation (and the tree-sum kernel) on the stream,
 * then waits for the stream by polling, so that an abort (the group's flag
 * in this process, or NCCL's asynchronous error from a peer elsewhere)
 * ends the wait instead of leaving it blocked in the driver. A rank that
 * sees an abort aborts its own NCCL communicator, which frees the work
 * still queued on the device; the group is then unusable, as comm.h says. */
#include "parallel/comm_nccl.h"

#include "core/alloc.h"
#include "core/error.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* What the ranks of one local group share: the abort flag and a count of
 * the handles still alive (the last one frees it). A rank made by id has a
 * group of its own. */
typedef struct nccl_group {
  atomic_int aborted;
  atomic_int alive;
} nccl_group;

typedef struct nccl_rank {
  const brisk_nccl_rt *rt;
  nccl_group *group;
  void *comm;
  int device;
  void *stream;
  void *scratch; /* device memory, scratch_cap bytes */
  size_t scratch_cap;
  /* its NCCL communicator was aborted (nothing to destroy, unless the
   * runtime's abort_keeps); atomic, as the rank's own thread and rank 0's
   * failure path may abort it at once, and NCCL's abort must run once */
  atomic_bool comm_aborted;
} nccl_rank;

static nccl_rank *rank_of(brisk_comm *c) { return c->impl; }

static brisk_status rt_fail(const brisk_nccl_rt *rt, int e, const char *what) {
  if (rt->is_oom(e))
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: %s: out of device memory (%s)", rt->name, what,
                       rt->error_string(e));
  return brisk_error(BRISK_E_INTERNAL, "%s: %s failed: %s (error %d)", rt->name, what,
                     rt->error_string(e), e);
}

static brisk_status cancelled(void) {
  return brisk_error(BRISK_E_CANCELLED, "collective: a rank of the group failed");
}

static void abort_own(nccl_rank *r) {
  if (atomic_exchange(&r->comm_aborted, true)) return;
  (void)r->rt->comm_abort(r->comm);
}

/* Waits for the rank's stream; an abort seen meanwhile cancels. */
static brisk_status wait_stream(brisk_comm *c, const char *what) {
  nccl_rank *r = rank_of(c);
  for (unsigned spins = 0;; spins++) {
    if (atomic_load(&r->group->aborted)) {
      abort_own(r);
      return cancelled();
    }
    int q = r->rt->stream_query(r->stream);
    if (q == 0) return BRISK_OK;
    if (q != 1) return rt_fail(r->rt, q, what);
    int a = r->rt->async_error(r->comm);
    if (a) {
      atomic_store(&r->group->aborted, 1);
      abort_own(r);
      return brisk_error(BRISK_E_CANCELLED, "%s: %s: a peer failed: %s", r->rt->name, what,
                         r->rt->error_string(a));
    }
    if (spins < 1000) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

/* Queues one operation's status (e) and waits for it. */
static brisk_status finish(brisk_comm *c, int e, const char *what) {
  nccl_rank *r = rank_of(c);
  if (e && atomic_load(&r->group->aborted)) { /* failed because a rank aborted */
    abort_own(r);
    return cancelled();
  }
  if (e) return rt_fail(r->rt, e, what);
  return wait_stream(c, what);
}

static brisk_status enter(brisk_comm *c) {
  nccl_rank *r = rank_of(c);
  if (atomic_load(&r->group->aborted)) {
    abort_own(r);
    return cancelled();
  }
  int e = r->rt->set_device(r->device);
  return e ? rt_fail(r->rt, e, "select device") : BRISK_OK;
}

static brisk_status scratch(nccl_rank *r, size_t bytes, void **out) {
  if (bytes > r->scratch_cap) {
    void *p = NULL;
    int e = r->rt->malloc(&p, bytes);
    if (e) return rt_fail(r->rt, e, "communicator scratch");
    /* Every earlier use has finished: each call waits for its stream. */
    if (r->scratch) (void)r->rt->free(r->scratch);
    r->scratch = p;
    r->scratch_cap = bytes;
  }
  *out = r->scratch;
  return BRISK_OK;
}

static brisk_status nccl_all_reduce_sum(brisk_comm *c, float *buf, int64_t n) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || n == 0) return st;
  if (c->size == 1) return BRISK_OK; /* the tree sum of one value is the value */
  if ((uint64_t)n > SIZE_MAX / sizeof(float) / (size_t)c->size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "all_reduce_sum: %lld floats x %d ranks overflow",
                       (long long)n, c->size);
  const size_t bytes = (size_t)n * sizeof(float);
  void *parts = NULL;
  if ((st = scratch(r, bytes * (size_t)c->size, &parts))) return st;
  int e = r->rt->all_gather(buf, parts, bytes, r->comm, r->stream);
  if (!e) e = r->rt->tree_sum(parts, c->size, n, buf, r->stream);
  return finish(c, e, "all_reduce_sum");
}

static brisk_status nccl_all_gather(brisk_comm *c, const void *send, size_t bytes, void *recv) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || bytes == 0) return st;
  return finish(c, r->rt->all_gather(send, recv, bytes, r->comm, r->stream), "all_gather");
}

static brisk_status nccl_broadcast(brisk_comm *c, void *buf, size_t bytes, int root) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || bytes == 0 || c->size == 1) return st;
  return finish(c, r->rt->broadcast(buf, bytes, root, r->comm, r->stream), "broadcast");
}

static brisk_status nccl_send(brisk_comm *c, const void *buf, size_t bytes, int peer) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || bytes == 0) return st;
  return finish(c, r->rt->send(buf, bytes, peer, r->comm, r->stream), "send");
}

static brisk_status nccl_recv(brisk_comm *c, void *buf, size_t bytes, int peer) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || bytes == 0) return st;
  return finish(c, r->rt->recv(buf, bytes, peer, r->comm, r->stream), "recv");
}

/* NCCL has no barrier: an all-gather of one byte from every rank. */
static brisk_status nccl_barrier(brisk_comm *c) {
  nccl_rank *r = rank_of(c);
  brisk_status st = enter(c);
  if (st || c->size == 1) return st;
  void *s = NULL;
  if ((st = scratch(r, (size_t)c->size + 16, &s))) return st;
  return finish(c, r->rt->all_gather((char *)s + c->size, s, 1, r->comm, r->stream), "barrier");
}

static void nccl_abort(brisk_comm *c) {
  nccl_rank *r = rank_of(c);
  atomic_store(&r->group->aborted, 1);
  abort_own(r);
}

static void rank_free(nccl_rank *r) {
  if (r->comm && (!atomic_load(&r->comm_aborted) || r->rt->abort_keeps))
    (void)r->rt->comm_destroy(r->comm);
  if (r->scratch) (void)r->rt->free(r->scratch);
  if (r->stream) (void)r->rt->stream_destroy(r->stream);
  if (r->group && atomic_fetch_sub(&r->group->alive, 1) == 1) brisk_free(r->group);
}

static void nccl_destroy(brisk_comm *c) {
  nccl_rank *r = rank_of(c);
  (void)r->rt->set_device(r->device);
  rank_free(r);
  brisk_free(c);
}

static const brisk_comm_ops nccl_ops = {
    .name = "nccl",
    .all_reduce_sum = nccl_all_reduce_sum,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

brisk_status brisk_comm_id_create(const brisk_nccl_rt *rt, brisk_comm_id *id) {
  if (!rt || !id) return brisk_error(BRISK_E_INVALID_ARGUMENT, "comm id: rt and id must be set");
  memset(id, 0, sizeof *id);
  int e = rt->get_unique_id(id);
  return e ? rt_fail(rt, e, "ncclGetUniqueId") : BRISK_OK;
}

brisk_status brisk_comm_id_from_bytes(brisk_comm_id *id, const void *bytes, size_t n) {
  if (!id || !bytes || n != BRISK_COMM_ID_BYTES)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "comm id: %zu bytes (an id is exactly %d bytes from brisk_comm_id_create)",
                       n, BRISK_COMM_ID_BYTES);
  memcpy(id->bytes, bytes, BRISK_COMM_ID_BYTES);
  return BRISK_OK;
}

static brisk_status check_size(int rank, int size) {
  if (size < 1 || size > 256 || rank < 0 || rank >= size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "nccl communicator: rank %d of %d (1 <= size <= 256, 0 <= rank < size)",
                       rank, size);
  return BRISK_OK;
}

/* A handle with its stream on `device`, not yet joined (comm NULL). */
static brisk_status rank_new(const brisk_nccl_rt *rt, nccl_group *g, int rank, int size, int device,
                             brisk_comm **out) {
  brisk_comm *c = brisk_calloc(1, sizeof *c + sizeof(nccl_rank));
  if (!c) return brisk_error_oom();
  nccl_rank *r = (nccl_rank *)(c + 1);
  *r = (nccl_rank){.rt = rt, .group = g, .device = device};
  atomic_fetch_add(&g->alive, 1);
  *c = (brisk_comm){.ops = &nccl_ops, .rank = rank, .size = size, .impl = r};
  int e = rt->set_device(device);
  if (!e) e = rt->stream_create(&r->stream);
  if (e) {
    brisk_status st = rt_fail(rt, e, device < 0 ? "select device" : "stream creation");
    rank_free(r);
    brisk_free(c);
    return st;
  }
  *out = c;
  return BRISK_OK;
}

brisk_status brisk_comm_nccl_create_rank(const brisk_nccl_rt *rt, const brisk_comm_id *id, int rank,
                                         int size, int device, brisk_comm **out) {
  if (!rt || !id || !out || device < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "nccl communicator: rt, id, out and device");
  brisk_status st = check_size(rank, size);
  if (st) return st;
  nccl_group *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  brisk_comm *c = NULL;
  atomic_store(&g->alive, 1); /* held by this call */
  st = rank_new(rt, g, rank, size, device, &c);
  if (atomic_fetch_sub(&g->alive, 1) == 1) brisk_free(g);
  if (st) return st;
  nccl_rank *r = rank_of(c);
  int e = rt->comm_init_rank(&r->comm, size, id, rank);
  if (e) {
    st = rt_fail(rt, e, "ncclCommInitRank");
    r->comm = NULL;
    brisk_comm_free(c);
    return st;
  }
  *out = c;
  return BRISK_OK;
}

brisk_status brisk_comm_nccl_create_local(const brisk_nccl_rt *rt, int size, const int *devices,
                                          brisk_comm **ranks) {
  if (!rt || !devices || !ranks)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "nccl communicators: rt, devices and ranks");
  brisk_status st = check_size(0, size);
  if (st) return st;
  for (int i = 0; i < size; i++) {
    if (devices[i] < 0)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "nccl communicators: device %d", devices[i]);
    for (int j = 0; j < i; j++)
      if (devices[i] == devices[j])
        return brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "nccl communicators: device %d named twice (one rank per device)",
                           devices[i]);
  }
  brisk_comm_id id;
  if ((st = brisk_comm_id_create(rt, &id))) return st;
  nccl_group *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  atomic_store(&g->alive, 1); /* held by this call until every rank is made */
  int made = 0;
  for (; made < size && !st; made++) st = rank_new(rt, g, made, size, devices[made], &ranks[made]);
  if (st) made--;
  /* One group: NCCL initializes the ranks together (ncclCommInitAll's way). */
  int e = st ? 0 : rt->group_start();
  for (int i = 0; i < size && !st && !e; i++) {
    nccl_rank *r = rank_of(ranks[i]);
    e = rt->set_device(devices[i]);
    if (!e) e = rt->comm_init_rank(&r->comm, size, &id, i);
  }
  if (!st) {
    int ge = rt->group_end();
    if (!e) e = ge;
    if (e) st = rt_fail(rt, e, "ncclCommInitRank (grouped)");
  }
  if (st) {
    for (int i = 0; i < made; i++) {
      nccl_rank *r = rank_of(ranks[i]);
      if (e) {
        /* A group that failed to form: its communicators are aborted. */
        if (r->comm) abort_own(r);
      }
      brisk_comm_free(ranks[i]);
      ranks[i] = NULL;
    }
  }
  if (atomic_fetch_sub(&g->alive, 1) == 1) brisk_free(g);
  return st;
}
