/* Quantization presets and llama.cpp's per-tensor type rules for them (see
 * preset.h). The rules are those of llama-quant.cpp's
 * llama_tensor_get_type_impl for the presets listed here, dense models only
 * (the 8-expert and 70B-specific bumps are not applied: brisk has no such
 * models). */
#include "quant/preset.h"

#include "core/dtype.h"

#include <stdio.h>
#include <string.h>

static const brisk_quant_preset presets[] = {
    {"F32", 0, BRISK_DTYPE_F32, true},
    {"F16", 1, BRISK_DTYPE_F16, true},
    {"BF16", 32, BRISK_DTYPE_BF16, true},
    {"Q4_0", 2, BRISK_DTYPE_Q4_0, true},
    {"Q4_1", 3, BRISK_DTYPE_Q4_1, true},
    {"Q8_0", 7, BRISK_DTYPE_Q8_0, true},
    {"Q5_0", 8, BRISK_DTYPE_Q5_0, true},
    {"Q5_1", 9, BRISK_DTYPE_Q5_1, true},
    {"Q4_K_S", 14, BRISK_DTYPE_Q4_K, true},
    {"Q4_K_M", 15, BRISK_DTYPE_Q4_K, true},
    {"Q5_K_S", 16, BRISK_DTYPE_Q5_K, true},
    {"Q5_K_M", 17, BRISK_DTYPE_Q5_K, true},
    {"Q6_K", 18, BRISK_DTYPE_Q6_K, true},
    /* Not llama.cpp file types: one K type for every matrix (llama.cpp
     * writes these as Q4_K_S / Q5_K_S with --pure). */
    {"Q4_K", 14, BRISK_DTYPE_Q4_K, false},
    {"Q5_K", 16, BRISK_DTYPE_Q5_K, false},
};
#define N_PRESETS (int)(sizeof presets / sizeof *presets)

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static bool same_ci(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (lower((unsigned char)*a) != lower((unsigned char)*b)) return false;
  return !*a && !*b;
}

const brisk_quant_preset *brisk_quant_preset_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < N_PRESETS; i++)
    if (same_ci(name, presets[i].name)) return &presets[i];
  return NULL;
}

const brisk_quant_preset *brisk_quant_preset_at(int i) {
  return i >= 0 && i < N_PRESETS ? &presets[i] : NULL;
}

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

bool brisk_quant_allows(const char *name, uint32_t n_dims) {
  if (n_dims < 2 || !ends_with(name, "weight")) return false;
  /* llama.cpp's exclusions that apply to the architectures brisk reads,
   * and the cheap name tests of the others (harmless when absent). */
  static const char *const never[] = {
      "_norm.weight",
      "ffn_gate_inp.weight",
      "ffn_gate_tid2eid.weight",
      "altup",
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d",
      "shortconv.conv.weight",
      "time_mix_first.weight",
      "attn_rel_b.weight",
      ".position_embd",
      ".rel_pos",
      ".patch_embd",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_lerp_fused",
      "time_mix_decay_w1",
      "time_mix_decay_w2",
  };
  for (size_t i = 0; i < sizeof never / sizeof *never; i++)
    if (has(name, never[i])) return false;
  return strcmp(name, "position_embd.weight") && strcmp(name, "token_types.weight");
}

typedef enum {
  CAT_TOKEN_EMBD,
  CAT_ATTN_V, /* attn_v, attn_qkv, attn_kv_b: "attention-V-like" */
  CAT_ATTN_QKV,
  CAT_ATTN_OUT,
  CAT_FFN_DOWN,
  CAT_OUTPUT,
  CAT_OTHER,
} category;

/* llama.cpp's tensor_get_category, reduced to the categories these
 * presets' rules look at (in its order of tests). */
static category category_of(const char *name) {
  if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
  if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
    return CAT_TOKEN_EMBD;
  if (has(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
  if (has(name, "attn_kv_b.weight") || has(name, "attn_v.weight")) return CAT_ATTN_V;
  if (has(name, "attn_k.weight") || has(name, "attn_q.weight")) return CAT_OTHER;
  if (has(name, "attn_output.weight")) return CAT_ATTN_OUT;
  if (has(name, "ffn_up") || has(name, "ffn_gate")) return CAT_OTHER;
  if (has(name, "ffn_down")) return CAT_FFN_DOWN;
  return CAT_OTHER;
}

void brisk_quant_mix_init(brisk_quant_mix *mix, const brisk_quant_preset *preset, bool pure,
                          const char *arch, int n_layer, const char *const *names, int n_names) {
  memset(mix, 0, sizeof *mix);
  mix->preset = preset;
  mix->pure = pure || !preset->mix;
  mix->falcon = arch && !strcmp(arch, "falcon");
  mix->n_layer = n_layer;
  mix->tied = true;
  for (int i = 0; i < n_names; i++) {
    category c = category_of(names[i]);
    if (c == CAT_ATTN_V || c == CAT_ATTN_QKV) mix->n_attn_v++;
    if (c == CAT_OUTPUT) mix->tied = false;
  }
}

static bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's tensor_type_fallback: a row length the type's block does not
 * divide gets the nearest 32-element type, and F16 if even that fails. */
static uint32_t fallback(uint32_t t, uint64_t ne0) {
  const brisk_dtype_info *d = brisk_dtype_get(t);
  if (ne0 % d->block_size == 0) return t;
  switch (t) {
  case BRISK_DTYPE_Q2_K:
  case BRISK_DTYPE_Q3_K: t = BRISK_DTYPE_Q4_0; break;
  case BRISK_DTYPE_Q4_K: t = BRISK_DTYPE_Q5_0; break;
  case BRISK_DTYPE_Q5_K: t = BRISK_DTYPE_Q5_1; break;
  case BRISK_DTYPE_Q6_K: t = BRISK_DTYPE_Q8_0; break;
  default: break;
  }
  return ne0 % brisk_dtype_get(t)->block_size == 0 ? t : BRISK_DTYPE_F16;
}

/* llama_tensor_get_type_impl for this file's preset. */
static uint32_t rule(brisk_quant_mix *mix, category cat, uint64_t ne0, uint32_t t) {
  const char *p = mix->preset->name;
  const bool q4km = !strcmp(p, "Q4_K_M"), q5km = !strcmp(p, "Q5_K_M"), q4ks = !strcmp(p, "Q4_K_S");
  if (cat == CAT_OUTPUT || (mix->tied && cat == CAT_TOKEN_EMBD)) {
    const uint64_t qk = brisk_dtype_get(t)->block_size;
    if (mix->falcon || ne0 % qk) return BRISK_DTYPE_Q8_0;
    return t == BRISK_DTYPE_Q8_0 ? t : BRISK_DTYPE_Q6_K;
  }
  if (cat == CAT_TOKEN_EMBD) return t;
  if (cat == CAT_ATTN_V || cat == CAT_ATTN_QKV) {
    /* attn_qkv counts as V-like: llama.cpp's V branch comes first in its
     * chain, so its separate attn_qkv rule is never reached. */
    if ((q4km || q5km) && use_more_bits(mix->i_attn_v, mix->n_attn_v))
      t = BRISK_DTYPE_Q6_K;
    else if (q4ks && mix->i_attn_v < 4)
      t = BRISK_DTYPE_Q5_K;
    mix->i_attn_v++;
    return t;
  }
  if (cat == CAT_FFN_DOWN) {
    const int i = mix->i_ffn_down++, n = mix->n_layer;
    if (q4km) {
      if (mix->falcon)
        t = i < n / 16            ? BRISK_DTYPE_Q6_K
            : use_more_bits(i, n) ? BRISK_DTYPE_Q5_K
                                  : BRISK_DTYPE_Q4_K;
      else if (use_more_bits(i, n))
        t = BRISK_DTYPE_Q6_K;
    } else if (q5km && use_more_bits(i, n))
      t = BRISK_DTYPE_Q6_K;
    else if (q4ks && !mix->falcon && i < n / 8)
      t = BRISK_DTYPE_Q5_K;
    else if ((!strcmp(p, "Q4_0") || !strcmp(p, "Q5_0")) && mix->has_imatrix && i < n / 8)
      t = !strcmp(p, "Q4_0") ? BRISK_DTYPE_Q4_1 : BRISK_DTYPE_Q5_1;
    return t;
  }
  return t;
}

uint32_t brisk_quant_mix_type(brisk_quant_mix *mix, const char *name, uint32_t n_dims, uint64_t ne0,
                              uint32_t cur) {
  if (!brisk_quant_allows(name, n_dims)) return cur;
  uint32_t t = mix->preset->default_type;
  /* Unquantized presets (F16, BF16, F32) take every allowed matrix as is. */
  if (!brisk_dtype_get(t)->quantized) return t;
  category cat = category_of(name);
  if (!mix->pure) t = rule(mix, cat, ne0, t);
  return fallback(t, ne0);
}

int brisk_quant_mix_order(const char *a, const char *b) {
  int la = -1, lb = -1;
  if (sscanf(a, "blk.%d.", &la) != 1) la = -1;
  if (sscanf(b, "blk.%d.", &lb) != 1) lb = -1;
  if (la != lb) return la < lb ? -1 : 1;
  return strcmp(a, b);
}
