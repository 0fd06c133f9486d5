/* Cross-layer KV sharing: layers that attend to an earlier layer's K/V
 * instead of computing their own (Gemma 3n's last layers). */
#ifndef BRISK_MODEL_KV_SHARE_H
#define BRISK_MODEL_KV_SHARE_H

#include "model/model.h"

/* Sets every layer's kv_source from hp.n_kv_shared (after the loader bound
 * the layers and their sliding windows). BRISK_E_FORMAT when the count
 * leaves no layer of a shared layer's kind to read from;
 * BRISK_E_UNSUPPORTED for latent attention and for tensor or pipeline
 * parallelism (their ranks and stages hold K/V per layer). */
brisk_status brisk_model_share_kv(brisk_model *m, const brisk_model_params *params);

/* Layers that hold K/V of their own: n_layer - n_kv_shared. */
static inline uint32_t brisk_model_kv_layers(const brisk_model *m) {
  return m->hp.n_layer - m->hp.n_kv_shared;
}

#endif
