/* Pipeline-parallel stages of a context (docs/parallelism.md): stage s of
 * S runs the model's consecutive layers [brisk_model_stage_begin(m, s),
 * brisk_model_stage_begin(m, s + 1)). Stage 0 is the context itself (its
 * KV manager decides every block; its forward pass embeds the tokens and
 * runs the first layers); stages 1..S-1 are threads, each with its own
 * thread pool, CPU backend, forward pass over its layers and KV storage of
 * its layers only, and, with tensor parallelism, its own group of TP ranks
 * (a tp x pp grid).
 *
 * A step: stage 0 broadcasts the batch (and copy-on-write pairs) to the
 * stages, cuts the batch's tokens into micro-batches and, for each, runs
 * its layers and sends the residual stream (n_tokens x n_embd floats) to
 * stage 1, which runs its layers and sends it on, and so on: while stage 1
 * works on micro-batch j, stage 0 works on j + 1. The last stage collects
 * the logits of every micro-batch and sends them to stage 0 at the end.
 * Micro-batches go through each stage in order, so a token of micro-batch
 * j + 1 finds the K/V of the earlier tokens of its sequence written, and
 * the logits are bit for bit those of one pass (the forward pass is
 * batch-invariant).
 *
 * Failure: a stage that fails aborts the pipeline's communicator (and its
 * TP group), so every other stage's send, recv or broadcast returns
 * BRISK_E_CANCELLED instead of waiting; the step fails on every stage and
 * the group stays failed (later steps say so). */
#ifndef BRISK_CONTEXT_PP_H
#define BRISK_CONTEXT_PP_H

#include "brisk.h"
#include "context/tp.h"
#include "forward/forward.h"

#include <stdint.h>

typedef struct brisk_pp brisk_pp;

/* The stages 1..pp_size-1 of a model loaded with pp_size > 1, each with
 * n_threads (>= 1) threads per rank, KV storage of n_blocks blocks of
 * block_size tokens in kv_dtype, passes of up to max_tokens. */
brisk_status brisk_pp_create(const brisk_model *model, int n_threads, uint32_t kv_dtype,
                             int32_t n_blocks, int32_t block_size, int32_t max_tokens,
                             brisk_pp **out);

/* Stage 0's step, on the context's thread: fwd0 (set to stage 0's layers)
 * over kv0, with tp0 its TP followers (NULL without TP), after the
 * context's own block copies; the other stages get the batch and `copies`
 * ({src, dst} pairs) from here. The logits of the batch's n_out rows land
 * in logits ([n_out][n_vocab], host memory). A failure once the step is
 * sent fails the group (every stage stops) and tp0; an allocation failure
 * before it leaves both usable. */
brisk_status brisk_pp_run(brisk_pp *g, brisk_forward *fwd0, brisk_tp *tp0,
                          const brisk_forward_kv *kv0, const int32_t *copies, int32_t n_copies,
                          const brisk_forward_batch *b, float *logits);

/* Micro-batches a batch of n_tokens is cut into on `stages` stages. */
int32_t brisk_pp_micro_batches(int32_t n_tokens, int32_t stages);

/* What the steps so far measured: micro-batches run, and the bubble
 * fraction, 1 - (time the stages computed) / (stages x wall time of the
 * steps), and the ideal one for the same micro-batch counts,
 * (S - 1) / (M + S - 1) averaged over the steps. Zeros before a step. */
void brisk_pp_stats(const brisk_pp *g, uint64_t *n_micro, double *bubble, double *ideal);

/* Test hook: stage `stage` (1..S-1, thread stages) fails its next step
 * with BRISK_E_INTERNAL once it has the step; stage 0 fails its next step
 * after its first micro-batch's pass (the later stages in theirs). */
void brisk_pp_force_error(brisk_pp *g, int stage);

/* Stops the stages (a shutdown step, or abort after a failure), joins them
 * and frees everything; NULL is a no-op. */
void brisk_pp_free(brisk_pp *g);

/* Stages as the processes of an MPI world of pp_size processes
 * (parallel/world.h; context/tp.h has the world's protocol): on rank 0,
 * brisk_pp_create runs the pipeline over the world (stage s is rank s)
 * instead of threads; with tp_size > 1 over a world of tp_size x pp_size
 * processes, over the stage leaders (brisk_world_grid), each stage with a
 * TP group of processes. A worker process serves one context (whose
 * geometry rank 0 sent, brisk_tp_serve) as stage rank(stages): BRISK_OK when rank 0 frees it,
 * else how the context failed (a failing stage, or rank 0, makes every
 * stage return a status: each finishes the step's exchanges in failed
 * mode). */
brisk_status brisk_pp_serve(const brisk_model *model, int n_threads, uint32_t kv_dtype,
                            int64_t n_blocks, int64_t block_size, int64_t max_tokens,
                            brisk_comm *stages);

#endif
