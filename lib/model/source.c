#include "model/source.h"

#include "model/load.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "format/json.h"

#include <json-c/json.h>
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct brisk_model_source {
  brisk_gguf *gguf; /* exactly one of gguf and hf is set */
  brisk_hf *hf;
  void **owned; /* weights converted at load (HF vectors, deepseek2's kv_b) */
  size_t n_owned, cap_owned;
};

brisk_status brisk_model_source_open(const char *path, const brisk_model_params *params,
                                     brisk_model_source **out) {
  struct stat st_buf;
  if (stat(path, &st_buf) != 0)
    return brisk_error(BRISK_E_IO, "cannot open model '%s': no such file or folder", path);
  brisk_model_source *src = brisk_calloc(1, sizeof *src);
  if (!src) return brisk_error_oom();
  brisk_status st;
  if (S_ISDIR(st_buf.st_mode))
    st = brisk_hf_open(path, &src->hf);
  else
    st = params->use_mmap ? brisk_gguf_open(path, &src->gguf)
                          : brisk_gguf_open_flags(path, BRISK_GGUF_OPEN_NO_MMAP, &src->gguf);
  if (st) {
    brisk_free(src);
    return st;
  }
  *out = src;
  return BRISK_OK;
}

brisk_status brisk_model_source_open_memory(const void *data, size_t size, bool owned,
                                            brisk_model_source **out) {
  brisk_model_source *src = brisk_calloc(1, sizeof *src);
  if (!src) return brisk_error_oom();
  brisk_status st = owned ? brisk_gguf_open_owned((void *)(uintptr_t)data, size, &src->gguf)
                          : brisk_gguf_open_memory(data, size, &src->gguf);
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
  brisk_hf_close(src->hf);
  for (size_t i = 0; i < src->n_owned; i++) brisk_aligned_free(src->owned[i]);
  brisk_free(src->owned);
  brisk_free(src);
}

/* A tokenizer this build does not know leaves the model without a
 * vocabulary (token ids still work); a malformed one fails the load. */
static brisk_status vocab_status(brisk_model *m, brisk_status st) {
  if (st == BRISK_E_UNSUPPORTED) {
    BRISK_WARN("%s; the model is usable with token ids only", brisk_last_error());
    m->vocab_error = brisk_strdup(brisk_last_error());
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  return st;
}

/* tokenizer.json, with BOS/EOS and add_bos from the folder's other files. */
static brisk_status load_hf_vocab(brisk_model *m, const brisk_hf *hf) {
  const char *path = brisk_hf_tokenizer_json_path(hf);
  brisk_status st;
  if (!path) {
    /* A BERT folder may carry only vocab.txt. */
    if ((st = brisk_model_hf_wordpiece(m, hf)) != BRISK_E_NOT_FOUND) return st;
    m->vocab_error = brisk_strdup("the folder has no tokenizer.json");
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  st = brisk_vocab_from_hf_file(path, &m->vocab);
  if (st == BRISK_E_UNSUPPORTED) { /* a WordPiece (BERT) tokenizer.json? */
    char why[256];
    snprintf(why, sizeof why, "%s", brisk_last_error());
    if (brisk_model_hf_wordpiece(m, hf) == BRISK_OK) {
      m->vocab_error = brisk_strdup("the WordPiece tokenizer is used by brisk_embed only");
      return m->vocab_error ? BRISK_OK : brisk_error_oom();
    }
    brisk_error(BRISK_E_UNSUPPORTED, "%s", why);
  }
  if (st) return vocab_status(m, st);
  int32_t bos, eos[8];
  size_t n_eos = 0;
  if (brisk_hf_bos_id(hf, &bos) == BRISK_OK && bos < brisk_vocab_n_tokens(m->vocab))
    brisk_vocab_set_special(m->vocab, BRISK_VOCAB_BOS, bos);
  if (brisk_hf_eos_ids(hf, eos, 8, &n_eos) == BRISK_OK && n_eos > 0 &&
      eos[0] < brisk_vocab_n_tokens(m->vocab))
    brisk_vocab_set_special(m->vocab, BRISK_VOCAB_EOS, eos[0]);
  bool add_bos = false, add_eos = false;
  const struct json_object *tc = brisk_hf_tokenizer_config(hf);
  int set_bos =
      brisk_json_get_bool(tc, "tokenizer_config.json", "add_bos_token", &add_bos) == BRISK_OK;
  int set_eos =
      brisk_json_get_bool(tc, "tokenizer_config.json", "add_eos_token", &add_eos) == BRISK_OK;
  brisk_vocab_set_add_special(m->vocab, set_bos ? add_bos : -1, set_eos ? add_eos : -1);
  return BRISK_OK;
}

static brisk_status load_vocab(brisk_model *m, const brisk_model_source *src) {
  if (src->hf) return load_hf_vocab(m, src->hf);
  if (brisk_gguf_find_key(src->gguf, "tokenizer.ggml.model") < 0) {
    m->vocab_error = brisk_strdup("the file has no tokenizer.ggml.model");
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  brisk_gguf_str model;
  if (!brisk_gguf_get_str(src->gguf, "tokenizer.ggml.model", &model) && model.len == 4 &&
      !memcmp(model.ptr, "bert", 4)) { /* a WordPiece vocabulary, for brisk_embed */
    brisk_status st = brisk_wordpiece_from_gguf(src->gguf, &m->wordpiece);
    if (st) return st;
    m->vocab_error = brisk_strdup("the WordPiece tokenizer is used by brisk_embed only");
    return m->vocab_error ? BRISK_OK : brisk_error_oom();
  }
  return vocab_status(m, brisk_vocab_from_gguf(src->gguf, &m->vocab));
}

/* The vocabulary and the embedding must agree on the token ids. More
 * tokens than embedding rows would give ids the model cannot embed or
 * score: refused. Fewer (checkpoints pad the embedding to a round size) are
 * used as the model's n_vocab: the embedding and output rows past the last
 * token are never read, so every id that can be submitted or sampled has a
 * token and a text. */
static brisk_status fit_vocab(brisk_model *m) {
  if (m->wordpiece && (uint32_t)brisk_wordpiece_n_tokens(m->wordpiece) > m->hp.n_vocab)
    return brisk_error(BRISK_E_FORMAT,
                       "the WordPiece vocabulary has %d tokens but the embedding only %u rows",
                       brisk_wordpiece_n_tokens(m->wordpiece), m->hp.n_vocab);
  if (!m->vocab) return BRISK_OK;
  uint32_t n = (uint32_t)brisk_vocab_n_tokens(m->vocab);
  if (n > m->hp.n_vocab)
    return brisk_error(BRISK_E_FORMAT,
                       "the vocabulary has %u tokens but the embedding only %u rows: ids from "
                       "%u up could not be embedded",
                       n, m->hp.n_vocab, m->hp.n_vocab);
  if (n == m->hp.n_vocab) return BRISK_OK;
  BRISK_INFO("the embedding has %u rows for %u tokens; the %u rows past the vocabulary are unused",
             m->hp.n_vocab, n, m->hp.n_vocab - n);
  m->hp.n_vocab = n;
  m->token_embd.rows = n;
  m->output.rows = n; /* the same view when tied */
  return BRISK_OK;
}

brisk_status brisk_model_source_bind(brisk_model *m, brisk_model_source *src,
                                     const brisk_model_params *params) {
  brisk_status st = load_vocab(m, src);
  if (st) return st;
  if (params->vocab_only) {
    m->hp.n_vocab = m->vocab ? (uint32_t)brisk_vocab_n_tokens(m->vocab) : 0;
    return BRISK_OK;
  }
  st = src->hf
           ? brisk_model_load_hf(m, src->hf, params, &src->owned, &src->n_owned, &src->cap_owned)
           : brisk_model_load_gguf(m, src->gguf, params, &src->owned, &src->n_owned,
                                   &src->cap_owned);
  if (!st && src->hf) st = brisk_model_hf_embed_config(m, src->hf);
  if (st) return st;
  return fit_vocab(m);
}

const char *brisk_model_source_kind(const brisk_model_source *src) {
  return src->hf ? "hf" : "gguf";
}

const char *brisk_model_source_chat_template(const brisk_model_source *src) {
  if (src->hf) return brisk_hf_chat_template(src->hf, NULL);
  brisk_gguf_str s;
  if (brisk_gguf_get_str(src->gguf, "tokenizer.chat_template", &s) != BRISK_OK) return NULL;
  return s.ptr;
}

brisk_status brisk_model_source_set_writable(brisk_model_source *src, const void *p, size_t n,
                                             bool writable) {
  if (!src->gguf)
    return brisk_error(BRISK_E_UNSUPPORTED, "weights of a Hugging Face folder are not rewritten");
  return brisk_gguf_set_writable(src->gguf, p, n, writable);
}

bool brisk_model_source_is_mapped(const brisk_model_source *src) {
  return src->gguf ? brisk_gguf_is_mapped(src->gguf) : false;
}

int64_t brisk_model_source_n_tensors(const brisk_model_source *src) {
  return src->hf ? (int64_t)brisk_hf_n_tensors(src->hf) : brisk_gguf_n_tensors(src->gguf);
}

void brisk_model_source_tensor(const brisk_model_source *src, int64_t index,
                               brisk_tensor_info *info) {
  if (src->hf) {
    /* safetensors shapes are outermost first; the API lists fastest first. */
    const brisk_safetensors_tensor *t = brisk_hf_tensor_at(src->hf, (size_t)index);
    info->name = t->name;
    info->type = brisk_dtype_name(t->dtype);
    info->n_dims = t->n_dims ? t->n_dims : 1;
    for (int d = 0; d < 4; d++)
      info->dims[d] = d < (int)t->n_dims ? t->shape[t->n_dims - 1 - d] : 1;
    info->n_bytes = t->n_bytes;
    return;
  }
  const brisk_gguf_tensor *t = brisk_gguf_tensor_at(src->gguf, index);
  info->name = t->name;
  info->type = brisk_dtype_name(t->type);
  info->n_dims = t->n_dims;
  for (int d = 0; d < 4; d++) info->dims[d] = t->ne[d];
  info->n_bytes = t->n_bytes;
}

/* Writes text of length len (plus a NUL, truncated to cap). */
static brisk_status put_text(const char *key, const char *text, size_t len, char *buf, size_t cap,
                             size_t *needed) {
  if (cap > 0) {
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(buf, text, n);
    buf[n] = 0;
  }
  if (needed) *needed = len;
  if (len + 1 > cap)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "metadata '%s' needs %zu bytes, buffer has %zu",
                       key, len + 1, cap);
  return BRISK_OK;
}

/* config.json values: strings as they are, anything else as JSON text. */
static brisk_status hf_meta(const brisk_hf *hf, const char *key, char *buf, size_t cap,
                            size_t *needed) {
  struct json_object *v = NULL;
  brisk_status st = brisk_json_find(brisk_hf_config(hf), "config.json", key, &v);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_NOT_FOUND, "metadata key '%s' is not in config.json", key);
  if (st) return st;
  if (json_object_is_type(v, json_type_string))
    return put_text(key, json_object_get_string(v), (size_t)json_object_get_string_len(v), buf, cap,
                    needed);
  const char *text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
  return put_text(key, text, strlen(text), buf, cap, needed);
}

brisk_status brisk_model_source_meta(const brisk_model_source *src, const char *key, char *buf,
                                     size_t cap, size_t *needed) {
  if (src->hf) return hf_meta(src->hf, key, buf, cap, needed);
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
