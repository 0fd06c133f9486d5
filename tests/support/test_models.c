#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "format/gguf.h"
#include "quant/quant.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

test_model_spec test_model_default(const char *arch) {
  test_model_spec s = {
      .arch = arch,
      .n_vocab = 96,
      .n_embd = 64,
      .n_layer = 2,
      .n_head = 4,
      .n_head_kv = 2,
      .head_dim = 16,
      .n_ff = 96,
      .n_ctx = 256,
      .weight_type = BRISK_DTYPE_F32,
  };
  if (!strcmp(arch, "mixtral")) {
    s.n_expert = 4;
    s.n_expert_used = 2;
  }
  if (!strcmp(arch, "mistral")) s.sliding_window = 32;
  if (!strcmp(arch, "qwen3")) s.head_dim = 32; /* explicit, != n_embd / n_head */
  if (!strcmp(arch, "deepseek2")) {
    s.head_dim = 24; /* nope 16 + rope 8 */
    s.n_head_kv = s.n_head;
    s.kv_lora_rank = 32;
    s.rope_dim = 8;
    s.v_head_dim = 16;
    s.n_expert = 4;
    s.n_expert_used = 2;
  }
  return s;
}

typedef struct writer_ctx {
  brisk_gguf_writer *w;
  const test_model_spec *spec;
  test_rng *rng;
  uint64_t n_params;
  brisk_status st;
} writer_ctx;

/* Adds a tensor of ne = [cols, rows, n3] filled with small random values. */
static void add(writer_ctx *c, const char *name, uint32_t type, uint64_t cols, uint64_t rows,
                uint64_t n3) {
  if (c->st) return;
  if (c->spec->omit_tensor && !strcmp(c->spec->omit_tensor, name)) return;
  if (c->spec->misshape_tensor && !strcmp(c->spec->misshape_tensor, name)) rows += 1;
  uint64_t ne[3] = {cols, rows, n3};
  uint32_t n_dims = n3 > 1 ? 3 : rows > 1 ? 2 : 1;
  uint64_t row_bytes;
  if (!brisk_dtype_row_bytes(type, cols, &row_bytes)) type = BRISK_DTYPE_F32;
  brisk_dtype_row_bytes(type, cols, &row_bytes);
  uint64_t n_rows = rows * n3, bytes = row_bytes * n_rows;
  unsigned char *data = malloc(bytes ? bytes : 1);
  float *vals = malloc(cols * sizeof(float));
  for (uint64_t r = 0; r < n_rows; r++) {
    unsigned char *row = data + r * row_bytes;
    for (uint64_t i = 0; i < cols; i++) {
      vals[i] = (float)(test_rng_normal(c->rng) * 0.05);
      if (n_dims == 1) vals[i] += 1.0f; /* norm weights near one */
    }
    if (brisk_quant_can_quantize(type)) {
      brisk_quantize_row(type, vals, row, (int64_t)cols);
    } else {
      /* Q2_K/Q3_K have no quantizer: random bytes, only for load tests. */
      for (uint64_t i = 0; i < row_bytes; i++) row[i] = (unsigned char)test_rng_u64(c->rng);
    }
  }
  free(vals);
  c->n_params += cols * rows * n3;
  c->st = brisk_gguf_writer_add_tensor(c->w, name, type, n_dims, ne, data, bytes);
  free(data);
}

/* A tiny SPM vocabulary: specials, U+2581 and printable ASCII as single
 * characters, then two-character merges, scored so that merges win. */
static void write_vocab(brisk_gguf_writer *w, uint32_t n_vocab) {
  char **tokens = calloc(n_vocab, sizeof *tokens);
  float *scores = calloc(n_vocab, sizeof *scores);
  int32_t *types = calloc(n_vocab, sizeof *types);
  uint32_t i = 0;
  const char *specials[] = {"<unk>", "<s>", "</s>"};
  for (; i < 3 && i < n_vocab; i++) {
    tokens[i] = strdup(specials[i]);
    types[i] = i == 0 ? 2 : 3; /* UNKNOWN, CONTROL */
  }
  if (i < n_vocab) tokens[i++] = strdup("\xe2\x96\x81");
  for (int ch = 'a'; ch <= 'z' && i < n_vocab; ch++) {
    char t[2] = {(char)ch, 0};
    tokens[i++] = strdup(t);
  }
  for (int ch = '!'; ch <= '~' && i < n_vocab; ch++) {
    if (ch >= 'a' && ch <= 'z') continue;
    char t[2] = {(char)ch, 0};
    tokens[i++] = strdup(t);
  }
  for (int a = 'a'; i < n_vocab; a++) {
    for (int b = 'a'; b <= 'z' && i < n_vocab; b++) {
      char t[3] = {(char)a, (char)b, 0};
      scores[i] = 1.0f + (float)(i % 7);
      tokens[i++] = strdup(t);
    }
  }
  for (uint32_t k = 0; k < n_vocab; k++) {
    if (scores[k] == 0.0f) scores[k] = -(float)k;
    if (types[k] == 0) types[k] = 1; /* NORMAL */
  }
  brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
  brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, n_vocab);
  brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, scores, n_vocab);
  brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, n_vocab);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
  brisk_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
  for (uint32_t k = 0; k < n_vocab; k++) free(tokens[k]);
  free(tokens);
  free(scores);
  free(types);
}

brisk_status test_model_write(const char *path, const test_model_spec *s, test_rng *rng,
                              uint64_t *n_params) {
  writer_ctx c = {.spec = s, .rng = rng};
  brisk_status st = brisk_gguf_writer_create(3, s->alignment ? s->alignment : 32, &c.w);
  if (st) return st;
  char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", s->arch, suffix), key)
  brisk_gguf_writer_set_str(c.w, "general.architecture", s->arch);
  brisk_gguf_writer_set_str(c.w, "general.name", "brisk test model");
  brisk_gguf_writer_set_u32(c.w, KEY("context_length"), s->n_ctx);
  brisk_gguf_writer_set_u32(c.w, KEY("embedding_length"), s->n_embd);
  brisk_gguf_writer_set_u32(c.w, KEY("block_count"), s->n_layer);
  brisk_gguf_writer_set_u32(c.w, KEY("feed_forward_length"), s->n_ff);
  brisk_gguf_writer_set_u32(c.w, KEY("attention.head_count"), s->n_head);
  brisk_gguf_writer_set_u32(c.w, KEY("attention.head_count_kv"), s->n_head_kv);
  brisk_gguf_writer_set_f32(c.w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
  brisk_gguf_writer_set_f32(c.w, KEY("rope.freq_base"),
                            s->rope_base != 0.0f ? s->rope_base : 10000.0f);
  const bool mla = s->kv_lora_rank > 0;
  if (s->head_dim != s->n_embd / s->n_head || mla) {
    brisk_gguf_writer_set_u32(c.w, KEY("attention.key_length"), s->head_dim);
    brisk_gguf_writer_set_u32(c.w, KEY("attention.value_length"),
                              mla ? s->v_head_dim : s->head_dim);
  }
  if (mla) {
    brisk_gguf_writer_set_u32(c.w, KEY("attention.kv_lora_rank"), s->kv_lora_rank);
    brisk_gguf_writer_set_u32(c.w, KEY("rope.dimension_count"), s->rope_dim);
    brisk_gguf_writer_set_u32(c.w, KEY("leading_dense_block_count"), 1);
    brisk_gguf_writer_set_u32(c.w, KEY("expert_feed_forward_length"), s->n_ff / 2);
    brisk_gguf_writer_set_u32(c.w, KEY("expert_shared_count"), 1);
  }
  if (s->n_expert) {
    brisk_gguf_writer_set_u32(c.w, KEY("expert_count"), s->n_expert);
    brisk_gguf_writer_set_u32(c.w, KEY("expert_used_count"), s->n_expert_used);
  }
  if (s->sliding_window)
    brisk_gguf_writer_set_u32(c.w, KEY("attention.sliding_window"), s->sliding_window);
  if (s->shared_kv_layers)
    brisk_gguf_writer_set_u32(c.w, KEY("attention.shared_kv_layers"), s->shared_kv_layers);
#undef KEY
  if (!s->no_vocab) write_vocab(c.w, s->vocab_tokens ? s->vocab_tokens : s->n_vocab);
  if (s->extra) s->extra(c.w, s->arch, s->extra_user);
  uint32_t wt = s->weight_type, f32 = BRISK_DTYPE_F32;
  uint64_t d = s->n_embd, q = (uint64_t)s->n_head * s->head_dim,
           kv = (uint64_t)s->n_head_kv * s->head_dim, ff = s->n_ff;
  add(&c, "token_embd.weight", wt, d, s->n_vocab, 1);
  add(&c, "output_norm.weight", f32, d, 1, 1);
  if (!s->tied) add(&c, "output.weight", wt, d, s->n_vocab, 1);
  if (s->rope_freqs && !c.st) {
    uint64_t ne = s->head_dim / 2;
    c.st = brisk_gguf_writer_add_tensor(c.w, "rope_freqs.weight", BRISK_DTYPE_F32, 1, &ne,
                                        s->rope_freqs, ne * sizeof(float));
  }
  bool bias = !strcmp(s->arch, "qwen2"), qk_norm = !strcmp(s->arch, "qwen3");
  for (uint32_t l = 0; l < s->n_layer; l++) {
    char name[96];
#define T(suffix) (snprintf(name, sizeof name, "blk.%u.%s", l, suffix), name)
    add(&c, T("attn_norm.weight"), f32, d, 1, 1);
    add(&c, T("attn_q.weight"), wt, d, q, 1);
    if (mla) {
      uint64_t r = s->kv_lora_rank, hv = (uint64_t)s->n_head * s->v_head_dim;
      add(&c, T("attn_kv_a_mqa.weight"), wt, d, r + s->rope_dim, 1);
      add(&c, T("attn_kv_a_norm.weight"), f32, r, 1, 1);
      add(&c, T("attn_kv_b.weight"), wt, r,
          (uint64_t)s->n_head * (s->head_dim - s->rope_dim + s->v_head_dim), 1);
      add(&c, T("attn_output.weight"), wt, hv, d, 1);
    } else {
      add(&c, T("attn_k.weight"), wt, d, kv, 1);
      add(&c, T("attn_v.weight"), wt, d, kv, 1);
      add(&c, T("attn_output.weight"), wt, q, d, 1);
    }
    if (bias) {
      add(&c, T("attn_q.bias"), f32, q, 1, 1);
      add(&c, T("attn_k.bias"), f32, kv, 1, 1);
      add(&c, T("attn_v.bias"), f32, kv, 1, 1);
    }
    if (qk_norm) {
      add(&c, T("attn_q_norm.weight"), f32, s->head_dim, 1, 1);
      add(&c, T("attn_k_norm.weight"), f32, s->head_dim, 1, 1);
    }
    add(&c, T("ffn_norm.weight"), f32, d, 1, 1);
    if (mla && l > 0) { /* deepseek2: experts of n_ff / 2 and a shared one */
      uint64_t fe = ff / 2;
      add(&c, T("ffn_gate_inp.weight"), f32, d, s->n_expert, 1);
      add(&c, T("ffn_gate_exps.weight"), wt, d, fe, s->n_expert);
      add(&c, T("ffn_up_exps.weight"), wt, d, fe, s->n_expert);
      add(&c, T("ffn_down_exps.weight"), wt, fe, d, s->n_expert);
      add(&c, T("ffn_gate_shexp.weight"), wt, d, fe, 1);
      add(&c, T("ffn_up_shexp.weight"), wt, d, fe, 1);
      add(&c, T("ffn_down_shexp.weight"), wt, fe, d, 1);
    } else if (s->n_expert && !mla) {
      add(&c, T("ffn_gate_inp.weight"), f32, d, s->n_expert, 1);
      add(&c, T("ffn_gate_exps.weight"), wt, d, ff, s->n_expert);
      add(&c, T("ffn_up_exps.weight"), wt, d, ff, s->n_expert);
      add(&c, T("ffn_down_exps.weight"), wt, ff, d, s->n_expert);
    } else {
      add(&c, T("ffn_gate.weight"), wt, d, ff, 1);
      add(&c, T("ffn_up.weight"), wt, d, ff, 1);
      add(&c, T("ffn_down.weight"), wt, ff, d, 1);
    }
#undef T
  }
  st = c.st ? c.st : brisk_gguf_writer_write_file(c.w, path);
  brisk_gguf_writer_free(c.w);
  if (n_params) *n_params = c.n_params;
  return st;
}

brisk_status test_model_load(const char *dir, const char *name, const test_model_spec *spec,
                             test_rng *rng, brisk_model **out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  brisk_status st = test_model_write(path, spec, rng, NULL);
  return st ? st : brisk_model_load(path, NULL, out);
}

const char *test_tmpdir(void) {
  static char buf[64];
  snprintf(buf, sizeof buf, "/tmp/brisk-test-XXXXXX");
  return mkdtemp(buf);
}

void test_tmpdir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}
