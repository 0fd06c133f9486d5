/* Fuzz target: a Hugging Face folder's JSON files. The first input byte picks
 * the file the rest becomes (config.json, generation_config.json,
 * tokenizer_config.json, chat_template.json or model.safetensors.index.json);
 * the other files of the folder are valid. Then brisk_hf_open and every
 * accessor: typed lookups of each key and nested key of config.json, token
 * ids, chat templates, tensor lookup. Aborts on a status the headers do not
 * promise, a failure without a message, or an inconsistent tensor table. */
#include "fuzz_target.h"

#include "core/dtype.h"
#include "format/hf.h"
#include "format/json.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_hf_config: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static const char *const files[] = {"config.json", "generation_config.json",
                                    "tokenizer_config.json", "chat_template.json",
                                    "model.safetensors.index.json"};
#define N_FILES (sizeof files / sizeof files[0])

static const char *valid_config = "{\"model_type\": \"llama\", \"num_hidden_layers\": 2,"
                                  " \"rope_scaling\": {\"factor\": 8.0}, \"eos_token_id\": 2}";

/* Two folders made once per process: `single` holds model.safetensors,
 * `sharded` holds shards a/b.safetensors for the index. */
static char single[64], sharded[64];

static void put_file(const char *dir, const char *name, const void *data, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0);
}

static void drop_file(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unlink(path);
}

static void write_weights(const char *dir, const char *file, const char *const *names, size_t n) {
  brisk_safetensors_writer *w;
  CHECK(brisk_safetensors_writer_create(&w) == BRISK_OK);
  float v[4] = {1, -2, 3, -4};
  uint64_t shape[1] = {4};
  for (size_t i = 0; i < n; i++)
    CHECK(brisk_safetensors_writer_add_tensor(w, names[i], BRISK_DTYPE_F32, 1, shape, v, 16) ==
          BRISK_OK);
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  CHECK(brisk_safetensors_writer_write_file(w, path) == BRISK_OK);
  brisk_safetensors_writer_free(w);
}

static void cleanup(void) {
  const char *all[] = {"config.json",
                       "generation_config.json",
                       "tokenizer_config.json",
                       "chat_template.json",
                       "model.safetensors.index.json",
                       "model.safetensors",
                       "a.safetensors",
                       "b.safetensors"};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    drop_file(single, all[i]);
    drop_file(sharded, all[i]);
  }
  rmdir(single);
  rmdir(sharded);
}

static void setup(void) {
  snprintf(single, sizeof single, "/tmp/brisk-fuzz-hf-XXXXXX");
  snprintf(sharded, sizeof sharded, "/tmp/brisk-fuzz-hf-XXXXXX");
  CHECK(mkdtemp(single) && mkdtemp(sharded));
  atexit(cleanup);
  const char *names_a[] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"};
  const char *names_b[] = {"model.norm.weight", "lm_head.weight"};
  write_weights(single, "model.safetensors", names_a, 2);
  write_weights(sharded, "a.safetensors", names_a, 2);
  write_weights(sharded, "b.safetensors", names_b, 2);
  put_file(single, "config.json", valid_config, strlen(valid_config));
  put_file(sharded, "config.json", valid_config, strlen(valid_config));
}

static bool lookup_status_ok(brisk_status s) {
  return s == BRISK_OK || s == BRISK_E_NOT_FOUND || s == BRISK_E_FORMAT ||
         s == BRISK_E_INVALID_ARGUMENT || s == BRISK_E_BUFFER_TOO_SMALL;
}

/* Every typed getter on one key path. */
static void probe(const brisk_hf *hf, const char *path) {
  int64_t i, arr[4];
  double d;
  bool b;
  const char *s;
  size_t n;
  brisk_status st[] = {
      brisk_hf_config_get_int(hf, path, &i), brisk_hf_config_get_float(hf, path, &d),
      brisk_hf_config_get_bool(hf, path, &b), brisk_hf_config_get_string(hf, path, &s),
      brisk_hf_config_get_int_array(hf, path, arr, 4, &n)};
  for (size_t k = 0; k < sizeof st / sizeof st[0]; k++) {
    CHECK(lookup_status_ok(st[k]));
    if (st[k] != BRISK_OK) CHECK(brisk_last_error()[0] != 0);
  }
  if (st[3] == BRISK_OK) CHECK(s != NULL);
}

static void exercise(const brisk_hf *hf) {
  json_object_object_foreach((struct json_object *)brisk_hf_config(hf), key, val) {
    probe(hf, key);
    if (!json_object_is_type(val, json_type_object)) continue;
    json_object_object_foreach(val, sub, subval) {
      (void)subval;
      char path[600];
      snprintf(path, sizeof path, "%s.%s", key, sub);
      probe(hf, path);
    }
  }
  const char *keys[] = {"eos_token_id", "bos_token_id", "pad_token_id"};
  for (size_t k = 0; k < 3; k++) {
    int32_t ids[8];
    size_t n;
    brisk_status s = brisk_hf_token_ids(hf, keys[k], ids, 8, &n);
    CHECK(lookup_status_ok(s));
    if (s == BRISK_OK) {
      for (size_t j = 0; j < n; j++) CHECK(ids[j] >= 0);
    }
  }
  int32_t bos;
  CHECK(lookup_status_ok(brisk_hf_bos_id(hf, &bos)));
  const char *names[] = {NULL, "default", "tool_use"};
  for (size_t k = 0; k < 3; k++) {
    const char *t = brisk_hf_chat_template(hf, names[k]);
    if (t) CHECK(strlen(t) < (1u << 30));
  }
  for (size_t i = 0; i < brisk_hf_n_tensors(hf); i++) {
    const brisk_safetensors_tensor *t = brisk_hf_tensor_at(hf, i);
    CHECK(t && brisk_hf_find_tensor(hf, t->name) == t);
  }
  for (size_t i = 0; i < brisk_hf_n_shards(hf); i++) {
    const char *name = brisk_hf_shard_name(hf, i);
    CHECK(name && !strchr(name, '/') && !strstr(name, ".."));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!single[0]) setup();
  if (size == 0) return 0;
  size_t which = data[0] % N_FILES;
  const char *dir = which == N_FILES - 1 ? sharded : single;
  put_file(dir, files[which], data + 1, size - 1);
  brisk_hf *hf = NULL;
  brisk_status s = brisk_hf_open(dir, &hf);
  if (s == BRISK_OK) {
    exercise(hf);
    brisk_hf_close(hf);
  } else {
    CHECK(s == BRISK_E_FORMAT || s == BRISK_E_IO || s == BRISK_E_UNSUPPORTED ||
          s == BRISK_E_OUT_OF_MEMORY);
    CHECK(hf == NULL && brisk_last_error()[0] != 0);
  }
  if (which == 0)
    put_file(dir, files[0], valid_config, strlen(valid_config));
  else
    drop_file(dir, files[which]);
  return 0;
}
