/* NCCL and the CUDA runtime behind brisk_nccl_rt, for the plugin
 * (rt_nccl.h).
 *
 * libnccl.so.2 is opened with dlopen at the first NCCL call rather than
 * linked: the plugin then loads and runs single-GPU work on machines
 * without NCCL, and only a communicator asks for it (its absence is an
 * error naming the library). nccl.h gives the types at build time. NCCL's
 * codes are returned as NCCL_BASE + ncclResult_t, so that one int space
 * holds them and the CUDA runtime's. */
#include "backend/cuda/rt_nccl.h"

#include "comm.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
/* nccl.h declares some functions without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NCCL_BASE 200000
#define NO_LIBRARY (NCCL_BASE + 999)

_Static_assert(sizeof(ncclUniqueId) == BRISK_COMM_ID_BYTES, "ncclUniqueId is the id blob");

static struct {
  pthread_once_t once;
  void *lib;
  char why[256];
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*abort)(ncclComm_t);
  ncclResult_t (*destroy)(ncclComm_t);
  const char *(*error_string)(ncclResult_t);
} nc = {.once = PTHREAD_ONCE_INIT};

static void load(void) {
  nc.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!nc.lib) {
    snprintf(nc.why, sizeof nc.why, "NCCL is not available: %s", dlerror());
    return;
  }
  struct {
    void **fn;
    const char *name;
  } syms[] = {
      {(void **)&nc.get_unique_id, "ncclGetUniqueId"},
      {(void **)&nc.init_rank, "ncclCommInitRank"},
      {(void **)&nc.group_start, "ncclGroupStart"},
      {(void **)&nc.group_end, "ncclGroupEnd"},
      {(void **)&nc.all_gather, "ncclAllGather"},
      {(void **)&nc.broadcast, "ncclBroadcast"},
      {(void **)&nc.send, "ncclSend"},
      {(void **)&nc.recv, "ncclRecv"},
      {(void **)&nc.async_error, "ncclCommGetAsyncError"},
      {(void **)&nc.abort, "ncclCommAbort"},
      {(void **)&nc.destroy, "ncclCommDestroy"},
      {(void **)&nc.error_string, "ncclGetErrorString"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    *syms[i].fn = dlsym(nc.lib, syms[i].name);
    if (!*syms[i].fn) {
      snprintf(nc.why, sizeof nc.why, "libnccl.so.2 has no %s", syms[i].name);
      dlclose(nc.lib);
      nc.lib = NULL;
      return;
    }
  }
}

static bool ready(void) {
  pthread_once(&nc.once, load);
  return nc.lib != NULL;
}

static int code(ncclResult_t r) { return r == ncclSuccess ? 0 : NCCL_BASE + (int)r; }

static int get_unique_id(brisk_comm_id *id) {
  if (!ready()) return NO_LIBRARY;
  ncclUniqueId u;
  int e = code(nc.get_unique_id(&u));
  if (!e) memcpy(id->bytes, &u, sizeof u);
  return e;
}

static int comm_init_rank(void **comm, int size, const brisk_comm_id *id, int rank) {
  if (!ready()) return NO_LIBRARY;
  ncclUniqueId u;
  memcpy(&u, id->bytes, sizeof u);
  ncclComm_t c = NULL;
  int e = code(nc.init_rank(&c, size, u, rank));
  *comm = c;
  return e;
}

static int group_start(void) { return ready() ? code(nc.group_start()) : NO_LIBRARY; }
static int group_end(void) { return ready() ? code(nc.group_end()) : NO_LIBRARY; }

static int all_gather(const void *send, void *recv, size_t bytes, void *comm, void *s) {
  return code(nc.all_gather(send, recv, bytes, ncclUint8, comm, (cudaStream_t)s));
}
static int broadcast(void *buf, size_t bytes, int root, void *comm, void *s) {
  return code(nc.broadcast(buf, buf, bytes, ncclUint8, root, comm, (cudaStream_t)s));
}
static int send(const void *buf, size_t bytes, int peer, void *comm, void *s) {
  return code(nc.send(buf, bytes, ncclUint8, peer, comm, (cudaStream_t)s));
}
static int recv(void *buf, size_t bytes, int peer, void *comm, void *s) {
  return code(nc.recv(buf, bytes, ncclUint8, peer, comm, (cudaStream_t)s));
}
static int async_error(void *comm) {
  ncclResult_t r = ncclSuccess;
  ncclResult_t q = nc.async_error(comm, &r);
  return q != ncclSuccess ? code(q) : r == ncclInProgress ? 0 : code(r);
}
static int comm_abort(void *comm) { return code(nc.abort(comm)); }
static int comm_destroy(void *comm) { return code(nc.destroy(comm)); }

static int set_device(int d) { return (int)cudaSetDevice(d); }
static int dev_malloc(void **p, size_t n) { return (int)cudaMalloc(p, n); }
static int dev_free(void *p) { return (int)cudaFree(p); }
static int stream_create(void **s) {
  return (int)cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking);
}
static int stream_destroy(void *s) { return (int)cudaStreamDestroy((cudaStream_t)s); }
static int stream_query(void *s) {
  cudaError_t e = cudaStreamQuery((cudaStream_t)s);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return 1;
  }
  return (int)e;
}
static int tree_sum(const float *parts, int size, int64_t n, float *out, void *s) {
  return brisk_kcomm_tree_sum(parts, size, n, out, s);
}

static const char *error_string(int e) {
  if (e == NO_LIBRARY) return nc.why[0] ? nc.why : "NCCL is not available";
  if (e >= NCCL_BASE)
    return nc.error_string ? nc.error_string((ncclResult_t)(e - NCCL_BASE)) : "NCCL error";
  return cudaGetErrorString((cudaError_t)e);
}
static bool is_oom(int e) { return e == (int)cudaErrorMemoryAllocation; }

const brisk_nccl_rt brisk_nccl_rt_cuda = {
    .name = "nccl",
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
