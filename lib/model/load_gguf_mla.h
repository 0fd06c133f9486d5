/* deepseek2's multi-head latent attention from GGUF files (model/load_gguf_mla.c). */
#ifndef BRISK_MODEL_LOAD_GGUF_MLA_H
#define BRISK_MODEL_LOAD_GGUF_MLA_H

#include "format/gguf.h"
#include "model/model.h"

/* The latent-attention and routing keys of `arch` into hp, after the common
 * keys (heads, experts, RoPE scaling) are read. */
brisk_status brisk_gguf_mla_hparams(const brisk_gguf *g, const char *arch, brisk_hparams *hp);

/* Layer il's kv_b as float32 [n_head][nope + v][rank] in new memory (*out,
 * aligned: brisk_aligned_free; the caller keeps it), from attn_kv_b or from
 * the split attn_k_b / attn_v_b, bound into *w. */
brisk_status brisk_gguf_mla_kv_b(brisk_model *m, const brisk_gguf *g, uint32_t il, float **out,
                                 brisk_weight *w);

#endif
