/* Seeds for fuzz_model: tiny models of every architecture from the test
 * writer (tests/support/test_models.c), F32 and Q8_0, with and without a
 * vocabulary, tied and not, and with RoPE scaling keys, so mutations start
 * from files that load. Each is written twice: with an even and an odd last
 * byte (full load, vocabulary only). */
#include "fuzz_seeds.h"
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void yarn(struct brisk_gguf_writer *w, const char *arch, void *user) {
  (void)user;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  brisk_gguf_writer_set_str(w, key, "yarn");
  snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
  brisk_gguf_writer_set_f32(w, key, 4.0f);
}

/* A writer's image saved as a full-load and a vocabulary-only seed. */
static int save_image(const char *dir, const char *name, brisk_gguf_writer *w) {
  void *data = NULL;
  size_t n = 0;
  int bad = brisk_gguf_writer_write_memory(w, &data, &n) != BRISK_OK;
  brisk_gguf_writer_free(w);
  if (bad) return 1;
  unsigned char *buf = malloc(n + 1);
  if (!buf) return 1;
  memcpy(buf, data, n);
  brisk_free(data);
  char out[256];
  buf[n] = 0;
  snprintf(out, sizeof out, "%s-full", name);
  bad = fuzz_seed_save(dir, out, buf, n + 1);
  buf[n] = 1;
  snprintf(out, sizeof out, "%s-vocab", name);
  bad = bad || fuzz_seed_save(dir, out, buf, n + 1);
  free(buf);
  return bad;
}

/* An F32 tensor of small deterministic values (norm weights near 1). */
static void add_f32(brisk_gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1) {
  uint64_t ne[2] = {ne0, ne1}, n = ne0 * (ne1 ? ne1 : 1);
  float *v = malloc(n * sizeof *v);
  if (!v) return;
  bool norm = strstr(name, "norm.weight") != NULL;
  for (uint64_t i = 0; i < n; i++)
    v[i] = (norm ? 1.0f : 0.0f) + 0.05f * (float)((i * 7) % 11) - 0.25f;
  brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, ne1 ? 2 : 1, ne, v, n * sizeof *v);
  free(v);
}

/* A BERT encoder as llama.cpp's converter writes it: bert.* keys with the
 * pooling type, a WordPiece vocabulary in its phantom-space spelling. */
static int save_bert(const char *dir) {
  brisk_gguf_writer *w = NULL;
  if (brisk_gguf_writer_create(3, 0, &w)) return 1;
  static const char *const toks[] = {"[PAD]",
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
  const uint32_t nv = sizeof toks / sizeof toks[0], d = 8, ff = 8, ctx = 16;
  int32_t types[sizeof toks / sizeof toks[0]];
  for (uint32_t i = 0; i < nv; i++) types[i] = i < 5 ? 3 : 1;
  brisk_gguf_writer_set_str(w, "general.architecture", "bert");
  brisk_gguf_writer_set_u32(w, "bert.context_length", ctx);
  brisk_gguf_writer_set_u32(w, "bert.embedding_length", d);
  brisk_gguf_writer_set_u32(w, "bert.block_count", 1);
  brisk_gguf_writer_set_u32(w, "bert.feed_forward_length", ff);
  brisk_gguf_writer_set_u32(w, "bert.attention.head_count", 2);
  brisk_gguf_writer_set_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f);
  brisk_gguf_writer_set_bool(w, "bert.attention.causal", false);
  brisk_gguf_writer_set_u32(w, "bert.pooling_type", 1);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2);
  brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
  brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, nv);
  brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, nv);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
  brisk_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", true);
  add_f32(w, "token_embd.weight", d, nv);
  add_f32(w, "position_embd.weight", d, ctx);
  add_f32(w, "token_types.weight", d, 2);
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
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    snprintf(name, sizeof name, "blk.0.%s", vec[i]);
    add_f32(w, name, d, 0);
  }
  add_f32(w, "blk.0.ffn_up.weight", d, ff);
  add_f32(w, "blk.0.ffn_up.bias", ff, 0);
  add_f32(w, "blk.0.ffn_down.weight", ff, d);
  return save_image(dir, "bert-f32", w);
}

/* phi3 with LongRoPE as llama.cpp's converter writes it: fused qkv and
 * gate/up, rope_factors_long / rope_factors_short and the original
 * context and attention factor keys. */
static int save_phi3_longrope(const char *dir) {
  brisk_gguf_writer *w = NULL;
  if (brisk_gguf_writer_create(3, 0, &w)) return 1;
  const uint32_t nv = 40, d = 8, ff = 8;
  brisk_gguf_writer_set_str(w, "general.architecture", "phi3");
  brisk_gguf_writer_set_u32(w, "phi3.context_length", 64);
  brisk_gguf_writer_set_u32(w, "phi3.embedding_length", d);
  brisk_gguf_writer_set_u32(w, "phi3.block_count", 1);
  brisk_gguf_writer_set_u32(w, "phi3.feed_forward_length", ff);
  brisk_gguf_writer_set_u32(w, "phi3.attention.head_count", 2);
  brisk_gguf_writer_set_u32(w, "phi3.attention.head_count_kv", 2);
  brisk_gguf_writer_set_u32(w, "phi3.rope.dimension_count", 4);
  brisk_gguf_writer_set_u32(w, "phi3.rope.scaling.original_context_length", 2);
  brisk_gguf_writer_set_f32(w, "phi3.rope.scaling.attn_factor", 1.4f);
  add_f32(w, "token_embd.weight", d, nv);
  add_f32(w, "output_norm.weight", d, 0);
  add_f32(w, "output.weight", d, nv);
  float longf[2] = {1.5f, 4.0f}, shortf[2] = {1.0f, 1.25f};
  uint64_t ne = 2;
  brisk_gguf_writer_add_tensor(w, "rope_factors_long.weight", BRISK_DTYPE_F32, 1, &ne, longf,
                               sizeof longf);
  brisk_gguf_writer_add_tensor(w, "rope_factors_short.weight", BRISK_DTYPE_F32, 1, &ne, shortf,
                               sizeof shortf);
  add_f32(w, "blk.0.attn_norm.weight", d, 0);
  add_f32(w, "blk.0.attn_qkv.weight", d, 3 * d);
  add_f32(w, "blk.0.attn_output.weight", d, d);
  add_f32(w, "blk.0.ffn_norm.weight", d, 0);
  add_f32(w, "blk.0.ffn_up.weight", d, 2 * ff);
  add_f32(w, "blk.0.ffn_down.weight", ff, d);
  return save_image(dir, "phi3-longrope", w);
}

static int save(const char *dir, const char *name, const test_model_spec *s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.tmp", dir, name);
  test_rng r = test_rng_seeded(name);
  if (test_model_write(path, s, &r, NULL)) return 1;
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  int bad = fread(buf, 1, (size_t)n, f) != (size_t)n;
  fclose(f);
  unlink(path);
  char out[256];
  buf[n] = 0; /* an extra even byte: a full load */
  snprintf(out, sizeof out, "%s-full", name);
  bad = bad || fuzz_seed_save(dir, out, buf, (size_t)n + 1);
  buf[n] = 1;
  snprintf(out, sizeof out, "%s-vocab", name);
  bad = bad || fuzz_seed_save(dir, out, buf, (size_t)n + 1);
  free(buf);
  return bad;
}

int fuzz_write_seeds(const char *dir) {
  const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral"};
  int bad = 0;
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    test_model_spec s = test_model_default(archs[a]);
    s.n_vocab = 40, s.n_embd = 8, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 1, s.head_dim = 4,
    s.n_ff = 8, s.n_ctx = 64;
    if (s.n_expert) s.n_expert = 2, s.n_expert_used = 1;
    if (s.sliding_window) s.sliding_window = 4;
    char name[64];
    snprintf(name, sizeof name, "%s-f32", archs[a]);
    bad |= save(dir, name, &s);
    s.tied = true;
    s.no_vocab = true;
    snprintf(name, sizeof name, "%s-tied-novocab", archs[a]);
    bad |= save(dir, name, &s);
  }
  /* Latent attention: a dense layer, then a MoE one with a shared expert. */
  test_model_spec ds = test_model_default("deepseek2");
  ds.n_vocab = 40, ds.n_embd = 8, ds.n_layer = 2, ds.n_head = 2, ds.n_head_kv = 2, ds.head_dim = 6,
  ds.rope_dim = 2, ds.kv_lora_rank = 4, ds.v_head_dim = 4, ds.n_ff = 8, ds.n_ctx = 64,
  ds.n_expert = 2, ds.n_expert_used = 1;
  bad |= save(dir, "deepseek2-f32", &ds);
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 40, s.n_embd = 32, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 2, s.head_dim = 16,
  s.n_ff = 32, s.n_ctx = 64, s.weight_type = BRISK_DTYPE_Q8_0;
  bad |= save(dir, "llama-q8_0", &s);
  s.weight_type = BRISK_DTYPE_F32;
  s.n_embd = 8, s.head_dim = 4, s.n_ff = 8;
  s.extra = yarn;
  bad |= save(dir, "llama-yarn", &s);
  float f[2] = {1.0f, 4.0f};
  s.extra = NULL;
  s.rope_freqs = f;
  s.vocab_tokens = 30;
  bad |= save(dir, "llama-freqs-padded", &s);
  bad |= save_bert(dir);
  bad |= save_phi3_longrope(dir);
  return bad;
}
