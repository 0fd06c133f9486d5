/* brisk_nccl_rt (parallel/comm_nccl.h) for the test suite: NCCL's calls
 * over the threads communicator (ranks as threads of this process, each
 * NCCL communicator one threads rank), the device's over the emulation
 * (tests/cudabe/rt_emu.c memory, the tree-sum kernel of kernels/comm.cu
 * through the SIMT emulation). Collectives complete before they return, so
 * a stream is always idle.
 *
 * Ids: get_unique_id hands out distinct ids; the ranks that init with one
 * id share one threads group, made by the first of them (NCCL's init
 * blocks until every rank has joined; this one need not, as the threads
 * collectives meet by themselves). Up to 8 devices. */
#include "cuda_emu.h"
#include "nccl_emu.h"

#include "comm.h"
#include "parallel/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { E_INVALID = 1, E_OOM = 2, E_REMOTE = 6 /* ncclRemoteError */, N_DEV = 8 };

typedef struct pending {
  brisk_comm_id id;
  int size, joined;
  brisk_comm **ranks;
  struct pending *next;
} pending;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pending *groups;
static uint64_t next_id = 1;
static __thread int current_device;
static int fail_init_rank = -1; /* tests: this rank's init fails */

void brisk_nccl_emu_fail_init(int rank) { fail_init_rank = rank; }

static int get_unique_id(brisk_comm_id *id) {
  pthread_mutex_lock(&lock);
  uint64_t v = next_id++;
  pthread_mutex_unlock(&lock);
  memset(id->bytes, 0, sizeof id->bytes);
  memcpy(id->bytes, "brisk-nccl-emu", 14);
  memcpy(id->bytes + 16, &v, sizeof v);
  return 0;
}

static int comm_init_rank(void **comm, int size, const brisk_comm_id *id, int rank) {
  *comm = NULL;
  if (rank == fail_init_rank) return E_INVALID;
  if (size < 1 || rank < 0 || rank >= size) return E_INVALID;
  pthread_mutex_lock(&lock);
  pending **pp = &groups;
  while (*pp && memcmp((*pp)->id.bytes, id->bytes, sizeof id->bytes) != 0) pp = &(*pp)->next;
  pending *p = *pp;
  int e = 0;
  if (!p) {
    p = calloc(1, sizeof *p);
    brisk_comm **ranks = p ? calloc((size_t)size, sizeof *ranks) : NULL;
    if (!ranks || brisk_comm_threads_create(size, ranks)) {
      free(ranks);
      free(p);
      pthread_mutex_unlock(&lock);
      return E_OOM;
    }
    p->id = *id;
    p->size = size;
    p->ranks = ranks;
    p->next = groups;
    groups = p;
    pp = &groups;
  }
  if (p->size != size || !p->ranks[rank]) {
    e = E_INVALID;
  } else {
    *comm = p->ranks[rank];
    p->ranks[rank] = NULL;
    if (++p->joined == size) { /* every rank has its handle: forget the id */
      *pp = p->next;
      free(p->ranks);
      free(p);
    }
  }
  pthread_mutex_unlock(&lock);
  return e;
}

static int group_start(void) { return 0; }
static int group_end(void) { return 0; }

static int status_code(brisk_status st) {
  return st == BRISK_OK ? 0 : st == BRISK_E_CANCELLED ? E_REMOTE : E_INVALID;
}

static int all_gather(const void *send, void *recv, size_t bytes, void *comm, void *s) {
  (void)s;
  return status_code(brisk_comm_all_gather(comm, send, bytes, recv));
}
static int broadcast(void *buf, size_t bytes, int root, void *comm, void *s) {
  (void)s;
  return status_code(brisk_comm_broadcast(comm, buf, bytes, root));
}
static int send(const void *buf, size_t bytes, int peer, void *comm, void *s) {
  (void)s;
  return status_code(brisk_comm_send(comm, buf, bytes, peer));
}
static int recv(void *buf, size_t bytes, int peer, void *comm, void *s) {
  (void)s;
  return status_code(brisk_comm_recv(comm, buf, bytes, peer));
}
static int async_error(void *comm) {
  (void)comm;
  return 0;
}
/* Wakes the rank's collectives only (abort_keeps): tensor parallelism's
 * failure path aborts every rank's communicator from rank 0's thread while
 * a rank's own thread may still be inside a collective on it, which here
 * runs in that thread; comm_destroy frees it once that thread is done. */
static int comm_abort(void *comm) {
  brisk_comm_abort(comm);
  return 0;
}
static int comm_destroy(void *comm) {
  brisk_comm_free(comm);
  return 0;
}

/* The runtime's current device too: scratch is counted on the rank's. */
static int set_device(int d) {
  if (d < 0 || d >= N_DEV) return 101;
  current_device = d;
  return brisk_cuda_rt_emu.set_device(d);
}
static int dev_malloc(void **p, size_t n) { return brisk_cuda_rt_emu.malloc(p, n); }
static int dev_free(void *p) { return brisk_cuda_rt_emu.free(p); }
static char stream_token;
static int stream_create(void **s) {
  *s = &stream_token;
  return 0;
}
static int stream_destroy(void *s) { return s == &stream_token ? 0 : E_INVALID; }
static int stream_query(void *s) { return s == &stream_token ? 0 : E_INVALID; }
static int tree_sum(const float *parts, int size, int64_t n, float *out, void *s) {
  return brisk_kcomm_tree_sum(parts, size, n, out, s);
}

static const char *error_string(int e) {
  switch (e) {
  case E_INVALID: return "invalid argument (emulated NCCL)";
  case E_OOM: return "out of memory (emulated NCCL)";
  case E_REMOTE: return "remote process exited or there was a network error (emulated NCCL)";
  case 101: return "invalid device ordinal (emulated device)";
  default: return brisk_cuda_rt_emu.error_string(e);
  }
}
static bool is_oom(int e) { return e == E_OOM; }

const brisk_nccl_rt brisk_nccl_rt_emu = {
    .name = "nccl-emu",
    .get_unique_id = get_unique_id,
    .comm_init_rank = comm_init_rank,
    .group_start = group_start,
    .group_end = group_end,
    .all_gather = all_gather,
    .broadcast = broadcast,
    .send = send,
    .recv = recv,
    .async_error = async_error,
    .comm_abort = comm_abort,
    .comm_destroy = comm_destroy,
    .abort_keeps = true,
    .set_device = set_device,
    .malloc = dev_malloc,
    .free = dev_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_query = stream_query,
    .tree_sum = tree_sum,
    .error_string = error_string,
    .is_oom = is_oom,
};
