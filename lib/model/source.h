/* Where a model's weights and metadata come from: a GGUF file or a Hugging
 * Face folder. The model keeps its source open so weights stay mapped. */
#ifndef BRISK_MODEL_SOURCE_H
#define BRISK_MODEL_SOURCE_H

#include "model/model.h"

brisk_status brisk_model_source_open(const char *path, const brisk_model_params *params,
                                     brisk_model_source **out);
/* A GGUF image in memory: borrowed (the caller's, never written, must
 * outlive the model) when `owned` is false; else a brisk_aligned_alloc'ed
 * buffer the source takes over on success. */
brisk_status brisk_model_source_open_memory(const void *data, size_t size, bool owned,
                                            brisk_model_source **out);
void brisk_model_source_close(brisk_model_source *src);
/* Reads hyper-parameters and binds every weight of m from the source. */
brisk_status brisk_model_source_bind(brisk_model *m, brisk_model_source *src,
                                     const brisk_model_params *params);
const char *brisk_model_source_chat_template(const brisk_model_source *src);
int64_t brisk_model_source_n_tensors(const brisk_model_source *src);
/* index is in range; fills every field but struct_size. */
void brisk_model_source_tensor(const brisk_model_source *src, int64_t index,
                               brisk_tensor_info *info);
/* Makes [p, p + n) of the source's weight bytes writable (or read-only
 * again) for rewriting in place; BRISK_E_UNSUPPORTED where the bytes cannot
 * be rewritten (a Hugging Face folder, a caller's buffer). */
brisk_status brisk_model_source_set_writable(brisk_model_source *src, const void *p, size_t n,
                                             bool writable);
/* Whether the weights are a mapping of the file (not a read buffer). */
bool brisk_model_source_is_mapped(const brisk_model_source *src);
/* "gguf" or "hf". */
const char *brisk_model_source_kind(const brisk_model_source *src);

#endif
