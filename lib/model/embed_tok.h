/* What brisk_embed needs from a model besides its weights: token ids of a
 * text from whichever tokenizer the model has. */
#ifndef BRISK_MODEL_EMBED_TOK_H
#define BRISK_MODEL_EMBED_TOK_H

#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

/* The ids of text[0, len) into *ids (brisk_malloc'ed, the caller frees;
 * *n >= 1): the WordPiece tokenizer with [CLS] and [SEP], else the
 * vocabulary with its add_special rule (no special-token parsing). At most
 * max_tokens (>= 2) are kept: longer inputs are cut at the end, an encoder's
 * closing [SEP] kept. An empty result (a decoder without BOS given "") is
 * BRISK_E_INVALID_ARGUMENT; no tokenizer is BRISK_E_UNSUPPORTED. */
brisk_status brisk_model_embed_tokens(const brisk_model *m, const char *text, size_t len,
                                      uint32_t max_tokens, int32_t **ids, size_t *n);

#endif
