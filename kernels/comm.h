/* The communicators' device-side sum (kernels/comm.cu): the NCCL
 * communicator (lib/parallel/comm_nccl.c) all-gathers the ranks' values and
 * adds them here in comm.h's fixed tree over rank ids, so that every rank
 * gets the same bits as brisk_comm_tree_sum on the host, whatever NCCL's
 * own reduction order would have been. */
#ifndef BRISK_KERNELS_COMM_H
#define BRISK_KERNELS_COMM_H

#include "kstream.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest group the tree sum takes. */
#define BRISK_KCOMM_MAX_RANKS 256

/* out[i] = brisk_comm_tree_sum(parts[0][i], ..., parts[size - 1][i]) for i
 * in [0, n); 1 <= size <= BRISK_KCOMM_MAX_RANKS. out may not overlap
 * parts. Returns 0 or the CUDA (emulation) error code; 1 for a size out of
 * range. */
int brisk_kcomm_tree_sum(const float *parts /* [size][n] */, int size, int64_t n,
                         float *out /* [n] */, brisk_kstream stream);

#ifdef __cplusplus
}
#endif

#endif
