/* A Hugging Face model folder: the JSON files and their accessors. */
#include "core/utf8.h"
#include "format/hf.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/hf_internal.h"
#include "format/json.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct brisk_hf {
  char *dir;
  struct json_object *config;        /* config.json, an object */
  struct json_object *gen_config;    /* generation_config.json or NULL */
  struct json_object *tok_config;    /* tokenizer_config.json or NULL */
  struct json_object *template_json; /* chat_template.json or NULL */
  char *template_jinja;              /* chat_template.jinja's text, or NULL */
  char *tokenizer_json;              /* path, or NULL when absent */
  brisk_hf_weights weights;
};

/* Parses dir/name into *out when the file exists (else leaves *out NULL);
 * a present file must hold a JSON object. */
static brisk_status load_json(const char *dir, const char *name, size_t max_bytes, bool required,
                              struct json_object **out) {
  char *path = brisk_hf_join(dir, name);
  if (!path) return brisk_error_oom();
  bool exists = true;
  brisk_status s = required ? BRISK_OK : brisk_hf_exists(path, &exists);
  if (s == BRISK_OK && exists) s = brisk_json_parse_file(path, max_bytes, out);
  if (s == BRISK_OK && exists && !json_object_is_type(*out, json_type_object)) {
    s = brisk_error(BRISK_E_FORMAT, "%s holds %s, not an object", path, brisk_json_type_name(*out));
    brisk_json_free(*out);
    *out = NULL;
  }
  brisk_free(path);
  return s;
}

/* chat_template.jinja: newer transformers save the template as raw text. */
static brisk_status load_jinja(brisk_hf *hf) {
  char *path = brisk_hf_join(hf->dir, "chat_template.jinja");
  if (!path) return brisk_error_oom();
  bool exists;
  size_t n;
  brisk_status s = brisk_hf_exists(path, &exists);
  if (s == BRISK_OK && exists)
    s = brisk_json_read_file(path, BRISK_HF_MAX_CONFIG_BYTES, &hf->template_jinja, &n);
  if (s == BRISK_OK && exists &&
      (!brisk_utf8_valid(hf->template_jinja, n) || memchr(hf->template_jinja, 0, n)))
    s = brisk_error(BRISK_E_FORMAT, "%s is not UTF-8 text", path);
  brisk_free(path);
  return s;
}

/* tokenizer_config.json's "chat_template": a string or a list of
 * {"name": str, "template": str}; checked here so lookups cannot fail. */
static brisk_status check_templates(const brisk_hf *hf) {
  struct json_object *t;
  if (hf->template_json) {
    if (json_object_object_get_ex(hf->template_json, "chat_template", &t) &&
        !json_object_is_type(t, json_type_string) && !json_object_is_type(t, json_type_null))
      return brisk_error(BRISK_E_FORMAT, "chat_template.json: \"chat_template\" is %s",
                         brisk_json_type_name(t));
  }
  if (!hf->tok_config || !json_object_object_get_ex(hf->tok_config, "chat_template", &t) ||
      json_object_is_type(t, json_type_null) || json_object_is_type(t, json_type_string))
    return BRISK_OK;
  if (!json_object_is_type(t, json_type_array))
    return brisk_error(BRISK_E_FORMAT, "tokenizer_config.json: \"chat_template\" is %s",
                       brisk_json_type_name(t));
  for (size_t i = 0; i < json_object_array_length(t); i++) {
    struct json_object *e = json_object_array_get_idx(t, i), *name, *text;
    if (!json_object_is_type(e, json_type_object) || !json_object_object_get_ex(e, "name", &name) ||
        !json_object_is_type(name, json_type_string) ||
        !json_object_object_get_ex(e, "template", &text) ||
        !json_object_is_type(text, json_type_string))
      return brisk_error(BRISK_E_FORMAT,
                         "tokenizer_config.json: \"chat_template\"[%zu] is not an object with "
                         "string \"name\" and \"template\"",
                         i);
  }
  return BRISK_OK;
}

static brisk_status hf_load(brisk_hf *hf) {
  struct stat st;
  if (stat(hf->dir, &st) != 0)
    return brisk_error(BRISK_E_IO, "cannot open %s: %s", hf->dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return brisk_error(BRISK_E_IO, "%s is not a folder", hf->dir);
  brisk_status s;
  if ((s = load_json(hf->dir, "config.json", BRISK_HF_MAX_CONFIG_BYTES, true, &hf->config)) ||
      (s = load_json(hf->dir, "generation_config.json", BRISK_HF_MAX_CONFIG_BYTES, false,
                     &hf->gen_config)) ||
      (s = load_json(hf->dir, "tokenizer_config.json", BRISK_HF_MAX_INDEX_BYTES, false,
                     &hf->tok_config)) ||
      (s = load_json(hf->dir, "chat_template.json", BRISK_HF_MAX_CONFIG_BYTES, false,
                     &hf->template_json)) ||
      (s = load_jinja(hf)) || (s = check_templates(hf)))
    return s;
  char *tok = brisk_hf_join(hf->dir, "tokenizer.json");
  if (!tok) return brisk_error_oom();
  bool exists;
  s = brisk_hf_exists(tok, &exists);
  if (s == BRISK_OK && exists)
    hf->tokenizer_json = tok;
  else
    brisk_free(tok);
  if (s != BRISK_OK) return s;
  return brisk_hf_weights_open(&hf->weights, hf->dir);
}

void brisk_hf_close(brisk_hf *hf) {
  if (!hf) return;
  brisk_hf_weights_free(&hf->weights);
  brisk_json_free(hf->config);
  brisk_json_free(hf->gen_config);
  brisk_json_free(hf->tok_config);
  brisk_json_free(hf->template_json);
  brisk_free(hf->template_jinja);
  brisk_free(hf->tokenizer_json);
  brisk_free(hf->dir);
  brisk_free(hf);
}

brisk_status brisk_hf_open(const char *dir, brisk_hf **out) {
  if (!dir || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_hf_open: NULL argument");
  brisk_hf *hf = brisk_calloc(1, sizeof *hf);
  if (!hf) return brisk_error_oom();
  hf->dir = brisk_strdup(dir);
  brisk_status s = hf->dir ? hf_load(hf) : brisk_error_oom();
  if (s != BRISK_OK) {
    brisk_hf_close(hf);
    return s;
  }
  *out = hf;
  return BRISK_OK;
}

const char *brisk_hf_dir(const brisk_hf *hf) { return hf->dir; }

/* ---- config.json ---------------------------------------------------------- */

const struct json_object *brisk_hf_config(const brisk_hf *hf) { return hf->config; }

brisk_status brisk_hf_config_get_int(const brisk_hf *hf, const char *key, int64_t *out) {
  return brisk_json_get_int(hf->config, "config.json", key, out);
}
brisk_status brisk_hf_config_get_float(const brisk_hf *hf, const char *key, double *out) {
  return brisk_json_get_float(hf->config, "config.json", key, out);
}
brisk_status brisk_hf_config_get_bool(const brisk_hf *hf, const char *key, bool *out) {
  return brisk_json_get_bool(hf->config, "config.json", key, out);
}
brisk_status brisk_hf_config_get_string(const brisk_hf *hf, const char *key, const char **out) {
  return brisk_json_get_string(hf->config, "config.json", key, out, NULL);
}
brisk_status brisk_hf_config_get_int_array(const brisk_hf *hf, const char *key, int64_t *out,
                                           size_t cap, size_t *n) {
  return brisk_json_get_int_array(hf->config, "config.json", key, out, cap, n);
}

/* ---- other files ------------------------------------------------------------ */

const struct json_object *brisk_hf_generation_config(const brisk_hf *hf) { return hf->gen_config; }
const struct json_object *brisk_hf_tokenizer_config(const brisk_hf *hf) { return hf->tok_config; }
const char *brisk_hf_tokenizer_json_path(const brisk_hf *hf) { return hf->tokenizer_json; }

brisk_status brisk_hf_load_tokenizer_json(const brisk_hf *hf, struct json_object **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_hf_load_tokenizer_json: NULL");
  if (!hf->tokenizer_json)
    return brisk_error(BRISK_E_NOT_FOUND, "%s has no tokenizer.json", hf->dir);
  struct json_object *obj;
  brisk_status s = brisk_json_parse_file(hf->tokenizer_json, BRISK_HF_MAX_TOKENIZER_BYTES, &obj);
  if (s != BRISK_OK) return s;
  if (!json_object_is_type(obj, json_type_object)) {
    s = brisk_error(BRISK_E_FORMAT, "%s holds %s, not an object", hf->tokenizer_json,
                    brisk_json_type_name(obj));
    brisk_json_free(obj);
    return s;
  }
  *out = obj;
  return BRISK_OK;
}

const char *brisk_hf_chat_template(const brisk_hf *hf, const char *name) {
  if (!name && hf->template_jinja) return hf->template_jinja;
  struct json_object *t;
  if (hf->tok_config && json_object_object_get_ex(hf->tok_config, "chat_template", &t)) {
    if (json_object_is_type(t, json_type_string)) {
      if (!name) return json_object_get_string(t);
    } else if (json_object_is_type(t, json_type_array)) {
      const char *want = name ? name : "default";
      for (size_t i = 0; i < json_object_array_length(t); i++) {
        struct json_object *e = json_object_array_get_idx(t, i), *n, *text;
        json_object_object_get_ex(e, "name", &n);
        json_object_object_get_ex(e, "template", &text);
        if (strcmp(json_object_get_string(n), want) == 0) return json_object_get_string(text);
      }
    }
  }
  if (!name && hf->template_json &&
      json_object_object_get_ex(hf->template_json, "chat_template", &t) &&
      json_object_is_type(t, json_type_string))
    return json_object_get_string(t);
  return NULL;
}

/* ---- special token ids ---------------------------------------------------- */

static brisk_status id_value(struct json_object *v, const char *what, const char *key,
                             int32_t *out) {
  int64_t x;
  brisk_status s = brisk_json_as_int(v, what, key, &x);
  if (s != BRISK_OK) return s;
  if (x < 0 || x > INT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "%s: %s %lld is not a valid token id", what, key,
                       (long long)x);
  *out = (int32_t)x;
  return BRISK_OK;
}

brisk_status brisk_hf_token_ids(const brisk_hf *hf, const char *key, int32_t *out, size_t cap,
                                size_t *n) {
  if (!key || !n || (cap && !out))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_hf_token_ids: NULL argument");
  char nested[256];
  snprintf(nested, sizeof nested, "text_config.%s", key);
  const struct {
    const struct json_object *root;
    const char *what, *path;
  } sources[] = {{hf->gen_config, "generation_config.json", key},
                 {hf->config, "config.json", key},
                 {hf->config, "config.json", nested}};
  for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
    struct json_object *v;
    brisk_status s = brisk_json_find(sources[i].root, sources[i].what, sources[i].path, &v);
    if (s == BRISK_E_NOT_FOUND) continue;
    if (s != BRISK_OK) return s;
    bool is_list = json_object_is_type(v, json_type_array);
    size_t len = is_list ? json_object_array_length(v) : 1;
    int32_t id;
    for (size_t j = 0; j < len; j++) {
      s = id_value(is_list ? json_object_array_get_idx(v, j) : v, sources[i].what, sources[i].path,
                   &id);
      if (s != BRISK_OK) return s;
    }
    *n = len;
    if (len > cap)
      return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "%s: %s has %zu ids, room for %zu",
                         sources[i].what, sources[i].path, len, cap);
    for (size_t j = 0; j < len; j++)
      id_value(is_list ? json_object_array_get_idx(v, j) : v, sources[i].what, sources[i].path,
               &out[j]);
    return BRISK_OK;
  }
  return brisk_error(BRISK_E_NOT_FOUND, "%s: no %s in generation_config.json or config.json",
                     hf->dir, key);
}

brisk_status brisk_hf_eos_ids(const brisk_hf *hf, int32_t *out, size_t cap, size_t *n) {
  return brisk_hf_token_ids(hf, "eos_token_id", out, cap, n);
}

brisk_status brisk_hf_bos_id(const brisk_hf *hf, int32_t *out) {
  size_t n = 0;
  int32_t id;
  brisk_status s = brisk_hf_token_ids(hf, "bos_token_id", &id, 1, &n);
  if (s == BRISK_E_BUFFER_TOO_SMALL || (s == BRISK_OK && n != 1))
    return brisk_error(BRISK_E_FORMAT, "%s: bos_token_id is a list of %zu ids, expected one",
                       hf->dir, n);
  if (s == BRISK_OK) *out = id;
  return s;
}

/* ---- tensors ------------------------------------------------------------------ */

size_t brisk_hf_n_tensors(const brisk_hf *hf) { return hf->weights.n_tensors; }

const brisk_safetensors_tensor *brisk_hf_tensor_at(const brisk_hf *hf, size_t i) {
  return i < hf->weights.n_tensors ? hf->weights.tensors[i] : NULL;
}

const brisk_safetensors_tensor *brisk_hf_find_tensor(const brisk_hf *hf, const char *name) {
  if (!name) return NULL;
  size_t lo = 0, hi = hf->weights.n_tensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, hf->weights.by_name[mid]->name);
    if (c == 0) return hf->weights.by_name[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

uint64_t brisk_hf_tensor_bytes(const brisk_hf *hf) { return hf->weights.bytes; }
size_t brisk_hf_n_shards(const brisk_hf *hf) { return hf->weights.n_shards; }

const char *brisk_hf_shard_name(const brisk_hf *hf, size_t i) {
  return i < hf->weights.n_shards ? hf->weights.shard_names[i] : NULL;
}

const brisk_safetensors *brisk_hf_shard(const brisk_hf *hf, size_t i) {
  return i < hf->weights.n_shards ? hf->weights.shards[i] : NULL;
}
