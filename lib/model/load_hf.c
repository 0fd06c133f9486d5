/* Maps a Hugging Face folder (config.json + safetensors) into the internal
 * model layout. Matrices are used in place from the mapping. Q/K rows stay
 * as the checkpoint stores them, laid out for rotate_half RoPE, so these
 * models run with NeoX-style pairing; a GGUF conversion of the same weights
 * permutes those rows instead and pairs adjacent dimensions: the two are the
 * same model. Vectors (norms, biases) are used as float32: F16/BF16 ones, or
 * misaligned ones, are converted into memory the model owns. */
#include "model/load.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "format/hf.h"

#include <stdio.h>
#include <string.h>

typedef struct hf_loader {
  const brisk_hf *hf;
  brisk_model *m;
  void ***owned; /* model-owned conversion buffers, appended to */
  size_t *n_owned, *cap_owned;
  bool copy; /* use_mmap 0: every weight is copied, nothing is read from the mapping later */
} hf_loader;

static brisk_status cfg_u32(const brisk_hf *hf, const char *key, bool required, uint32_t *out) {
  int64_t v;
  brisk_status st = brisk_hf_config_get_int(hf, key, &v);
  if (st == BRISK_E_NOT_FOUND && !required) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "config.json: key '%s' is missing", key);
  if (st) return st;
  if (v < 0 || v > (int64_t)UINT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "config.json: '%s' = %lld is out of range", key,
                       (long long)v);
  *out = (uint32_t)v;
  return BRISK_OK;
}

static brisk_status cfg_f32(const brisk_hf *hf, const char *key, float *out) {
  double v;
  brisk_status st = brisk_hf_config_get_float(hf, key, &v);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return st;
  *out = (float)v;
  return BRISK_OK;
}

static brisk_status read_rope_scaling(const brisk_hf *hf, brisk_hparams *hp) {
  const char *type = NULL;
  brisk_status st = brisk_hf_config_get_string(hf, "rope_scaling.rope_type", &type);
  if (st == BRISK_E_NOT_FOUND) st = brisk_hf_config_get_string(hf, "rope_scaling.type", &type);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return st;
  if (!strcmp(type, "default")) return BRISK_OK;
  if (!strcmp(type, "linear"))
    hp->rope_scaling = BRISK_HP_ROPE_SCALING_LINEAR;
  else if (!strcmp(type, "llama3"))
    hp->rope_scaling = BRISK_HP_ROPE_SCALING_LLAMA3;
  else if (!strcmp(type, "yarn"))
    hp->rope_scaling = BRISK_HP_ROPE_SCALING_YARN;
  else
    return brisk_error(BRISK_E_UNSUPPORTED, "config.json: rope scaling type '%s' is not supported",
                       type);
  hp->rope_low_freq_factor = 1.0f;
  hp->rope_high_freq_factor = 4.0f;
  hp->yarn_beta_fast = 32.0f;
  hp->yarn_beta_slow = 1.0f;
  hp->yarn_attn_factor = 1.0f;
  if ((st = cfg_f32(hf, "rope_scaling.factor", &hp->rope_factor)) ||
      (st = cfg_f32(hf, "rope_scaling.low_freq_factor", &hp->rope_low_freq_factor)) ||
      (st = cfg_f32(hf, "rope_scaling.high_freq_factor", &hp->rope_high_freq_factor)) ||
      (st = cfg_f32(hf, "rope_scaling.beta_fast", &hp->yarn_beta_fast)) ||
      (st = cfg_f32(hf, "rope_scaling.beta_slow", &hp->yarn_beta_slow)) ||
      (st = cfg_f32(hf, "rope_scaling.attention_factor", &hp->yarn_attn_factor)) ||
      (st =
           cfg_u32(hf, "rope_scaling.original_max_position_embeddings", false, &hp->rope_orig_ctx)))
    return st;
  return BRISK_OK;
}

static brisk_status read_hparams(const brisk_hf *hf, brisk_hparams *hp) {
  const char *model_type;
  brisk_status st = brisk_hf_config_get_string(hf, "model_type", &model_type);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "config.json: key 'model_type' is missing");
  if (st) return st;
  if (!brisk_arch_from_hf_model_type(model_type, &hp->arch))
    return brisk_error(BRISK_E_UNSUPPORTED, "architecture '%s' is not supported", model_type);
  if ((st = cfg_u32(hf, "vocab_size", true, &hp->n_vocab)) ||
      (st = cfg_u32(hf, "hidden_size", true, &hp->n_embd)) ||
      (st = cfg_u32(hf, "num_hidden_layers", true, &hp->n_layer)) ||
      (st = cfg_u32(hf, "num_attention_heads", true, &hp->n_head)) ||
      (st = cfg_u32(hf, "intermediate_size", true, &hp->n_ff)))
    return st;
  hp->n_head_kv = hp->n_head;
  hp->n_ctx_train = 2048;
  hp->rms_eps = 1e-6f;
  hp->rope_base = 10000.0f;
  hp->rope_factor = 1.0f;
  if ((st = cfg_u32(hf, "num_key_value_heads", false, &hp->n_head_kv)) ||
      (st = cfg_u32(hf, "max_position_embeddings", false, &hp->n_ctx_train)) ||
      (st = cfg_f32(hf, "rms_norm_eps", &hp->rms_eps)) ||
      (st = cfg_f32(hf, "rope_theta", &hp->rope_base)) ||
      (st = cfg_u32(hf, "num_local_experts", false, &hp->n_expert)) ||
      (st = cfg_u32(hf, "num_experts_per_tok", false, &hp->n_expert_used)))
    return st;
  if (hp->n_head == 0) return brisk_error(BRISK_E_FORMAT, "config.json: num_attention_heads is 0");
  hp->head_dim = hp->n_embd / hp->n_head;
  if ((st = cfg_u32(hf, "head_dim", false, &hp->head_dim))) return st;
  hp->rope_dim = hp->head_dim;
  if (hp->arch == BRISK_ARCH_MISTRAL || hp->arch == BRISK_ARCH_MIXTRAL)
    if ((st = cfg_u32(hf, "sliding_window", false, &hp->sliding_window))) return st;
  bool use_sw = false;
  st = brisk_hf_config_get_bool(hf, "use_sliding_window", &use_sw);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (use_sw && hp->arch != BRISK_ARCH_MISTRAL && hp->arch != BRISK_ARCH_MIXTRAL)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: use_sliding_window with per-layer windows (max_window_layers) "
                       "is not supported");
  bool tied = false;
  st = brisk_hf_config_get_bool(hf, "tie_word_embeddings", &tied);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  hp->tied_embeddings = tied;
  hp->rope_style = BRISK_HP_ROPE_NEOX;
  return read_rope_scaling(hf, hp);
}

static brisk_status keep(hf_loader *L, void *buf) {
  if (brisk_grow((void **)L->owned, L->cap_owned, *L->n_owned + 1, sizeof(void *))) {
    brisk_aligned_free(buf);
    return brisk_error_oom();
  }
  (*L->owned)[(*L->n_owned)++] = buf;
  return BRISK_OK;
}

/* Binds a checkpoint tensor: a vector of `cols` (rows == 0) or a [rows][cols]
 * matrix (safetensors shape [rows, cols]). */
static brisk_status bind(hf_loader *L, const char *name, int64_t cols, int64_t rows, bool required,
                         brisk_weight *w) {
  const brisk_safetensors_tensor *t = brisk_hf_find_tensor(L->hf, name);
  if (!t) {
    if (required) return brisk_error(BRISK_E_FORMAT, "tensor '%s' is missing", name);
    return BRISK_OK;
  }
  bool vector = rows == 0;
  bool ok = vector ? t->n_dims == 1 && (int64_t)t->shape[0] == cols
                   : t->n_dims == 2 && (int64_t)t->shape[0] == rows && (int64_t)t->shape[1] == cols;
  if (!ok)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s' has shape [%llu, %llu] (%u dims); expected [%lld%s%lld]", name,
                       (unsigned long long)t->shape[0], (unsigned long long)t->shape[1], t->n_dims,
                       vector ? (long long)cols : (long long)rows, vector ? "" : ", ",
                       vector ? 0LL : (long long)cols);
  const void *data = t->data;
  uint32_t type = t->dtype;
  size_t elt = type == BRISK_DTYPE_F32 ? 4 : 2;
  if (vector && type != BRISK_DTYPE_F32) {
    float *f = brisk_aligned_alloc(64, (size_t)cols * sizeof(float));
    if (!f) return brisk_error_oom();
    for (int64_t i = 0; i < cols; i++) {
      uint16_t h;
      memcpy(&h, (const char *)t->data + 2 * i, 2);
      f[i] = type == BRISK_DTYPE_F16 ? brisk_f16_to_f32(h) : brisk_bf16_to_f32(h);
    }
    brisk_status st = keep(L, f);
    if (st) return st;
    data = f;
    type = BRISK_DTYPE_F32;
  } else if ((uintptr_t)data % elt || L->copy) {
    /* The kernels read elements aligned; an odd file gets an aligned copy.
     * Without mmap every weight is copied, so a file changed under the
     * program later cannot reach the weights. */
    void *copy = brisk_aligned_alloc(64, (size_t)t->n_bytes);
    if (!copy) return brisk_error_oom();
    memcpy(copy, t->data, (size_t)t->n_bytes);
    brisk_status st = keep(L, copy);
    if (st) return st;
    data = copy;
  }
  return brisk_model_bind_check(L->m, t->name, data, type, cols, vector ? 1 : rows, vector, w);
}

static brisk_status bind_layer(hf_loader *L, uint32_t il) {
  brisk_model *m = L->m;
  const brisk_hparams *hp = &m->hp;
  brisk_layer *ly = &m->layers[il];
  const brisk_arch_info *ai = brisk_arch_get(hp->arch);
  int64_t d = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim,
          kv_dim = (int64_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
  char name[128];
  brisk_status st;
#define BIND(suffix, cols, rows, required, field)                                                  \
  do {                                                                                             \
    snprintf(name, sizeof name, "model.layers.%u.%s", il, suffix);                                 \
    if ((st = bind(L, name, cols, rows, required, &(field)))) return st;                           \
  } while (0)
  BIND("input_layernorm.weight", d, 0, true, ly->attn_norm);
  BIND("self_attn.q_proj.weight", d, q_dim, true, ly->wq);
  BIND("self_attn.k_proj.weight", d, kv_dim, true, ly->wk);
  BIND("self_attn.v_proj.weight", d, kv_dim, true, ly->wv);
  BIND("self_attn.o_proj.weight", q_dim, d, true, ly->wo);
  BIND("self_attn.q_proj.bias", q_dim, 0, ai->qkv_bias, ly->bq);
  BIND("self_attn.k_proj.bias", kv_dim, 0, ai->qkv_bias, ly->bk);
  BIND("self_attn.v_proj.bias", kv_dim, 0, ai->qkv_bias, ly->bv);
  BIND("self_attn.q_norm.weight", hp->head_dim, 0, ai->qk_norm, ly->q_norm);
  BIND("self_attn.k_norm.weight", hp->head_dim, 0, ai->qk_norm, ly->k_norm);
  BIND("post_attention_layernorm.weight", d, 0, true, ly->ffn_norm);
  if (hp->n_expert == 0) {
    BIND("mlp.gate_proj.weight", d, ff, true, ly->ffn_gate);
    BIND("mlp.up_proj.weight", d, ff, true, ly->ffn_up);
    BIND("mlp.down_proj.weight", ff, d, true, ly->ffn_down);
  } else {
    BIND("block_sparse_moe.gate.weight", d, hp->n_expert, true, ly->moe_router);
    if ((st = brisk_model_alloc_experts(m, ly))) return st;
    for (uint32_t e = 0; e < hp->n_expert; e++) {
      char suffix[96];
      snprintf(suffix, sizeof suffix, "block_sparse_moe.experts.%u.w1.weight", e);
      BIND(suffix, d, ff, true, ly->expert_gate[e]);
      snprintf(suffix, sizeof suffix, "block_sparse_moe.experts.%u.w3.weight", e);
      BIND(suffix, d, ff, true, ly->expert_up[e]);
      snprintf(suffix, sizeof suffix, "block_sparse_moe.experts.%u.w2.weight", e);
      BIND(suffix, ff, d, true, ly->expert_down[e]);
    }
  }
#undef BIND
  ly->sliding_window = hp->sliding_window;
  return BRISK_OK;
}

brisk_status brisk_model_load_hf(brisk_model *m, const brisk_hf *hf,
                                 const brisk_model_params *params, void ***owned, size_t *n_owned,
                                 size_t *cap_owned) {
  hf_loader L = {hf, m, owned, n_owned, cap_owned, !params->use_mmap};
  brisk_status st;
  if ((st = read_hparams(hf, &m->hp)) || (st = brisk_model_check_hparams(&m->hp))) return st;
  const brisk_hparams *hp = &m->hp;
  if ((st = bind(&L, "model.embed_tokens.weight", hp->n_embd, hp->n_vocab, true, &m->token_embd)) ||
      (st = bind(&L, "model.norm.weight", hp->n_embd, 0, true, &m->output_norm)) ||
      (st = bind(&L, "lm_head.weight", hp->n_embd, hp->n_vocab, !hp->tied_embeddings, &m->output)))
    return st;
  if (!m->output.data) m->output = m->token_embd;
  if ((st = brisk_model_alloc_layers(m))) return st;
  for (uint32_t il = 0; il < hp->n_layer; il++) {
    if ((st = bind_layer(&L, il))) return st;
    if ((st = brisk_model_report_progress(params, (float)(il + 1) / (float)(hp->n_layer + 1))))
      return st;
  }
  return BRISK_OK;
}
