/* Internal view of a context for modules built on it (speculative
 * decoding sizes its batches and its draft context from these). */
#ifndef BRISK_CONTEXT_CONTEXT_H
#define BRISK_CONTEXT_CONTEXT_H

#include "brisk.h"

/* The parameters the context was created with (defaults filled in). */
const brisk_context_params *brisk_context_get_params(const brisk_context *ctx);

/* The context's forward pass (for brisk_forward_set_observer). */
struct brisk_forward;
struct brisk_forward *brisk_context_forward(brisk_context *ctx);
/* The context's host CPU backend, on its thread pool (engine embedding
 * passes run on it between decodes, on the decoding thread). */
struct brisk_backend;
struct brisk_backend *brisk_context_host_backend(brisk_context *ctx);
/* The bytes brisk_context_create would take for `model` with `params`:
 * the KV pool and everything else (brisk_estimate_memory). Errors as
 * brisk_context_create's for the params. */
brisk_status brisk_context_estimate(const brisk_model *model, const brisk_context_params *params,
                                    uint64_t *kv_bytes, uint64_t *buffer_bytes);
/* The backend cache dtype of a (valid) brisk_kv_type. */
uint32_t brisk_context_kv_dtype(brisk_kv_type type);

#endif
