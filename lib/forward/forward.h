/* The forward pass over a batch, written once for every architecture and
 * every backend: it calls only the backend's operation table. */
#ifndef BRISK_FORWARD_FORWARD_H
#define BRISK_FORWARD_FORWARD_H

#include "backend/backend.h"
#include "model/model.h"
#include "parallel/comm.h"

#include <stdint.h>

typedef struct brisk_forward brisk_forward;

/* Per-layer paged K/V storage, owned by the caller (the context). A
 * latent-attention model (deepseek2) keeps its latent rows in the same
 * pair of pools (backend.h, brisk_mla_params); brisk_forward_kv_geometry
 * gives the pools' heads and head_dim. */
typedef struct brisk_forward_kv {
  brisk_kv_layout layout;
  void **k; /* [n_layer] each [n_blocks][n_kv_heads][block_size][head_dim] */
  void **v; /* [n_layer] same */
} brisk_forward_kv;

/* The heads and head_dim of each K and V pool for the model: n_head_kv and
 * head_dim, or for latent attention 1 head of (kv_lora_rank + rope_dim) / 2
 * values in each pool, the two halves of a token's latent row. */
void brisk_forward_kv_geometry(const brisk_hparams *hp, int32_t *n_kv_heads, int32_t *head_dim);

/* One batch, all host memory. Token i is position pos[i] of the sequence
 * whose block table is row seq_row[i] of block_tables, and its K/V goes to
 * global slot slot[i]. Logits are produced for the n_out tokens listed in
 * out_rows (ascending batch indices). */
typedef struct brisk_forward_batch {
  int32_t n_tokens;
  const int32_t *tokens;       /* [n_tokens] */
  const int32_t *pos;          /* [n_tokens] */
  const int32_t *seq_row;      /* [n_tokens] */
  const int64_t *slot;         /* [n_tokens] */
  const int32_t *block_tables; /* [n_seqs][max_blocks] */
  int32_t n_seqs;
  int32_t max_blocks;
  int32_t n_out;
  const int32_t *out_rows; /* [n_out] */
  /* Attention sinks (context/stream.c), both optional. rope_pos[n_tokens]:
   * the positions RoPE rotates by where they differ from pos (a windowed
   * sequence's pos are its table positions); NULL: pos. keep_rows[n_keep]:
   * batch rows whose K before RoPE and V each layer copies to host
   * keep_k / keep_v [n_layer][n_keep][n_head_kv * head_dim]. */
  const int32_t *rope_pos;
  int32_t n_keep;
  const int32_t *keep_rows;
  float *keep_k, *keep_v;
} brisk_forward_batch;

/* Abort check between layers: nonzero stops the pass with BRISK_E_CANCELLED. */
typedef int (*brisk_forward_abort_fn)(void *user_data);

/* Activation buffers sized for batches of up to max_tokens tokens, on the
 * host backend (a CPU backend: embeddings, and the layers the model keeps in
 * host memory) and, exactly when the model has layers on a device, on
 * `device` (a backend of the model's device, NULL otherwise). Both are
 * borrowed and must outlive the pass. */
brisk_status brisk_forward_create(const brisk_model *model, brisk_backend *host,
                                  brisk_backend *device, int32_t max_tokens, brisk_forward **out);

/* Which backend runs a layer, and the output: 0 the host's, 1 the device's.
 * The layer's K/V cache and the logits buffer live on that backend. */
int brisk_forward_layer_device(const brisk_model *model, int32_t layer);
int brisk_forward_output_device(const brisk_model *model);
void brisk_forward_free(brisk_forward *f);
/* The tensor-parallel group of a rank shard's pass (model->split with
 * tp_size > 1): its row-parallel sums and output gather run over `comm`,
 * borrowed, which every rank's pass enters in the same order. */
void brisk_forward_set_comm(brisk_forward *f, brisk_comm *comm);
/* A pipeline stage's pass (context/pp.h): layers [begin, end) only, 0 <=
 * begin < end <= n_layer (default: all). A pass that begins after layer 0
 * reads its input from brisk_forward_residual instead of the embeddings;
 * one that ends before the last layer leaves its output there and writes
 * no logits. Host models only. */
void brisk_forward_set_layers(brisk_forward *f, int32_t begin, int32_t end);
/* The host residual stream, [max_tokens][n_embd] floats: the stage
 * boundary's activations (host memory: the CPU backend's buffers are). */
float *brisk_forward_residual(brisk_forward *f);
/* on: brisk_forward_run writes the out_rows tokens' final hidden states,
 * after the output norm, into `logits` as host memory ([n_out][n_embd])
 * instead of their logits (embeddings from decoder models). */
void brisk_forward_set_hidden_output(brisk_forward *f, bool on);
/* Bytes of backend memory the activation buffers hold. */
uint64_t brisk_forward_bytes(const brisk_forward *f);

/* Sees the input of every weight matrix product on the host: n rows of
 * w->cols floats (w is the model's weight; x is host memory, so only layers
 * on the host backend are seen). For activation statistics (brisk
 * imatrix). Called on the decoding thread; NULL fn removes it. */
typedef void (*brisk_forward_observe_fn)(void *user, const brisk_weight *w, const float *x,
                                         int32_t n);
void brisk_forward_set_observer(brisk_forward *f, brisk_forward_observe_fn fn, void *user);

/* Runs the model on the batch: writes every token's K/V into `kv` and the
 * logits of the out_rows tokens into logits ([n_out][n_vocab], memory of the
 * output's backend). */
brisk_status brisk_forward_run(brisk_forward *f, const brisk_forward_kv *kv,
                               const brisk_forward_batch *batch, float *logits,
                               brisk_forward_abort_fn abort_fn, void *abort_user_data);

/* Writes the K/V of n tokens again, every layer on its backend: k rows as
 * they were before RoPE (keep_k above) rotated to rope_pos[n], v rows as
 * they were (host [n_layer][n][n_head_kv * head_dim] each), to global
 * slots slot[n]: a windowed sequence's sinks, moved next to its window
 * (context/stream.c). n in 1 .. max_tokens. */
brisk_status brisk_forward_rewrite_kv(brisk_forward *f, const brisk_forward_kv *kv, int32_t n,
                                      const float *k, const float *v, const int32_t *rope_pos,
                                      const int64_t *slot);

#endif
