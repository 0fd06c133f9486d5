/* Maps a GGUF file into the internal model layout: hyper-parameters from
 * "<arch>.*" keys, weights bound in place from the file mapping, every shape
 * checked against what the architecture expects. */
#include "model/load.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "model/load_gguf_mla.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct gguf_loader {
  const brisk_gguf *g;
  const char *arch; /* key prefix */
  void ***owned;    /* model-owned buffers made at load, appended to */
  size_t *n_owned, *cap_owned;
} gguf_loader;

static brisk_status get_u32(const gguf_loader *L, const char *suffix, bool required,
                            uint32_t *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
  brisk_status st = brisk_gguf_get_u32(L->g, key, out);
  if (st == BRISK_E_NOT_FOUND && !required) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND) return brisk_error(st, "GGUF key '%s' is missing", key);
  return st;
}

static brisk_status get_f32(const gguf_loader *L, const char *suffix, bool required, float *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
  brisk_status st = brisk_gguf_get_f32(L->g, key, out);
  if (st == BRISK_E_NOT_FOUND && !required) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND) return brisk_error(st, "GGUF key '%s' is missing", key);
  return st;
}

/* Gemma 2/3 as llama.cpp converts them: norms already hold 1 + w,
 * embeddings scaled by sqrt(n_embd), queries by 1/sqrt(head_dim) (by
 * 1/sqrt(n_embd / n_head) in the 27B models, as llama.cpp does: its
 * converter does not store query_pre_attn_scalar; {arch}.attention.scale
 * overrides), soft-caps as keys, and
 * gemma3's sliding layers with their own base (10000 unless given). */
static brisk_status read_gemma(const gguf_loader *L, brisk_hparams *hp) {
  brisk_status st;
  bool g3 = hp->arch == BRISK_ARCH_GEMMA3;
  if ((st = get_f32(L, "attn_logit_softcapping", false, &hp->attn_softcap)) ||
      (st = get_f32(L, "final_logit_softcapping", false, &hp->final_softcap)))
    return st;
  hp->embd_scale = (float)sqrt((double)hp->n_embd);
  bool big = hp->n_layer == (g3 ? 62u : 46u);
  hp->attn_scale =
      (float)(1.0 / sqrt(big ? (double)hp->n_embd / hp->n_head : (double)hp->head_dim));
  /* A file that stores the scale (query_pre_attn_scalar^-1/2) says best. */
  if ((st = get_f32(L, "attention.scale", false, &hp->attn_scale))) return st;
  hp->rope_base_local = 0;
  if (g3) {
    hp->rope_base_local = 10000.0f;
    if ((st = get_f32(L, "rope.freq_base_swa", false, &hp->rope_base_local))) return st;
  }
  return BRISK_OK;
}

/* Whether a Gemma layer uses the sliding window: the per-layer bool array
 * or the period in {arch}.attention.sliding_window_pattern when present,
 * else llama.cpp's (gemma2: even layers; gemma3: all but every sixth). */
static brisk_status gemma_sliding(const gguf_loader *L, const brisk_hparams *hp, uint32_t il,
                                  bool *sliding) {
  char key[128];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", L->arch);
  uint32_t period = hp->arch == BRISK_ARCH_GEMMA2 ? 2 : 6;
  brisk_gguf_type et;
  uint64_t len;
  brisk_status st = brisk_gguf_get_arr(L->g, key, &et, &len);
  if (st == BRISK_OK) {
    if (et != BRISK_GGUF_BOOL || len != hp->n_layer)
      return brisk_error(BRISK_E_FORMAT, "GGUF: '%s' must be %u booleans", key, hp->n_layer);
    uint8_t b;
    memcpy(&b, (const char *)brisk_gguf_arr_data(L->g, brisk_gguf_find_key(L->g, key)) + il, 1);
    *sliding = b != 0;
    return BRISK_OK;
  }
  if ((st = get_u32(L, "attention.sliding_window_pattern", false, &period))) return st;
  if (period == 0) return brisk_error(BRISK_E_FORMAT, "GGUF: '%s' is 0", key);
  *sliding = (il + 1) % period != 0;
  return BRISK_OK;
}

static brisk_status read_hparams(const gguf_loader *L, brisk_hparams *hp) {
  brisk_status st;
  if ((st = get_u32(L, "context_length", true, &hp->n_ctx_train)) ||
      (st = get_u32(L, "embedding_length", true, &hp->n_embd)) ||
      (st = get_u32(L, "block_count", true, &hp->n_layer)) ||
      (st = get_u32(L, "feed_forward_length", true, &hp->n_ff)) ||
      (st = get_u32(L, "attention.head_count", true, &hp->n_head)))
    return st;
  hp->n_head_kv = hp->n_head;
  hp->rms_eps = 1e-5f;
  hp->rope_base = 10000.0f;
  hp->rope_factor = 1.0f;
  if ((st = get_u32(L, "attention.head_count_kv", false, &hp->n_head_kv)) ||
      (st = get_f32(L, "attention.layer_norm_rms_epsilon", false, &hp->rms_eps)) ||
      (st = get_f32(L, "rope.freq_base", false, &hp->rope_base)) ||
      (st = get_u32(L, "attention.sliding_window", false, &hp->sliding_window)) ||
      (st = get_u32(L, "attention.shared_kv_layers", false, &hp->n_kv_shared)) ||
      (st = get_u32(L, "expert_count", false, &hp->n_expert)) ||
      (st = get_u32(L, "expert_used_count", false, &hp->n_expert_used)))
    return st;
  /* Qwen-MoE: expert and shared-expert widths; llama.cpp renormalizes
   * mixtral's and qwen3moe's top-k weights, not qwen2moe's, nor
   * deepseek2's unless expert_weights_norm says so (the converter writes
   * it only when norm_topk_prob is true). */
  hp->n_ff_exp = hp->n_ff;
  hp->moe_renorm = hp->arch != BRISK_ARCH_QWEN2MOE && hp->arch != BRISK_ARCH_DEEPSEEK2;
  bool norm = hp->moe_renorm;
  if ((st = get_u32(L, "expert_feed_forward_length", false, &hp->n_ff_exp)) ||
      (st = get_u32(L, "expert_shared_feed_forward_length", false, &hp->n_ff_shexp)))
    return st;
  char nkey[128];
  snprintf(nkey, sizeof nkey, "%s.expert_weights_norm", L->arch);
  st = brisk_gguf_get_bool(L->g, nkey, &norm);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  hp->moe_renorm = norm;
  if (hp->n_head == 0 || hp->n_embd == 0)
    return brisk_error(BRISK_E_FORMAT, "GGUF: head_count %u and embedding_length %u must be > 0",
                       hp->n_head, hp->n_embd);
  hp->head_dim = hp->n_embd / hp->n_head;
  if ((st = get_u32(L, "attention.key_length", false, &hp->head_dim))) return st;
  uint32_t value_length = hp->head_dim;
  if ((st = get_u32(L, "attention.value_length", false, &value_length))) return st;
  /* deepseek2's head sizes are read by brisk_gguf_mla_hparams. */
  if (value_length != hp->head_dim && hp->arch != BRISK_ARCH_DEEPSEEK2)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: attention.value_length %u differs from key_length %u", value_length,
                       hp->head_dim);
  hp->rope_dim = hp->head_dim;
  if ((st = get_u32(L, "rope.dimension_count", false, &hp->rope_dim))) return st;
  if ((hp->arch == BRISK_ARCH_GEMMA2 || hp->arch == BRISK_ARCH_GEMMA3) && (st = read_gemma(L, hp)))
    return st;
  if (hp->arch == BRISK_ARCH_GRANITE) {
    /* llama.cpp's keys; logits are divided by logit_scale. */
    float logit = 1.0f;
    if ((st = get_f32(L, "embedding_scale", false, &hp->embd_scale)) ||
        (st = get_f32(L, "residual_scale", false, &hp->residual_scale)) ||
        (st = get_f32(L, "attention.scale", false, &hp->attn_scale)) ||
        (st = get_f32(L, "logit_scale", false, &logit)))
      return st;
    if (!(logit > 0 && logit < 1e30f))
      return brisk_error(BRISK_E_FORMAT, "GGUF: granite.logit_scale %g must be positive",
                         (double)logit);
    hp->logit_scale = 1.0f / logit;
  }

  /* RoPE scaling: "linear" and "yarn" are keys; llama3-style scaling is
   * stored by converters as a rope_freqs tensor (bound separately). */
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", L->arch);
  brisk_gguf_str type;
  st = brisk_gguf_get_str(L->g, key, &type);
  if (st == BRISK_OK) {
    if (strcmp(type.ptr, "none") == 0) {
      hp->rope_scaling = BRISK_HP_ROPE_SCALING_NONE;
    } else if (strcmp(type.ptr, "linear") == 0) {
      hp->rope_scaling = BRISK_HP_ROPE_SCALING_LINEAR;
    } else if (strcmp(type.ptr, "yarn") == 0) {
      hp->rope_scaling = BRISK_HP_ROPE_SCALING_YARN;
      hp->yarn_beta_fast = 32.0f;
      hp->yarn_beta_slow = 1.0f;
      hp->yarn_attn_factor = 1.0f;
      if ((st = get_f32(L, "rope.scaling.yarn_beta_fast", false, &hp->yarn_beta_fast)) ||
          (st = get_f32(L, "rope.scaling.yarn_beta_slow", false, &hp->yarn_beta_slow)) ||
          (st = get_f32(L, "rope.scaling.attn_factor", false, &hp->yarn_attn_factor)))
        return st;
    } else {
      return brisk_error(BRISK_E_UNSUPPORTED, "GGUF: rope scaling type '%s' is not supported",
                         type.ptr);
    }
    if ((st = get_f32(L, "rope.scaling.factor", false, &hp->rope_factor)) ||
        (st = get_u32(L, "rope.scaling.original_context_length", false, &hp->rope_orig_ctx)))
      return st;
  } else if (st != BRISK_E_NOT_FOUND) {
    return st;
  }
  return BRISK_OK;
}

/* Binds tensor `name`: expects a vector of `cols` (rows == 0) or a matrix of
 * `rows` x `cols`. A missing optional tensor leaves w->data NULL. */
static brisk_status bind(brisk_model *m, const gguf_loader *L, const char *name, int64_t cols,
                         int64_t rows, bool required, brisk_weight *w) {
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(L->g, name);
  if (!t) {
    if (required) return brisk_error(BRISK_E_FORMAT, "tensor '%s' is missing", name);
    return BRISK_OK;
  }
  bool vector = rows == 0;
  int64_t got_rows = t->n_dims >= 2 ? (int64_t)t->ne[1] : 1;
  bool ok = (int64_t)t->ne[0] == cols && t->ne[2] == 1 && t->ne[3] == 1 &&
            (vector ? t->n_dims == 1 : got_rows == rows);
  if (!ok)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s' has shape [%llu, %llu, %llu, %llu]; expected [%lld%s%lld]",
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)cols,
                       vector ? "" : ", ", vector ? 0LL : (long long)rows);
  /* The weight keeps the file's own name string (it lives as long as the
   * mapping); `name` may be the caller's stack buffer. */
  return brisk_model_bind_check(m, t->name, t->data, t->type, cols, vector ? 1 : rows, vector, w);
}

/* phi3 LongRoPE as llama.cpp's converter writes it: rope_factors_short and
 * rope_factors_long ([rope_dim / 2] F32 each, finite and positive) into the
 * fields the Hugging Face loader fills (rope_freqs: short, rope_long), the
 * original context from rope.scaling.original_context_length and the cos /
 * sin magnitude from rope.scaling.attn_factor (else the converter's
 * sqrt(1 + ln s / ln orig), s = context_length / orig, 1 when s <= 1). */
static brisk_status bind_longrope(brisk_model *m, const gguf_loader *L) {
  brisk_hparams *hp = &m->hp;
  const bool has_long = brisk_gguf_find_tensor(L->g, "rope_factors_long.weight") != NULL,
             has_short = brisk_gguf_find_tensor(L->g, "rope_factors_short.weight") != NULL;
  if (!has_long && !has_short) return BRISK_OK;
  if (hp->arch != BRISK_ARCH_PHI3 || !has_long || !has_short || m->rope_freqs.data)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: LongRoPE needs both rope_factors_long and rope_factors_short in a "
                       "phi3 model without rope_freqs");
  brisk_status st;
  if ((st = bind(m, L, "rope_factors_short.weight", hp->rope_dim / 2, 0, true, &m->rope_freqs)) ||
      (st = bind(m, L, "rope_factors_long.weight", hp->rope_dim / 2, 0, true, &m->rope_long)))
    return st;
  if (m->rope_freqs.type != BRISK_DTYPE_F32 || m->rope_long.type != BRISK_DTYPE_F32)
    return brisk_error(BRISK_E_FORMAT,
                       "GGUF: rope_factors_short and rope_factors_long must be F32");
  if ((st = brisk_model_check_rope_freqs(&m->rope_freqs)) ||
      (st = brisk_model_check_rope_freqs(&m->rope_long)))
    return st;
  uint32_t orig = 0;
  if ((st = get_u32(L, "rope.scaling.original_context_length", true, &orig))) return st;
  if (orig < 2)
    return brisk_error(BRISK_E_FORMAT,
                       "GGUF: %s.rope.scaling.original_context_length %u must be at least 2",
                       L->arch, orig);
  double s = (double)hp->n_ctx_train / orig;
  float attn = s <= 1 ? 1.0f : (float)sqrt(1 + log(s) / log((double)orig));
  if ((st = get_f32(L, "rope.scaling.attn_factor", false, &attn))) return st;
  if (!(isfinite(attn) && attn > 0))
    return brisk_error(BRISK_E_FORMAT,
                       "GGUF: %s.rope.scaling.attn_factor %g must be finite and positive", L->arch,
                       (double)attn);
  hp->rope_scaling = BRISK_HP_ROPE_SCALING_LONGROPE;
  hp->rope_orig_ctx = orig;
  hp->rope_factor = s > 0 ? (float)s : 1.0f;
  hp->yarn_attn_factor = attn;
  return brisk_model_check_hparams(hp);
}

brisk_status brisk_model_gguf_bind(brisk_model *m, const brisk_gguf *g, const char *name,
                                   int64_t cols, int64_t rows, bool required, brisk_weight *w) {
  const gguf_loader L = {g, NULL, NULL, NULL, NULL};
  return bind(m, &L, name, cols, rows, required, w);
}

/* Stacked experts: one 3-D tensor [cols, rows, n_expert] split into views. */
static brisk_status bind_experts(brisk_model *m, const gguf_loader *L, const char *name,
                                 int64_t cols, int64_t rows, uint32_t n_expert, brisk_weight *out) {
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(L->g, name);
  if (!t) return brisk_error(BRISK_E_FORMAT, "tensor '%s' is missing", name);
  if (t->n_dims != 3 || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows ||
      t->ne[2] != n_expert)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s' has shape [%llu, %llu, %llu]; expected [%lld, %lld, %u]", name,
                       (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[2], (long long)cols, (long long)rows, n_expert);
  uint64_t row_bytes;
  if (!brisk_dtype_row_bytes(t->type, (uint64_t)cols, &row_bytes))
    return brisk_error(BRISK_E_FORMAT, "tensor '%s': bad row length", name);
  for (uint32_t e = 0; e < n_expert; e++) {
    /* In bounds: the reader checked n_bytes = n_expert * rows * row_bytes. */
    const char *data = (const char *)t->data + (uint64_t)e * (uint64_t)rows * row_bytes;
    brisk_status st = brisk_model_bind_check(m, t->name, data, t->type, cols, rows, false, &out[e]);
    if (st) return st;
  }
  return BRISK_OK;
}

/* deepseek2's attention weights (model/load_gguf_mla.c for kv_b). */
static brisk_status bind_mla(brisk_model *m, const gguf_loader *L, uint32_t il) {
  const brisk_hparams *hp = &m->hp;
  brisk_layer *ly = &m->layers[il];
  const int64_t d = hp->n_embd, r = hp->kv_lora_rank, dr = hp->rope_dim, ql = hp->q_lora_rank,
                q_dim = (int64_t)hp->n_head * hp->head_dim;
  char name[96];
  brisk_status st;
#define BIND(suffix, cols, rows, field)                                                            \
  do {                                                                                             \
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);                                          \
    if ((st = bind(m, L, name, cols, rows, true, &(field)))) return st;                            \
  } while (0)
  if (ql) {
    BIND("attn_q_a.weight", d, ql, ly->wq_a);
    BIND("attn_q_a_norm.weight", ql, 0, ly->q_a_norm);
    BIND("attn_q_b.weight", ql, q_dim, ly->wq_b);
  } else {
    BIND("attn_q.weight", d, q_dim, ly->wq);
  }
  brisk_weight kv_a;
  BIND("attn_kv_a_mqa.weight", d, r + dr, kv_a);
  ly->wkv_a_lat = brisk_weight_rows(&kv_a, 0, r);
  ly->wkv_a_rope = brisk_weight_rows(&kv_a, r, dr);
  BIND("attn_kv_a_norm.weight", r, 0, ly->kv_a_norm);
  BIND("attn_output.weight", (int64_t)hp->n_head * hp->mla_v_dim, d, ly->wo);
#undef BIND
  if (brisk_grow((void **)L->owned, L->cap_owned, *L->n_owned + 1, sizeof(void *)))
    return brisk_error_oom();
  float *kv_b = NULL;
  if ((st = brisk_gguf_mla_kv_b(m, L->g, il, &kv_b, &ly->wkv_b))) {
    brisk_aligned_free(kv_b);
    return st;
  }
  (*L->owned)[(*L->n_owned)++] = kv_b;
  return BRISK_OK;
}

static brisk_status bind_layer(brisk_model *m, const gguf_loader *L, uint32_t il) {
  const brisk_hparams *hp = &m->hp;
  brisk_layer *ly = &m->layers[il];
  const brisk_arch_info *ai = brisk_arch_get(hp->arch);
  int64_t d = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim,
          kv_dim = (int64_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
  char name[96];
  brisk_status st;
#define BIND(suffix, cols, rows, required, field)                                                  \
  do {                                                                                             \
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);                                          \
    if ((st = bind(m, L, name, cols, rows, required, &ly->field))) return st;                      \
  } while (0)
  const bool olmo2 = hp->arch == BRISK_ARCH_OLMO2;
  const bool gemma = hp->arch == BRISK_ARCH_GEMMA2 || hp->arch == BRISK_ARCH_GEMMA3;
  if (!olmo2) BIND("attn_norm.weight", d, 0, true, attn_norm);
  const bool phi3 = hp->arch == BRISK_ARCH_PHI3, mla = hp->kv_lora_rank > 0;
  /* deepseek2: its leading dense layers, then MoE ones. */
  uint32_t n_dense = 0;
  if (mla && (st = get_u32(L, "leading_dense_block_count", false, &n_dense))) return st;
  const bool dense = hp->n_expert == 0 || (mla && il < n_dense);
  if (mla) {
    if ((st = bind_mla(m, L, il))) return st;
  } else if (phi3) { /* q, k, v rows of one fused matrix */
    brisk_weight qkv;
    snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", il);
    if ((st = bind(m, L, name, d, q_dim + 2 * kv_dim, true, &qkv))) return st;
    ly->wq = brisk_weight_rows(&qkv, 0, q_dim);
    ly->wk = brisk_weight_rows(&qkv, q_dim, kv_dim);
    ly->wv = brisk_weight_rows(&qkv, q_dim + kv_dim, kv_dim);
  } else {
    BIND("attn_q.weight", d, q_dim, true, wq);
    BIND("attn_k.weight", d, kv_dim, true, wk);
    BIND("attn_v.weight", d, kv_dim, true, wv);
  }
  if (!mla) BIND("attn_output.weight", q_dim, d, true, wo);
  BIND("attn_q.bias", q_dim, 0, ai->qkv_bias, bq);
  BIND("attn_k.bias", kv_dim, 0, ai->qkv_bias, bk);
  BIND("attn_v.bias", kv_dim, 0, ai->qkv_bias, bv);
  /* olmo2: q/k norms over all heads, post-norms instead of pre-norms. */
  BIND("attn_q_norm.weight", olmo2 ? q_dim : hp->head_dim, 0, ai->qk_norm, q_norm);
  BIND("attn_k_norm.weight", olmo2 ? kv_dim : hp->head_dim, 0, ai->qk_norm, k_norm);
  BIND("post_attention_norm.weight", d, 0, olmo2 || gemma, post_attn_norm);
  BIND("post_ffw_norm.weight", d, 0, olmo2 || gemma, post_ffn_norm);
  if (!olmo2) BIND("ffn_norm.weight", d, 0, true, ffn_norm);
  if (phi3) { /* llama.cpp's ffn_up holds the gate rows, then the up rows */
    brisk_weight gate_up;
    snprintf(name, sizeof name, "blk.%u.ffn_up.weight", il);
    if ((st = bind(m, L, name, d, 2 * ff, true, &gate_up))) return st;
    ly->ffn_gate = brisk_weight_rows(&gate_up, 0, ff);
    ly->ffn_up = brisk_weight_rows(&gate_up, ff, ff);
    BIND("ffn_down.weight", ff, d, true, ffn_down);
  } else if (dense) {
    BIND("ffn_gate.weight", d, ff, true, ffn_gate);
    BIND("ffn_up.weight", d, ff, true, ffn_up);
    BIND("ffn_down.weight", ff, d, true, ffn_down);
  } else {
    BIND("ffn_gate_inp.weight", d, hp->n_expert, true, moe_router);
    if ((st = brisk_model_alloc_experts(m, ly))) return st;
    int64_t fe = hp->n_ff_exp, fs = hp->n_ff_shexp;
    snprintf(name, sizeof name, "blk.%u.ffn_gate_exps.weight", il);
    if ((st = bind_experts(m, L, name, d, fe, hp->n_expert, ly->expert_gate))) return st;
    snprintf(name, sizeof name, "blk.%u.ffn_up_exps.weight", il);
    if ((st = bind_experts(m, L, name, d, fe, hp->n_expert, ly->expert_up))) return st;
    snprintf(name, sizeof name, "blk.%u.ffn_down_exps.weight", il);
    if ((st = bind_experts(m, L, name, fe, d, hp->n_expert, ly->expert_down))) return st;
    if (fs) { /* qwen2moe's shared expert and its gate; deepseek2's, ungated */
      BIND("ffn_gate_shexp.weight", d, fs, true, shexp_gate);
      BIND("ffn_up_shexp.weight", d, fs, true, shexp_up);
      BIND("ffn_down_shexp.weight", fs, d, true, shexp_down);
      /* [n_embd] or [n_embd, 1]: a one-row matrix either way. */
      BIND("ffn_gate_inp_shexp.weight", d, 1, false, shexp_gate_inp);
    }
  }
#undef BIND
  ly->sliding_window = hp->sliding_window;
  if (gemma) {
    bool sliding = false;
    if ((st = gemma_sliding(L, hp, il, &sliding))) return st;
    ly->sliding_window = sliding ? hp->sliding_window : 0;
  }
  return BRISK_OK;
}

brisk_status brisk_model_load_gguf(brisk_model *m, const brisk_gguf *g,
                                   const brisk_model_params *params, void ***owned, size_t *n_owned,
                                   size_t *cap_owned) {
  brisk_gguf_str arch;
  brisk_status st = brisk_gguf_get_str(g, "general.architecture", &arch);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "GGUF key 'general.architecture' is missing");
  if (st) return st;
  if (!brisk_arch_from_name(arch.ptr, &m->hp.arch))
    return brisk_error(
        BRISK_E_UNSUPPORTED,
        "architecture '%s' (GGUF general.architecture) is not supported; brisk runs %s", arch.ptr,
        brisk_arch_names());
  if (m->hp.arch == BRISK_ARCH_BERT) return brisk_model_load_gguf_bert(m, g, params);
  gguf_loader L = {g, arch.ptr, owned, n_owned, cap_owned};
  if ((st = read_hparams(&L, &m->hp)) ||
      (m->hp.arch == BRISK_ARCH_DEEPSEEK2 && (st = brisk_gguf_mla_hparams(g, arch.ptr, &m->hp))))
    return st;
  m->hp.rope_style = brisk_arch_get(m->hp.arch)->gguf_rope_style;

  /* Vocabulary size comes from the embedding table. */
  const brisk_gguf_tensor *embd = brisk_gguf_find_tensor(g, "token_embd.weight");
  if (!embd) return brisk_error(BRISK_E_FORMAT, "tensor 'token_embd.weight' is missing");
  if (embd->n_dims != 2 || embd->ne[1] > UINT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "tensor 'token_embd.weight' must be 2-D [n_embd, n_vocab]");
  m->hp.n_vocab = (uint32_t)embd->ne[1];
  if ((st = brisk_model_check_hparams(&m->hp))) return st;

  const brisk_hparams *hp = &m->hp;
  if ((st = bind(m, &L, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->token_embd)) ||
      (st = bind(m, &L, "output_norm.weight", hp->n_embd, 0, true, &m->output_norm)) ||
      (st = bind(m, &L, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output)) ||
      (st = bind(m, &L, "rope_freqs.weight", hp->rope_dim / 2, 0, false, &m->rope_freqs)) ||
      (st = brisk_model_check_rope_freqs(&m->rope_freqs)))
    return st;
  if (!m->output.data) {
    m->output = m->token_embd;
    m->hp.tied_embeddings = true;
  }
  if (m->rope_freqs.data && m->hp.rope_scaling == BRISK_HP_ROPE_SCALING_NONE)
    m->hp.rope_scaling = BRISK_HP_ROPE_SCALING_LLAMA3; /* factors given per frequency */
  if ((st = bind_longrope(m, &L))) return st;
  if ((st = brisk_model_alloc_layers(m))) return st;
  for (uint32_t il = 0; il < hp->n_layer; il++) {
    if ((st = bind_layer(m, &L, il))) return st;
    if ((st = brisk_model_report_progress(params, (float)(il + 1) / (float)(hp->n_layer + 1))))
      return st;
  }
  return BRISK_OK;
}
