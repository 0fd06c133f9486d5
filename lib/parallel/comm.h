/* Communicators: the collectives tensor and pipeline parallelism need,
 * over one interface with several implementations (threads in one process
 * here; MPI across processes in comm_mpi.c; NCCL for CUDA devices later).
 *
 * A communicator is one rank's handle onto a group of `size` ranks. Every
 * collective is called by every rank of the group, in the same order, with
 * the same sizes (a rank that disagrees makes all of them fail with
 * BRISK_E_INVALID_ARGUMENT). Buffers are host memory for the threads and
 * MPI implementations (device memory for NCCL).
 *
 * Determinism: all_reduce_sum adds the ranks' values in one fixed pairwise
 * tree over rank ids, ((r0 + r1) + (r2 + r3)) for four ranks, and every
 * rank receives the same bits. A sum that has to be identical for several
 * group sizes is split by the caller into the same partial sums at every
 * size (see lib/parallel's README in docs/architecture.md).
 *
 * Failure: a rank that calls brisk_comm_abort (after its own error) makes
 * the collectives every rank is in, or enters later, return
 * BRISK_E_CANCELLED ("a rank of the group failed"): none waits forever. */
#ifndef BRISK_PARALLEL_COMM_H
#define BRISK_PARALLEL_COMM_H

#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

typedef struct brisk_comm brisk_comm;

typedef struct brisk_comm_ops {
  const char *name; /* "threads", "mpi" */
  brisk_status (*all_reduce_sum)(brisk_comm *c, float *buf, int64_t n);
  brisk_status (*all_gather)(brisk_comm *c, const void *send, size_t bytes, void *recv);
  brisk_status (*broadcast)(brisk_comm *c, void *buf, size_t bytes, int root);
  brisk_status (*send)(brisk_comm *c, const void *buf, size_t bytes, int peer);
  brisk_status (*recv)(brisk_comm *c, void *buf, size_t bytes, int peer);
  brisk_status (*barrier)(brisk_comm *c);
  void (*abort)(brisk_comm *c);
  void (*destroy)(brisk_comm *c);
} brisk_comm_ops;

struct brisk_comm {
  const brisk_comm_ops *ops;
  int rank, size;
  void *impl;
};

static inline int brisk_comm_rank(const brisk_comm *c) { return c->rank; }
static inline int brisk_comm_size(const brisk_comm *c) { return c->size; }

/* buf[i] = the tree sum over ranks of every rank's buf[i] ([n] floats). */
brisk_status brisk_comm_all_reduce_sum(brisk_comm *c, float *buf, int64_t n);
/* recv ([size][bytes]) receives every rank's send ([bytes]) in rank order. */
brisk_status brisk_comm_all_gather(brisk_comm *c, const void *send, size_t bytes, void *recv);
/* Every rank's buf ([bytes]) receives root's. */
brisk_status brisk_comm_broadcast(brisk_comm *c, void *buf, size_t bytes, int root);
/* Point to point: a send to peer is matched by peer's recv from this rank,
 * of the same size; both return once the data has moved. */
brisk_status brisk_comm_send(brisk_comm *c, const void *buf, size_t bytes, int peer);
brisk_status brisk_comm_recv(brisk_comm *c, void *buf, size_t bytes, int peer);
brisk_status brisk_comm_barrier(brisk_comm *c);
/* Marks the group failed (see above). */
void brisk_comm_abort(brisk_comm *c);
/* Frees this rank's handle; NULL is a no-op. */
void brisk_comm_free(brisk_comm *c);

/* `size` ranks in this process, one handle each (ranks[r] has rank r), each
 * to be used by its own thread and freed on its own. 1 <= size <= 256. */
brisk_status brisk_comm_threads_create(int size, brisk_comm **ranks);

/* The fixed reduction tree over n values (the ranks' values in rank order),
 * as all_reduce_sum uses it: exposed so that callers and tests compute the
 * same sums. */
float brisk_comm_tree_sum(const float *values, int n);

#endif
