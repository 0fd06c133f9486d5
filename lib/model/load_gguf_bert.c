/* BERT-family encoders from GGUF files as llama.cpp's converter writes them
 * (general.architecture "bert"): the same model the Hugging Face loader
 * builds from a folder (model/load_bert.c), from llama.cpp's tensor names
 * and keys. The WordPiece vocabulary is read with the other tokenizers
 * (model/source.c, tokenizer/wordpiece_gguf.c). */
#include "model/load.h"

#include "core/error.h"
#include "format/gguf.h"

#include <stdio.h>

/* llama.cpp's pooling types ({arch}.pooling_type). */
enum { GGUF_POOL_NONE = 0, GGUF_POOL_MEAN, GGUF_POOL_CLS, GGUF_POOL_LAST, GGUF_POOL_RANK };

static brisk_status key_u32(const brisk_gguf *g, const char *suffix, bool required, uint32_t *out) {
  char key[96];
  snprintf(key, sizeof key, "bert.%s", suffix);
  brisk_status st = brisk_gguf_get_u32(g, key, out);
  if (st == BRISK_E_NOT_FOUND && !required) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND) return brisk_error(st, "GGUF key '%s' is missing", key);
  return st;
}

static brisk_status hparams(const brisk_gguf *g, brisk_hparams *hp) {
  brisk_status st;
  if ((st = key_u32(g, "context_length", true, &hp->n_ctx_train)) ||
      (st = key_u32(g, "embedding_length", true, &hp->n_embd)) ||
      (st = key_u32(g, "block_count", true, &hp->n_layer)) ||
      (st = key_u32(g, "feed_forward_length", true, &hp->n_ff)) ||
      (st = key_u32(g, "attention.head_count", true, &hp->n_head)))
    return st;
  hp->n_head_kv = hp->n_head;
  if ((st = key_u32(g, "attention.head_count_kv", false, &hp->n_head_kv))) return st;
  if (hp->n_head_kv != hp->n_head)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: bert.attention.head_count_kv %u differs from head_count %u",
                       hp->n_head_kv, hp->n_head);
  st = brisk_gguf_get_f32(g, "bert.attention.layer_norm_epsilon", &hp->rms_eps);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(st, "GGUF key 'bert.attention.layer_norm_epsilon' is missing");
  if (st) return st;
  bool causal = false;
  st = brisk_gguf_get_bool(g, "bert.attention.causal", &causal);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if (causal)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: bert.attention.causal is true; bert encoders attend both ways");
  if (hp->n_head == 0) return brisk_error(BRISK_E_FORMAT, "GGUF: bert.attention.head_count is 0");
  hp->head_dim = hp->n_embd / hp->n_head;
  hp->rope_dim = hp->head_dim; /* unused: positions are embedded */
  hp->rope_base = 10000.0f;
  hp->rope_factor = 1.0f;
  hp->tied_embeddings = true;
  return BRISK_OK;
}

/* bert.pooling_type into the model's embedding default; llama.cpp's
 * embedding tools L2-normalise unless told otherwise, and the converter
 * keeps no trace of a sentence-transformers Normalize module, so a GGUF
 * encoder normalises by default. */
static brisk_status pooling(const brisk_gguf *g, brisk_model *m) {
  uint32_t p = GGUF_POOL_NONE;
  brisk_status st = key_u32(g, "pooling_type", false, &p);
  if (st) return st;
  switch (p) {
  case GGUF_POOL_NONE: break; /* per-token vectors in llama.cpp: brisk's default applies */
  case GGUF_POOL_MEAN: m->embed_pooling = BRISK_EMBED_POOLING_MEAN; break;
  case GGUF_POOL_CLS: m->embed_pooling = BRISK_EMBED_POOLING_CLS; break;
  case GGUF_POOL_LAST: m->embed_pooling = BRISK_EMBED_POOLING_LAST; break;
  case GGUF_POOL_RANK: m->embed_pooling_unsupported = true; break; /* a reranker's head */
  default:
    return brisk_error(BRISK_E_FORMAT, "GGUF: bert.pooling_type %u is not a pooling type (0-4)", p);
  }
  m->embed_normalize = true;
  return BRISK_OK;
}

/* The token-type embedding: tokenizer.ggml.token_type_count rows (else the
 * tensor's), optional as in llama.cpp. */
static brisk_status bind_types(brisk_model *m, const brisk_gguf *g) {
  uint32_t count = 0;
  brisk_status st = brisk_gguf_get_u32(g, "tokenizer.ggml.token_type_count", &count);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, "token_types.weight");
  if (!t) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND) count = t->n_dims >= 2 && t->ne[1] <= 1024 ? (uint32_t)t->ne[1] : 0;
  if (count == 0 || count > 1024)
    return brisk_error(BRISK_E_FORMAT,
                       "GGUF: token_types.weight needs 1 to 1024 token types "
                       "(tokenizer.ggml.token_type_count %u)",
                       count);
  m->hp.n_type_vocab = count;
  return brisk_model_gguf_bind(m, g, "token_types.weight", m->hp.n_embd, count, true,
                               &m->type_embd);
}

static brisk_status bind_layer(brisk_model *m, const brisk_gguf *g, uint32_t il) {
  brisk_layer *ly = &m->layers[il];
  const int64_t d = m->hp.n_embd, ff = m->hp.n_ff;
  char name[96];
  brisk_status st;
#define BIND(suffix, cols, rows, field)                                                            \
  do {                                                                                             \
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);                                          \
    if ((st = brisk_model_gguf_bind(m, g, name, cols, rows, true, &ly->field))) return st;         \
  } while (0)
  snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", il);
  if (brisk_gguf_find_tensor(g, name))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: a fused '%s' in a bert model is not supported (separate attn_q, "
                       "attn_k and attn_v are)",
                       name);
  BIND("attn_q.weight", d, d, wq);
  BIND("attn_q.bias", d, 0, bq);
  BIND("attn_k.weight", d, d, wk);
  BIND("attn_k.bias", d, 0, bk);
  BIND("attn_v.weight", d, d, wv);
  BIND("attn_v.bias", d, 0, bv);
  BIND("attn_output.weight", d, d, wo);
  BIND("attn_output.bias", d, 0, bo);
  BIND("attn_output_norm.weight", d, 0, attn_norm);
  BIND("attn_output_norm.bias", d, 0, attn_norm_b);
  BIND("ffn_up.weight", d, ff, ffn_up);
  BIND("ffn_up.bias", ff, 0, ffn_up_b);
  BIND("ffn_down.weight", ff, d, ffn_down);
  BIND("ffn_down.bias", d, 0, ffn_down_b);
  BIND("layer_output_norm.weight", d, 0, ffn_norm);
  BIND("layer_output_norm.bias", d, 0, ffn_norm_b);
#undef BIND
  return BRISK_OK;
}

brisk_status brisk_model_load_gguf_bert(brisk_model *m, const brisk_gguf *g,
                                        const brisk_model_params *params) {
  brisk_hparams *hp = &m->hp;
  brisk_status st = hparams(g, hp);
  if (st || (st = pooling(g, m))) return st;
  const brisk_gguf_tensor *embd = brisk_gguf_find_tensor(g, "token_embd.weight");
  if (!embd) return brisk_error(BRISK_E_FORMAT, "tensor 'token_embd.weight' is missing");
  if (embd->n_dims != 2 || embd->ne[1] > UINT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "tensor 'token_embd.weight' must be 2-D [n_embd, n_vocab]");
  hp->n_vocab = (uint32_t)embd->ne[1];
  if ((st = brisk_model_check_hparams(hp))) return st;
  const int64_t d = hp->n_embd;
  if ((st = brisk_model_gguf_bind(m, g, "token_embd.weight", d, hp->n_vocab, true,
                                  &m->token_embd)) ||
      (st = brisk_model_gguf_bind(m, g, "position_embd.weight", d, hp->n_ctx_train, true,
                                  &m->pos_embd)) ||
      (st = bind_types(m, g)) ||
      (st = brisk_model_gguf_bind(m, g, "token_embd_norm.weight", d, 0, true, &m->embd_norm)) ||
      (st = brisk_model_gguf_bind(m, g, "token_embd_norm.bias", d, 0, true, &m->embd_norm_b)))
    return st;
  m->output = m->token_embd;
  if ((st = brisk_model_alloc_layers(m))) return st;
  for (uint32_t il = 0; il < hp->n_layer; il++) {
    if ((st = bind_layer(m, g, il))) return st;
    if ((st = brisk_model_report_progress(params, (float)(il + 1) / (float)(hp->n_layer + 1))))
      return st;
  }
  return BRISK_OK;
}
