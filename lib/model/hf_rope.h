/* RoPE settings read from a Hugging Face config.json (model/hf_rope.c). */
#ifndef BRISK_MODEL_HF_ROPE_H
#define BRISK_MODEL_HF_ROPE_H

#include "brisk.h"
#include "model/arch.h"

#include <stdbool.h>
#include <stdint.h>

struct json_object;
typedef struct brisk_hf brisk_hf;

#define BRISK_HF_ROPE_MAX_FACTORS 512

/* One RoPE configuration. Fields the config leaves out keep what the caller
 * set (base, dim) or transformers' defaults (the rest). */
typedef struct brisk_hf_rope {
  float base;   /* rope_theta */
  uint32_t dim; /* rotated dimensions from partial_rotary_factor; 0: unchanged */
  brisk_hp_rope_scaling scaling;
  float factor;
  uint32_t orig_ctx; /* original_max_position_embeddings; 0: not given */
  float low_freq_factor, high_freq_factor;
  float beta_fast, beta_slow;
  float attn_factor; /* yarn, longrope (0: longrope's default, the caller's to compute) */
  /* Set by the caller: DeepSeek's yarn mscale / mscale_all_dim are read
   * (else refused). mscale_all_dim (0: none) also scales DeepSeek's
   * attention logits, which is the caller's to apply. */
  bool allow_mscale;
  float mscale_all_dim;
  uint32_t n_factors; /* longrope: entries of short_factor / long_factor */
  float short_factor[BRISK_HF_ROPE_MAX_FACTORS];
  float long_factor[BRISK_HF_ROPE_MAX_FACTORS];
} brisk_hf_rope;

/* Reads one rope object `o` (named `path` in messages) for heads of
 * head_dim. Unknown keys, rope types and settings brisk does not compute
 * are BRISK_E_UNSUPPORTED naming the key; malformed values BRISK_E_FORMAT. */
brisk_status brisk_hf_rope_read(const struct json_object *o, const char *path, uint32_t head_dim,
                                brisk_hf_rope *r);

/* The RoPE settings of the config: "rope_parameters" (for layer_type
 * "full_attention" / "sliding_attention" when it holds one object per layer
 * type; layer_type NULL refuses such a config), else the older top-level
 * rope_theta / partial_rotary_factor / "rope_scaling". */
brisk_status brisk_hf_rope_lookup(const brisk_hf *hf, const char *layer_type, uint32_t head_dim,
                                  brisk_hf_rope *r);

#endif
