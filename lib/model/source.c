#include "model/source.h"

#include "model/load.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct brisk_model_source {
  brisk_gguf *gguf;
};

brisk_status brisk_model_source_open(const char *path, const brisk_model_params *params,
                                     brisk_model_source **out) {
  struct stat st_buf;
  if (stat(path, &st_buf) != 0)
    return brisk_error(BRISK_E_IO, "cannot open model '%s': no such file or folder", path);
  if (S_ISDIR(st_buf.st_mode))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "'%s' is a folder; Hugging Face folders are not supported yet", path);
  brisk_model_source *src = brisk_calloc(1, sizeof *src);
  if (!src) return brisk_error_oom();
  brisk_status st = params->use_mmap ? brisk_gguf_open(path, &src->gguf)
                                     : brisk_gguf_open_flags(path, BRISK_GGUF_OPEN_NO_MMAP,
                                                             &src->gguf);
  if (st) {
    brisk_free(src);
    return st;
  }
  *out = src;
  return BRISK_OK;
}

void brisk_model_source_close(brisk_model_source *src) {
  if (!src) return;
  brisk_gguf_close(src->gguf);
  brisk_free(src);
}

/* A tokenizer this build does not know leaves the model without a
 * vocabulary (token ids still work); a malformed one fails the load. */
static brisk_status load_vocab(brisk_model *m, const brisk_model_source *src) {
  if (brisk_gguf_find_key(src->gguf, "tokenizer.ggml.model") < 0) {
    m->vocab_error = brisk_strdup("the file has no tokenizer.ggml.model");
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  brisk_status st = brisk_vocab_from_gguf(src->gguf, &m->vocab);
  if (st == BRISK_E_UNSUPPORTED) {
    BRISK_WARN("%s; the model is usable with token ids only", brisk_last_error());
    m->vocab_error = brisk_strdup(brisk_last_error());
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  return st;
}

brisk_status brisk_model_source_bind(brisk_model *m, brisk_model_source *src,
                                     const brisk_model_params *params) {
  brisk_status st = load_vocab(m, src);
  if (st) return st;
  if (params->vocab_only) {
    m->hp.n_vocab = m->vocab ? (uint32_t)brisk_vocab_n_tokens(m->vocab) : 0;
    return BRISK_OK;
  }
  if ((st = brisk_model_load_gguf(m, src->gguf, params))) return st;
  if (m->vocab && (uint32_t)brisk_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
    BRISK_WARN("the vocabulary has %d tokens but the embedding only %u rows",
               brisk_vocab_n_tokens(m->vocab), m->hp.n_vocab);
  return BRISK_OK;
}

const char *brisk_model_source_kind(const brisk_model_source *src) {
  (void)src;
  return "gguf";
}

const char *brisk_model_source_chat_template(const brisk_model_source *src) {
  brisk_gguf_str s;
  if (brisk_gguf_get_str(src->gguf, "tokenizer.chat_template", &s) != BRISK_OK) return NULL;
  return s.ptr;
}

int64_t brisk_model_source_n_tensors(const brisk_model_source *src) {
  return brisk_gguf_n_tensors(src->gguf);
}

void brisk_model_source_tensor(const brisk_model_source *src, int64_t index,
                               brisk_tensor_info *info) {
  const brisk_gguf_tensor *t = brisk_gguf_tensor_at(src->gguf, index);
  info->name = t->name;
  info->type = brisk_dtype_name(t->type);
  info->n_dims = t->n_dims;
  for (int d = 0; d < 4; d++) info->dims[d] = t->ne[d];
  info->n_bytes = t->n_bytes;
}

brisk_status brisk_model_source_meta(const brisk_model_source *src, const char *key, char *buf,
                                     size_t cap, size_t *needed) {
  int64_t i = brisk_gguf_find_key(src->gguf, key);
  if (i < 0) return brisk_error(BRISK_E_NOT_FOUND, "metadata key '%s' is not in the model", key);
  /* Strings can be long (chat templates): format into a buffer of the
   * string's size rather than a fixed one. */
  size_t len;
  if (brisk_gguf_kv_type(src->gguf, i) == BRISK_GGUF_STRING) {
    brisk_gguf_str s;
    brisk_gguf_get_str(src->gguf, key, &s);
    len = (size_t)s.len;
    if (cap > 0) {
      size_t n = len < cap - 1 ? len : cap - 1;
      memcpy(buf, s.ptr, n);
      buf[n] = 0;
    }
  } else {
    char tmp[256];
    brisk_gguf_format_value(src->gguf, i, tmp, sizeof tmp);
    len = strlen(tmp);
    if (cap > 0) snprintf(buf, cap, "%s", tmp);
  }
  if (needed) *needed = len;
  if (len + 1 > cap)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "metadata '%s' needs %zu bytes, buffer has %zu",
                       key, len + 1, cap);
  return BRISK_OK;
}
