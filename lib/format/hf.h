/* A Hugging Face model folder: config.json (required), the optional
 * generation_config.json, tokenizer_config.json, tokenizer.json and chat
 * template files, and weights in model.safetensors or in shards listed by
 * model.safetensors.index.json ({"weight_map": {tensor: file}}).
 *
 * Everything in the folder is untrusted. Opening parses the small JSON files
 * (each size-bounded), validates shard names (plain file names in the folder:
 * no '/', '\', or ".."), opens and validates every shard, and checks that
 * each mapped tensor is in the shard the map names. tokenizer.json, which can
 * be tens of megabytes, is only located; brisk_hf_load_tokenizer_json()
 * parses it on demand.
 *
 * Tensor names are the checkpoint's own (model.layers.0.self_attn.q_proj.weight);
 * the model loader maps them to its layout through brisk_hf_find_tensor().
 * The handle is immutable after open: every accessor below may be called
 * concurrently. JSON trees come from json-c (see format/json.h). */
#ifndef BRISK_FORMAT_HF_H
#define BRISK_FORMAT_HF_H

#include "brisk.h"
#include "format/safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

/* Size limits for the files read at open (and tokenizer.json on demand). */
#define BRISK_HF_MAX_CONFIG_BYTES (16u << 20)     /* config, generation config, templates */
#define BRISK_HF_MAX_INDEX_BYTES (64u << 20)      /* tokenizer_config, the shard index */
#define BRISK_HF_MAX_TOKENIZER_BYTES (512u << 20) /* tokenizer.json */

typedef struct brisk_hf brisk_hf;

/* Opens the folder `dir`. Errors: BRISK_E_IO (the folder, config.json, a
 * named shard or the weights cannot be opened; errno's text and the path in
 * the message), BRISK_E_FORMAT (a malformed JSON file or safetensors shard, a
 * JSON file that is not an object, a bad shard name, a tensor missing from
 * its shard), BRISK_E_UNSUPPORTED (only pickle weights, pytorch_model.bin, or
 * an unsupported dtype in a shard), BRISK_E_OUT_OF_MEMORY. Weights are taken
 * from model.safetensors when present, else from the index. *out is set only
 * on BRISK_OK. */
brisk_status brisk_hf_open(const char *dir, brisk_hf **out);
/* NULL is a no-op. Invalidates every pointer obtained from the handle. */
void brisk_hf_close(brisk_hf *hf);

/* The folder path as given to brisk_hf_open. */
const char *brisk_hf_dir(const brisk_hf *hf);

/* ---- config.json ---------------------------------------------------------- */

/* The parsed config.json (a JSON object), owned by the handle. */
const struct json_object *brisk_hf_config(const brisk_hf *hf);
/* Typed lookups in config.json by key or dotted path ("rope_scaling.factor",
 * "text_config.num_hidden_layers"): BRISK_E_NOT_FOUND when absent or null,
 * BRISK_E_FORMAT when of the wrong type; see format/json.h for each type's
 * rules. Strings stay valid until brisk_hf_close. */
brisk_status brisk_hf_config_get_int(const brisk_hf *hf, const char *key, int64_t *out);
brisk_status brisk_hf_config_get_float(const brisk_hf *hf, const char *key, double *out);
brisk_status brisk_hf_config_get_bool(const brisk_hf *hf, const char *key, bool *out);
brisk_status brisk_hf_config_get_string(const brisk_hf *hf, const char *key, const char **out);
brisk_status brisk_hf_config_get_int_array(const brisk_hf *hf, const char *key, int64_t *out,
                                           size_t cap, size_t *n);

/* ---- other JSON files --------------------------------------------------------- */

/* Parsed generation_config.json / tokenizer_config.json, or NULL when the
 * file is absent. Query with the brisk_json_get_* functions, whose root may
 * be NULL (then BRISK_E_NOT_FOUND). */
const struct json_object *brisk_hf_generation_config(const brisk_hf *hf);
const struct json_object *brisk_hf_tokenizer_config(const brisk_hf *hf);

/* Path of tokenizer.json, or NULL when absent. */
const char *brisk_hf_tokenizer_json_path(const brisk_hf *hf);
/* Parses tokenizer.json (at most BRISK_HF_MAX_TOKENIZER_BYTES) into a new
 * tree the caller frees with brisk_json_free(). BRISK_E_NOT_FOUND when
 * absent, else as brisk_json_parse_file, plus BRISK_E_FORMAT if it is not an
 * object. */
brisk_status brisk_hf_load_tokenizer_json(const brisk_hf *hf, struct json_object **out);

/* The chat template text, or NULL. With name == NULL: chat_template.jinja if
 * present (as transformers, it overrides the config), else
 * tokenizer_config.json's "chat_template" (a string, or from a list of
 * {"name", "template"} the one named "default"), else chat_template.json's
 * "chat_template". With a name: that entry of the list. Valid until
 * brisk_hf_close. */
const char *brisk_hf_chat_template(const brisk_hf *hf, const char *name);

/* Token ids stored under `key` ("eos_token_id", "bos_token_id",
 * "pad_token_id"): an integer or a list of integers, looked up in
 * generation_config.json, then config.json, then config.json's
 * "text_config"; the first file that sets the key wins. Each id must be in
 * [0, INT32_MAX]. *n receives the count; BRISK_E_BUFFER_TOO_SMALL if it
 * exceeds cap (nothing written). BRISK_E_NOT_FOUND if no file sets it. */
brisk_status brisk_hf_token_ids(const brisk_hf *hf, const char *key, int32_t *out, size_t cap,
                                size_t *n);
/* Shorthands: all eos ids; the single bos id (BRISK_E_FORMAT if a list of
 * several). */
brisk_status brisk_hf_eos_ids(const brisk_hf *hf, int32_t *out, size_t cap, size_t *n);
brisk_status brisk_hf_bos_id(const brisk_hf *hf, int32_t *out);

/* ---- tensors ------------------------------------------------------------------ */

/* Tensors in file order (single file) or weight-map order (sharded). The
 * pointers and their data stay valid until brisk_hf_close. */
size_t brisk_hf_n_tensors(const brisk_hf *hf);
const brisk_safetensors_tensor *brisk_hf_tensor_at(const brisk_hf *hf, size_t i);
/* Binary search across all shards; NULL if absent. */
const brisk_safetensors_tensor *brisk_hf_find_tensor(const brisk_hf *hf, const char *name);
/* Sum of n_bytes over the tensors. */
uint64_t brisk_hf_tensor_bytes(const brisk_hf *hf);
/* The safetensors files opened, by file name, sorted. */
size_t brisk_hf_n_shards(const brisk_hf *hf);
const char *brisk_hf_shard_name(const brisk_hf *hf, size_t i);
const brisk_safetensors *brisk_hf_shard(const brisk_hf *hf, size_t i);

#endif
