/* Internal view of a context for modules built on it (speculative
 * decoding sizes its batches and its draft context from these). */
#ifndef BRISK_CONTEXT_CONTEXT_H
#define BRISK_CONTEXT_CONTEXT_H

#include "brisk.h"

/* The parameters the context was created with (defaults filled in). */
const brisk_context_params *brisk_context_get_params(const brisk_context *ctx);

/* The backend cache dtype of a (valid) brisk_kv_type. */
uint32_t brisk_context_kv_dtype(brisk_kv_type type);

#endif
