/* Encoder models of the BERT family from Hugging Face folders (BertModel
 * and the bert.* tensors of its task heads): absolute position and
 * token-type embeddings with a LayerNorm, post-LayerNorm blocks with biases
 * everywhere, an exact-GELU FFN. Also what a folder says about embeddings
 * (sentence-transformers' 1_Pooling/config.json and sentence_bert_config.json)
 * and its WordPiece tokenizer. */
#include "model/load.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "format/hf.h"
#include "format/json.h"
#include "tokenizer/wordpiece.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* Small JSON files of a folder are read up to this size. */
#define EMBED_CFG_MAX_BYTES (1u << 20)
/* vocab.txt files are read up to this size. */
#define VOCAB_TXT_MAX_BYTES (64u << 20)

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = brisk_malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static brisk_status bert_hparams(const brisk_hf *hf, brisk_hparams *hp) {
  const char *s = NULL;
  brisk_status st = brisk_hf_config_get_string(hf, "position_embedding_type", &s);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (!st && strcmp(s, "absolute"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: position_embedding_type '%s' is not supported (absolute is)",
                       s);
  if (!(st = brisk_hf_config_get_string(hf, "hidden_act", &s)) && strcmp(s, "gelu"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: hidden_act '%s' is not supported for bert (gelu is)", s);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  bool dec = false;
  if (!brisk_hf_config_get_bool(hf, "is_decoder", &dec) && dec)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "config.json: is_decoder bert models are not supported");
  double eps = 1e-12;
  int64_t types = 2;
  if (((st = brisk_hf_config_get_float(hf, "layer_norm_eps", &eps)) && st != BRISK_E_NOT_FOUND) ||
      ((st = brisk_hf_config_get_int(hf, "type_vocab_size", &types)) && st != BRISK_E_NOT_FOUND))
    return st;
  if (!(eps > 0 && eps < 1))
    return brisk_error(BRISK_E_FORMAT, "config.json: layer_norm_eps %g is out of range (0, 1)",
                       eps);
  if (types < 0 || types > 1024)
    return brisk_error(BRISK_E_FORMAT, "config.json: type_vocab_size %lld is out of range",
                       (long long)types);
  if (hp->n_head_kv != hp->n_head)
    return brisk_error(BRISK_E_UNSUPPORTED, "config.json: bert with num_key_value_heads");
  hp->rms_eps = (float)eps;
  hp->n_type_vocab = (uint32_t)types;
  hp->tied_embeddings = true;
  return BRISK_OK;
}

/* "bert." for the task-head checkpoints (BertForMaskedLM, ...), "" for
 * BertModel. */
static const char *tensor_prefix(const brisk_hf *hf) {
  return brisk_hf_find_tensor(hf, "bert.embeddings.word_embeddings.weight") ? "bert." : "";
}

brisk_status brisk_model_bind_bert(brisk_model *m, const brisk_hf *hf,
                                   const brisk_model_params *params, void *loader) {
  brisk_hparams *hp = &m->hp;
  brisk_status st = bert_hparams(hf, hp);
  if (st) return st;
  const char *pre = tensor_prefix(hf);
  int64_t d = hp->n_embd, ff = hp->n_ff;
  char name[160];
#define BINDT(fmt, cols, rows, required, field, ...)                                               \
  do {                                                                                             \
    snprintf(name, sizeof name, "%s" fmt, pre, __VA_ARGS__);                                       \
    if ((st = brisk_model_hf_bind(loader, name, cols, rows, required, &(field)))) return st;       \
  } while (0)
  BINDT("embeddings.word_embeddings.weight%s", d, hp->n_vocab, true, m->token_embd, "");
  BINDT("embeddings.position_embeddings.weight%s", d, hp->n_ctx_train, true, m->pos_embd, "");
  if (hp->n_type_vocab)
    BINDT("embeddings.token_type_embeddings.weight%s", d, hp->n_type_vocab, true, m->type_embd, "");
  BINDT("embeddings.LayerNorm.weight%s", d, 0, true, m->embd_norm, "");
  BINDT("embeddings.LayerNorm.bias%s", d, 0, true, m->embd_norm_b, "");
  m->output = m->token_embd;
  if ((st = brisk_model_alloc_layers(m))) return st;
  for (uint32_t il = 0; il < hp->n_layer; il++) {
    brisk_layer *ly = &m->layers[il];
    BINDT("encoder.layer.%u.attention.self.query.weight", d, d, true, ly->wq, il);
    BINDT("encoder.layer.%u.attention.self.query.bias", d, 0, true, ly->bq, il);
    BINDT("encoder.layer.%u.attention.self.key.weight", d, d, true, ly->wk, il);
    BINDT("encoder.layer.%u.attention.self.key.bias", d, 0, true, ly->bk, il);
    BINDT("encoder.layer.%u.attention.self.value.weight", d, d, true, ly->wv, il);
    BINDT("encoder.layer.%u.attention.self.value.bias", d, 0, true, ly->bv, il);
    BINDT("encoder.layer.%u.attention.output.dense.weight", d, d, true, ly->wo, il);
    BINDT("encoder.layer.%u.attention.output.dense.bias", d, 0, true, ly->bo, il);
    BINDT("encoder.layer.%u.attention.output.LayerNorm.weight", d, 0, true, ly->attn_norm, il);
    BINDT("encoder.layer.%u.attention.output.LayerNorm.bias", d, 0, true, ly->attn_norm_b, il);
    BINDT("encoder.layer.%u.intermediate.dense.weight", d, ff, true, ly->ffn_up, il);
    BINDT("encoder.layer.%u.intermediate.dense.bias", ff, 0, true, ly->ffn_up_b, il);
    BINDT("encoder.layer.%u.output.dense.weight", ff, d, true, ly->ffn_down, il);
    BINDT("encoder.layer.%u.output.dense.bias", d, 0, true, ly->ffn_down_b, il);
    BINDT("encoder.layer.%u.output.LayerNorm.weight", d, 0, true, ly->ffn_norm, il);
    BINDT("encoder.layer.%u.output.LayerNorm.bias", d, 0, true, ly->ffn_norm_b, il);
    if ((st = brisk_model_report_progress(params, (float)(il + 1) / (float)(hp->n_layer + 1))))
      return st;
  }
#undef BINDT
  return BRISK_OK;
}

/* ---- embedding defaults ----------------------------------------------- */

/* 1_Pooling/config.json's modes, in sentence-transformers' order of
 * precedence when several are set (only one is honoured). */
static brisk_status read_pooling(brisk_model *m, const char *dir) {
  char *path = join(dir, "1_Pooling/config.json");
  if (!path) return brisk_error_oom();
  struct json_object *root = NULL;
  brisk_status st = brisk_json_parse_file(path, EMBED_CFG_MAX_BYTES, &root);
  brisk_free(path);
  if (st == BRISK_E_IO) { /* no pooling module: the caller chooses */
    /* no pooling or config file: nothing to read */
    return BRISK_OK;
  }
  if (st) return st;
  static const struct {
    const char *key;
    int32_t pooling;
  } modes[] = {{"pooling_mode_cls_token", BRISK_EMBED_POOLING_CLS},
               {"pooling_mode_mean_tokens", BRISK_EMBED_POOLING_MEAN},
               {"pooling_mode_lasttoken", BRISK_EMBED_POOLING_LAST}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0] && !st; i++) {
    bool on = false;
    brisk_status g = brisk_json_get_bool(root, "1_Pooling/config.json", modes[i].key, &on);
    if (g && g != BRISK_E_NOT_FOUND) st = g;
    if (!g && on && !m->embed_pooling) m->embed_pooling = modes[i].pooling;
  }
  const char *others[] = {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                          "pooling_mode_weightedmean_tokens"};
  for (size_t i = 0; i < sizeof others / sizeof others[0] && !st; i++) {
    bool on = false;
    if (!brisk_json_get_bool(root, "1_Pooling/config.json", others[i], &on) && on &&
        !m->embed_pooling)
      m->embed_pooling_unsupported = true;
  }
  brisk_json_free(root);
  return st;
}

/* modules.json: a list of sentence-transformers modules; a Normalize one
 * L2-normalises the pooled vector. */
static brisk_status read_modules(brisk_model *m, const char *dir) {
  char *path = join(dir, "modules.json");
  if (!path) return brisk_error_oom();
  struct json_object *root = NULL;
  brisk_status st = brisk_json_parse_file(path, EMBED_CFG_MAX_BYTES, &root);
  brisk_free(path);
  if (st == BRISK_E_IO) return BRISK_OK; /* none: nothing to read */
  if (st) return st;
  if (!json_object_is_type(root, json_type_array)) {
    brisk_json_free(root);
    return brisk_error(BRISK_E_FORMAT, "modules.json is not an array");
  }
  size_t n = json_object_array_length(root);
  for (size_t i = 0; i < n; i++) {
    struct json_object *t = NULL;
    const char *type = json_object_object_get_ex(json_object_array_get_idx(root, i), "type", &t) &&
                               json_object_is_type(t, json_type_string)
                           ? json_object_get_string(t)
                           : "";
    if (!strcmp(type, "sentence_transformers.models.Normalize")) m->embed_normalize = true;
  }
  brisk_json_free(root);
  return BRISK_OK;
}

brisk_status brisk_model_hf_embed_config(brisk_model *m, const brisk_hf *hf) {
  const char *dir = brisk_hf_dir(hf);
  brisk_status st = read_pooling(m, dir);
  if (st || (st = read_modules(m, dir))) return st;
  char *path = join(dir, "sentence_bert_config.json");
  if (!path) return brisk_error_oom();
  struct json_object *root = NULL;
  st = brisk_json_parse_file(path, EMBED_CFG_MAX_BYTES, &root);
  brisk_free(path);
  if (st == BRISK_E_IO) {
    /* no pooling or config file: nothing to read */
    return BRISK_OK;
  }
  if (st) return st;
  int64_t max_len = 0;
  st = brisk_json_get_int(root, "sentence_bert_config.json", "max_seq_length", &max_len);
  brisk_json_free(root);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return st;
  if (max_len < 2 || max_len > (int64_t)1 << 30)
    return brisk_error(BRISK_E_FORMAT, "sentence_bert_config.json: max_seq_length %lld",
                       (long long)max_len);
  m->embed_max_tokens = (uint32_t)max_len;
  return BRISK_OK;
}

/* ---- tokenizer ---------------------------------------------------------- */

brisk_status brisk_model_hf_wordpiece(brisk_model *m, const brisk_hf *hf) {
  const char *tj = brisk_hf_tokenizer_json_path(hf);
  char *text = NULL;
  size_t len = 0;
  brisk_status st;
  if (tj) {
    if ((st = brisk_json_read_file(tj, 256u << 20, &text, &len))) return st;
    st = brisk_wordpiece_from_hf_json(text, len, &m->wordpiece);
    brisk_free(text);
    return st;
  }
  char *path = join(brisk_hf_dir(hf), "vocab.txt");
  if (!path) return brisk_error_oom();
  st = brisk_json_read_file(path, VOCAB_TXT_MAX_BYTES, &text, &len);
  brisk_free(path);
  if (st == BRISK_E_IO) {
    /* no pooling or config file: nothing to read */
    return BRISK_E_NOT_FOUND;
  }
  if (st) return st;
  bool lower = true;
  const struct json_object *tc = brisk_hf_tokenizer_config(hf);
  if (tc) brisk_json_get_bool(tc, "tokenizer_config.json", "do_lower_case", &lower);
  st = brisk_wordpiece_from_vocab_txt(text, len, lower, &m->wordpiece);
  brisk_free(text);
  return st;
}
