/* NCCL communicators for CUDA devices (comm_nccl.c): comm.h's collectives
 * on device buffers, one communicator per device.
 *
 * Two ways to make a group:
 *  - one process driving several GPUs: brisk_comm_nccl_create_local, one
 *    rank per device, initialized as one NCCL group; each handle is then
 *    used by its own thread (as comm.h's threads ranks are);
 *  - one rank per process (or node): one of them makes an id
 *    (brisk_comm_id_create), the host carries its bytes to the others by
 *    any means it has (MPI, a file, its own control channel: brisk never
 *    opens sockets itself), each turns them back into an id
 *    (brisk_comm_id_from_bytes) and calls brisk_comm_nccl_create_rank.
 *
 * NCCL and the device runtime come through brisk_nccl_rt, a table: the CUDA
 * plugin's (lib/backend/cuda/rt_nccl.c: libnccl.so.2 opened with dlopen,
 * the CUDA runtime, the tree-sum kernel of kernels/comm.cu), or the test
 * suite's emulation (ranks as threads over comm_threads). libbrisk itself
 * never links NCCL; it gets the plugin's table from brisk_plugin_nccl
 * (backend/plugin.h).
 *
 * Semantics as comm.h, with these differences:
 *  - buffers are device memory of the rank's device; the caller has
 *    finished writing them (its backend synchronized) before the call, and
 *    each call returns when its result is in place;
 *  - all_reduce_sum all-gathers the ranks' values and adds them on the
 *    device in comm.h's fixed tree (kernels/comm.h), so every rank gets the
 *    bits brisk_comm_tree_sum gives: that costs size x n floats of traffic
 *    per rank instead of NCCL's 2 (size - 1) / size x n, which is small for
 *    decode activations and buys results independent of NCCL's algorithm;
 *  - disagreeing calls are not detected (NCCL cannot see them; they hang or
 *    fail in NCCL);
 *  - abort: every rank of a local group sees it at once (a shared flag,
 *    checked while waiting) and aborts its own NCCL communicator; across
 *    processes the peers find out from NCCL (ncclCommGetAsyncError, polled
 *    while waiting), when the failed process's connections close. */
#ifndef BRISK_PARALLEL_COMM_NCCL_H
#define BRISK_PARALLEL_COMM_NCCL_H

#include "parallel/comm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NCCL's unique id (ncclUniqueId is 128 bytes): opaque, carried by the host. */
#define BRISK_COMM_ID_BYTES 128
typedef struct brisk_comm_id {
  uint8_t bytes[BRISK_COMM_ID_BYTES];
} brisk_comm_id;

/* Every entry returns 0 or an error code that error_string names;
 * stream_query returns 0 when the stream's work is done, 1 while it runs. */
typedef struct brisk_nccl_rt {
  const char *name; /* "nccl", "nccl-emu" */
  /* NCCL */
  int (*get_unique_id)(brisk_comm_id *id);
  /* On the current device (set_device first). */
  int (*comm_init_rank)(void **comm, int size, const brisk_comm_id *id, int rank);
  int (*group_start)(void);
  int (*group_end)(void);
  int (*all_gather)(const void *send, void *recv, size_t bytes_per_rank, void *comm, void *stream);
  int (*broadcast)(void *buf, size_t bytes, int root, void *comm, void *stream);
  int (*send)(const void *buf, size_t bytes, int peer, void *comm, void *stream);
  int (*recv)(void *buf, size_t bytes, int peer, void *comm, void *stream);
  /* 0, or the error NCCL found in the background (a peer that went away). */
  int (*async_error)(void *comm);
  /* NCCL's abort frees the communicator (nothing to destroy after it),
   * unless abort_keeps: then it only wakes it, and comm_destroy frees it
   * once the rank's own thread is done with it (the emulation, whose
   * collectives run in that thread while another thread aborts). */
  int (*comm_abort)(void *comm);
  int (*comm_destroy)(void *comm);
  bool abort_keeps;
  /* The device */
  int (*set_device)(int device);
  int (*malloc)(void **p, size_t bytes);
  int (*free)(void *p);
  int (*stream_create)(void **stream);
  int (*stream_destroy)(void *stream);
  int (*stream_query)(void *stream);
  int (*tree_sum)(const float *parts, int size, int64_t n, float *out, void *stream);
  const char *(*error_string)(int error);
  bool (*is_oom)(int error);
} brisk_nccl_rt;

/* A new id, on the rank that makes it. */
brisk_status brisk_comm_id_create(const brisk_nccl_rt *rt, brisk_comm_id *id);
/* An id from the bytes another process made (exactly BRISK_COMM_ID_BYTES). */
brisk_status brisk_comm_id_from_bytes(brisk_comm_id *id, const void *bytes, size_t n);

/* Rank `rank` of `size` on CUDA device `device`, joining the group of `id`;
 * returns when every rank has joined (NCCL's rule). */
brisk_status brisk_comm_nccl_create_rank(const brisk_nccl_rt *rt, const brisk_comm_id *id, int rank,
                                         int size, int device, brisk_comm **out);

/* `size` ranks in this process, rank r on devices[r] (distinct), made as
 * one NCCL group; ranks[r] has rank r. On failure none is made. */
brisk_status brisk_comm_nccl_create_local(const brisk_nccl_rt *rt, int size, const int *devices,
                                          brisk_comm **ranks);

#endif
