/* The weights of a Hugging Face folder: one model.safetensors, or shards
 * listed by model.safetensors.index.json. */
#include "format/hf_internal.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/log.h"
#include "format/json.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME "model.safetensors.index.json"

char *brisk_hf_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name), n;
  if (brisk_add_overflow_size(a, b + 2, &n)) return NULL;
  char *p = brisk_malloc(n);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

brisk_status brisk_hf_exists(const char *path, bool *exists) {
  struct stat st;
  if (stat(path, &st) == 0) {
    *exists = true;
    return BRISK_OK;
  }
  if (errno == ENOENT || errno == ENOTDIR) {
    *exists = false;
    return BRISK_OK;
  }
  return brisk_error(BRISK_E_IO, "cannot stat %s: %s", path, strerror(errno));
}

void brisk_hf_weights_free(brisk_hf_weights *w) {
  for (size_t i = 0; i < w->n_shards; i++) {
    brisk_safetensors_close(w->shards[i]);
    brisk_free(w->shard_names[i]);
  }
  brisk_free(w->shards);
  brisk_free(w->shard_names);
  brisk_free(w->tensors);
  brisk_free(w->by_name);
  *w = (brisk_hf_weights){0};
}

/* Opens dir/name as shard i; the message says which shard failed. */
static brisk_status open_shard(brisk_hf_weights *w, const char *dir, const char *name) {
  size_t i = w->n_shards;
  w->shard_names[i] = brisk_strdup(name);
  char *path = brisk_hf_join(dir, name);
  if (!w->shard_names[i] || !path) {
    brisk_free(w->shard_names[i]);
    brisk_free(path);
    return brisk_error_oom();
  }
  brisk_status s = brisk_safetensors_open_model(path, &w->shards[i]);
  brisk_free(path);
  if (s != BRISK_OK) {
    brisk_free(w->shard_names[i]);
    return s;
  }
  w->n_shards++;
  return BRISK_OK;
}

static int cmp_tensor_name(const void *a, const void *b) {
  return strcmp((*(const brisk_safetensors_tensor *const *)a)->name,
                (*(const brisk_safetensors_tensor *const *)b)->name);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fills by_name and bytes once tensors[] is complete. */
static brisk_status index_tensors(brisk_hf_weights *w) {
  w->by_name = brisk_malloc((w->n_tensors ? w->n_tensors : 1) * sizeof *w->by_name);
  if (!w->by_name) return brisk_error_oom();
  memcpy(w->by_name, w->tensors, w->n_tensors * sizeof *w->by_name);
  qsort(w->by_name, w->n_tensors, sizeof *w->by_name, cmp_tensor_name);
  w->bytes = 0;
  for (size_t i = 0; i < w->n_tensors; i++) w->bytes += w->tensors[i]->n_bytes;
  return BRISK_OK;
}

static brisk_status open_single(brisk_hf_weights *w, const char *dir) {
  w->shards = brisk_calloc(1, sizeof *w->shards);
  w->shard_names = brisk_calloc(1, sizeof *w->shard_names);
  if (!w->shards || !w->shard_names) return brisk_error_oom();
  brisk_status s = open_shard(w, dir, "model.safetensors");
  if (s != BRISK_OK) return s;
  size_t n = brisk_safetensors_n_tensors(w->shards[0]);
  w->tensors = brisk_malloc((n ? n : 1) * sizeof *w->tensors);
  if (!w->tensors) return brisk_error_oom();
  for (size_t i = 0; i < n; i++) w->tensors[i] = brisk_safetensors_tensor_at(w->shards[0], i);
  w->n_tensors = n;
  return index_tensors(w);
}

/* A shard must be a file directly inside the folder. */
static brisk_status check_shard_name(const char *tensor, struct json_object *v) {
  if (!json_object_is_type(v, json_type_string))
    return brisk_error(BRISK_E_FORMAT, INDEX_NAME ": weight_map entry of '%.200s' is %s", tensor,
                       brisk_json_type_name(v));
  const char *s = json_object_get_string(v);
  size_t len = (size_t)json_object_get_string_len(v);
  if (len == 0 || strlen(s) != len || strchr(s, '/') || strchr(s, '\\') || strstr(s, "..") ||
      strcmp(s, ".") == 0)
    return brisk_error(BRISK_E_FORMAT,
                       INDEX_NAME ": shard '%.200s' of tensor '%.200s' is not a plain file name", s,
                       tensor);
  return BRISK_OK;
}

static brisk_status open_sharded(brisk_hf_weights *w, const char *dir, const char *index_path) {
  struct json_object *index = NULL, *map = NULL;
  const char **names = NULL;
  brisk_status s = brisk_json_parse_file(index_path, BRISK_HF_MAX_INDEX_BYTES, &index);
  if (s != BRISK_OK) return s;
  if (!json_object_is_type(index, json_type_object)) {
    s = brisk_error(BRISK_E_FORMAT, INDEX_NAME " holds %s, not an object",
                    brisk_json_type_name(index));
    goto done;
  }
  if (!json_object_object_get_ex(index, "weight_map", &map) ||
      !json_object_is_type(map, json_type_object)) {
    s = brisk_error(BRISK_E_FORMAT, INDEX_NAME ": \"weight_map\" is %s, expected an object",
                    map ? brisk_json_type_name(map) : "missing");
    goto done;
  }
  size_t n = (size_t)json_object_object_length(map);
  if (n == 0) {
    s = brisk_error(BRISK_E_FORMAT, INDEX_NAME ": \"weight_map\" is empty");
    goto done;
  }
  /* The distinct shard names, sorted; each file is opened once. */
  names = brisk_malloc(n * sizeof *names);
  if (!names) {
    s = brisk_error_oom();
    goto done;
  }
  size_t k = 0;
  json_object_object_foreach(map, tname, tfile) {
    if ((s = check_shard_name(tname, tfile)) != BRISK_OK) goto done;
    names[k++] = json_object_get_string(tfile);
  }
  qsort(names, n, sizeof *names, cmp_str);
  size_t n_unique = 0;
  for (size_t i = 0; i < n; i++)
    if (n_unique == 0 || strcmp(names[n_unique - 1], names[i]) != 0) names[n_unique++] = names[i];

  w->shards = brisk_calloc(n_unique, sizeof *w->shards);
  w->shard_names = brisk_calloc(n_unique, sizeof *w->shard_names);
  w->tensors = brisk_malloc(n * sizeof *w->tensors);
  if (!w->shards || !w->shard_names || !w->tensors) {
    s = brisk_error_oom();
    goto done;
  }
  for (size_t i = 0; i < n_unique; i++)
    if ((s = open_shard(w, dir, names[i])) != BRISK_OK) goto done;

  json_object_object_foreach(map, name, file) {
    const char *fname = json_object_get_string(file);
    const char **hit = bsearch(&fname, names, n_unique, sizeof *names, cmp_str);
    const brisk_safetensors *shard = w->shards[hit - names];
    const brisk_safetensors_tensor *t = brisk_safetensors_find(shard, name);
    if (!t) {
      s = brisk_error(BRISK_E_FORMAT, INDEX_NAME ": tensor '%.200s' is not in its shard '%.200s'",
                      name, fname);
      goto done;
    }
    w->tensors[w->n_tensors++] = t;
  }
  size_t in_shards = 0;
  for (size_t i = 0; i < w->n_shards; i++) in_shards += brisk_safetensors_n_tensors(w->shards[i]);
  if (in_shards > n)
    BRISK_WARN("%s: shards hold %zu tensors that " INDEX_NAME " does not map; ignoring them", dir,
               in_shards - n);
  s = index_tensors(w);
done:
  brisk_free(names);
  brisk_json_free(index);
  return s;
}

brisk_status brisk_hf_weights_open(brisk_hf_weights *w, const char *dir) {
  static const char *const candidates[] = {"model.safetensors", INDEX_NAME, "pytorch_model.bin",
                                           "pytorch_model.bin.index.json"};
  bool present[4];
  for (int i = 0; i < 4; i++) {
    char *path = brisk_hf_join(dir, candidates[i]);
    if (!path) return brisk_error_oom();
    brisk_status s = brisk_hf_exists(path, &present[i]);
    /* Reached only without model.safetensors, which wins when present. */
    if (s == BRISK_OK && i == 1 && present[1]) s = open_sharded(w, dir, path);
    brisk_free(path);
    if (s != BRISK_OK) return s;
    if (i == 0 && present[0]) return open_single(w, dir);
    if (i == 1 && present[1]) return BRISK_OK;
  }
  if (present[2] || present[3])
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s has only PyTorch pickle weights (pytorch_model.bin); convert them to "
                       "safetensors",
                       dir);
  return brisk_error(BRISK_E_IO, "%s has no model.safetensors or " INDEX_NAME, dir);
}
