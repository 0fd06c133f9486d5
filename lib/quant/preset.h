/* Quantization presets ("file types") as llama.cpp's llama-quantize defines
 * them: a default tensor type plus the rules that give some tensors more
 * bits (the output / tied embedding, attention V, FFN down, by layer
 * position), and the shape fallbacks for rows that a K type's 256-element
 * super-block does not divide. The rules follow llama.cpp's
 * llama_tensor_get_type for dense (non-expert) models of these presets, so
 * the same input gives the same type per tensor. */
#ifndef BRISK_QUANT_PRESET_H
#define BRISK_QUANT_PRESET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct brisk_quant_preset {
  const char *name;      /* canonical spelling, e.g. "Q4_K_M" */
  uint32_t file_type;    /* general.file_type (llama_ftype) */
  uint32_t default_type; /* BRISK_DTYPE_* of most matrices */
  bool mix;              /* false: every quantizable matrix gets default_type */
} brisk_quant_preset;

/* The preset called `name` (ASCII case-insensitive), or NULL. Mixes:
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, F16,
 * BF16, F32; uniform types (every matrix the same): Q4_K, Q5_K. */
const brisk_quant_preset *brisk_quant_preset_find(const char *name);
/* The i-th preset (NULL past the end), for listing them. */
const brisk_quant_preset *brisk_quant_preset_at(int i);

/* The per-file state of the mix rules: counts taken over the whole tensor
 * list first, then counters advanced as tensors are visited in llama.cpp's
 * order (layer number, then name; see brisk_quant_mix_order). */
typedef struct brisk_quant_mix {
  const brisk_quant_preset *preset;
  bool pure;        /* --pure: no per-tensor rules, only shape fallbacks */
  bool has_imatrix; /* changes Q4_0 / Q5_0 FFN-down choices, as in llama.cpp */
  bool tied;        /* no output.weight: token_embd is the output matrix */
  bool falcon;      /* general.architecture "falcon" has rules of its own */
  int n_layer;
  int n_attn_v, i_attn_v, i_ffn_down;
} brisk_quant_mix;

/* Counts over all tensor names of the file (arch: general.architecture, may
 * be NULL; n_layer: the model's block count). */
void brisk_quant_mix_init(brisk_quant_mix *mix, const brisk_quant_preset *preset, bool pure,
                          const char *arch, int n_layer, const char *const *names, int n_names);

/* Whether llama.cpp would quantize this tensor at all (2-D or more, a name
 * ending in "weight", not a norm, gate-input or position table). */
bool brisk_quant_allows(const char *name, uint32_t n_dims);

/* The type of the next tensor in visiting order: `cur` (its stored type)
 * when it is not quantized, else the mix's choice after the shape fallback
 * (which may be F16 for rows no block divides). Advances the counters. */
uint32_t brisk_quant_mix_type(brisk_quant_mix *mix, const char *name, uint32_t n_dims, uint64_t ne0,
                              uint32_t cur);

/* llama.cpp's tensor visiting order: ascending block number ("blk.N.",
 * -1 for others), then strcmp of the names. A qsort-style comparison. */
int brisk_quant_mix_order(const char *a, const char *b);

#endif
