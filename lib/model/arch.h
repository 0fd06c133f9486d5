/* The architectures brisk knows and their hyper-parameters. */
#ifndef BRISK_MODEL_ARCH_H
#define BRISK_MODEL_ARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum brisk_arch {
  BRISK_ARCH_LLAMA = 0, /* llama 1/2/3, tinyllama, smollm, ... */
  BRISK_ARCH_MISTRAL,   /* llama + sliding-window attention */
  BRISK_ARCH_QWEN2,     /* llama + qkv bias, NeoX RoPE */
  BRISK_ARCH_QWEN3,     /* llama + per-head q/k RMSNorm, NeoX RoPE, explicit head_dim */
  BRISK_ARCH_MIXTRAL,   /* llama + mixture-of-experts FFN */
  BRISK_ARCH_GRANITE,   /* llama + embedding / residual / attention / logit multipliers */
  BRISK_ARCH_OLMO2,     /* post-norm sub-blocks, RMSNorm over all of q and of k */
  BRISK_ARCH_GEMMA2,    /* GeGLU, pre+post norms, soft-capping, interleaved sliding layers */
  BRISK_ARCH_GEMMA3,    /* gemma2 + per-head q/k norms, a local RoPE base for sliding layers */
  BRISK_ARCH_PHI3,      /* llama with fused qkv and gate/up projections */
  BRISK_ARCH_QWEN2MOE,  /* qwen2 + MoE FFN with a sigmoid-gated shared expert */
  BRISK_ARCH_QWEN3MOE,  /* qwen3 + MoE FFN */
  BRISK_ARCH_DEEPSEEK2, /* multi-head latent attention, dense first layers, shared experts */
  BRISK_ARCH_BERT,      /* bidirectional encoder, post-LayerNorm, GELU FFN: embeddings only */
  BRISK_ARCH_COUNT
} brisk_arch;

/* How RoPE pairs dimensions: NORMAL rotates adjacent pairs (2i, 2i+1), as
 * GGUF llama files store q/k; NEOX rotates (i, i + d/2), as Hugging Face
 * checkpoints store them. The two are the same model up to a permutation of
 * q/k rows, so a Hugging Face llama runs unpermuted with NEOX. */
typedef enum brisk_hp_rope_style {
  BRISK_HP_ROPE_NORMAL = 0,
  BRISK_HP_ROPE_NEOX = 1
} brisk_hp_rope_style;

typedef enum brisk_hp_rope_scaling {
  BRISK_HP_ROPE_SCALING_NONE = 0,
  BRISK_HP_ROPE_SCALING_LINEAR,
  BRISK_HP_ROPE_SCALING_LLAMA3,
  BRISK_HP_ROPE_SCALING_YARN,
  BRISK_HP_ROPE_SCALING_LONGROPE, /* per-pair factors and a magnitude factor (not run yet) */
} brisk_hp_rope_scaling;

typedef struct brisk_hparams {
  brisk_arch arch;
  uint32_t n_vocab;
  uint32_t n_ctx_train;
  uint32_t n_embd;
  uint32_t n_layer;
  uint32_t n_head;
  uint32_t n_head_kv;
  uint32_t head_dim; /* usually n_embd / n_head; qwen3 sets it explicitly */
  uint32_t n_ff;
  uint32_t n_expert;      /* 0 for dense models */
  uint32_t n_expert_used; /* experts per token */
  uint32_t n_ff_exp;      /* width of each expert's FFN (n_ff in mixtral) */
  uint32_t n_ff_shexp;    /* width of the shared expert's FFN; 0: none */
  bool moe_renorm;        /* top-k routing weights divided by their sum */
  float rms_eps;
  float rope_base;
  uint32_t rope_dim; /* dimensions rotated per head (= head_dim unless partial) */
  brisk_hp_rope_style rope_style;
  brisk_hp_rope_scaling rope_scaling;
  float rope_factor;                                      /* linear / llama3 / yarn scale factor */
  float rope_low_freq_factor;                             /* llama3 */
  float rope_high_freq_factor;                            /* llama3 */
  uint32_t rope_orig_ctx;                                 /* llama3 / yarn original context */
  float yarn_beta_fast, yarn_beta_slow, yarn_attn_factor; /* attn_factor: also longrope's */
  uint32_t sliding_window;                                /* 0: none */
  bool tied_embeddings;
  /* Variants of the llama block; 0 means "not used" for each. */
  float embd_scale;      /* x = embed(tokens) * embd_scale (granite, gemma) */
  float residual_scale;  /* x += sub-block output * residual_scale (granite) */
  float attn_scale;      /* attention logit scale; 0: 1 / sqrt(head_dim) */
  float logit_scale;     /* logits *= logit_scale (granite: 1 / logits_scaling) */
  float attn_softcap;    /* attention scores soft-capped (gemma2) */
  float final_softcap;   /* logits soft-capped (gemma2) */
  float rope_base_local; /* RoPE base of sliding-window layers, unscaled (gemma3) */
  /* Multi-head latent attention (deepseek2), when kv_lora_rank > 0: head_dim
   * is the query/key head (mla_nope_dim + rope_dim), rope_dim the decoupled
   * RoPE part, and the KV cache holds kv_lora_rank + rope_dim per token. */
  uint32_t q_lora_rank;  /* 0: a plain q projection */
  uint32_t kv_lora_rank; /* 0: not MLA */
  uint32_t mla_nope_dim; /* qk_nope_head_dim */
  uint32_t mla_v_dim;    /* v_head_dim */
  /* Group-limited top-k (deepseek2 group_limited_greedy); 0: plain top-k. */
  uint32_t moe_n_group, moe_topk_group;
  float moe_scale; /* routed experts' weights are multiplied by this; 0: 1 */
  uint32_t n_type_vocab; /* token-type (segment) embedding rows (bert) */
  /* Cross-layer KV sharing: the last n_kv_shared layers compute no K/V and
   * read an earlier layer's (brisk_layer.kv_source, model/kv_share.c). */
  uint32_t n_kv_shared;
} brisk_hparams;

typedef struct brisk_arch_info {
  const char *name; /* as in GGUF general.architecture */
  brisk_hp_rope_style gguf_rope_style;
  bool qkv_bias;      /* q/k/v projections have biases */
  bool qk_norm;       /* per-head RMSNorm on q and k */
  bool moe;           /* mixture-of-experts FFN */
  bool geglu;         /* gelu(gate) * up FFN instead of SwiGLU */
  bool encoder;       /* bidirectional encoder: run by brisk_embed, no logits */
} brisk_arch_info;

const brisk_arch_info *brisk_arch_get(brisk_arch arch);
/* The names brisk runs, ", "-separated, for messages (a static string). */
const char *brisk_arch_names(void);
/* Looks up a GGUF architecture name; false if unknown. */
bool brisk_arch_from_name(const char *name, brisk_arch *out);
/* Looks up a Hugging Face config.json model_type; false if unknown. */
bool brisk_arch_from_hf_model_type(const char *model_type, brisk_arch *out);

#endif
