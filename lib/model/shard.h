/* Tensor-parallel shards of a loaded model, and the fixed split of the
 * row-parallel reductions that makes the result the same bits for every
 * tensor-parallel size.
 *
 * The reduction dimension of the two row-parallel projections (attention
 * output wo over the query heads, FFN down over n_ff, and the MoE sum over
 * experts) is cut into BRISK_SPLIT_SLOTS fixed slots: slot s holds heads
 * [s H / 8, (s + 1) H / 8) (floor), FFN columns likewise in units of the
 * weight's quantization block, experts likewise. Each slot's partial sum is
 * one matmul over its own contiguous columns; the slots are added in one
 * pairwise tree, ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). Rank r
 * of TP ranks (TP dividing 8) holds slots [r 8 / TP, (r + 1) 8 / TP), a
 * subtree: it adds its own slots by the same tree, and the communicator's
 * all-reduce (the same pairwise tree over ranks) adds the subtrees. So the
 * sum is computed by the same operations in the same order for TP = 1, 2,
 * 4 and 8, and TP = 1 runs this path too.
 *
 * A model whose wo cannot be cut at every slot boundary (head_dim not a
 * multiple of the weight's block, e.g. Q4_K with 64-dim heads) keeps one
 * slot: it runs as before at TP = 1, and refuses TP > 1. */
#ifndef BRISK_MODEL_SHARD_H
#define BRISK_MODEL_SHARD_H

#include "model/model.h"

#include <stdint.h>

#define BRISK_SPLIT_SLOTS 8
#define BRISK_TP_MAX 8

/* One layer's row-parallel weights, for the slots a rank holds. */
typedef struct brisk_split_layer {
  /* Slot j (0 <= j < n_slots) reads columns [att_col[j], att_col[j + 1]) of
   * the rank's attention output; wo[j] is [n_embd][those columns] (data NULL
   * when the slot holds no head). */
  int32_t att_col[BRISK_SPLIT_SLOTS + 1];
  brisk_weight wo[BRISK_SPLIT_SLOTS];
  /* Dense FFN: columns [ff_col[j], ff_col[j + 1]) of the rank's gate
   * activations, down[j] [n_embd][those columns]. */
  int32_t ff_col[BRISK_SPLIT_SLOTS + 1];
  brisk_weight down[BRISK_SPLIT_SLOTS];
  /* MoE: slot j sums experts [expert[j], expert[j + 1]) (global ids). */
  int32_t expert[BRISK_SPLIT_SLOTS + 1];
} brisk_split_layer;

/* A rank's split (model->split): what the forward pass reads instead of the
 * layers' wo / ffn_down, and the vocabulary range of its output rows. */
typedef struct brisk_split {
  int32_t tp_size, tp_rank;
  int32_t n_slots; /* slots per rank: BRISK_SPLIT_SLOTS / tp_size, or 1 (unsliced) */
  int32_t
      first_layer; /* layers [first_layer, n_layer) are split; earlier ones keep wo / ffn_down */
  int32_t vocab_begin[BRISK_TP_MAX + 1]; /* rank q's output rows [vocab_begin[q], [q + 1]) */
  int32_t vocab_max;                     /* the largest rank's row count */
  brisk_split_layer *layers;             /* [n_layer] */
  void **bufs;                           /* copies this split owns */
  size_t n_bufs, bufs_cap;
  uint64_t owned_bytes; /* their bytes */
} brisk_split;

/* Whether the model can be cut into BRISK_SPLIT_SLOTS slots (else 1). */
int32_t brisk_split_model_slots(const brisk_model *m);

/* Attaches the TP = 1 split (m->split): the slot copies of wo / ffn_down
 * of the layers from first_host_layer on (those the CPU runs; the device's
 * layers use wo / ffn_down as they are). A model of one slot gets none. */
brisk_status brisk_split_attach(brisk_model *m, uint32_t first_host_layer);

/* Makes the shards of a host model for tp_size ranks (2..BRISK_TP_MAX,
 * dividing BRISK_SPLIT_SLOTS): m->tp_ranks[r], each a model whose hparams
 * are the rank's (n_head, n_head_kv, n_ff), whose column-parallel weights
 * are views of the rank's rows, and whose split holds its slot copies.
 * Called before any in-place regrouping (the views read the stored layout). */
brisk_status brisk_split_make_ranks(brisk_model *m, int32_t tp_size);

/* At load, before placement: tp_size > 1 makes the ranks (a GPU model
 * only with every layer on the devices); otherwise a model gets its
 * TP = 1 split: every layer of a CPU model or of a model wholly on a GPU,
 * the host layers of one split between a GPU and the host. */
brisk_status brisk_model_split(brisk_model *m, int32_t tp_size, int32_t n_gpu_layers);

/* Frees the split's host copies once they have been copied to a device
 * (the weights then point at the device's memory). */
void brisk_split_drop_host_copies(brisk_split *sp);

/* Frees m->split and m->tp_ranks (and what each rank placed on its device). */
void brisk_split_free(brisk_model *m);

/* Bytes of weights rank `rank` reads (its views and copies; embeddings and
 * norms, which every rank keeps, included), over the layers this process
 * keeps (m->local_*). For a model without ranks, the model's weight bytes;
 * 0 for a shard this process does not hold. */
uint64_t brisk_split_rank_bytes(const brisk_model *m, int32_t rank);

/* What this process keeps (brisk_model's local_* fields), before the split
 * and placement: rank `rank` of an MPI job of `size` processes, when size
 * is tp_size x pp_size (2 or more), keeps the layers of its pipeline stage
 * (rank / tp) and its tensor-parallel shard (rank % tp), and computes the
 * logits if its stage is the last; otherwise everything. */
void brisk_model_set_local(brisk_model *m, int32_t tp_size, int32_t pp_size, int32_t rank,
                           int32_t size);

#endif
