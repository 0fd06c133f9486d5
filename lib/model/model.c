/* Model lifecycle and the public getters. */
#include "model/kv_share.h"
#include "model/load.h"
#include "model/shard.h"
#include "model/source.h"

#include "core/abi.h"
#include "backend/backend.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memcap.h"
#include "parallel/world.h"
#include "tokenizer/wordpiece.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

BRISK_API void brisk_model_params_init(brisk_model_params *params) {
  if (!params) return;
  memset(params, 0, sizeof *params);
  params->struct_size = sizeof *params;
  params->use_mmap = 1;
  params->repack = 1;
  params->device = NULL;
  params->n_gpu_layers = -1;
}

/* Reads a caller's params struct of any size up to ours: fields the caller's
 * (older) header lacks keep their defaults. */
static brisk_status copy_params(const brisk_model_params *in, brisk_model_params *out) {
  brisk_model_params_init(out);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_model_params, in, out);
  if (st) return st;
  if (out->n_gpu_layers < -1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_model_params.n_gpu_layers %d must be >= 0, or -1 for all",
                       (int)out->n_gpu_layers);
  if (out->tp_size < 0 || out->tp_size > 8 || (out->tp_size > 1 && 8 % out->tp_size))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_model_params.tp_size %d must be 0, 1, 2, 4 or 8", (int)out->tp_size);
  if (out->pp_size < 0 || out->pp_size > BRISK_PP_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_model_params.pp_size %d is outside [0, %d]",
                       (int)out->pp_size, BRISK_PP_MAX);
  return BRISK_OK;
}

/* Pipeline stages: whole layers on the CPU, at most one stage per layer. */
static brisk_status set_stages(brisk_model *m, int32_t pp_size) {
  m->pp_size = pp_size > 1 ? pp_size : 1;
  if (m->pp_size == 1) return BRISK_OK;
  if (!brisk_device_is_cpu(&m->device) || m->n_dev_layers > 0)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "pipeline parallelism (pp_size %d) runs on the CPU device only",
                       (int)pp_size);
  if ((uint32_t)pp_size > m->hp.n_layer)
    return brisk_error(BRISK_E_UNSUPPORTED, "pp_size %d: the model has only %u layers to cut",
                       (int)pp_size, m->hp.n_layer);
  return BRISK_OK;
}

/* In an MPI job of tp_size x pp_size processes (joined before the load),
 * this process keeps its rank's layers and shard only (model/shard.h). */
static brisk_status keep_local(brisk_model *m, const brisk_model_params *p) {
  brisk_comm *w = brisk_world();
  if (w && brisk_comm_size(w) > 1 && brisk_device_is_cpu(&m->device))
    brisk_model_set_local(m, p->tp_size, p->pp_size, brisk_comm_rank(w), brisk_comm_size(w));
  return BRISK_OK;
}

/* What a rank of an MPI job keeps, for the host's log. */
static void log_local(const brisk_model *m) {
  if (!m->local) return;
  int32_t q = m->local_tp_rank < 0 ? 0 : m->local_tp_rank;
  BRISK_INFO("MPI rank: layers %d..%d%s%s, %.1f MiB of weights read, %.1f MiB allocated",
             (int)m->local_begin, (int)m->local_end - 1, m->local_output ? " and the output" : "",
             m->local_tp_rank < 0 ? "" : ", one tensor-parallel shard",
             (double)brisk_split_rank_bytes(m, q) / 1048576.0,
             (double)brisk_mem_account_used(m->mem) / 1048576.0);
}

brisk_status brisk_model_report_progress(const brisk_model_params *params, float fraction) {
  if (params->progress && !params->progress(fraction, params->progress_user_data))
    return brisk_error(BRISK_E_CANCELLED, "model load cancelled by the progress callback");
  return BRISK_OK;
}

static bool finite_positive(float x) { return isfinite(x) && x > 0.0f; }

/* Everything the forward pass and the backend would refuse at decode is
 * refused here, so a file that loads also runs (brisk.h promises complete
 * validation before use). */
brisk_status brisk_model_check_hparams(const brisk_hparams *hp) {
  /* Bounds far above any real model, low enough that derived sizes cannot
   * overflow 64-bit arithmetic anywhere later. */
  const uint32_t big = 1u << 20;
  struct {
    const char *name;
    uint32_t value, max;
  } checks[] = {
      {"n_vocab", hp->n_vocab, 1u << 24}, {"n_embd", hp->n_embd, big},
      {"n_layer", hp->n_layer, 4096},     {"n_head", hp->n_head, 4096},
      {"n_head_kv", hp->n_head_kv, 4096}, {"head_dim", hp->head_dim, BRISK_MAX_HEAD_DIM},
      {"n_ff", hp->n_ff, 1u << 22},       {"n_ctx_train", hp->n_ctx_train, 1u << 30},
  };
  if (hp->n_ff_exp > 1u << 22 || hp->n_ff_shexp > 1u << 22 || (hp->n_expert && !hp->n_ff_exp))
    return brisk_error(BRISK_E_FORMAT, "expert FFN widths %u (shared %u) are out of range",
                       hp->n_ff_exp, hp->n_ff_shexp);
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
    if (checks[i].value == 0 || checks[i].value > checks[i].max)
      return brisk_error(BRISK_E_FORMAT, "hyper-parameter %s = %u is out of range [1, %u]",
                         checks[i].name, checks[i].value, checks[i].max);
  if (hp->n_head % hp->n_head_kv)
    return brisk_error(BRISK_E_FORMAT, "n_head %u is not a multiple of n_head_kv %u", hp->n_head,
                       hp->n_head_kv);
  if (hp->rope_dim == 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
    return brisk_error(BRISK_E_FORMAT, "rope dimension %u must be even and in [2, head_dim %u]",
                       hp->rope_dim, hp->head_dim);
  if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
    return brisk_error(BRISK_E_FORMAT, "rms epsilon %g is out of range (0, 1)",
                       (double)hp->rms_eps);
  if (!finite_positive(hp->rope_base))
    return brisk_error(BRISK_E_FORMAT, "rope base %g must be finite and positive",
                       (double)hp->rope_base);
  if (hp->n_expert > 1024 || hp->n_expert_used > hp->n_expert ||
      (hp->n_expert > 0 && hp->n_expert_used == 0))
    return brisk_error(BRISK_E_FORMAT, "expert counts %u used of %u are inconsistent",
                       hp->n_expert_used, hp->n_expert);
  if (hp->rope_scaling != BRISK_HP_ROPE_SCALING_NONE && !finite_positive(hp->rope_factor))
    return brisk_error(BRISK_E_FORMAT, "rope scaling factor %g must be finite and positive",
                       (double)hp->rope_factor);
  /* The forward pass hands these to the backend as int32 (a window of
   * 2^32 - 1 would become -1 there). */
  if (hp->sliding_window > INT32_MAX || hp->rope_orig_ctx > INT32_MAX)
    return brisk_error(BRISK_E_FORMAT,
                       "sliding window %u and rope original context %u must be at most %d",
                       hp->sliding_window, hp->rope_orig_ctx, INT32_MAX);
  if (hp->rope_scaling == BRISK_HP_ROPE_SCALING_YARN &&
      (!finite_positive(hp->yarn_beta_fast) || !finite_positive(hp->yarn_beta_slow) ||
       !isfinite(hp->yarn_attn_factor)))
    return brisk_error(BRISK_E_FORMAT,
                       "yarn beta_fast %g and beta_slow %g must be finite and positive, "
                       "attn_factor %g finite",
                       (double)hp->yarn_beta_fast, (double)hp->yarn_beta_slow,
                       (double)hp->yarn_attn_factor);
  float mults[] = {hp->embd_scale,   hp->residual_scale, hp->attn_scale,     hp->logit_scale,
                   hp->attn_softcap, hp->final_softcap,  hp->rope_base_local};
  for (size_t i = 0; i < sizeof mults / sizeof mults[0]; i++)
    if (!isfinite(mults[i]) || mults[i] < 0)
      return brisk_error(BRISK_E_FORMAT,
                         "multipliers (embedding %g, residual %g, attention %g, logit %g), "
                         "soft-caps (%g, %g) and local rope base %g must be finite and not "
                         "negative",
                         (double)hp->embd_scale, (double)hp->residual_scale, (double)hp->attn_scale,
                         (double)hp->logit_scale, (double)hp->attn_softcap,
                         (double)hp->final_softcap, (double)hp->rope_base_local);
  /* GGUF files give llama3 scaling as a rope_freqs tensor (checked by
   * brisk_model_check_rope_freqs); these two are used without one. */
  if (hp->rope_scaling == BRISK_HP_ROPE_SCALING_LLAMA3 &&
      (!finite_positive(hp->rope_low_freq_factor) || !finite_positive(hp->rope_high_freq_factor) ||
       !(hp->rope_low_freq_factor < hp->rope_high_freq_factor)))
    return brisk_error(BRISK_E_FORMAT,
                       "llama3 rope scaling needs 0 < low_freq_factor %g < high_freq_factor %g",
                       (double)hp->rope_low_freq_factor, (double)hp->rope_high_freq_factor);
  return BRISK_OK;
}

brisk_status brisk_model_check_rope_freqs(const brisk_weight *w) {
  for (int64_t i = 0; w->data && i < w->cols; i++) {
    float f;
    memcpy(&f, (const char *)w->data + (size_t)i * sizeof f, sizeof f);
    if (!finite_positive(f))
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': factor %lld is %g, not finite and positive",
                         w->name ? w->name : "rope_freqs.weight", (long long)i, (double)f);
  }
  return BRISK_OK;
}

/* The weight types the CPU matmul computes with. Q2_K/Q3_K are read by the
 * file parsers but not yet computed: they fail here, at load, by name. */
static bool matmul_type_supported(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_F32:
  case BRISK_DTYPE_F16:
  case BRISK_DTYPE_BF16:
  case BRISK_DTYPE_Q8_0:
  case BRISK_DTYPE_Q4_0:
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_0:
  case BRISK_DTYPE_Q5_1:
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K:
  case BRISK_DTYPE_Q6_K: return true;
  default: return false;
  }
}

brisk_status brisk_model_bind_check(brisk_model *m, const char *name, const void *data,
                                    uint32_t type, int64_t cols, int64_t rows, bool vector,
                                    brisk_weight *w) {
  /* Vectors (norms, biases, rope factors) are used as float32 arrays. */
  if (vector ? type != BRISK_DTYPE_F32 : !matmul_type_supported(type))
    return brisk_error(BRISK_E_UNSUPPORTED, "tensor '%s' has type %s, which brisk cannot %s yet",
                       name, brisk_dtype_name(type), vector ? "use for a vector" : "compute with");
  /* Unquantized elements are read as aligned floats or halves (the matmul
   * refuses misaligned weights): a file with a small general.alignment and
   * odd offsets fails here, not at the first decode. */
  const brisk_dtype_info *info = brisk_dtype_get(type);
  if (info && !info->quantized && info->type_size > 1 && (uintptr_t)data % info->type_size)
    return brisk_error(BRISK_E_FORMAT, "tensor '%s': %s data is not aligned to %u bytes", name,
                       brisk_dtype_name(type), info->type_size);
  uint64_t row_bytes, n, bytes;
  if (!brisk_dtype_row_bytes(type, (uint64_t)cols, &row_bytes) ||
      brisk_mul_overflow_u64((uint64_t)cols, (uint64_t)rows, &n) ||
      brisk_mul_overflow_u64(row_bytes, (uint64_t)rows, &bytes))
    return brisk_error(BRISK_E_FORMAT, "tensor '%s': %lld x %lld elements of %s do not fit", name,
                       (long long)rows, (long long)cols, brisk_dtype_name(type));
  *w = (brisk_weight){data, type, cols, rows, row_bytes, name, NULL};
  m->n_params += n;
  m->weight_bytes += bytes;
  return BRISK_OK;
}

brisk_weight brisk_weight_rows(const brisk_weight *w, int64_t r0, int64_t n) {
  brisk_weight v = *w;
  v.data = (const char *)w->data + (uint64_t)r0 * w->row_bytes;
  v.rows = n;
  return v;
}

brisk_status brisk_model_alloc_layers(brisk_model *m) {
  m->layers = brisk_calloc(m->hp.n_layer, sizeof *m->layers);
  if (!m->layers) return brisk_error_oom();
  for (uint32_t l = 0; l < m->hp.n_layer; l++) m->layers[l].kv_source = (int32_t)l;
  return BRISK_OK;
}

brisk_status brisk_model_alloc_experts(brisk_model *m, brisk_layer *ly) {
  size_t n = m->hp.n_expert;
  ly->expert_gate = brisk_calloc(n, sizeof(brisk_weight));
  ly->expert_up = brisk_calloc(n, sizeof(brisk_weight));
  ly->expert_down = brisk_calloc(n, sizeof(brisk_weight));
  if (!ly->expert_gate || !ly->expert_up || !ly->expert_down) return brisk_error_oom();
  return BRISK_OK;
}

BRISK_API void brisk_model_free(brisk_model *m) {
  if (!m) return;
  if (m->layers) {
    for (uint32_t i = 0; i < m->hp.n_layer; i++) {
      brisk_free(m->layers[i].expert_gate);
      brisk_free(m->layers[i].expert_up);
      brisk_free(m->layers[i].expert_down);
    }
  }
  brisk_split_free(m);
  brisk_model_unplace(m);
  brisk_free(m->layers);
  brisk_vocab_free(m->vocab);
  brisk_wordpiece_free(m->wordpiece);
  brisk_free(m->vocab_error);
  brisk_model_source_close(m->source);
  brisk_free(m->path);
  struct brisk_mem_account *mem = m->mem;
  if (m->repack_charge) brisk_mem_uncharge(mem, m->repack_charge);
  brisk_free(m);
  brisk_mem_account_release(mem);
}

/* Where a load reads from: a path, a caller's buffer, or a reader. */
typedef struct load_from {
  const char *path;                 /* a file or folder, or NULL */
  const void *data;                 /* a caller's GGUF image, or NULL */
  size_t size;                      /* its bytes */
  const brisk_model_reader *reader; /* or a reader */
} load_from;

/* The reader's bytes, in chunks, into a buffer the source will own; the
 * read is the first half of the progress bar, and can be cancelled. */
static brisk_status read_all(const brisk_model_reader *r, const brisk_model_params *params,
                             void **out) {
  enum { CHUNK = 16 << 20 };
  if (r->size == 0 || r->size > (uint64_t)PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "model reader: size %llu is not a GGUF image",
                       (unsigned long long)r->size);
  /* Page-aligned like a mapping, so tensor data keeps the file's alignment. */
  unsigned char *buf = brisk_aligned_alloc(4096, (size_t)r->size);
  if (!buf) return brisk_error_oom();
  brisk_status st = BRISK_OK;
  for (uint64_t off = 0; off < r->size && !st;) {
    size_t want = r->size - off < CHUNK ? (size_t)(r->size - off) : CHUNK;
    int64_t got = r->read(r->user_data, off, buf + off, want);
    if (got < 0 || (uint64_t)got > want)
      st = brisk_error(BRISK_E_IO, "model reader failed at offset %llu (returned %lld)",
                       (unsigned long long)off, (long long)got);
    else if (got == 0)
      st = brisk_error(BRISK_E_IO, "model reader ended at offset %llu of %llu bytes",
                       (unsigned long long)off, (unsigned long long)r->size);
    else
      off += (uint64_t)got;
    if (!st) st = brisk_model_report_progress(params, 0.5f * (float)off / (float)r->size);
  }
  if (st) {
    brisk_aligned_free(buf);
    return st;
  }
  *out = buf;
  return BRISK_OK;
}

static brisk_status open_source(const load_from *from, const brisk_model_params *params,
                                brisk_model_source **out) {
  if (from->path) return brisk_model_source_open(from->path, params, out);
  if (from->data) return brisk_model_source_open_memory(from->data, from->size, false, out);
  void *buf = NULL;
  brisk_status st = read_all(from->reader, params, &buf);
  if (st) return st;
  if ((st = brisk_model_source_open_memory(buf, (size_t)from->reader->size, true, out)))
    brisk_aligned_free(buf);
  return st;
}

static brisk_status load(const load_from *from, const char *name,
                         const brisk_model_params *params_in, brisk_model **out) {
  brisk_model_params params;
  brisk_status st = copy_params(params_in, &params);
  if (st) return st;
  /* An unusable device fails before the file is read. */
  brisk_device_ref device;
  if ((st = brisk_device_parse(params.device, &device))) return st;
  if ((st = brisk_model_report_progress(&params, 0.0f))) return st;
  /* Everything the load allocates is charged to the model's account. */
  brisk_mem_account *mem = NULL;
  if ((st = brisk_mem_account_create(params.memory_limit, "model's", &mem))) return st;
  brisk_mem_account *outer = brisk_mem_enter(mem);
  brisk_model *m = brisk_calloc(1, sizeof *m);
  if (!m || !(m->path = brisk_strdup(name))) {
    brisk_free(m);
    brisk_mem_leave(outer);
    brisk_mem_account_release(mem);
    return brisk_error_oom();
  }
  m->mem = mem;
  m->device = device;
  if ((st = open_source(from, &params, &m->source)) ||
      (st = brisk_model_source_bind(m, m->source, &params)) ||
      (m->layers && (st = brisk_model_share_kv(m, &params))) ||
      (m->layers && (st = keep_local(m, &params))) ||
      (m->layers && (st = brisk_model_split(m, params.tp_size, params.n_gpu_layers))) ||
      (m->layers && !m->tp_size && (st = brisk_model_place(m, &params))) ||
      (m->layers && m->tp_size && !brisk_device_is_cpu(&m->device) &&
       (st = brisk_model_place_ranks(m, &params))) ||
      (m->layers && (st = set_stages(m, params.pp_size))) ||
      (st = brisk_model_report_progress(&params, 1.0f))) {
    brisk_model_free(m);
    brisk_mem_leave(outer);
    return st;
  }
  brisk_mem_leave(outer);
  log_local(m);
  *out = m;
  return BRISK_OK;
}

BRISK_API uint64_t brisk_model_memory_used(const brisk_model *m) {
  return m ? brisk_mem_account_used(m->mem) : 0;
}

BRISK_API brisk_status brisk_model_load(const char *path, const brisk_model_params *params,
                                        brisk_model **out) {
  if (!path || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_model_load: path and out must be set");
  load_from from = {.path = path};
  return load(&from, path, params, out);
}

BRISK_API brisk_status brisk_model_load_from_memory(const void *data, size_t size,
                                                    const brisk_model_params *params,
                                                    brisk_model **out) {
  if (!data || size == 0 || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_model_load_from_memory: data, size and out must be set");
  load_from from = {.data = data, .size = size};
  return load(&from, "(memory)", params, out);
}

BRISK_API brisk_status brisk_model_load_from_reader(const brisk_model_reader *reader,
                                                    const brisk_model_params *params,
                                                    brisk_model **out) {
  if (!reader || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_model_load_from_reader: reader and out must be set");
  brisk_model_reader r = {.struct_size = sizeof r};
  brisk_status st = brisk_abi_read(&brisk_abi_model_reader, reader, &r);
  if (st) return st;
  if (!r.read)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_model_load_from_reader: read is NULL");
  load_from from = {.reader = &r};
  return load(&from, "(reader)", params, out);
}

BRISK_API const char *brisk_model_architecture(const brisk_model *m) {
  return m && m->hp.n_layer ? brisk_arch_get(m->hp.arch)->name : "";
}
BRISK_API int32_t brisk_model_n_vocab(const brisk_model *m) {
  return m ? (int32_t)m->hp.n_vocab : 0;
}
BRISK_API int32_t brisk_model_n_ctx_train(const brisk_model *m) {
  return m ? (int32_t)m->hp.n_ctx_train : 0;
}
BRISK_API int32_t brisk_model_n_embd(const brisk_model *m) { return m ? (int32_t)m->hp.n_embd : 0; }
BRISK_API int32_t brisk_model_n_layer(const brisk_model *m) {
  return m ? (int32_t)m->hp.n_layer : 0;
}
BRISK_API int32_t brisk_model_n_head(const brisk_model *m) { return m ? (int32_t)m->hp.n_head : 0; }
BRISK_API int32_t brisk_model_n_head_kv(const brisk_model *m) {
  return m ? (int32_t)m->hp.n_head_kv : 0;
}
BRISK_API uint64_t brisk_model_n_params(const brisk_model *m) { return m ? m->n_params : 0; }
BRISK_API uint64_t brisk_model_weight_bytes(const brisk_model *m) {
  return m ? m->weight_bytes : 0;
}

BRISK_API brisk_status brisk_model_meta(const brisk_model *m, const char *key, char *buf,
                                        size_t capacity, size_t *needed) {
  if (!m || !key || (!buf && capacity > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_model_meta: model, key and buf must be set");
  return brisk_model_source_meta(m->source, key, buf, capacity, needed);
}

BRISK_API const char *brisk_model_chat_template(const brisk_model *m) {
  return m ? brisk_model_source_chat_template(m->source) : NULL;
}

BRISK_API int64_t brisk_model_n_tensors(const brisk_model *m) {
  return m ? brisk_model_source_n_tensors(m->source) : 0;
}

BRISK_API brisk_status brisk_model_tensor(const brisk_model *m, int64_t index,
                                          brisk_tensor_info *info) {
  if (!m || !info)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_model_tensor: model and info must be set");
  if (index < 0 || index >= brisk_model_source_n_tensors(m->source))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "tensor index %lld is out of range [0, %lld)",
                       (long long)index, (long long)brisk_model_source_n_tensors(m->source));
  brisk_tensor_info t = {.struct_size = sizeof t};
  brisk_model_source_tensor(m->source, index, &t);
  return brisk_abi_write(&brisk_abi_tensor_info, info, &t);
}
