/* BERT encoders and phi3 LongRoPE from GGUF files laid out as llama.cpp's
 * converter writes them: a small valid file of each loads (the BERT one
 * tokenizes its phantom-space vocabulary as Hugging Face's WordPiece would
 * and embeds; the phi3 one gets the LongRoPE fields and decodes), and every
 * new key and tensor is validated at load: a bad value is refused with a
 * message naming it, leaking nothing; running out of memory anywhere in the
 * load is BRISK_E_OUT_OF_MEMORY. The numbers themselves are checked against
 * transformers by model_embed_reference, model_hf_reference and
 * model_hf_converter. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "model/embed_tok.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a test file gets wrong (all 0: a valid file). */
typedef struct file_opts {
  /* bert */
  bool causal, no_eps, fused_qkv, no_unk, tokens_not_strings, short_types;
  uint32_t pooling, n_type_rows, type_count, head_count_kv, embd_rows, unk_id;
  /* phi3 */
  const char *arch;
  bool only_long, f16_factors, no_orig;
  uint32_t n_factors, orig;
  float long0, attn;
} file_opts;

static void add_f32(brisk_gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1) {
  uint64_t ne[2] = {ne0, ne1}, n = ne0 * (ne1 ? ne1 : 1);
  float *v = malloc(n * sizeof *v);
  assert_non_null(v);
  bool norm = strstr(name, "norm.weight") != NULL;
  for (uint64_t i = 0; i < n; i++)
    v[i] = (norm ? 1.0f : 0.0f) + 0.05f * (float)((i * 7) % 11) - 0.25f;
  assert_int_equal(
      brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, ne1 ? 2 : 1, ne, v, n * sizeof *v),
      BRISK_OK);
  free(v);
}

static const char *const bert_tokens[] = {"[PAD]",
                                          "[UNK]",
                                          "[CLS]",
                                          "[SEP]",
                                          "[MASK]",
                                          "\xe2\x96\x81hello",
                                          "\xe2\x96\x81world",
                                          "lo",
                                          "\xe2\x96\x81,",
                                          "\xe2\x96\x81!",
                                          "s",
                                          "\xe2\x96\x81h",
                                          "e",
                                          "l",
                                          "o"};
#define N_BERT_TOKENS 15

static void *bert_image(const file_opts *o, size_t *size) {
  brisk_gguf_writer *w = NULL;
  assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
  const uint32_t d = 8, ff = 8, ctx = 16;
  int32_t types[N_BERT_TOKENS];
  for (uint32_t i = 0; i < N_BERT_TOKENS; i++) types[i] = i < 5 ? 3 : 1;
  brisk_gguf_writer_set_str(w, "general.architecture", "bert");
  brisk_gguf_writer_set_u32(w, "bert.context_length", ctx);
  brisk_gguf_writer_set_u32(w, "bert.embedding_length", d);
  brisk_gguf_writer_set_u32(w, "bert.block_count", 1);
  brisk_gguf_writer_set_u32(w, "bert.feed_forward_length", ff);
  brisk_gguf_writer_set_u32(w, "bert.attention.head_count", 2);
  if (o->head_count_kv)
    brisk_gguf_writer_set_u32(w, "bert.attention.head_count_kv", o->head_count_kv);
  if (!o->no_eps) brisk_gguf_writer_set_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f);
  brisk_gguf_writer_set_bool(w, "bert.attention.causal", o->causal);
  brisk_gguf_writer_set_u32(w, "bert.pooling_type", o->pooling ? o->pooling : 1);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count",
                            o->type_count ? o->type_count : 2);
  brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
  const char *toks[N_BERT_TOKENS];
  memcpy(toks, bert_tokens, sizeof toks);
  if (o->no_unk) toks[1] = "[UNUSED]";
  if (o->tokens_not_strings)
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_INT32, types, N_BERT_TOKENS);
  else
    brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, N_BERT_TOKENS);
  brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types,
                            o->short_types ? N_BERT_TOKENS - 1 : N_BERT_TOKENS);
  if (o->unk_id) brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", o->unk_id);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
  brisk_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", true);
  add_f32(w, "token_embd.weight", d, o->embd_rows ? o->embd_rows : N_BERT_TOKENS);
  add_f32(w, "position_embd.weight", d, ctx);
  add_f32(w, "token_types.weight", d, o->n_type_rows ? o->n_type_rows : 2);
  add_f32(w, "token_embd_norm.weight", d, 0);
  add_f32(w, "token_embd_norm.bias", d, 0);
  static const char *const vec[] = {"attn_q.bias",
                                    "attn_k.bias",
                                    "attn_v.bias",
                                    "attn_output.bias",
                                    "attn_output_norm.weight",
                                    "attn_output_norm.bias",
                                    "ffn_down.bias",
                                    "layer_output_norm.weight",
                                    "layer_output_norm.bias"};
  static const char *const mat[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                    "attn_output.weight"};
  char name[64];
  for (size_t i = 0; i < sizeof mat / sizeof mat[0]; i++) {
    snprintf(name, sizeof name, "blk.0.%s", mat[i]);
    add_f32(w, name, d, d);
  }
  if (o->fused_qkv) add_f32(w, "blk.0.attn_qkv.weight", d, 3 * d);
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    snprintf(name, sizeof name, "blk.0.%s", vec[i]);
    add_f32(w, name, d, 0);
  }
  add_f32(w, "blk.0.ffn_up.weight", d, ff);
  add_f32(w, "blk.0.ffn_up.bias", ff, 0);
  add_f32(w, "blk.0.ffn_down.weight", ff, d);
  void *data = NULL;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &data, size), BRISK_OK);
  brisk_gguf_writer_free(w);
  return data;
}

static void *phi3_image(const file_opts *o, size_t *size) {
  brisk_gguf_writer *w = NULL;
  assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
  const uint32_t nv = 40, d = 8, ff = 8;
  const char *arch = o->arch ? o->arch : "phi3";
  char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
  brisk_gguf_writer_set_str(w, "general.architecture", arch);
  brisk_gguf_writer_set_u32(w, KEY("context_length"), 64);
  brisk_gguf_writer_set_u32(w, KEY("embedding_length"), d);
  brisk_gguf_writer_set_u32(w, KEY("block_count"), 1);
  brisk_gguf_writer_set_u32(w, KEY("feed_forward_length"), ff);
  brisk_gguf_writer_set_u32(w, KEY("attention.head_count"), 2);
  brisk_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 2);
  brisk_gguf_writer_set_u32(w, KEY("rope.dimension_count"), 4);
  if (!o->no_orig)
    brisk_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                              o->orig ? o->orig : 2);
  brisk_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), o->attn != 0 ? o->attn : 1.4f);
#undef KEY
  add_f32(w, "token_embd.weight", d, nv);
  add_f32(w, "output_norm.weight", d, 0);
  add_f32(w, "output.weight", d, nv);
  float longf[3] = {o->long0 != 0 ? o->long0 : 1.5f, 4.0f, 2.0f}, shortf[3] = {1.0f, 1.25f, 1.0f};
  uint64_t ne = o->n_factors ? o->n_factors : 2;
  if (o->f16_factors) {
    uint16_t h[3] = {0x3c00, 0x3c00, 0x3c00}; /* 1.0 */
    brisk_gguf_writer_add_tensor(w, "rope_factors_long.weight", BRISK_DTYPE_F16, 1, &ne, h, ne * 2);
  } else {
    brisk_gguf_writer_add_tensor(w, "rope_factors_long.weight", BRISK_DTYPE_F32, 1, &ne, longf,
                                 ne * 4);
  }
  if (!o->only_long)
    brisk_gguf_writer_add_tensor(w, "rope_factors_short.weight", BRISK_DTYPE_F32, 1, &ne, shortf,
                                 ne * 4);
  add_f32(w, "blk.0.attn_norm.weight", d, 0);
  if (!strcmp(arch, "phi3")) {
    add_f32(w, "blk.0.attn_qkv.weight", d, 3 * d);
  } else {
    add_f32(w, "blk.0.attn_q.weight", d, d);
    add_f32(w, "blk.0.attn_k.weight", d, d);
    add_f32(w, "blk.0.attn_v.weight", d, d);
  }
  add_f32(w, "blk.0.attn_output.weight", d, d);
  add_f32(w, "blk.0.ffn_norm.weight", d, 0);
  if (!strcmp(arch, "phi3")) {
    add_f32(w, "blk.0.ffn_up.weight", d, 2 * ff);
  } else {
    add_f32(w, "blk.0.ffn_gate.weight", d, ff);
    add_f32(w, "blk.0.ffn_up.weight", d, ff);
  }
  add_f32(w, "blk.0.ffn_down.weight", ff, d);
  void *data = NULL;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &data, size), BRISK_OK);
  brisk_gguf_writer_free(w);
  return data;
}

static void expect_refused(void *data, size_t size, brisk_status want, const char *needle) {
  brisk_model *m = NULL;
  uint64_t live = brisk_alloc_live_count();
  brisk_status st = brisk_model_load_from_memory(data, size, NULL, &m);
  if (st != want || !strstr(brisk_last_error(), needle))
    fprintf(stderr, "want %d with '%s', got %d: %s\n", want, needle, st, brisk_last_error());
  assert_int_equal(st, want);
  assert_non_null(strstr(brisk_last_error(), needle));
  assert_null(m);
  assert_int_equal(brisk_alloc_live_count(), live);
  brisk_free(data);
}

static void expect_ids(const brisk_model *m, const char *text, const int32_t *want, size_t n) {
  int32_t *ids = NULL;
  size_t got = 0;
  assert_int_equal(brisk_model_embed_tokens(m, text, strlen(text), 64, &ids, &got), BRISK_OK);
  assert_int_equal(got, n);
  assert_memory_equal(ids, want, n * sizeof *want);
  brisk_free(ids);
}

static void test_bert_loads(void **state) {
  (void)state;
  file_opts o = {0};
  size_t size;
  void *data = bert_image(&o, &size);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load_from_memory(data, size, NULL, &m), BRISK_OK);
  assert_int_equal(m->hp.arch, BRISK_ARCH_BERT);
  assert_int_equal(m->hp.n_type_vocab, 2);
  assert_int_equal(m->embed_pooling, BRISK_EMBED_POOLING_MEAN);
  assert_true(m->embed_normalize);
  /* Word starts lose their U+2581, continuations get "##" back: "hellos"
   * is hello ##s, "Hello," two words, a special token in the text itself. */
  const int32_t a[] = {2, 5, 8, 6, 9, 3}, b[] = {2, 5, 10, 3}, c[] = {2, 11, 12, 13, 13, 3, 1, 3};
  expect_ids(m, "Hello, world!", a, 6);
  expect_ids(m, "hellos", b, 4);
  expect_ids(m, "HELL[SEP]xyz", c, 8);
  const char *texts[] = {"hello world", "hellos!"};
  float v[16];
  assert_int_equal(brisk_embed(m, NULL, texts, 2, v, 16), BRISK_OK);
  for (int t = 0; t < 2; t++) { /* normalised by default */
    double s = 0;
    for (int i = 0; i < 8; i++) s += (double)v[t * 8 + i] * v[t * 8 + i];
    assert_true(fabs(s - 1) < 1e-5);
  }
  brisk_model_free(m);
  brisk_free(data);
}

static void test_bert_refused(void **state) {
  (void)state;
  size_t size;
  void *d;
  d = bert_image(&(file_opts){.causal = true}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "causal");
  d = bert_image(&(file_opts){.pooling = 9}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "pooling_type 9");
  d = bert_image(&(file_opts){.no_eps = true}, &size);
  expect_refused(d, size, BRISK_E_NOT_FOUND, "layer_norm_epsilon");
  d = bert_image(&(file_opts){.type_count = 3}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "token_types.weight");
  d = bert_image(&(file_opts){.type_count = 5000, .n_type_rows = 2}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "token_type_count 5000");
  d = bert_image(&(file_opts){.head_count_kv = 1}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "head_count_kv");
  d = bert_image(&(file_opts){.fused_qkv = true}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "attn_qkv");
  d = bert_image(&(file_opts){.embd_rows = 10}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "WordPiece vocabulary has 15 tokens");
  d = bert_image(&(file_opts){.tokens_not_strings = true}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "tokenizer.ggml.tokens");
  d = bert_image(&(file_opts){.short_types = true}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "tokenizer.ggml.token_type");
  d = bert_image(&(file_opts){.unk_id = 99}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "unknown_token_id 99");
  d = bert_image(&(file_opts){.no_unk = true}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "no unknown token");
}

/* A reranker's pooling (rank) loads; embedding needs a pooling given. */
static void test_bert_rank_pooling(void **state) {
  (void)state;
  size_t size;
  void *data = bert_image(&(file_opts){.pooling = 4}, &size);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load_from_memory(data, size, NULL, &m), BRISK_OK);
  const char *texts[] = {"hello"};
  float v[8];
  assert_int_equal(brisk_embed(m, NULL, texts, 1, v, 8), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "pooling"));
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = BRISK_EMBED_POOLING_CLS;
  assert_int_equal(brisk_embed(m, &p, texts, 1, v, 8), BRISK_OK);
  brisk_model_free(m);
  brisk_free(data);
}

typedef struct load_ctx {
  const void *data;
  size_t size;
} load_ctx;

static brisk_status load_once(void *p) {
  load_ctx *c = p;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load_from_memory(c->data, c->size, NULL, &m);
  brisk_model_free(m);
  return st;
}

static void test_out_of_memory(void **state) {
  (void)state;
  load_ctx c;
  void *data = bert_image(&(file_opts){0}, &c.size);
  c.data = data;
  assert_true(test_every_allocation_fails(load_once, &c) > 0);
  brisk_free(data);
  data = phi3_image(&(file_opts){0}, &c.size);
  c.data = data;
  assert_true(test_every_allocation_fails(load_once, &c) > 0);
  brisk_free(data);
}

static void test_phi3_longrope_loads(void **state) {
  (void)state;
  size_t size;
  void *data = phi3_image(&(file_opts){0}, &size);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load_from_memory(data, size, NULL, &m), BRISK_OK);
  assert_int_equal(m->hp.rope_scaling, BRISK_HP_ROPE_SCALING_LONGROPE);
  assert_int_equal(m->hp.rope_orig_ctx, 2);
  assert_true(fabsf(m->hp.yarn_attn_factor - 1.4f) < 1e-7f);
  assert_non_null(m->rope_freqs.data);
  assert_non_null(m->rope_long.data);
  float f[2];
  memcpy(f, m->rope_long.data, sizeof f);
  assert_true(f[0] == 1.5f && f[1] == 4.0f);
  memcpy(f, m->rope_freqs.data, sizeof f);
  assert_true(f[0] == 1.0f && f[1] == 1.25f);
  /* A prompt past the original context: the long factors run. */
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 16;
  cp.block_size = 4;
  cp.n_threads = 1;
  cp.max_batch_tokens = 4;
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &ctx), BRISK_OK);
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, 3 * i + 1, i, 0, i == 3);
  assert_int_equal(brisk_decode(ctx, b), BRISK_OK);
  const float *l = brisk_get_logits(ctx, 3);
  assert_non_null(l);
  for (int i = 0; i < 40; i++) assert_true(isfinite(l[i]));
  brisk_batch_free(b);
  brisk_context_free(ctx);
  brisk_model_free(m);
  brisk_free(data);
}

static void test_phi3_longrope_refused(void **state) {
  (void)state;
  size_t size;
  void *d;
  d = phi3_image(&(file_opts){.long0 = NAN}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "rope_factors_long.weight");
  d = phi3_image(&(file_opts){.long0 = -2.0f}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "not finite and positive");
  d = phi3_image(&(file_opts){.n_factors = 3}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "rope_factors_short.weight");
  d = phi3_image(&(file_opts){.only_long = true}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "rope_factors_short");
  d = phi3_image(&(file_opts){.f16_factors = true}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "f16");
  d = phi3_image(&(file_opts){.orig = 1}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "original_context_length 1");
  d = phi3_image(&(file_opts){.no_orig = true}, &size);
  expect_refused(d, size, BRISK_E_NOT_FOUND, "original_context_length");
  d = phi3_image(&(file_opts){.attn = -1.0f}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "attn_factor");
  d = phi3_image(&(file_opts){.attn = INFINITY}, &size);
  expect_refused(d, size, BRISK_E_FORMAT, "attn_factor");
  d = phi3_image(&(file_opts){.arch = "llama"}, &size);
  expect_refused(d, size, BRISK_E_UNSUPPORTED, "phi3");
}

int main(void) {
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bert_loads),          cmocka_unit_test(test_bert_refused),
      cmocka_unit_test(test_bert_rank_pooling),   cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_phi3_longrope_loads), cmocka_unit_test(test_phi3_longrope_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
