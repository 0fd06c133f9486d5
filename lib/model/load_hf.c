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
#include "format/json.h"
#include "model/hf_quant.h"
#include "model/hf_rope.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct hf_loader {
  const brisk_hf *hf;
  brisk_model *m;
  void ***owned; /* model-owned conversion buffers, appended to */
  size_t *n_owned, *cap_owned;
  bool copy; /* use_mmap 0: every weight is copied, nothing is read from the mapping later */
  bool norm_plus_one;   /* gemma: norm weights w are applied as 1 + w */
  bool f32;             /* bind a matrix as float32 too (deepseek2's kv_b, read by mla_attention) */
  brisk_hf_quant quant; /* quantization_config: GPTQ / AWQ linear layers */
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

/* Copies a RoPE configuration into the hyper-parameters. LongRoPE's
 * factors are bound by the caller (they are weights of the model). */
static brisk_status apply_rope(const brisk_hf_rope *r, brisk_hparams *hp) {
  hp->rope_base = r->base;
  if (r->dim) hp->rope_dim = r->dim;
  hp->rope_scaling = r->scaling;
  hp->rope_factor = r->factor;
  hp->rope_low_freq_factor = r->low_freq_factor;
  hp->rope_high_freq_factor = r->high_freq_factor;
  hp->rope_orig_ctx = r->orig_ctx;
  hp->yarn_beta_fast = r->beta_fast;
  hp->yarn_beta_slow = r->beta_slow;
  hp->yarn_attn_factor = r->attn_factor;
  return BRISK_OK;
}

/* LongRoPE (phi3 long-context models): the original context, and the cos /
 * sin magnitude transformers applies: attention_factor, or sqrt(1 + ln s /
 * ln orig) with s = factor, or max_position_embeddings / orig without one
 * (1 when s <= 1). The short and long factors are bound by bind_longrope. */
static brisk_status longrope_hparams(const brisk_hf *hf, const brisk_hf_rope *r,
                                     brisk_hparams *hp) {
  uint32_t orig = r->orig_ctx;
  brisk_status st;
  /* transformers' Phi3Config takes the top-level key, 4096 when absent,
   * over the rope object's. */
  if (hp->arch == BRISK_ARCH_PHI3) orig = 4096;
  if ((!r->orig_ctx || hp->arch == BRISK_ARCH_PHI3) &&
      (st = cfg_u32(hf, "original_max_position_embeddings", false, &orig)))
    return st;
  if (orig < 2)
    return brisk_error(BRISK_E_FORMAT,
                       "config.json: rope type 'longrope' needs original_max_position_embeddings "
                       "of at least 2 (got %u)",
                       orig);
  hp->rope_orig_ctx = orig;
  double s = r->factor > 0 ? (double)r->factor : (double)hp->n_ctx_train / orig;
  hp->rope_factor = (float)s;
  hp->yarn_attn_factor = r->attn_factor > 0 ? r->attn_factor
                         : s <= 1           ? 1.0f
                                            : (float)sqrt(1 + log(s) / log((double)orig));
  if (!(isfinite(hp->yarn_attn_factor) && hp->yarn_attn_factor > 0 && isfinite(s) && s > 0))
    return brisk_error(BRISK_E_FORMAT,
                       "config.json: longrope factor %g and attention_factor %g must be finite and "
                       "positive",
                       s, (double)hp->yarn_attn_factor);
  return BRISK_OK;
}

/* Granite's four multipliers (transformers' GraniteConfig defaults are 1). */
static brisk_status read_granite(const brisk_hf *hf, brisk_hparams *hp) {
  float embd = 1.0f, resid = 1.0f, attn = 1.0f, logits = 1.0f;
  brisk_status st;
  if ((st = cfg_f32(hf, "embedding_multiplier", &embd)) ||
      (st = cfg_f32(hf, "residual_multiplier", &resid)) ||
      (st = cfg_f32(hf, "attention_multiplier", &attn)) ||
      (st = cfg_f32(hf, "logits_scaling", &logits)))
    return st;
  if (!(isfinite(logits) && logits > 0))
    return brisk_error(BRISK_E_FORMAT, "config.json: logits_scaling %g must be positive",
                       (double)logits);
  hp->embd_scale = embd;
  hp->residual_scale = resid;
  hp->attn_scale = attn;
  hp->logit_scale = 1.0f / logits;
  return BRISK_OK;
}

/* Expert widths and routing: mixtral's experts are intermediate_size wide
 * and renormalized; Qwen-MoE's are moe_intermediate_size wide, renormalized
 * when norm_topk_prob, plus a shared expert when it has a width. */
static brisk_status read_moe(const brisk_hf *hf, brisk_hparams *hp) {
  hp->n_ff_exp = hp->n_ff;
  hp->moe_renorm = hp->arch == BRISK_ARCH_MIXTRAL;
  brisk_status st;
  if ((st = cfg_u32(hf, "moe_intermediate_size", false, &hp->n_ff_exp)) ||
      (st = cfg_u32(hf, "shared_expert_intermediate_size", false, &hp->n_ff_shexp)))
    return st;
  st = brisk_hf_config_get_bool(hf, "norm_topk_prob", &hp->moe_renorm);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (hp->arch == BRISK_ARCH_QWEN3MOE) hp->n_ff_shexp = 0; /* none in Qwen3-MoE */
  return BRISK_OK;
}

/* Whether layer il has the MoE FFN: Qwen-MoE configs may keep some layers
 * dense (mlp_only_layers, decoder_sparse_step). */
static brisk_status layer_is_moe(const brisk_hf *hf, uint32_t il, bool *moe) {
  int64_t dense[256];
  size_t n = 0;
  uint32_t step = 1;
  brisk_status st = brisk_hf_config_get_int_array(hf, "mlp_only_layers", dense, 256, &n);
  if (st == BRISK_E_NOT_FOUND) n = 0, st = BRISK_OK;
  if (st || (st = cfg_u32(hf, "decoder_sparse_step", false, &step))) return st;
  *moe = step > 0 && (il + 1) % step == 0;
  for (size_t i = 0; i < n; i++)
    if (dense[i] == (int64_t)il) *moe = false;
  return BRISK_OK;
}

/* DeepSeek-V2 (transformers' deepseek_v2): latent attention sizes, routed
 * and shared experts (n_shared_experts of moe_intermediate_size each, as
 * one FFN, ungated), routing. Called after the RoPE settings are read. */
static brisk_status read_deepseek2(const brisk_hf *hf, brisk_hparams *hp, float mscale_all_dim) {
  uint32_t rope = 0, n_shared = 0;
  brisk_status st;
  if ((st = cfg_u32(hf, "q_lora_rank", false, &hp->q_lora_rank)) ||
      (st = cfg_u32(hf, "kv_lora_rank", true, &hp->kv_lora_rank)) ||
      (st = cfg_u32(hf, "qk_nope_head_dim", true, &hp->mla_nope_dim)) ||
      (st = cfg_u32(hf, "qk_rope_head_dim", true, &rope)) ||
      (st = cfg_u32(hf, "v_head_dim", true, &hp->mla_v_dim)) ||
      (st = cfg_u32(hf, "n_routed_experts", false, &hp->n_expert)) ||
      (st = cfg_u32(hf, "n_shared_experts", false, &n_shared)) ||
      (st = cfg_u32(hf, "moe_intermediate_size", false, &hp->n_ff_exp)) ||
      (st = cfg_f32(hf, "routed_scaling_factor", &hp->moe_scale)))
    return st;
  if (hp->kv_lora_rank == 0 || hp->mla_nope_dim == 0 || rope == 0 || hp->mla_v_dim == 0 ||
      rope % 2 || (hp->kv_lora_rank + rope) % 2 || hp->kv_lora_rank > BRISK_MAX_HEAD_DIM ||
      hp->mla_nope_dim + rope > BRISK_MAX_HEAD_DIM || hp->mla_v_dim > BRISK_MAX_HEAD_DIM)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: kv_lora_rank %u, qk_nope_head_dim %u, qk_rope_head_dim %u, "
                       "v_head_dim %u: each must be 1..%d, the rope part and rank + rope even",
                       hp->kv_lora_rank, hp->mla_nope_dim, rope, hp->mla_v_dim, BRISK_MAX_HEAD_DIM);
  hp->head_dim = hp->mla_nope_dim + rope;
  hp->rope_dim = rope;
  hp->n_head_kv = hp->n_head; /* every head reads the one latent */
  hp->n_ff_shexp = n_shared * hp->n_ff_exp;
  bool bias = false;
  if ((st = brisk_hf_config_get_bool(hf, "attention_bias", &bias)) && st != BRISK_E_NOT_FOUND)
    return st;
  if (bias)
    return brisk_error(BRISK_E_UNSUPPORTED, "config.json: attention_bias true is not supported");
  const char *method = "greedy", *scoring = "softmax";
  if (((st = brisk_hf_config_get_string(hf, "topk_method", &method)) && st != BRISK_E_NOT_FOUND) ||
      ((st = brisk_hf_config_get_string(hf, "scoring_func", &scoring)) && st != BRISK_E_NOT_FOUND))
    return st;
  if (strcmp(scoring, "softmax"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: scoring_func '%s' is not supported (softmax is)", scoring);
  if (!strcmp(method, "group_limited_greedy")) {
    if ((st = cfg_u32(hf, "n_group", true, &hp->moe_n_group)) ||
        (st = cfg_u32(hf, "topk_group", true, &hp->moe_topk_group)))
      return st;
    if (hp->moe_n_group == 0 || hp->n_expert % hp->moe_n_group || hp->moe_topk_group == 0 ||
        hp->moe_topk_group > hp->moe_n_group ||
        hp->n_expert_used > hp->moe_topk_group * (hp->n_expert / hp->moe_n_group))
      return brisk_error(BRISK_E_FORMAT,
                         "config.json: n_group %u, topk_group %u do not fit %u experts, %u per "
                         "token",
                         hp->moe_n_group, hp->moe_topk_group, hp->n_expert, hp->n_expert_used);
  } else if (strcmp(method, "greedy")) {
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: topk_method '%s' is not supported (greedy and "
                       "group_limited_greedy are)",
                       method);
  }
  hp->moe_renorm = false;
  if ((st = brisk_hf_config_get_bool(hf, "norm_topk_prob", &hp->moe_renorm)) &&
      st != BRISK_E_NOT_FOUND)
    return st;
  /* DeepSeek scales the logits by mscale(factor, mscale_all_dim)^2 too
   * (transformers' yarn_apply_mscale). */
  double scale = 1.0 / sqrt((double)hp->head_dim);
  if (hp->rope_scaling != BRISK_HP_ROPE_SCALING_NONE && mscale_all_dim != 0 &&
      hp->rope_factor > 1) {
    double ms = 1 + 0.1 * mscale_all_dim * log((double)hp->rope_factor);
    scale *= ms * ms;
  }
  hp->attn_scale = (float)scale;
  return BRISK_OK;
}

/* Whether layer il of a deepseek2 model has the MoE FFN: from
 * first_k_dense_replace on, every moe_layer_freq-th layer. */
static brisk_status deepseek2_layer_is_moe(const brisk_hf *hf, uint32_t il, bool *moe) {
  uint32_t first = 0, freq = 1;
  brisk_status st;
  if ((st = cfg_u32(hf, "first_k_dense_replace", false, &first)) ||
      (st = cfg_u32(hf, "moe_layer_freq", false, &freq)))
    return st;
  *moe = il >= first && freq > 0 && il % freq == 0;
  return BRISK_OK;
}

static bool has_rope_parameters(const brisk_hf *hf) {
  struct json_object *o = NULL;
  return brisk_json_find(brisk_hf_config(hf), "config.json", "rope_parameters", &o) == BRISK_OK;
}

/* Gemma 2/3: embeddings scaled by sqrt(n_embd), queries by
 * query_pre_attn_scalar^-1/2, soft-capping (null or absent: none); older
 * Gemma 3 configs give the sliding layers' base as rope_local_base_freq. */
static brisk_status read_gemma(const brisk_hf *hf, brisk_hparams *hp) {
  float qpas = (float)hp->head_dim;
  brisk_status st;
  hp->rope_base_local = 10000.0f;
  if ((st = cfg_f32(hf, "query_pre_attn_scalar", &qpas)) ||
      (st = cfg_f32(hf, "attn_logit_softcapping", &hp->attn_softcap)) ||
      (st = cfg_f32(hf, "final_logit_softcapping", &hp->final_softcap)) ||
      (st = cfg_f32(hf, "rope_local_base_freq", &hp->rope_base_local)))
    return st;
  const char *act = "gelu_pytorch_tanh";
  st = brisk_hf_config_get_string(hf, "hidden_activation", &act);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_tanh"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: hidden_activation '%s' is not supported (gelu_pytorch_tanh "
                       "is)",
                       act);
  if (!(qpas > 0))
    return brisk_error(BRISK_E_FORMAT, "config.json: query_pre_attn_scalar %g must be positive",
                       (double)qpas);
  hp->attn_scale = (float)(1.0 / sqrt((double)qpas));
  /* transformers multiplies by sqrt(hidden_size) rounded to the
   * activations' type (float32 here). */
  hp->embd_scale = (float)sqrt((double)hp->n_embd);
  if (hp->arch == BRISK_ARCH_GEMMA2) hp->rope_base_local = 0;
  return BRISK_OK;
}

/* Whether layer il of a Gemma model attends through the sliding window:
 * "layer_types" when the config has it, else the pattern the config's
 * family used before (gemma2: every other layer from the first; gemma3:
 * all but every sliding_window_pattern-th). */
static brisk_status gemma_layer_sliding(const brisk_hf *hf, const brisk_hparams *hp, uint32_t il,
                                        bool *sliding) {
  struct json_object *types = NULL;
  brisk_status st = brisk_json_find(brisk_hf_config(hf), "config.json", "layer_types", &types);
  if (st == BRISK_OK) {
    if (!json_object_is_type(types, json_type_array) ||
        json_object_array_length(types) != hp->n_layer)
      return brisk_error(BRISK_E_FORMAT,
                         "config.json: 'layer_types' must list num_hidden_layers (%u) types",
                         hp->n_layer);
    const char *t = json_object_get_string(json_object_array_get_idx(types, il));
    if (!t || (strcmp(t, "sliding_attention") && strcmp(t, "full_attention")))
      return brisk_error(BRISK_E_UNSUPPORTED, "config.json: layer_types[%u] '%s' is not supported",
                         il, t ? t : "(not a string)");
    *sliding = !strcmp(t, "sliding_attention");
    return BRISK_OK;
  }
  if (st != BRISK_E_NOT_FOUND) return st;
  uint32_t pattern = hp->arch == BRISK_ARCH_GEMMA2 ? 2 : 6;
  if ((st = cfg_u32(hf, "sliding_window_pattern", false, &pattern))) return st;
  if (pattern == 0) return brisk_error(BRISK_E_FORMAT, "config.json: sliding_window_pattern is 0");
  *sliding = (il + 1) % pattern != 0;
  return BRISK_OK;
}

static brisk_status read_hparams(const brisk_hf *hf, brisk_hparams *hp) {
  const char *model_type;
  brisk_status st = brisk_hf_config_get_string(hf, "model_type", &model_type);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "config.json: key 'model_type' is missing");
  if (st) return st;
  if (!brisk_arch_from_hf_model_type(model_type, &hp->arch))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "architecture '%s' (config.json model_type) is not supported; brisk runs %s",
                       model_type, brisk_arch_names());
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
      (st = cfg_u32(hf, "num_local_experts", false, &hp->n_expert)) ||
      (st = cfg_u32(hf, "num_experts", false, &hp->n_expert)) ||
      (st = cfg_u32(hf, "num_experts_per_tok", false, &hp->n_expert_used)) ||
      (st = cfg_u32(hf, "num_kv_shared_layers", false, &hp->n_kv_shared)))
    return st;
  if (hp->n_head == 0) return brisk_error(BRISK_E_FORMAT, "config.json: num_attention_heads is 0");
  hp->head_dim = hp->n_embd / hp->n_head;
  if ((st = cfg_u32(hf, "head_dim", false, &hp->head_dim))) return st;
  hp->rope_dim = hp->head_dim;
  bool gemma = hp->arch == BRISK_ARCH_GEMMA2 || hp->arch == BRISK_ARCH_GEMMA3;
  if (hp->arch == BRISK_ARCH_MISTRAL || hp->arch == BRISK_ARCH_MIXTRAL || gemma ||
      hp->arch == BRISK_ARCH_PHI3)
    if ((st = cfg_u32(hf, "sliding_window", false, &hp->sliding_window))) return st;
  bool use_sw = false;
  st = brisk_hf_config_get_bool(hf, "use_sliding_window", &use_sw);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (use_sw && hp->arch != BRISK_ARCH_MISTRAL && hp->arch != BRISK_ARCH_MIXTRAL)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: use_sliding_window with per-layer windows (max_window_layers) "
                       "is not supported");
  bool tied = gemma; /* transformers' default for Gemma configs */
  st = brisk_hf_config_get_bool(hf, "tie_word_embeddings", &tied);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  hp->tied_embeddings = tied;
  if (hp->arch == BRISK_ARCH_GRANITE && (st = read_granite(hf, hp))) return st;
  const bool deepseek2 = hp->arch == BRISK_ARCH_DEEPSEEK2;
  if (hp->n_expert && !deepseek2 && (st = read_moe(hf, hp))) return st;
  if ((hp->arch == BRISK_ARCH_GEMMA2 || hp->arch == BRISK_ARCH_GEMMA3) && (st = read_gemma(hf, hp)))
    return st;
  /* DeepSeek rotates adjacent pairs of its rope dims (complex multiply). */
  hp->rope_style = deepseek2 ? BRISK_HP_ROPE_NORMAL : BRISK_HP_ROPE_NEOX;
  uint32_t rope_dim = 0;
  if (deepseek2 && (st = cfg_u32(hf, "qk_rope_head_dim", true, &rope_dim))) return st;
  brisk_hf_rope *rope = brisk_calloc(1, sizeof *rope);
  if (!rope) return brisk_error_oom();
  rope->base = hp->rope_base;
  rope->allow_mscale = deepseek2;
  /* Gemma 3 keeps one rope object per layer type: the full layers' is the
   * model's, the sliding layers' gives their (unscaled) base. */
  bool per_type = hp->arch == BRISK_ARCH_GEMMA3;
  if (!(st = brisk_hf_rope_lookup(hf, per_type ? "full_attention" : NULL,
                                  deepseek2 ? rope_dim : hp->head_dim, rope)))
    st = apply_rope(rope, hp);
  if (!st && hp->rope_scaling == BRISK_HP_ROPE_SCALING_LONGROPE) {
    if (per_type || deepseek2)
      st = brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: rope type 'longrope' is not supported for this architecture");
    else
      st = longrope_hparams(hf, rope, hp);
  }
  if (!st && deepseek2 && !(st = read_deepseek2(hf, hp, rope->mscale_all_dim)) && rope->dim)
    st = brisk_error(BRISK_E_UNSUPPORTED,
                     "config.json: partial_rotary_factor is not supported for deepseek_v2");
  if (!st && per_type && has_rope_parameters(hf)) {
    memset(rope, 0, sizeof *rope);
    rope->base = hp->rope_base_local;
    st = brisk_hf_rope_lookup(hf, "sliding_attention", hp->head_dim, rope);
    if (!st && (rope->scaling != BRISK_HP_ROPE_SCALING_NONE || rope->dim))
      st =
          brisk_error(BRISK_E_UNSUPPORTED, "config.json: rope scaling or partial rotary dims in "
                                           "'rope_parameters.sliding_attention' are not supported");
    hp->rope_base_local = rope->base;
  }
  brisk_free(rope);
  return st;
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
/* A GPTQ / AWQ matrix `name` (X.weight) stored as X.qweight and its
 * companions: repacked into Q4_1 memory the model owns. *done is false when
 * the folder has no X.qweight (an unquantized layer, such as lm_head). */
static brisk_status bind_quantized(hf_loader *L, const char *name, int64_t cols, int64_t rows,
                                   brisk_weight *w, bool *done) {
  char prefix[256];
  size_t n = strlen(name);
  *done = false;
  if (rows == 0 || n < 7 || n - 7 >= sizeof prefix || strcmp(name + n - 7, ".weight"))
    return BRISK_OK;
  memcpy(prefix, name, n - 7);
  prefix[n - 7] = 0;
  if (!brisk_hf_quant_has(L->hf, prefix)) return BRISK_OK;
  void *blocks = NULL;
  int32_t *perm = NULL;
  const char *qname = NULL;
  brisk_status st;
  if ((st = brisk_hf_quant_repack(L->hf, &L->quant, prefix, cols, rows, &blocks, &perm, &qname)))
    return st;
  /* keep frees what it cannot hold. */
  if ((st = keep(L, blocks))) {
    brisk_aligned_free(perm);
    return st;
  }
  if (perm && (st = keep(L, perm))) return st;
  *done = true;
  st = brisk_model_bind_check(L->m, qname, blocks, BRISK_DTYPE_Q4_1, cols, rows, false, w);
  w->perm = perm;
  if (perm) L->m->act_order = true;
  return st;
}

/* Act-order linears of one input whose column orders are equal (GPTQ
 * orders a layer's columns by its input's Hessian: q, k and v share one,
 * gate and up another) share one array, so the forward pass gathers their
 * input once. */
static void share_order(const brisk_weight *a, brisk_weight *b) {
  if (a->perm && b->perm && a->perm != b->perm && a->cols == b->cols &&
      !memcmp(a->perm, b->perm, (size_t)a->cols * sizeof *a->perm))
    b->perm = a->perm;
}

static brisk_status bind(hf_loader *L, const char *name, int64_t cols, int64_t rows, bool required,
                         brisk_weight *w) {
  bool quantized;
  brisk_status qst = bind_quantized(L, name, cols, rows, w, &quantized);
  if (!qst && quantized && L->f32)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tensor '%s': a GPTQ / AWQ matrix where brisk reads float32 (multi-head "
                       "latent attention's kv_b) is not supported",
                       name);
  if (qst || quantized) return qst;
  const brisk_safetensors_tensor *t = brisk_hf_find_tensor(L->hf, name);
  if (t && t->dtype == BRISK_DTYPE_I32)
    return brisk_error(BRISK_E_FORMAT, "tensor '%s' is int32, not a floating-point weight", name);
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
  /* Gemma's norms scale by (1 + weight): stored here as that sum, as GGUF
   * conversions store them. */
  size_t n_name = strlen(name);
  bool plus_one =
      L->norm_plus_one && vector && n_name >= 11 && !strcmp(name + n_name - 11, "norm.weight");
  if ((vector || L->f32) && (type != BRISK_DTYPE_F32 || plus_one)) {
    const int64_t n_elem = vector ? cols : cols * rows; /* shape checked above */
    float *f = brisk_aligned_alloc(64, (size_t)n_elem * sizeof(float));
    if (!f) return brisk_error_oom();
    for (int64_t i = 0; i < n_elem; i++) {
      uint16_t h;
      if (type == BRISK_DTYPE_F32) {
        memcpy(&f[i], (const char *)t->data + 4 * i, 4);
      } else {
        memcpy(&h, (const char *)t->data + 2 * i, 2);
        f[i] = type == BRISK_DTYPE_F16 ? brisk_f16_to_f32(h) : brisk_bf16_to_f32(h);
      }
      if (plus_one) f[i] += 1.0f;
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
  const bool olmo2 = hp->arch == BRISK_ARCH_OLMO2;
  const bool mla = hp->kv_lora_rank > 0;
  bool moe = hp->n_expert > 0;
  if (moe && (st = mla ? deepseek2_layer_is_moe(L->hf, il, &moe) : layer_is_moe(L->hf, il, &moe)))
    return st;
  if (!olmo2) BIND("input_layernorm.weight", d, 0, true, ly->attn_norm);
  if (mla) {
    /* Latent attention: q (plain or through its own low rank), kv_a
     * ([latent | k_rope] rows), its norm, kv_b (per head: nope rows, then
     * value rows) and o. */
    int64_t r = hp->kv_lora_rank, dr = hp->rope_dim, ql = hp->q_lora_rank;
    if (ql) {
      BIND("self_attn.q_a_proj.weight", d, ql, true, ly->wq_a);
      BIND("self_attn.q_a_layernorm.weight", ql, 0, true, ly->q_a_norm);
      BIND("self_attn.q_b_proj.weight", ql, q_dim, true, ly->wq_b);
    } else {
      BIND("self_attn.q_proj.weight", d, q_dim, true, ly->wq);
    }
    brisk_weight kv_a;
    BIND("self_attn.kv_a_proj_with_mqa.weight", d, r + dr, true, kv_a);
    ly->wkv_a_lat = brisk_weight_rows(&kv_a, 0, r);
    ly->wkv_a_rope = brisk_weight_rows(&kv_a, r, dr);
    BIND("self_attn.kv_a_layernorm.weight", r, 0, true, ly->kv_a_norm);
    L->f32 = true;
    snprintf(name, sizeof name, "model.layers.%u.self_attn.kv_b_proj.weight", il);
    st = bind(L, name, r, (int64_t)hp->n_head * (hp->mla_nope_dim + hp->mla_v_dim), true,
              &ly->wkv_b);
    L->f32 = false;
    if (st) return st;
    BIND("self_attn.o_proj.weight", (int64_t)hp->n_head * hp->mla_v_dim, d, true, ly->wo);
    BIND("post_attention_layernorm.weight", d, 0, true, ly->ffn_norm);
  } else if (hp->arch == BRISK_ARCH_PHI3) { /* q, k, v rows of one fused matrix */
    brisk_weight qkv;
    BIND("self_attn.qkv_proj.weight", d, q_dim + 2 * kv_dim, true, qkv);
    ly->wq = brisk_weight_rows(&qkv, 0, q_dim);
    ly->wk = brisk_weight_rows(&qkv, q_dim, kv_dim);
    ly->wv = brisk_weight_rows(&qkv, q_dim + kv_dim, kv_dim);
  } else {
    BIND("self_attn.q_proj.weight", d, q_dim, true, ly->wq);
    BIND("self_attn.k_proj.weight", d, kv_dim, true, ly->wk);
    BIND("self_attn.v_proj.weight", d, kv_dim, true, ly->wv);
  }
  if (!mla) BIND("self_attn.o_proj.weight", q_dim, d, true, ly->wo);
  BIND("self_attn.q_proj.bias", q_dim, 0, ai->qkv_bias, ly->bq);
  BIND("self_attn.k_proj.bias", kv_dim, 0, ai->qkv_bias, ly->bk);
  BIND("self_attn.v_proj.bias", kv_dim, 0, ai->qkv_bias, ly->bv);
  /* olmo2 norms all of q and all of k; its post_attention_layernorm is a
   * post-norm of the attention output, and it has no pre-norms. */
  BIND("self_attn.q_norm.weight", olmo2 ? q_dim : hp->head_dim, 0, ai->qk_norm, ly->q_norm);
  BIND("self_attn.k_norm.weight", olmo2 ? kv_dim : hp->head_dim, 0, ai->qk_norm, ly->k_norm);
  if (olmo2) {
    BIND("post_attention_layernorm.weight", d, 0, true, ly->post_attn_norm);
    BIND("post_feedforward_layernorm.weight", d, 0, true, ly->post_ffn_norm);
  } else if (L->norm_plus_one) { /* gemma: a norm before and after each sub-block */
    BIND("post_attention_layernorm.weight", d, 0, true, ly->post_attn_norm);
    BIND("pre_feedforward_layernorm.weight", d, 0, true, ly->ffn_norm);
    BIND("post_feedforward_layernorm.weight", d, 0, true, ly->post_ffn_norm);
  } else if (!mla) {
    BIND("post_attention_layernorm.weight", d, 0, true, ly->ffn_norm);
  }
  if (hp->arch == BRISK_ARCH_PHI3) { /* gate rows, then up rows */
    brisk_weight gate_up;
    BIND("mlp.gate_up_proj.weight", d, 2 * ff, true, gate_up);
    ly->ffn_gate = brisk_weight_rows(&gate_up, 0, ff);
    ly->ffn_up = brisk_weight_rows(&gate_up, ff, ff);
    BIND("mlp.down_proj.weight", ff, d, true, ly->ffn_down);
  } else if (hp->n_expert == 0 || !moe) {
    BIND("mlp.gate_proj.weight", d, ff, true, ly->ffn_gate);
    BIND("mlp.up_proj.weight", d, ff, true, ly->ffn_up);
    BIND("mlp.down_proj.weight", ff, d, true, ly->ffn_down);
  } else if (hp->arch != BRISK_ARCH_MIXTRAL) { /* qwen2moe, qwen3moe */
    int64_t fe = hp->n_ff_exp, fs = hp->n_ff_shexp;
    BIND("mlp.gate.weight", d, hp->n_expert, true, ly->moe_router);
    if ((st = brisk_model_alloc_experts(m, ly))) return st;
    for (uint32_t e = 0; e < hp->n_expert; e++) {
      char suffix[96];
      snprintf(suffix, sizeof suffix, "mlp.experts.%u.gate_proj.weight", e);
      BIND(suffix, d, fe, true, ly->expert_gate[e]);
      snprintf(suffix, sizeof suffix, "mlp.experts.%u.up_proj.weight", e);
      BIND(suffix, d, fe, true, ly->expert_up[e]);
      snprintf(suffix, sizeof suffix, "mlp.experts.%u.down_proj.weight", e);
      BIND(suffix, fe, d, true, ly->expert_down[e]);
    }
    if (fs && mla) { /* deepseek2: n_shared_experts as one FFN, no gate */
      BIND("mlp.shared_experts.gate_proj.weight", d, fs, true, ly->shexp_gate);
      BIND("mlp.shared_experts.up_proj.weight", d, fs, true, ly->shexp_up);
      BIND("mlp.shared_experts.down_proj.weight", fs, d, true, ly->shexp_down);
    } else if (fs) {
      BIND("mlp.shared_expert.gate_proj.weight", d, fs, true, ly->shexp_gate);
      BIND("mlp.shared_expert.up_proj.weight", d, fs, true, ly->shexp_up);
      BIND("mlp.shared_expert.down_proj.weight", fs, d, true, ly->shexp_down);
      BIND("mlp.shared_expert_gate.weight", d, 1, false, ly->shexp_gate_inp);
    }
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
  share_order(&ly->wq, &ly->wk);
  share_order(&ly->wq, &ly->wv);
  share_order(&ly->ffn_gate, &ly->ffn_up);
  share_order(&ly->shexp_gate, &ly->shexp_up);
  for (uint32_t e = 0; ly->expert_gate && e < hp->n_expert; e++)
    share_order(&ly->expert_gate[e], &ly->expert_up[e]);
  ly->sliding_window = hp->sliding_window;
  if (L->norm_plus_one) {
    bool sliding = false;
    if ((st = gemma_layer_sliding(L->hf, hp, il, &sliding))) return st;
    ly->sliding_window = sliding ? hp->sliding_window : 0;
  }
  return BRISK_OK;
}

brisk_status brisk_model_hf_bind(void *loader, const char *name, int64_t cols, int64_t rows,
                                 bool required, brisk_weight *w) {
  return bind(loader, name, cols, rows, required, w);
}

/* LongRoPE's short and long factors ([rope_dim / 2] each, from the rope
 * object) as F32 vectors the model owns: rope_freqs (short) and rope_long. */
static brisk_status bind_longrope(hf_loader *L) {
  brisk_model *m = L->m;
  const brisk_hparams *hp = &m->hp;
  brisk_hf_rope *r = brisk_calloc(1, sizeof *r);
  if (!r) return brisk_error_oom();
  r->base = hp->rope_base;
  brisk_status st = brisk_hf_rope_lookup(L->hf, NULL, hp->head_dim, r);
  uint32_t n = hp->rope_dim / 2;
  if (!st && r->n_factors != n)
    st = brisk_error(BRISK_E_FORMAT, "config.json: longrope has %u factors for %u rotated pairs",
                     r->n_factors, n);
  const char *names[2] = {"rope_parameters.short_factor", "rope_parameters.long_factor"};
  const float *src[2] = {r->short_factor, r->long_factor};
  brisk_weight *dst[2] = {&m->rope_freqs, &m->rope_long};
  for (int i = 0; i < 2 && !st; i++) {
    float *f = brisk_aligned_alloc(64, (size_t)n * sizeof(float));
    if (!f) {
      st = brisk_error_oom();
      break;
    }
    memcpy(f, src[i], (size_t)n * sizeof(float));
    if (!(st = keep(L, f)))
      st = brisk_model_bind_check(m, names[i], f, BRISK_DTYPE_F32, n, 1, true, dst[i]);
  }
  brisk_free(r);
  return st;
}

brisk_status brisk_model_load_hf(brisk_model *m, const brisk_hf *hf,
                                 const brisk_model_params *params, void ***owned, size_t *n_owned,
                                 size_t *cap_owned) {
  hf_loader L = {hf, m, owned, n_owned, cap_owned, !params->use_mmap, false, false, {0}};
  brisk_status st;
  if ((st = read_hparams(hf, &m->hp)) || (st = brisk_model_check_hparams(&m->hp)) ||
      (st = brisk_hf_quant_read(hf, &L.quant)))
    return st;
  if (m->hp.arch == BRISK_ARCH_BERT) return brisk_model_bind_bert(m, hf, params, &L);
  if (m->hp.rope_scaling == BRISK_HP_ROPE_SCALING_LONGROPE && (st = bind_longrope(&L))) return st;
  L.norm_plus_one = m->hp.arch == BRISK_ARCH_GEMMA2 || m->hp.arch == BRISK_ARCH_GEMMA3;
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
