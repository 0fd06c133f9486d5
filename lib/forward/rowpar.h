/* The row-parallel sums of the forward pass over a model's slot split
 * (model/shard.h): each slot's partial sum is pushed onto a small stack
 * that adds equal-sized subtrees as soon as both exist, which is the
 * pairwise tree ((p0 + p1) + (p2 + p3)) for a power-of-two slot count;
 * finish adds the ranks' subtrees with the communicator's tree all-reduce,
 * into the caller's buffer (the forward pass then adds it to the residual
 * stream, after a post-norm where the model has one).
 *
 * The buffers live where the split layers run: host memory for a CPU
 * model (or the host layers of one split with a GPU), the device's memory
 * for a model wholly on a GPU. There a slot's columns are gathered by the
 * backend's embed (rows of the widest width dividing every offset), zero
 * slots are copied from a zeroed buffer, and the communicator (NCCL) reads
 * device buffers once the backend has finished writing them. */
#ifndef BRISK_FORWARD_ROWPAR_H
#define BRISK_FORWARD_ROWPAR_H

#include "backend/backend.h"
#include "model/shard.h"
#include "parallel/comm.h"

#include <stdint.h>

#define BRISK_ROWPAR_DEPTH 5 /* log2(BRISK_SPLIT_SLOTS) + 2 */

typedef struct brisk_rowpar {
  brisk_comm *comm;   /* the tensor-parallel group; NULL: one rank */
  brisk_backend *dev; /* the device backend whose memory the buffers are; NULL: host */
  float *zeros;       /* device only: [max_tokens][d] zeros */
  int32_t *ids;       /* device only: host [ids_cap] the gathers' row ids */
  size_t ids_cap;
  int64_t d; /* n_embd: columns of every partial sum */
  int64_t gather_cols;
  float *gather;                   /* [max_tokens][gather_cols] one slot's input columns */
  float *part[BRISK_ROWPAR_DEPTH]; /* [max_tokens][d] pending partial sums */
  int level[BRISK_ROWPAR_DEPTH];   /* subtree height of each */
  int top;
  float *vlocal, *vall; /* output: [max_tokens][vocab_max], [tp][max_tokens][vocab_max] */
  uint64_t bytes;
} brisk_rowpar;

/* Buffers for batches of up to max_tokens over the model's split (which
 * must be set), in host memory (dev NULL) or dev's. */
brisk_status brisk_rowpar_init(brisk_rowpar *r, const brisk_model *m, int32_t max_tokens,
                               brisk_backend *dev);
void brisk_rowpar_free(brisk_rowpar *r);
/* The bytes brisk_rowpar_init allocates for the model (0 without a split). */
uint64_t brisk_rowpar_bytes(const brisk_model *m, int32_t max_tokens);

/* The buffer of the next slot's partial sum, [n][d]. */
float *brisk_rowpar_slot(brisk_rowpar *r);
/* The slot's buffer, filled, joins the sum. */
brisk_status brisk_rowpar_push(brisk_rowpar *r, brisk_backend *be, int32_t n);
/* A zero partial sum (a slot with nothing in it on this rank). */
brisk_status brisk_rowpar_push_zero(brisk_rowpar *r, brisk_backend *be, int32_t n);
/* Zeroes the next slot's buffer ([n][d]), for a sum added into it. */
brisk_status brisk_rowpar_zero_slot(brisk_rowpar *r, brisk_backend *be, int32_t n);
/* One slot: x[:, c0:c1] . w^T, x [n][x_cols]. An absent w is a zero slot. */
brisk_status brisk_rowpar_matmul(brisk_rowpar *r, brisk_backend *be, const brisk_weight *w,
                                 const float *x, int64_t x_cols, int64_t c0, int64_t c1, int32_t n);
/* out [n][d] = the sum over every slot of every rank (the buffers'
 * memory); the stack is empty again. */
brisk_status brisk_rowpar_finish(brisk_rowpar *r, brisk_backend *be, int32_t n, float *out);

/* The output projection of a split model: this rank's vocabulary rows into
 * a local buffer, gathered from every rank into logits [n][n_vocab]. */
brisk_status brisk_rowpar_output(brisk_rowpar *r, brisk_backend *be, const brisk_model *m,
                                 const float *h, int32_t n, float *logits);

#endif
