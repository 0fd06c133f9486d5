/* Hugging Face folders written into a temporary directory: a single-file
 * model, a sharded one (index + 2 shards) and every malformed folder case;
 * config accessors, special token ids, chat templates, tokenizer files, and
 * allocation-failure injection over open. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "format/hf.h"
#include "format/json.h"

#include <dirent.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- temporary folders -------------------------------------------------------- */

static char *make_dir(void) {
  char *d = strdup("/tmp/brisk-hf-XXXXXX");
  assert_non_null(mkdtemp(d));
  return d;
}

/* Removes the folder and its files (the tests create no subfolders but one). */
static void remove_dir(char *dir) {
  DIR *dp = opendir(dir);
  assert_non_null(dp);
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    if (S_ISDIR(st.st_mode))
      assert_int_equal(rmdir(path), 0);
    else
      assert_int_equal(unlink(path), 0);
  }
  closedir(dp);
  assert_int_equal(rmdir(dir), 0);
  free(dir);
}

static void write_bytes(const char *dir, const char *name, const void *data, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void write_text(const char *dir, const char *name, const char *text) {
  write_bytes(dir, name, text, strlen(text));
}

static void remove_file(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(unlink(path), 0);
}

/* ---- tensors -------------------------------------------------------------------- */

typedef struct tensor_spec {
  char name[64];
  uint32_t dtype;
  uint32_t n_dims;
  uint64_t shape[2];
  void *data; /* malloc'ed random values */
  uint64_t n_bytes;
} tensor_spec;

enum { N_LAYERS = 3, N_TENSORS = 2 + 3 * N_LAYERS };

/* A small llama-like checkpoint with fresh random, non-zero values. */
static void make_specs(test_rng *r, tensor_spec *t) {
  size_t k = 0;
  const char *names[3] = {"self_attn.q_proj.weight", "mlp.up_proj.weight",
                          "input_layernorm.weight"};
  t[k] = (tensor_spec){.dtype = BRISK_DTYPE_BF16, .n_dims = 2, .shape = {11, 8}};
  snprintf(t[k].name, sizeof t[k].name, "model.embed_tokens.weight");
  k++;
  for (int l = 0; l < N_LAYERS; l++) {
    for (int j = 0; j < 3; j++) {
      t[k] = (tensor_spec){.dtype = j == 2 ? BRISK_DTYPE_F32 : BRISK_DTYPE_F16,
                           .n_dims = j == 2 ? 1 : 2,
                           .shape = {j == 1 ? 5 : 8, 8}};
      snprintf(t[k].name, sizeof t[k].name, "model.layers.%d.%s", l, names[j]);
      k++;
    }
  }
  t[k] = (tensor_spec){.dtype = BRISK_DTYPE_F32, .n_dims = 0}; /* a scalar */
  snprintf(t[k].name, sizeof t[k].name, "model.norm.scale");
  k++;
  assert_int_equal(k, N_TENSORS);
  for (size_t i = 0; i < N_TENSORS; i++) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t[i].n_dims; d++) n *= t[i].shape[d];
    size_t elem = t[i].dtype == BRISK_DTYPE_F32 ? 4 : 2;
    t[i].n_bytes = n * elem;
    unsigned char *p = malloc(t[i].n_bytes);
    for (uint64_t e = 0; e < n; e++) {
      float v = (float)test_rng_uniform(r, 0.25, 4) * (test_rng_u64(r) & 1 ? 1 : -1);
      uint16_t h = t[i].dtype == BRISK_DTYPE_F16 ? brisk_f32_to_f16(v) : brisk_f32_to_bf16(v);
      if (elem == 4)
        memcpy(p + 4 * e, &v, 4);
      else
        memcpy(p + 2 * e, &h, 2);
    }
    t[i].data = p;
  }
}

static void free_specs(tensor_spec *t) {
  for (size_t i = 0; i < N_TENSORS; i++) free(t[i].data);
}

/* Writes tensors [from, to) of t into dir/name, plus `extra` unmapped ones. */
static void write_shard(const char *dir, const char *name, const tensor_spec *t, size_t from,
                        size_t to, bool extra) {
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "format", "pt"), BRISK_OK);
  for (size_t i = from; i < to; i++)
    assert_int_equal(brisk_safetensors_writer_add_tensor(w, t[i].name, t[i].dtype, t[i].n_dims,
                                                         t[i].shape, t[i].data, t[i].n_bytes),
                     BRISK_OK);
  if (extra) {
    float x = 1.5f;
    assert_int_equal(
        brisk_safetensors_writer_add_tensor(w, "unmapped", BRISK_DTYPE_F32, 0, NULL, &x, 4),
        BRISK_OK);
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(brisk_safetensors_writer_write_file(w, path), BRISK_OK);
  brisk_safetensors_writer_free(w);
}

/* An index mapping t[0, split) to shard A and the rest to shard B. */
static void write_index(const char *dir, const tensor_spec *t, size_t split, const char *shard_a,
                        const char *shard_b) {
  char text[8192];
  size_t n = (size_t)snprintf(text, sizeof text,
                              "{\"metadata\": {\"total_size\": 1234},\n"
                              " \"weight_map\": {\n");
  for (size_t i = 0; i < N_TENSORS; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "  \"%s\": \"%s\"%s\n", t[i].name,
                          i < split ? shard_a : shard_b, i + 1 < N_TENSORS ? "," : "");
  snprintf(text + n, sizeof text - n, "}}\n");
  write_text(dir, "model.safetensors.index.json", text);
}

static const char *config_json =
    "{\n"
    "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    "  \"model_type\": \"llama\",\n"
    "  \"hidden_size\": 8,\n"
    "  \"num_hidden_layers\": 3,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_theta\": 500000,\n"
    "  \"max_position_embeddings\": 4096.0,\n"
    "  \"partial\": 2.5,\n"
    "  \"huge\": 99999999999999999999,\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"sliding_window\": null,\n"
    "  \"layer_types\": [1, 2, 3, 4],\n"
    "  \"mixed\": [1, \"x\"],\n"
    "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,\n"
    "                   \"inner\": {\"deep\": 7}},\n"
    "  \"bos_token_id\": 128000,\n"
    "  \"eos_token_id\": 128001,\n"
    "  \"pad_token_id\": [1, 2],\n"
    "  \"text_config\": {\"unk_token_id\": 3}\n"
    "}\n";

static void check_tensors(const brisk_hf *hf, const tensor_spec *t) {
  assert_int_equal(brisk_hf_n_tensors(hf), N_TENSORS);
  uint64_t bytes = 0;
  for (size_t i = 0; i < N_TENSORS; i++) {
    const brisk_safetensors_tensor *x = brisk_hf_find_tensor(hf, t[i].name);
    if (!x) {
      fprintf(stderr, "tensor %s not found\n", t[i].name);
      fail();
    }
    assert_ptr_equal(brisk_hf_tensor_at(hf, i), x); /* file / weight-map order */
    assert_string_equal(x->name, t[i].name);
    assert_int_equal(x->dtype, t[i].dtype);
    assert_int_equal(x->n_dims, t[i].n_dims);
    for (uint32_t d = 0; d < t[i].n_dims; d++) assert_int_equal(x->shape[d], t[i].shape[d]);
    assert_int_equal(x->n_bytes, t[i].n_bytes);
    assert_memory_equal(x->data, t[i].data, t[i].n_bytes);
    bytes += t[i].n_bytes;
  }
  assert_int_equal(brisk_hf_tensor_bytes(hf), bytes);
  assert_null(brisk_hf_find_tensor(hf, "model.layers.9.mlp.up_proj.weight"));
  assert_null(brisk_hf_find_tensor(hf, "unmapped"));
  assert_null(brisk_hf_tensor_at(hf, N_TENSORS));
}

/* A complete single-file folder. */
static char *single_folder(const tensor_spec *t) {
  char *dir = make_dir();
  write_text(dir, "config.json", config_json);
  write_shard(dir, "model.safetensors", t, 0, N_TENSORS, false);
  return dir;
}

static brisk_hf *open_ok(const char *dir) {
  brisk_hf *hf = NULL;
  brisk_status s = brisk_hf_open(dir, &hf);
  if (s != BRISK_OK) {
    fprintf(stderr, "brisk_hf_open(%s): %d %s\n", dir, s, brisk_last_error());
    fail();
  }
  return hf;
}

static void expect_open(const char *dir, brisk_status want, const char *frag1, const char *frag2) {
  brisk_hf *hf = NULL;
  brisk_status s = brisk_hf_open(dir, &hf);
  if (s != want || (frag1 && !strstr(brisk_last_error(), frag1)) ||
      (frag2 && !strstr(brisk_last_error(), frag2))) {
    fprintf(stderr, "open gave %d (%s), wanted %d with '%s' '%s'\n", s, brisk_last_error(), want,
            frag1 ? frag1 : "", frag2 ? frag2 : "");
    fail();
  }
  if (s == BRISK_OK)
    brisk_hf_close(hf);
  else
    assert_null(hf);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_single_file_folder(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = single_folder(t);
  brisk_hf *hf = open_ok(dir);
  check_tensors(hf, t);
  assert_string_equal(brisk_hf_dir(hf), dir);
  assert_int_equal(brisk_hf_n_shards(hf), 1);
  assert_string_equal(brisk_hf_shard_name(hf, 0), "model.safetensors");
  assert_non_null(brisk_hf_shard(hf, 0));
  assert_null(brisk_hf_shard_name(hf, 1));
  assert_null(brisk_hf_generation_config(hf));
  assert_null(brisk_hf_tokenizer_config(hf));
  assert_null(brisk_hf_tokenizer_json_path(hf));
  assert_null(brisk_hf_chat_template(hf, NULL));
  struct json_object *tok;
  assert_int_equal(brisk_hf_load_tokenizer_json(hf, &tok), BRISK_E_NOT_FOUND);
  brisk_hf_close(hf);
  brisk_hf_close(NULL);
  remove_dir(dir);
  free_specs(t);
}

static void test_config_accessors(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = single_folder(t);
  brisk_hf *hf = open_ok(dir);
  int64_t i = -1;
  double f = -1;
  bool b = true;
  const char *s = NULL;

  assert_int_equal(brisk_hf_config_get_int(hf, "num_hidden_layers", &i), BRISK_OK);
  assert_int_equal(i, 3);
  /* An integral float reads as an integer; a fractional one does not. */
  assert_int_equal(brisk_hf_config_get_int(hf, "max_position_embeddings", &i), BRISK_OK);
  assert_int_equal(i, 4096);
  assert_int_equal(brisk_hf_config_get_int(hf, "partial", &i), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "config.json: key 'partial' is 2.5"));
  assert_int_equal(brisk_hf_config_get_int(hf, "huge", &i), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "out of range"));
  assert_int_equal(brisk_hf_config_get_int(hf, "model_type", &i), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "key 'model_type' is a string, expected an integer"));
  assert_int_equal(brisk_hf_config_get_int(hf, "no_such_key", &i), BRISK_E_NOT_FOUND);
  assert_non_null(strstr(brisk_last_error(), "config.json: no key 'no_such_key'"));
  assert_int_equal(i, 4096); /* untouched on error */

  assert_int_equal(brisk_hf_config_get_float(hf, "rms_norm_eps", &f), BRISK_OK);
  assert_true(f == 1e-05);
  assert_int_equal(brisk_hf_config_get_float(hf, "rope_theta", &f), BRISK_OK); /* int is a number */
  assert_true(f == 500000.0);
  assert_int_equal(brisk_hf_config_get_float(hf, "tie_word_embeddings", &f), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "is a boolean, expected a number"));

  assert_int_equal(brisk_hf_config_get_bool(hf, "tie_word_embeddings", &b), BRISK_OK);
  assert_false(b);
  assert_int_equal(brisk_hf_config_get_bool(hf, "hidden_size", &b), BRISK_E_FORMAT);

  assert_int_equal(brisk_hf_config_get_string(hf, "model_type", &s), BRISK_OK);
  assert_string_equal(s, "llama");
  assert_int_equal(brisk_hf_config_get_string(hf, "hidden_size", &s), BRISK_E_FORMAT);

  /* Nested keys, nulls and paths through non-objects. */
  assert_int_equal(brisk_hf_config_get_string(hf, "rope_scaling.rope_type", &s), BRISK_OK);
  assert_string_equal(s, "llama3");
  assert_int_equal(brisk_hf_config_get_float(hf, "rope_scaling.factor", &f), BRISK_OK);
  assert_true(f == 8.0);
  assert_int_equal(brisk_hf_config_get_int(hf, "rope_scaling.inner.deep", &i), BRISK_OK);
  assert_int_equal(i, 7);
  assert_int_equal(brisk_hf_config_get_int(hf, "rope_scaling.missing", &i), BRISK_E_NOT_FOUND);
  assert_int_equal(brisk_hf_config_get_int(hf, "sliding_window", &i), BRISK_E_NOT_FOUND);
  assert_int_equal(brisk_hf_config_get_int(hf, "sliding_window.size", &i), BRISK_E_NOT_FOUND);
  assert_int_equal(brisk_hf_config_get_int(hf, "model_type.x", &i), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "'model_type' is a string, not an object"));
  assert_int_equal(brisk_hf_config_get_int(hf, "rope_scaling..x", &i), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_hf_config_get_int(hf, "", &i), BRISK_E_INVALID_ARGUMENT);

  int64_t arr[4] = {0};
  size_t n = 0;
  assert_int_equal(brisk_hf_config_get_int_array(hf, "layer_types", arr, 4, &n), BRISK_OK);
  assert_int_equal(n, 4);
  assert_int_equal(arr[0], 1);
  assert_int_equal(arr[3], 4);
  int64_t small[2] = {-7, -7};
  assert_int_equal(brisk_hf_config_get_int_array(hf, "layer_types", small, 2, &n),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(n, 4);
  assert_int_equal(small[0], -7);
  assert_int_equal(brisk_hf_config_get_int_array(hf, "mixed", arr, 4, &n), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "key 'mixed[1]' is a string"));
  assert_int_equal(brisk_hf_config_get_int_array(hf, "hidden_size", arr, 4, &n), BRISK_E_FORMAT);

  /* The tree is there for anything the accessors do not cover. */
  struct json_object *archs;
  assert_int_equal(brisk_json_find(brisk_hf_config(hf), "config.json", "architectures", &archs),
                   BRISK_OK);
  assert_string_equal(json_object_get_string(json_object_array_get_idx(archs, 0)),
                      "LlamaForCausalLM");
  brisk_hf_close(hf);
  remove_dir(dir);
  free_specs(t);
}

static void test_special_token_ids(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = single_folder(t);
  int32_t ids[4] = {0};
  size_t n = 0;
  int32_t bos = -1;

  /* From config.json alone. */
  brisk_hf *hf = open_ok(dir);
  assert_int_equal(brisk_hf_eos_ids(hf, ids, 4, &n), BRISK_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 128001);
  assert_int_equal(brisk_hf_bos_id(hf, &bos), BRISK_OK);
  assert_int_equal(bos, 128000);
  assert_int_equal(brisk_hf_token_ids(hf, "pad_token_id", ids, 4, &n), BRISK_OK);
  assert_int_equal(n, 2);
  assert_int_equal(ids[1], 2);
  assert_int_equal(brisk_hf_token_ids(hf, "unk_token_id", ids, 4, &n), BRISK_OK); /* text_config */
  assert_int_equal(ids[0], 3);
  assert_int_equal(brisk_hf_token_ids(hf, "sep_token_id", ids, 4, &n), BRISK_E_NOT_FOUND);
  brisk_hf_close(hf);

  /* generation_config.json wins; a list of eos ids; a bad bos list. */
  write_text(dir, "generation_config.json",
             "{\"eos_token_id\": [128001, 128008, 128009], \"bos_token_id\": [1, 2],"
             " \"pad_token_id\": -1, \"temperature\": 0.6}");
  hf = open_ok(dir);
  assert_int_equal(brisk_hf_eos_ids(hf, ids, 4, &n), BRISK_OK);
  assert_int_equal(n, 3);
  assert_int_equal(ids[2], 128009);
  int32_t one[1] = {-5};
  assert_int_equal(brisk_hf_eos_ids(hf, one, 1, &n), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(n, 3);
  assert_int_equal(one[0], -5);
  bos = -1;
  assert_int_equal(brisk_hf_bos_id(hf, &bos), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "list of 2"));
  assert_int_equal(bos, -1);
  assert_int_equal(brisk_hf_token_ids(hf, "pad_token_id", ids, 4, &n), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "generation_config.json: pad_token_id -1"));
  double temp;
  assert_int_equal(brisk_json_get_float(brisk_hf_generation_config(hf), "generation_config.json",
                                        "temperature", &temp),
                   BRISK_OK);
  assert_true(temp == 0.6);
  brisk_hf_close(hf);
  remove_dir(dir);
  free_specs(t);
}

static void test_tokenizer_files_and_templates(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = single_folder(t);
  write_text(dir, "tokenizer.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}");
  write_text(dir, "tokenizer_config.json",
             "{\"eos_token\": \"</s>\", \"chat_template\": \"{{ messages }}\\n\"}");
  brisk_hf *hf = open_ok(dir);
  const char *path = brisk_hf_tokenizer_json_path(hf);
  assert_non_null(path);
  assert_non_null(strstr(path, "/tokenizer.json"));
  struct json_object *tok = NULL;
  assert_int_equal(brisk_hf_load_tokenizer_json(hf, &tok), BRISK_OK);
  const char *type;
  assert_int_equal(brisk_json_get_string(tok, "tokenizer.json", "model.type", &type, NULL),
                   BRISK_OK);
  assert_string_equal(type, "BPE");
  brisk_json_free(tok);
  const char *eos;
  assert_int_equal(brisk_json_get_string(brisk_hf_tokenizer_config(hf), "tokenizer_config.json",
                                         "eos_token", &eos, NULL),
                   BRISK_OK);
  assert_string_equal(eos, "</s>");
  assert_string_equal(brisk_hf_chat_template(hf, NULL), "{{ messages }}\n");
  assert_null(brisk_hf_chat_template(hf, "tool_use"));
  brisk_hf_close(hf);

  /* Named templates. */
  write_text(dir, "tokenizer_config.json",
             "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"},"
             " {\"name\": \"tool_use\", \"template\": \"T\"}]}");
  hf = open_ok(dir);
  assert_string_equal(brisk_hf_chat_template(hf, NULL), "D");
  assert_string_equal(brisk_hf_chat_template(hf, "tool_use"), "T");
  assert_null(brisk_hf_chat_template(hf, "rag"));
  brisk_hf_close(hf);

  /* chat_template.jinja overrides the config, as in transformers. */
  write_text(dir, "chat_template.jinja", "{% for m in messages %}{{ m }}{% endfor %}");
  hf = open_ok(dir);
  assert_string_equal(brisk_hf_chat_template(hf, NULL),
                      "{% for m in messages %}{{ m }}{% endfor %}");
  assert_string_equal(brisk_hf_chat_template(hf, "tool_use"), "T");
  brisk_hf_close(hf);
  remove_file(dir, "chat_template.jinja");

  /* chat_template.json is the last resort. */
  write_text(dir, "tokenizer_config.json", "{}");
  write_text(dir, "chat_template.json", "{\"chat_template\": \"J\"}");
  hf = open_ok(dir);
  assert_string_equal(brisk_hf_chat_template(hf, NULL), "J");
  brisk_hf_close(hf);

  /* Malformed template entries and files. */
  write_text(dir, "chat_template.json", "{\"chat_template\": 5}");
  expect_open(dir, BRISK_E_FORMAT, "chat_template.json: \"chat_template\" is an integer", NULL);
  remove_file(dir, "chat_template.json");
  write_text(dir, "tokenizer_config.json", "{\"chat_template\": [{\"name\": \"default\"}]}");
  expect_open(dir, BRISK_E_FORMAT, "\"chat_template\"[0]", NULL);
  write_text(dir, "tokenizer_config.json", "{\"chat_template\": {}}");
  expect_open(dir, BRISK_E_FORMAT, "\"chat_template\" is an object", NULL);
  write_text(dir, "tokenizer_config.json", "[]");
  expect_open(dir, BRISK_E_FORMAT, "tokenizer_config.json holds an array, not an object", NULL);
  write_text(dir, "tokenizer_config.json", "{}");
  write_text(dir, "chat_template.jinja", "bad \xff byte");
  expect_open(dir, BRISK_E_FORMAT, "chat_template.jinja is not UTF-8 text", NULL);
  remove_file(dir, "chat_template.jinja");
  /* tokenizer.json is only parsed on demand, so a broken one opens. */
  write_text(dir, "tokenizer.json", "[1, 2]");
  hf = open_ok(dir);
  assert_int_equal(brisk_hf_load_tokenizer_json(hf, &tok), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "tokenizer.json holds an array"));
  brisk_hf_close(hf);
  remove_dir(dir);
  free_specs(t);
}

static void capture_log(brisk_log_level level, const char *message, void *user_data) {
  (void)level;
  snprintf(user_data, 512, "%s", message);
}

static void test_sharded_folder(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = make_dir();
  write_text(dir, "config.json", config_json);
  size_t split = 5;
  write_shard(dir, "model-00001-of-00002.safetensors", t, 0, split, false);
  write_shard(dir, "model-00002-of-00002.safetensors", t, split, N_TENSORS, false);
  write_index(dir, t, split, "model-00001-of-00002.safetensors",
              "model-00002-of-00002.safetensors");
  brisk_hf *hf = open_ok(dir);
  check_tensors(hf, t);
  assert_int_equal(brisk_hf_n_shards(hf), 2);
  assert_string_equal(brisk_hf_shard_name(hf, 0), "model-00001-of-00002.safetensors");
  assert_string_equal(brisk_hf_shard_name(hf, 1), "model-00002-of-00002.safetensors");
  for (size_t i = 0; i < N_TENSORS; i++) {
    /* Each tensor's data lies in the shard the map names. */
    const brisk_safetensors *sh = brisk_hf_shard(hf, i < split ? 0 : 1);
    assert_ptr_equal(brisk_safetensors_find(sh, t[i].name), brisk_hf_find_tensor(hf, t[i].name));
  }
  brisk_hf_close(hf);

  /* A shard holding a tensor the map does not name: ignored, with a warning. */
  write_shard(dir, "model-00002-of-00002.safetensors", t, split, N_TENSORS, true);
  char logged[512] = "";
  assert_int_equal(brisk_set_log_callback(capture_log, logged, BRISK_LOG_WARN), BRISK_OK);
  hf = open_ok(dir);
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN), BRISK_OK);
  assert_non_null(strstr(logged, "shards hold 1 tensors that model.safetensors.index.json does "
                                 "not map"));
  check_tensors(hf, t);
  brisk_hf_close(hf);

  /* model.safetensors, when present, is preferred over the index. */
  write_shard(dir, "model.safetensors", t, 0, N_TENSORS, false);
  hf = open_ok(dir);
  assert_int_equal(brisk_hf_n_shards(hf), 1);
  check_tensors(hf, t);
  brisk_hf_close(hf);
  remove_dir(dir);
  free_specs(t);
}

static void test_bad_shards(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = make_dir();
  write_text(dir, "config.json", config_json);
  write_shard(dir, "a.safetensors", t, 0, 4, false);
  write_shard(dir, "b.safetensors", t, 4, N_TENSORS, false);

  const char *bad_names[] = {"../a.safetensors",
                             "sub/a.safetensors",
                             "/tmp/a.safetensors",
                             "a\\\\b.safetensors",
                             "..",
                             ".",
                             "",
                             "a..safetensors"};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    write_index(dir, t, 4, "a.safetensors", bad_names[i]);
    expect_open(dir, BRISK_E_FORMAT, "is not a plain file name", "model.layers.1.");
  }
  /* The named shard does not exist. */
  write_index(dir, t, 4, "a.safetensors", "c.safetensors");
  expect_open(dir, BRISK_E_IO, "c.safetensors", "No such file");
  /* A tensor is mapped to a shard that does not hold it. */
  write_index(dir, t, 5, "a.safetensors", "b.safetensors");
  expect_open(dir, BRISK_E_FORMAT,
              "tensor 'model.layers.1.self_attn.q_proj.weight' is not in its shard "
              "'a.safetensors'",
              NULL);
  /* A malformed shard fails the folder with the shard's own message. */
  static const char bad_shard[] = "\x07\0\0\0\0\0\0\0{\"x\":1}";
  write_bytes(dir, "b.safetensors", bad_shard, sizeof bad_shard - 1);
  write_index(dir, t, 4, "a.safetensors", "b.safetensors");
  expect_open(dir, BRISK_E_FORMAT, "b.safetensors", "tensor 'x'");
  /* Index structure. */
  write_text(dir, "model.safetensors.index.json", "{\"metadata\": {}}");
  expect_open(dir, BRISK_E_FORMAT, "\"weight_map\" is missing", NULL);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": []}");
  expect_open(dir, BRISK_E_FORMAT, "\"weight_map\" is an array, expected an object", NULL);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {}}");
  expect_open(dir, BRISK_E_FORMAT, "\"weight_map\" is empty", NULL);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"w\": 3}}");
  expect_open(dir, BRISK_E_FORMAT, "weight_map entry of 'w' is an integer", NULL);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"w\": \"a\\u0000b\"}}");
  expect_open(dir, BRISK_E_FORMAT, "is not a plain file name", NULL);
  write_text(dir, "model.safetensors.index.json", "7");
  expect_open(dir, BRISK_E_FORMAT, "model.safetensors.index.json holds an integer", NULL);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"w\": \"a.safetensors\"");
  expect_open(dir, BRISK_E_FORMAT, "model.safetensors.index.json", "JSON");
  remove_dir(dir);
  free_specs(t);
}

static void test_bad_folders(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  expect_open("/nonexistent/brisk-model", BRISK_E_IO, "/nonexistent/brisk-model", NULL);
  char *dir = make_dir();
  /* config.json missing, not an object, malformed. */
  write_shard(dir, "model.safetensors", t, 0, N_TENSORS, false);
  expect_open(dir, BRISK_E_IO, "config.json", "No such file");
  write_text(dir, "config.json", "[1, 2]");
  expect_open(dir, BRISK_E_FORMAT, "config.json holds an array, not an object", NULL);
  write_text(dir, "config.json", "{\n  \"a\": 1,\n  \"b\": tru\n}");
  expect_open(dir, BRISK_E_FORMAT, "config.json: invalid JSON at line 3", NULL);
  write_text(dir, "config.json", "{\"a\": 1} {");
  expect_open(dir, BRISK_E_FORMAT, "config.json: unexpected byte", NULL);
  write_text(dir, "config.json", "");
  expect_open(dir, BRISK_E_FORMAT, "config.json: empty, no JSON value", NULL);
  /* A byte-order mark and Python's NaN are accepted in config files. */
  write_text(dir, "config.json", "\xef\xbb\xbf{\"x\": NaN, \"y\": 1,}");
  brisk_hf *hf = open_ok(dir);
  brisk_hf_close(hf);
  write_text(dir, "generation_config.json", "{\"a\": 1");
  expect_open(dir, BRISK_E_FORMAT, "generation_config.json", NULL);
  remove_file(dir, "generation_config.json");
  /* config.json as a folder. */
  remove_file(dir, "config.json");
  char sub[512];
  snprintf(sub, sizeof sub, "%s/config.json", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  expect_open(dir, BRISK_E_IO, "config.json is not a regular file", NULL);
  assert_int_equal(rmdir(sub), 0);
  write_text(dir, "config.json", config_json);
  /* No weights; pickle weights only. */
  remove_file(dir, "model.safetensors");
  expect_open(dir, BRISK_E_IO, "has no model.safetensors or model.safetensors.index.json", NULL);
  write_text(dir, "pytorch_model.bin", "PK");
  expect_open(dir, BRISK_E_UNSUPPORTED, "pytorch_model.bin", NULL);
  /* The folder is a file. */
  snprintf(sub, sizeof sub, "%s/config.json", dir);
  expect_open(sub, BRISK_E_IO, "is not a folder", NULL);
  brisk_hf *out = NULL;
  assert_int_equal(brisk_hf_open(NULL, &out), BRISK_E_INVALID_ARGUMENT);
  remove_dir(dir);
  free_specs(t);
}

/* ---- allocation failures ----------------------------------------------------------- */

static brisk_status op_open(void *ctx) {
  brisk_hf *hf;
  brisk_status s = brisk_hf_open(ctx, &hf);
  if (s != BRISK_OK) return s;
  /* Accessors allocate nothing; loading tokenizer.json does. */
  int32_t ids[4];
  size_t n;
  struct json_object *tok;
  if ((s = brisk_hf_eos_ids(hf, ids, 4, &n)) == BRISK_OK &&
      (s = brisk_hf_load_tokenizer_json(hf, &tok)) == BRISK_OK)
    brisk_json_free(tok);
  brisk_hf_close(hf);
  return s;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tensor_spec t[N_TENSORS];
  make_specs(&r, t);
  char *dir = make_dir();
  write_text(dir, "config.json", config_json);
  write_text(dir, "generation_config.json", "{\"eos_token_id\": [1, 2]}");
  write_text(dir, "tokenizer_config.json", "{\"chat_template\": \"x\"}");
  write_text(dir, "tokenizer.json", "{\"model\": {}}");
  write_text(dir, "chat_template.jinja", "{{ x }}");
  write_shard(dir, "s1.safetensors", t, 0, 6, false);
  write_shard(dir, "s2.safetensors", t, 6, N_TENSORS, false);
  write_index(dir, t, 6, "s1.safetensors", "s2.safetensors");
  /* json-c's allocations use malloc and are not injected; ours unwind. */
  assert_true(test_every_allocation_fails(op_open, dir) > 20);
  write_shard(dir, "model.safetensors", t, 0, N_TENSORS, false);
  assert_true(test_every_allocation_fails(op_open, dir) > 10);
  remove_dir(dir);
  free_specs(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_file_folder),
      cmocka_unit_test(test_config_accessors),
      cmocka_unit_test(test_special_token_ids),
      cmocka_unit_test(test_tokenizer_files_and_templates),
      cmocka_unit_test(test_sharded_folder),
      cmocka_unit_test(test_bad_shards),
      cmocka_unit_test(test_bad_folders),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
