/* Tensor-parallel ranks of a context: rank 0 is the context itself (its
 * backend, forward pass and KV storage run the model's shard 0); ranks
 * 1..tp-1 are follower threads, each with its own thread pool, CPU backend,
 * forward pass over its shard and KV storage of its KV heads, all with the
 * same block pool (rank 0's KV manager decides every block).
 *
 * Each decode step rank 0 broadcasts the step (copy-on-write pairs and the
 * forward batch), then every rank copies its blocks and runs its pass; the
 * passes meet in the row-parallel all-reduces and the logits all-gather.
 * A rank that fails aborts the communicator, so every other rank's next
 * collective returns BRISK_E_CANCELLED instead of waiting: the step fails
 * on every rank, and the group stays failed (later steps say so). */
#ifndef BRISK_CONTEXT_TP_H
#define BRISK_CONTEXT_TP_H

#include "brisk.h"
#include "forward/forward.h"
#include "parallel/comm.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct brisk_tp brisk_tp;

/* The group for a model loaded with tp_size > 1: starts the followers,
 * each with n_threads (>= 1) threads, KV storage of n_blocks blocks of
 * block_size tokens in kv_dtype, passes of up to max_tokens over layers
 * [layer_begin, layer_end) (a pipeline stage's, context/pp.h; all of them
 * without PP), KV storage for those layers only. *comm0 is rank 0's handle,
 * for the leader's forward pass. */
brisk_status brisk_tp_create(const brisk_model *model, int n_threads, uint32_t kv_dtype,
                             int32_t n_blocks, int32_t block_size, int32_t max_tokens,
                             int32_t layer_begin, int32_t layer_end, brisk_tp **out,
                             brisk_comm **comm0);

/* Rank 0, before its own copy and pass: sends the step to the followers.
 * `copies` are {src, dst} block pairs. A group of a later pipeline stage
 * (layer_begin > 0) also sends x, the stage's input ([n_tokens][n_embd],
 * the leader's brisk_forward_residual); NULL otherwise. */
brisk_status brisk_tp_step(brisk_tp *g, const int32_t *copies, int32_t n_copies,
                           const brisk_forward_batch *b, float *x);

/* Rank 0 after a failure (`why`: its status; BRISK_E_CANCELLED when a
 * collective reported another rank's): the followers stop (abort). */
void brisk_tp_fail(brisk_tp *g, brisk_status why);

/* Test hook: follower `rank` fails its next step with BRISK_E_INTERNAL
 * once it has the step, while rank 0 is already in its pass; rank 0
 * fails its next step once it has sent it (the followers in their pass). */
void brisk_tp_force_error(brisk_tp *g, int rank);

/* Stops the followers (a shutdown step, or abort after a failure), joins
 * them and frees everything; NULL is a no-op. */
void brisk_tp_free(brisk_tp *g);

/* Multi-process ranks (parallel/world.h): when the process has joined an
 * MPI world of exactly tp_size processes, brisk_tp_create on its rank 0
 * runs the group over the world (the other processes are its followers)
 * instead of threads. A follower process serves rank 0's contexts one at
 * a time: brisk_tp_serve waits for the next one and follows its steps
 * until rank 0 frees it (BRISK_OK), or sets *ended when rank 0 ended the
 * world (brisk_tp_end_world), or returns how the context failed. */
brisk_status brisk_tp_serve(const brisk_model *model, int n_threads, bool *ended);
brisk_status brisk_tp_end_world(void);

/* The world's side of a context over the processes (TP ranks here, or
 * pipeline stages, context/pp.h), on rank 0: tells the workers the
 * context's KV geometry and pass size and waits for every worker's setup
 * (a barrier); with grid_tp > 1 the world is a grid of pipeline stages
 * of grid_tp TP ranks and its groups are made in between
 * (brisk_world_grid). BRISK_E_INVALID_STATE on another rank; BRISK_E_CANCELLED
 * once a context over the world failed. A failure here fails the world. */
brisk_status brisk_world_context_begin(uint32_t kv_dtype, int32_t n_blocks, int32_t block_size,
                                       int32_t max_tokens, int32_t grid_tp);
/* A context over the world failed: the world takes no more (and rank 0
 * sends no end message). */
void brisk_world_fail(void);
/* A worker starting to serve a context: whether the test hook
 * (brisk_tp_worker_force_error) says this one fails its first step. */
bool brisk_world_forced_error(void);
/* Test hook of a follower process: the nth context it serves from now on
 * (1: the next) fails its first step with BRISK_E_INTERNAL, after the step
 * arrived, while rank 0 is in its pass. */
void brisk_tp_worker_force_error(int nth);

#endif
