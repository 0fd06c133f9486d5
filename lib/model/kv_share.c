/* Cross-layer KV sharing. The file declares how many of the last layers
 * share (GGUF `<arch>.attention.shared_kv_layers`, llama.cpp's
 * n_layer_kv_from_start = n_layer - that; config.json
 * `num_kv_shared_layers`); which earlier layer each one reads follows
 * transformers' Gemma3nTextConfig.kv_sharing_modes: with f = n_layer -
 * n_kv_shared, a shared layer of type T reads the last layer before f of
 * the same type T ("f - 1 - layer_types[:f][::-1].index(T)"), the types
 * being sliding or full attention, and a type no layer before f has is an
 * error ("The set of layer types producing a cache is different than the
 * set of layer types using them"). llama.cpp's gemma3n rule, f - 2 for a
 * sliding layer and f - 1 for a full one (llama-model.cpp, the `reuse`
 * callback of the KV cache), is the same choice for Gemma 3n, whose layers
 * f - 2 and f - 1 are sliding then full; the transformers rule is the
 * general one, for any pattern of layer types. */
#include "model/kv_share.h"

#include "core/error.h"

brisk_status brisk_model_share_kv(brisk_model *m, const brisk_model_params *params) {
  const brisk_hparams *hp = &m->hp;
  const uint32_t n = hp->n_layer, shared = hp->n_kv_shared;
  if (shared == 0) return BRISK_OK;
  if (shared >= n)
    return brisk_error(BRISK_E_FORMAT,
                       "%u of %u layers share K/V (shared_kv_layers / num_kv_shared_layers): no "
                       "layer is left to compute it",
                       shared, n);
  if (brisk_arch_get(hp->arch)->encoder)
    return brisk_error(BRISK_E_UNSUPPORTED, "cross-layer KV sharing in an encoder (%s)",
                       brisk_arch_get(hp->arch)->name);
  if (hp->kv_lora_rank)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "cross-layer KV sharing with multi-head latent attention is not supported");
  if (params->tp_size > 1 || params->pp_size > 1)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "cross-layer KV sharing (%u layers) with tensor or pipeline parallelism is "
                       "not supported yet",
                       shared);
  const uint32_t first = n - shared;
  for (uint32_t l = first; l < n; l++) {
    const bool sliding = m->layers[l].sliding_window != 0;
    int32_t src = -1;
    for (uint32_t j = first; j-- > 0;)
      if ((m->layers[j].sliding_window != 0) == sliding) {
        src = (int32_t)j;
        break;
      }
    if (src < 0)
      return brisk_error(BRISK_E_FORMAT,
                         "layer %u shares K/V but none of the first %u layers is a %s-attention "
                         "layer to read it from",
                         l, first, sliding ? "sliding" : "full");
    m->layers[l].kv_source = src;
  }
  return BRISK_OK;
}
