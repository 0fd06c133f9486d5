/* The loaded model: hyper-parameters and weights in one internal layout that
 * both GGUF files and Hugging Face folders map into. Weights are used in
 * place from the file mapping (no copy). Immutable after load. */
#ifndef BRISK_MODEL_MODEL_H
#define BRISK_MODEL_MODEL_H

#include "brisk.h"
#include "backend/device.h"
#include "model/arch.h"

#include <stdbool.h>
#include <stdint.h>

/* A weight matrix or vector. Matrices are `rows` rows of `cols` elements of
 * `type` (GGUF ne = [cols, rows]); row r starts at data + r * row_bytes.
 * Vectors have rows == 1. `data` is NULL when the tensor is absent. */
typedef struct brisk_weight {
  const void *data;
  uint32_t type; /* brisk_dtype */
  int64_t cols;  /* elements per row (the reduction dimension for matmul) */
  int64_t rows;
  uint64_t row_bytes;
  const char *name; /* the tensor's name in the file, for messages */
  /* Act-order GPTQ (model/hf_quant.h): the matrix's columns were sorted by
   * group at load, and it multiplies x' with x'[t][j] = x[t][perm[j]]
   * ([cols] host memory the model owns; linears of one input with equal
   * orders share one array). NULL: columns as they are. */
  const int32_t *perm;
} brisk_weight;

typedef struct brisk_layer {
  brisk_weight attn_norm;      /* [n_embd] */
  brisk_weight wq;             /* [n_head * head_dim][n_embd] */
  brisk_weight wk;             /* [n_head_kv * head_dim][n_embd] */
  brisk_weight wv;             /* [n_head_kv * head_dim][n_embd] */
  brisk_weight wo;             /* [n_embd][n_head * head_dim] */
  brisk_weight bq, bk, bv;     /* qkv bias (qwen2), [rows of wq/wk/wv] */
  brisk_weight q_norm, k_norm; /* RMSNorm per head (qwen3), [head_dim], or over all
                                * heads (olmo2), [n_head(_kv) * head_dim] */
  brisk_weight post_attn_norm; /* norm of the attention output (olmo2, gemma), [n_embd] */
  brisk_weight ffn_norm;       /* [n_embd]; attn_norm and ffn_norm are absent in olmo2 */
  brisk_weight post_ffn_norm;  /* norm of the FFN output (olmo2, gemma), [n_embd] */
  brisk_weight ffn_gate;       /* dense FFN: [n_ff][n_embd] */
  brisk_weight ffn_up;         /* [n_ff][n_embd] */
  brisk_weight ffn_down;       /* [n_embd][n_ff] */
  brisk_weight moe_router;     /* MoE: [n_expert][n_embd] */
  brisk_weight *expert_gate;   /* MoE: n_expert entries, each [n_ff][n_embd] */
  brisk_weight *expert_up;     /* [n_ff][n_embd] */
  brisk_weight *expert_down;   /* [n_embd][n_ff] */
  brisk_weight shexp_gate;     /* shared expert (qwen2moe): [n_ff_shexp][n_embd] */
  brisk_weight shexp_up;       /* [n_ff_shexp][n_embd] */
  brisk_weight shexp_down;     /* [n_embd][n_ff_shexp] */
  brisk_weight shexp_gate_inp; /* its sigmoid gate: [1][n_embd] */
  /* Multi-head latent attention (deepseek2); wq is then [n_head * head_dim]
   * [n_embd] when the model has no q_lora_rank, wo [n_embd][n_head * v]. */
  brisk_weight wq_a;       /* [q_lora_rank][n_embd] */
  brisk_weight q_a_norm;   /* [q_lora_rank] */
  brisk_weight wq_b;       /* [n_head * head_dim][q_lora_rank] */
  brisk_weight wkv_a_lat;  /* latent rows of kv_a: [kv_lora_rank][n_embd] */
  brisk_weight wkv_a_rope; /* k_rope rows of kv_a: [rope_dim][n_embd] */
  brisk_weight kv_a_norm;  /* [kv_lora_rank] */
  brisk_weight wkv_b;      /* [n_head * (nope + v)][kv_lora_rank], always F32 */
  uint32_t sliding_window; /* 0: full attention in this layer */
  /* The layer whose K/V this one attends to: itself, or with cross-layer
   * KV sharing an earlier layer (model/kv_share.h); a layer that reads
   * another's computes no K/V and holds no KV memory. */
  int32_t kv_source;
  /* Encoders (bert): the output projection's bias, the post-norms' biases
   * (attn_norm and ffn_norm are their weights, applied after each
   * sub-block) and the FFN's biases. */
  brisk_weight bo;                 /* [n_embd] */
  brisk_weight attn_norm_b;        /* [n_embd] */
  brisk_weight ffn_norm_b;         /* [n_embd] */
  brisk_weight ffn_up_b;           /* [n_ff] */
  brisk_weight ffn_down_b;         /* [n_embd] */
} brisk_layer;

typedef struct brisk_model_source brisk_model_source;

struct brisk_model {
  brisk_hparams hp;
  brisk_weight token_embd;  /* [n_vocab][n_embd] */
  brisk_weight output_norm; /* [n_embd] */
  brisk_weight output;      /* [n_vocab][n_embd]; equals token_embd when tied */
  brisk_weight rope_freqs;  /* optional per-pair frequency factors [head_dim / 2] */
  brisk_weight rope_long;   /* LongRoPE: the long factors [rope_dim / 2] (rope_freqs: short) */
  brisk_weight pos_embd;    /* encoders (bert): absolute positions [n_ctx_train][n_embd] */
  brisk_weight type_embd;   /* token types [n_type_vocab][n_embd] */
  brisk_weight embd_norm;   /* the embeddings' LayerNorm weight [n_embd] */
  brisk_weight embd_norm_b; /* and bias [n_embd] */
  brisk_layer *layers;      /* [n_layer] */
  uint64_t n_params;
  uint64_t weight_bytes;
  bool act_order; /* some matrix carries a column order (brisk_weight.perm) */
  brisk_model_source *source; /* the open file(s); keeps the mapping alive */
  /* Placement (model/place.c): layers [0, n_dev_layers) and, when
   * output_on_device, output_norm and output live on `device` (their data
   * pointers are its memory, their types its layouts); everything else is
   * host memory for the CPU backend. A CPU model has n_dev_layers 0. */
  brisk_device_ref device;
  int32_t n_dev_layers;
  bool output_on_device;
  brisk_backend *dev_be; /* owns the device copies (NULL for a CPU model) */
  void **dev_bufs;       /* [n_dev_bufs] those copies, freed with the model */
  size_t n_dev_bufs, dev_bufs_cap;
  uint64_t dev_weight_bytes; /* their bytes */
  struct brisk_vocab *vocab;  /* NULL when the file has no supported tokenizer */
  struct brisk_wordpiece *wordpiece; /* a WordPiece (BERT) tokenizer instead, or NULL */
  /* Embedding defaults of the folder (sentence-transformers' files): a
   * brisk_embed_pooling (0: none given) or a mode brisk does not compute,
   * the longest input in tokens (0: n_ctx_train), a Normalize module. */
  int32_t embed_pooling;
  bool embed_pooling_unsupported;
  uint32_t embed_max_tokens;
  bool embed_normalize;
  char *vocab_error;          /* why vocab is NULL (for the vocabulary calls' message) */
  char *path;
  /* The memory account of the load (core/memcap.h), and what repacking a
   * mapped file charged to it (those pages became the process's own). */
  struct brisk_mem_account *mem;
  uint64_t repack_charge;
  /* Tensor parallelism (model/shard.h): the row-parallel slot split the
   * forward pass reads (NULL: none); with tp_size > 1, the ranks' shards,
   * which borrow this model's source, vocabulary and path (is_shard). */
  struct brisk_split *split;
  struct brisk_model **tp_ranks;
  int32_t tp_size;
  bool is_shard;
  /* Pipeline stages (context/pp.h): 1 runs whole; stage s runs layers
   * [brisk_model_stage_begin(m, s), brisk_model_stage_begin(m, s + 1)). */
  int32_t pp_size;
  /* What this process keeps (model/shard.h, brisk_model_set_local): the
   * layers [local_begin, local_end) and the tensor-parallel shard
   * local_tp_rank (-1: every shard). All layers and shards, unless the
   * model was loaded by one rank of an MPI job whose size is tp x pp: that
   * rank keeps its stage's layers and its shard only, so the job divides
   * the weights' memory. */
  bool local; /* set: the fields below hold; unset (zeros): everything */
  int32_t local_begin, local_end;
  int32_t local_tp_rank;
  bool local_output; /* this process computes the logits (the last stage) */
};

/* The layers this process keeps, [0, brisk_model_local_end(m)) starting at
 * m->local_begin (0 unless m->local). */
static inline int32_t brisk_model_local_end(const struct brisk_model *m) {
  return m->local ? m->local_end : (int32_t)m->hp.n_layer;
}
/* Whether this process keeps TP shard q; and whether it computes the logits. */
static inline bool brisk_model_local_shard(const struct brisk_model *m, int32_t q) {
  return !m->local || m->local_tp_rank < 0 || m->local_tp_rank == q;
}
static inline bool brisk_model_local_output(const struct brisk_model *m) {
  return !m->local || m->local_output;
}

/* Most pipeline stages a model may be cut into. */
#define BRISK_PP_MAX 16

/* First layer of pipeline stage s of m->pp_size (s = pp_size: n_layer):
 * consecutive layers, the stages' sizes differing by at most one. */
static inline int32_t brisk_model_stage_begin(const struct brisk_model *m, int32_t s) {
  return (int32_t)(((int64_t)s * m->hp.n_layer) / (m->pp_size > 1 ? m->pp_size : 1));
}

/* Metadata access that works for both sources (GGUF keys; for Hugging Face
 * folders, config.json keys). Returns BRISK_E_NOT_FOUND when absent. */
brisk_status brisk_model_source_meta(const brisk_model_source *src, const char *key, char *buf,
                                     size_t cap, size_t *needed);

#endif
