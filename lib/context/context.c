/* The context: a model, a backend, a paged KV cache and the forward pass,
 * behind brisk_decode and the sequence operations. */
#include "context/batch.h"
#include "context/context.h"
#include "context/stream.h"
#include "context/pp.h"
#include "context/swap.h"
#include "context/tp.h"

#include "backend/device.h"
#include "core/abi.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memcap.h"
#include "core/threadpool.h"
#include "forward/forward.h"
#include "forward/rowpar.h"
#include "kv/host_tier.h"
#include "kv/kv.h"
#include "model/kv_share.h"
#include "model/model.h"
#include "parallel/world.h"

#include <stddef.h>
#include <string.h>

struct brisk_context {
  const brisk_model *model;
  brisk_context_params params;
  brisk_threadpool *pool;
  brisk_backend *be;     /* the host CPU's: embeddings, layers kept in host memory */
  brisk_backend *dev_be; /* the model's device's, when it has layers there; else NULL */
  brisk_kv *kv;
  brisk_forward_kv storage;
  uint64_t bytes_per_block;
  brisk_forward *fwd;
  /* Per-decode scratch, host, sized for max_batch_tokens. */
  int64_t *slot;         /* [max_batch] */
  int32_t *seq_row;      /* [max_batch] */
  int32_t *out_rows;     /* [max_batch] */
  int32_t *logit_row;    /* [max_batch] batch entry -> row of logits, or -1 */
  int32_t *row_of_seq;   /* [n_seq_max] row of a sequence in the decode's tables, or -1 */
  int32_t *roll_seq;     /* [max_batch] sequences a decode touches, in first-seen order */
  int32_t *old_len;      /* [max_batch] their lengths before it */
  brisk_kv_copy *copies; /* [max_batch] */
  int32_t *tables;       /* host [n_tables_cap] block tables of the batch */
  size_t tables_cap;
  float *logits_dev;       /* output backend [max_batch][n_vocab] */
  float *logits;           /* host [max_batch][n_vocab] */
  int32_t n_logit_entries; /* entries of the last decode; 0 before the first */
  /* What the context's calls allocate is charged here (core/memcap.h). */
  brisk_mem_account *mem;
  /* A model loaded with tp_size > 1: this context is rank 0 (its backend,
   * forward pass and KV storage run shard 0) and tp holds the followers. */
  brisk_tp *tp;
  brisk_comm *comm0;
  brisk_stream *stream; /* windowed sequences' sinks (context/stream.h); NULL: none yet */
  /* A model loaded with pp_size > 1: this context is stage 0 (its KV
   * storage holds stage 0's layers only) and pp holds the later stages. */
  brisk_pp *pp;
};

BRISK_API void brisk_context_params_init(brisk_context_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->block_size = 16;
  p->kv_type = BRISK_KV_F16;
  p->max_batch_tokens = 512;
  p->n_seq_max = 64;
  p->prefix_cache = 1;
}

uint32_t brisk_context_kv_dtype(brisk_kv_type type) {
  switch (type) {
  case BRISK_KV_F32: return BRISK_DTYPE_F32;
  case BRISK_KV_Q8_0: return BRISK_KVQ_DTYPE_Q8;
  case BRISK_KV_FP8_E4M3: return BRISK_KVQ_DTYPE_FP8;
  default: return BRISK_DTYPE_F16;
  }
}

static brisk_status copy_params(const brisk_context_params *in, brisk_context_params *out) {
  brisk_context_params_init(out);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_context_params, in, out);
  if (st) return st;
  if (out->n_threads < 0 || out->n_threads > 1024)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "n_threads %d is outside [0, 1024]",
                       out->n_threads);
  if (out->block_size < 1 || out->block_size > 4096)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "block_size %d is outside [1, 4096]",
                       out->block_size);
  if (out->kv_type != BRISK_KV_F16 && out->kv_type != BRISK_KV_F32 &&
      out->kv_type != BRISK_KV_Q8_0 && out->kv_type != BRISK_KV_FP8_E4M3)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "kv_type %d is not a brisk_kv_type",
                       (int)out->kv_type);
  if (out->max_batch_tokens < 1 || out->max_batch_tokens > (1 << 20))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "max_batch_tokens %d is outside [1, 2^20]",
                       out->max_batch_tokens);
  if (out->n_seq_max < 1 || out->n_seq_max > (1 << 20))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "n_seq_max %d is outside [1, 2^20]",
                       out->n_seq_max);
  if (out->kv_tokens < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "kv_tokens %d is negative", out->kv_tokens);
  return BRISK_OK;
}

/* Number of KV blocks from the params: tokens, else a byte budget, else a
 * default of min(n_ctx_train, 4096) tokens. */
static brisk_status pool_blocks(const brisk_context_params *p, const brisk_hparams *hp,
                                uint64_t bytes_per_block, int32_t *n_blocks) {
  uint64_t blocks;
  if (p->kv_tokens > 0 || p->kv_bytes == 0) {
    uint64_t tokens = p->kv_tokens > 0 ? (uint64_t)p->kv_tokens
                                       : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    blocks = (tokens + (uint64_t)p->block_size - 1) / (uint64_t)p->block_size;
  } else {
    blocks = p->kv_bytes / bytes_per_block;
    if (blocks == 0)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "kv_bytes %llu is less than one KV block (%llu bytes)",
                         (unsigned long long)p->kv_bytes, (unsigned long long)bytes_per_block);
  }
  if (blocks > INT32_MAX / (uint64_t)p->block_size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "KV pool of %llu blocks is too large",
                       (unsigned long long)blocks);
  *n_blocks = (int32_t)blocks;
  return BRISK_OK;
}

static brisk_status alloc_kv_storage(brisk_context *c) {
  const brisk_hparams *hp = &c->model->hp;
  brisk_forward_kv *s = &c->storage;
  size_t layer_bytes = (size_t)(c->bytes_per_block / (2 * brisk_model_kv_layers(c->model))) *
                       (size_t)s->layout.n_blocks;
  s->k = brisk_calloc(hp->n_layer, sizeof(void *));
  s->v = brisk_calloc(hp->n_layer, sizeof(void *));
  if (!s->k || !s->v) return brisk_error_oom();
  /* Under pipeline parallelism, stage 0's layers only (the rest NULL). */
  for (uint32_t l = 0; l < (uint32_t)brisk_model_stage_begin(c->model, 1); l++) {
    brisk_backend *be = brisk_context_layer_backend(c, l);
    const int32_t src = c->model->layers[l].kv_source;
    brisk_status st;
    if (src != (int32_t)l) { /* cross-layer KV sharing: the source's pools */
      s->k[l] = s->k[src];
      s->v[l] = s->v[src];
    } else if ((st = be->buffer_alloc(be, layer_bytes, &s->k[l])) ||
               (st = be->buffer_alloc(be, layer_bytes, &s->v[l]))) {
      return st;
    }
  }
  return BRISK_OK;
}

/* What this context runs: the model, or under tensor parallelism rank 0's
 * shard (which, on GPU devices, is what lives on rank 0's device). */
static const brisk_model *rank0_model(const brisk_model *m) {
  return m->tp_size > 1 ? m->tp_ranks[0] : m;
}
brisk_backend *brisk_context_host_backend(brisk_context *c) { return c->be; }

brisk_backend *brisk_context_layer_backend(brisk_context *c, uint32_t layer) {
  return brisk_forward_layer_device(rank0_model(c->model), (int32_t)layer) ? c->dev_be : c->be;
}

static brisk_backend *output_backend(const brisk_context *c) {
  return brisk_forward_output_device(rank0_model(c->model)) ? c->dev_be : c->be;
}

BRISK_API void brisk_context_free(brisk_context *c) {
  if (!c) return;
  brisk_pp_free(c->pp);
  brisk_tp_free(c->tp);
  for (uint32_t l = 0; l < c->model->hp.n_layer; l++) {
    brisk_backend *be = brisk_context_layer_backend(c, l);
    if (!be) continue; /* creation failed before the backends existed */
    if (c->model->layers[l].kv_source != (int32_t)l) continue; /* the source's pools */
    if (c->storage.k) be->buffer_free(be, c->storage.k[l]);
    if (c->storage.v) be->buffer_free(be, c->storage.v[l]);
  }
  brisk_free(c->storage.k);
  brisk_free(c->storage.v);
  if (output_backend(c)) output_backend(c)->buffer_free(output_backend(c), c->logits_dev);
  brisk_forward_free(c->fwd);
  brisk_kv_free(c->kv);
  brisk_stream_free(c->stream);
  brisk_backend_free(c->dev_be);
  brisk_backend_free(c->be);
  brisk_threadpool_free(c->pool);
  brisk_free(c->slot);
  brisk_free(c->seq_row);
  brisk_free(c->out_rows);
  brisk_free(c->logit_row);
  brisk_free(c->row_of_seq);
  brisk_free(c->old_len);
  brisk_free(c->roll_seq);
  brisk_free(c->copies);
  brisk_free(c->tables);
  brisk_free(c->logits);
  brisk_mem_account *mem = c->mem;
  brisk_free(c);
  brisk_mem_account_release(mem);
}

BRISK_API brisk_status brisk_context_create(const brisk_model *model,
                                            const brisk_context_params *params,
                                            brisk_context **out) {
  if (!model || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_context_create: model and out must be set");
  const brisk_arch_info *ai = brisk_arch_get(model->hp.arch);
  if (ai && ai->encoder)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "a %s model is an encoder: it gives embeddings (brisk_embed), not tokens",
                       ai->name);
  if (!model->layers)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_context_create: the model was loaded without weights (vocab_only)");
  brisk_context_params p;
  brisk_status st = copy_params(params, &p);
  if (st) return st;
  /* A rank of an MPI job other than 0 holds its part of the model only
   * (model/shard.h): it follows rank 0's contexts, it makes none. */
  if ((model->tp_size > 1 && !model->tp_ranks[0]) || model->local_begin > 0)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "this process holds its MPI rank's part of the model only: rank 0 creates "
                       "the contexts, this rank follows them through brisk_worker_run");
  const brisk_hparams *hp = &model->hp;
  /* Tensor parallelism: rank 0's shard, its KV heads, its share of the
   * threads (KV figures are rank 0's). */
  const brisk_model *shard = rank0_model(model);
  int tp = model->tp_size > 1 ? model->tp_size : 1, pp = model->pp_size > 1 ? model->pp_size : 1;
  int rank_threads = p.n_threads > 0 ? p.n_threads : brisk_cpu_count();
  /* TP ranks that are the processes of an MPI job (context/tp.h) each have
   * their process's threads. */
  brisk_comm *world = brisk_world();
  int local = world && brisk_comm_size(world) == tp * pp ? 1 : tp * pp;
  rank_threads = rank_threads / local > 0 ? rank_threads / local : 1;
  const uint32_t kv_dtype = brisk_context_kv_dtype(p.kv_type);
  int32_t kv_heads, kv_dim; /* latent attention: one latent row per token (forward.h) */
  brisk_forward_kv_geometry(&shard->hp, &kv_heads, &kv_dim);
  if (hp->kv_lora_rank && brisk_kvq_is_quantized(kv_dtype))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "kv_type %d: the latent KV cache of %s (multi-head latent attention) is "
                       "f16 or f32 only",
                       (int)p.kv_type, brisk_arch_get(hp->arch)->name);
  /* Layers sharing another's K/V hold none. */
  uint64_t bytes_per_block = 2ull * brisk_model_kv_layers(model) * (uint64_t)kv_heads *
                             (uint64_t)p.block_size * brisk_kvq_row_bytes(kv_dtype, kv_dim);
  for (uint32_t l = 0; l < hp->n_layer; l++)
    if (brisk_forward_layer_device(model, (int32_t)l) !=
        brisk_forward_layer_device(model, model->layers[l].kv_source))
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "layer %u reads the K/V of layer %d (cross-layer KV sharing), which "
                         "n_gpu_layers places on another device",
                         l, model->layers[l].kv_source);
  int32_t n_blocks = 0;
  if ((st = pool_blocks(&p, hp, bytes_per_block, &n_blocks))) return st;

  /* Everything the context allocates, from here on and in its calls, is
   * charged to its account. */
  brisk_mem_account *mem = NULL;
  if ((st = brisk_mem_account_create(p.memory_limit, "context's", &mem))) return st;
  brisk_mem_account *outer = brisk_mem_enter(mem);
  brisk_context *c = brisk_calloc(1, sizeof *c);
  if (!c) {
    brisk_mem_leave(outer);
    brisk_mem_account_release(mem);
    return brisk_error_oom();
  }
  c->mem = mem;
  c->model = model;
  c->params = p;
  c->bytes_per_block = bytes_per_block;
  c->storage.layout = (brisk_kv_layout){kv_dtype, n_blocks, kv_heads, p.block_size, kv_dim};
  size_t nb = (size_t)p.max_batch_tokens, nv = hp->n_vocab;
  c->slot = brisk_malloc(nb * sizeof *c->slot);
  c->seq_row = brisk_malloc(nb * sizeof *c->seq_row);
  c->out_rows = brisk_malloc(nb * sizeof *c->out_rows);
  c->logit_row = brisk_malloc(nb * sizeof *c->logit_row);
  c->row_of_seq = brisk_malloc((size_t)p.n_seq_max * sizeof *c->row_of_seq);
  c->old_len = brisk_malloc(nb * sizeof *c->old_len);
  c->roll_seq = brisk_malloc(nb * sizeof *c->roll_seq);
  c->copies = brisk_malloc(nb * sizeof *c->copies);
  c->logits = brisk_malloc(nb * nv * sizeof(float));
  if (!c->slot || !c->seq_row || !c->out_rows || !c->logit_row || !c->row_of_seq || !c->old_len ||
      !c->roll_seq || !c->copies || !c->logits) {
    st = brisk_error_oom();
    goto fail;
  }
  for (int32_t i = 0; i < p.n_seq_max; i++) c->row_of_seq[i] = -1;
  brisk_device_ref host = brisk_device_cpu();
  if ((st = brisk_threadpool_create(tp * pp > 1 ? rank_threads : p.n_threads, &c->pool)) ||
      (st = brisk_device_backend_create(&host, c->pool, &c->be)) ||
      (shard->n_dev_layers > 0 &&
       (st = brisk_device_backend_create(&shard->device, c->pool, &c->dev_be))) ||
      (st = brisk_kv_create(n_blocks, p.block_size, p.n_seq_max, p.prefix_cache != 0, &c->kv)) ||
      (st = alloc_kv_storage(c)) ||
      (st = brisk_forward_create(shard, c->be, c->dev_be, p.max_batch_tokens, &c->fwd)) ||
      (tp > 1 && (st = brisk_tp_create(model, rank_threads, c->storage.layout.dtype, n_blocks,
                                       p.block_size, p.max_batch_tokens, 0,
                                       brisk_model_stage_begin(model, 1), &c->tp, &c->comm0))) ||
      (pp > 1 && (st = brisk_pp_create(model, rank_threads, c->storage.layout.dtype, n_blocks,
                                       p.block_size, p.max_batch_tokens, &c->pp))) ||
      (st = output_backend(c)->buffer_alloc(output_backend(c), nb * nv * sizeof(float),
                                            (void **)&c->logits_dev)) ||
      (st = brisk_context_prefix_host_setup(c, p.prefix_host_bytes)))
    goto fail;
  brisk_mem_leave(outer);
  if (c->tp) brisk_forward_set_comm(c->fwd, c->comm0);
  if (c->pp) brisk_forward_set_layers(c->fwd, 0, brisk_model_stage_begin(model, 1));
  *out = c;
  return BRISK_OK;
fail:
  brisk_context_free(c);
  brisk_mem_leave(outer);
  return st;
}

brisk_status brisk_context_estimate(const brisk_model *model, const brisk_context_params *params,
                                    uint64_t *kv_bytes, uint64_t *buffer_bytes) {
  brisk_context_params p;
  brisk_status st = copy_params(params, &p);
  if (st) return st;
  const brisk_hparams *hp = &model->hp;
  int32_t kv_heads, kv_dim;
  brisk_forward_kv_geometry(hp, &kv_heads, &kv_dim);
  uint64_t bytes_per_block = 2ull * brisk_model_kv_layers(model) * (uint64_t)kv_heads *
                             (uint64_t)p.block_size *
                             brisk_kvq_row_bytes(brisk_context_kv_dtype(p.kv_type), kv_dim);
  int32_t n_blocks = 0;
  if ((st = pool_blocks(&p, hp, bytes_per_block, &n_blocks))) return st;
  /* What brisk_context_create allocates, term by term: the pool, the
   * forward pass's activations (brisk_forward_create), the logits on the
   * host and on the output backend, per-token scratch, and the KV
   * bookkeeping per sequence and per block. */
  const uint64_t n = (uint64_t)p.max_batch_tokens, e = hp->n_embd, nv = hp->n_vocab,
                 qd = (uint64_t)hp->n_head * hp->head_dim,
                 kvd = (uint64_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
  uint64_t qd_att =
      (uint64_t)hp->n_head * hp->mla_v_dim > qd ? (uint64_t)hp->n_head * hp->mla_v_dim : qd;
  uint64_t act = n * (3 * e + 2 * qd_att + 2 * kvd + 2 * ff) * sizeof(float);
  if (hp->kv_lora_rank)
    act += n * (hp->kv_lora_rank + hp->rope_dim + hp->q_lora_rank) * sizeof(float);
  if (hp->n_expert)
    act += n * (hp->n_expert + e) * sizeof(float) + n * hp->n_expert_used * 8 + n * 8;
  uint64_t scratch = n * (sizeof(int64_t) + 6 * sizeof(int32_t) + sizeof(brisk_kv_copy)) +
                     (uint64_t)p.n_seq_max * 64 + (uint64_t)n_blocks * 32;
  *kv_bytes = bytes_per_block * (uint64_t)n_blocks;
  *buffer_bytes =
      act + 2 * n * nv * sizeof(float) + scratch + brisk_rowpar_bytes(model, p.max_batch_tokens);
  return BRISK_OK;
}

BRISK_API uint64_t brisk_context_memory_used(const brisk_context *c) {
  return c ? brisk_mem_account_used(c->mem) : 0;
}

BRISK_API brisk_status brisk_context_set_memory_limit(brisk_context *c, uint64_t bytes) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_context_set_memory_limit: NULL");
  brisk_mem_account_set_limit(c->mem, bytes);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_context_kv_stats(const brisk_context *c, brisk_kv_stats *s) {
  if (!c || !s)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_context_kv_stats: context and stats must be set");
  brisk_kv_stats k = {.struct_size = sizeof k};
  k.block_size = brisk_kv_block_size(c->kv);
  k.n_blocks = brisk_kv_n_blocks(c->kv);
  k.n_free_blocks = brisk_kv_n_free_blocks(c->kv);
  k.bytes_per_block = c->bytes_per_block;
  k.kv_bytes = c->bytes_per_block * (uint64_t)k.n_blocks;
  k.other_bytes = brisk_forward_bytes(c->fwd) + c->be->workspace_bytes(c->be) +
                  (c->dev_be ? c->dev_be->workspace_bytes(c->dev_be) : 0) +
                  (uint64_t)c->params.max_batch_tokens * c->model->hp.n_vocab * sizeof(float);
  k.n_cached_blocks = brisk_kv_n_cached_blocks(c->kv);
  k.bytes_per_token = c->bytes_per_block / (uint64_t)k.block_size;
  const brisk_host_tier *h = brisk_kv_host_tier(c->kv);
  k.host_tier_bytes = h->used;
  k.host_tier_index_bytes = brisk_host_tier_index_bytes(h);
  k.n_host_tier_blocks = h->n_blocks;
  k.n_host_tier_hits = h->n_hits;
  k.n_host_tier_misses = h->n_misses;
  k.n_host_tier_evictions = h->n_evictions;
  return brisk_abi_write(&brisk_abi_kv_stats, s, &k);
}

/* Copies whole blocks (every layer, K and V) for copy-on-write. */
static brisk_status copy_blocks(brisk_context *c, int32_t n_copies) {
  _Static_assert(sizeof(brisk_kv_copy) == 2 * sizeof(int32_t), "copies are {src, dst} pairs");
  if (n_copies == 0) return BRISK_OK;
  const int32_t *pairs = (const int32_t *)c->copies;
  for (uint32_t l = 0; l < (uint32_t)brisk_model_stage_begin(c->model, 1); l++) {
    if (c->model->layers[l].kv_source != (int32_t)l) continue; /* the source's pools */
    brisk_backend *be = brisk_context_layer_backend(c, l);
    brisk_status st;
    if ((st = be->kv_copy_blocks(be, &c->storage.layout, c->storage.k[l], pairs, n_copies)) ||
        (st = be->kv_copy_blocks(be, &c->storage.layout, c->storage.v[l], pairs, n_copies)))
      return st;
  }
  return BRISK_OK;
}

/* Gathers the block tables of the batch's sequences (roll_seq, in the order
 * seq_row refers to) into one host matrix [n_seqs][max_blocks]. */
static brisk_status build_tables(brisk_context *c, int32_t n_seqs, int32_t *max_blocks) {
  *max_blocks = 1;
  for (int32_t r = 0; r < n_seqs; r++) {
    int32_t nbk;
    brisk_kv_block_table(c->kv, c->roll_seq[r], &nbk);
    if (nbk > *max_blocks) *max_blocks = nbk;
  }
  size_t need = (size_t)n_seqs * (size_t)*max_blocks;
  if (brisk_grow((void **)&c->tables, &c->tables_cap, need, sizeof *c->tables))
    return brisk_error_oom();
  for (int32_t r = 0; r < n_seqs; r++) {
    int32_t nbk;
    const int32_t *t = brisk_kv_block_table(c->kv, c->roll_seq[r], &nbk);
    memcpy(c->tables + (size_t)r * (size_t)*max_blocks, t, (size_t)nbk * sizeof *t);
  }
  return BRISK_OK;
}

/* Clears the sequence -> row marks a decode set, for the next one. */
static void clear_rows(brisk_context *c, int32_t n_seqs) {
  for (int32_t r = 0; r < n_seqs; r++) c->row_of_seq[c->roll_seq[r]] = -1;
}

static brisk_status decode(brisk_context *c, const brisk_batch *b) {
  const brisk_hparams *hp = &c->model->hp;
  if (b->n < 1 || b->n > c->params.max_batch_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "batch has %d tokens; this context takes 1..%d (max_batch_tokens)", b->n,
                       c->params.max_batch_tokens);
  int32_t n_out = 0;
  for (int32_t i = 0; i < b->n; i++) {
    if (b->token[i] < 0 || (uint32_t)b->token[i] >= hp->n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "batch entry %d: token %d is outside [0, %u)", i,
                         b->token[i], hp->n_vocab);
    if (b->want[i]) c->out_rows[n_out++] = i;
  }
  /* One pass over the batch: each sequence's row in the tables, and its
   * length so that a failed pass can be rolled back. */
  int32_t n_seqs = 0;
  for (int32_t i = 0; i < b->n; i++) {
    int32_t s = b->seq[i];
    if (s < 0 || s >= c->params.n_seq_max) {
      clear_rows(c, n_seqs);
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "batch entry %d: sequence id %d is outside [0, %d)", i, s,
                         c->params.n_seq_max);
    }
    if (c->row_of_seq[s] < 0) {
      c->row_of_seq[s] = n_seqs;
      c->roll_seq[n_seqs] = s;
      c->old_len[n_seqs++] = brisk_kv_seq_len(c->kv, s);
    }
    c->seq_row[i] = c->row_of_seq[s];
  }
  clear_rows(c, n_seqs);
  int32_t n_copies = 0;
  brisk_status st =
      brisk_kv_reserve(c->kv, b->n, b->seq, b->pos, b->token, c->slot, c->copies, &n_copies);
  if (st) return st;
  int32_t max_blocks = 0;
  brisk_forward_batch fb = {0};
  if (!(st = copy_blocks(c, n_copies)) && !(st = build_tables(c, n_seqs, &max_blocks))) {
    fb = (brisk_forward_batch){b->n,      b->token, b->pos,     c->seq_row, c->slot,
                               c->tables, n_seqs,   max_blocks, n_out,      c->out_rows,
                               NULL,      0,        NULL,       NULL,       NULL};
    st = brisk_stream_begin(c->stream, c->kv, c->fwd, &c->storage, b->seq, b->pos, b->n, &fb);
  }
  if (!st) {
    /* The followers run the same step. A pass of several ranks is not
     * stopped between layers (the ranks would disagree where): the host's
     * abort is asked once, before the step. */
    bool sent = false, ranks = c->tp || c->pp;
    if (ranks && c->params.abort_callback && c->params.abort_callback(c->params.abort_user_data))
      st = brisk_error(BRISK_E_CANCELLED, "decode aborted by the host");
    else if (c->pp)
      st = brisk_pp_run(c->pp, c->fwd, c->tp, &c->storage, (const int32_t *)c->copies, n_copies,
                        &fb, c->logits_dev);
    else if (c->tp && !(st = brisk_tp_step(c->tp, (const int32_t *)c->copies, n_copies, &fb, NULL)))
      sent = true;
    if (!st && !c->pp)
      st = brisk_forward_run(c->fwd, &c->storage, &fb, c->logits_dev,
                             ranks ? NULL : c->params.abort_callback, c->params.abort_user_data);
    if (st && sent) brisk_tp_fail(c->tp, st);
  }
  if (!st && n_out)
    st = output_backend(c)->download(output_backend(c), c->logits, c->logits_dev,
                                     (size_t)n_out * hp->n_vocab * sizeof(float));
  if (st) {
    /* Undo the reservation: the context is as before the call. */
    for (int32_t r = 0; r < n_seqs; r++) brisk_kv_abort(c->kv, c->roll_seq[r], c->old_len[r]);
    brisk_stream_undo(c->stream, c->kv, c->fwd, &c->storage);
    return st;
  }
  brisk_stream_end(c->stream, b->seq, &fb);
  /* The K/V is written: the blocks it filled join the prefix cache. */
  for (int32_t r = 0; r < n_seqs; r++) brisk_kv_commit(c->kv, c->roll_seq[r], c->old_len[r]);
  for (int32_t i = 0; i < b->n; i++) c->logit_row[i] = -1;
  for (int32_t j = 0; j < n_out; j++) c->logit_row[c->out_rows[j]] = j;
  c->n_logit_entries = b->n;
  return BRISK_OK;
}

BRISK_API brisk_status brisk_decode(brisk_context *c, const brisk_batch *b) {
  if (!c || !b)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_decode: context and batch must be set");
  brisk_mem_account *outer = brisk_mem_enter(c->mem);
  brisk_status st = decode(c, b);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API const float *brisk_get_logits(const brisk_context *c, int32_t i) {
  if (!c || i < 0 || i >= c->n_logit_entries || c->logit_row[i] < 0) return NULL;
  return c->logits + (size_t)c->logit_row[i] * c->model->hp.n_vocab;
}

BRISK_API int32_t brisk_seq_len(const brisk_context *c, int32_t seq) {
  return c ? brisk_kv_seq_len(c->kv, seq) : 0;
}

BRISK_API brisk_status brisk_seq_truncate(brisk_context *c, int32_t seq, int32_t len) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_truncate: context is NULL");
  return brisk_kv_seq_truncate(c->kv, seq, len);
}

BRISK_API brisk_status brisk_seq_free(brisk_context *c, int32_t seq) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_free: context is NULL");
  return brisk_kv_seq_free(c->kv, seq);
}

BRISK_API brisk_status brisk_seq_set_window(brisk_context *c, int32_t seq, int32_t n_sinks,
                                            int32_t window) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_set_window: context is NULL");
  if (brisk_context_is_split(c) && window > 0)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_seq_set_window: not with tensor or pipeline parallelism (every "
                       "rank's sinks would move)");
  if (c->model->hp.kv_lora_rank > 0 && window > 0)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_seq_set_window: not with multi-head latent attention (the sinks "
                       "are kept as per-head K/V)");
  if (c->model->hp.rope_scaling == BRISK_HP_ROPE_SCALING_LONGROPE && window > 0)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_seq_set_window: not with LongRoPE (its factors follow the "
                       "sequence's length, which a window keeps from the cache)");
  brisk_mem_account *outer = brisk_mem_enter(c->mem);
  brisk_status st = brisk_stream_set(&c->stream, c->kv, c->model, c->params.n_seq_max,
                                     c->params.max_batch_tokens, seq, n_sinks, window);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API brisk_status brisk_seq_fork(brisk_context *c, int32_t src, int32_t dst) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_fork: context is NULL");
  brisk_mem_account *outer = brisk_mem_enter(c->mem);
  brisk_status st = brisk_kv_seq_fork(c->kv, src, dst);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API brisk_status brisk_seq_match_prefix(brisk_context *c, int32_t seq, const int32_t *tokens,
                                              int32_t n, int32_t *reused) {
  if (!c || !reused || n < 0 || (n > 0 && !tokens))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_match_prefix: context, reused and (for n = %d > 0) tokens must "
                       "be set, n >= 0",
                       n);
  *reused = 0;
  uint32_t n_vocab = c->model->hp.n_vocab;
  for (int32_t i = 0; i < n; i++)
    if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "brisk_seq_match_prefix: token %d is %d, outside [0, %u)", i, tokens[i],
                         n_vocab);
  brisk_mem_account *outer = brisk_mem_enter(c->mem);
  brisk_status st = brisk_kv_match_prefix(c->kv, seq, tokens, n, reused);
  brisk_mem_leave(outer);
  return st;
}

BRISK_API const brisk_model *brisk_context_model(const brisk_context *c) {
  return c ? c->model : NULL;
}

const brisk_context_params *brisk_context_get_params(const brisk_context *c) { return &c->params; }

struct brisk_forward *brisk_context_forward(brisk_context *c) {
  return c->fwd;
}
bool brisk_context_is_split(const brisk_context *c) { return c->tp != NULL || c->pp != NULL; }

void brisk_context_tp_force_error(brisk_context *c, int rank) { brisk_tp_force_error(c->tp, rank); }

void brisk_context_pp_force_error(brisk_context *c, int stage) {
  brisk_pp_force_error(c->pp, stage);
}

BRISK_API brisk_status brisk_context_pipeline_stats(const brisk_context *c, int32_t *n_stages,
                                                    uint64_t *n_micro_batches, double *bubble,
                                                    double *ideal_bubble) {
  if (!c || !n_stages || !n_micro_batches || !bubble || !ideal_bubble)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_context_pipeline_stats: context and every output must be set");
  *n_stages = c->pp ? c->model->pp_size : 1;
  *n_micro_batches = 0;
  *bubble = *ideal_bubble = 0;
  if (c->pp) brisk_pp_stats(c->pp, n_micro_batches, bubble, ideal_bubble);
  return BRISK_OK;
}

void brisk_context_kv_parts(brisk_context *c, brisk_kv **kv, brisk_forward_kv **storage) {
  *kv = c->kv;
  *storage = &c->storage;
}
