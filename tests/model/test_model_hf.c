/* Hugging Face folders: the same random arrays written as a folder
 * (config.json + safetensors, q/k as the checkpoint stores them) and as a
 * GGUF file (q/k rows permuted the way llama.cpp's converter does) load into
 * the same weights; only the q/k row order and the RoPE pairing differ. */
#include "ref_forward.h"
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "backend/backend.h"
#include "format/gguf.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "model/hf_rope.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { D = 64, N_HEAD = 4, N_KV = 2, HD = 16, FF = 96, VOCAB = 80, LAYERS = 2, N_EXP = 3 };

typedef struct array {
  char gguf[96], hf[96];
  uint64_t rows, cols; /* rows 1 for vectors */
  int permute_heads;   /* q/k: heads to permute for GGUF; 0 otherwise */
  int stacked;         /* expert index for stacked GGUF tensors, -1 otherwise */
  float *data;         /* [rows][cols] */
} array;

typedef struct arrays {
  const char *arch;
  int n_tensors;
  array t[128];
} arrays;

static void add(arrays *a, test_rng *r, const char *gguf, const char *hf, uint64_t rows,
                uint64_t cols, int permute_heads, int stacked) {
  int i = a->n_tensors++;
  snprintf(a->t[i].gguf, sizeof a->t[i].gguf, "%s", gguf);
  snprintf(a->t[i].hf, sizeof a->t[i].hf, "%s", hf);
  a->t[i].rows = rows;
  a->t[i].cols = cols;
  a->t[i].permute_heads = permute_heads;
  a->t[i].stacked = stacked;
  a->t[i].data = malloc(rows * cols * sizeof(float));
  for (uint64_t k = 0; k < rows * cols; k++)
    a->t[i].data[k] =
        (float)(rows == 1 ? 1.0 + 0.1 * test_rng_normal(r) : 0.05 * test_rng_normal(r));
}

static void build(arrays *a, const char *arch, test_rng *r) {
  memset(a, 0, sizeof *a);
  a->arch = arch;
  bool bias = !strcmp(arch, "qwen2"), moe = !strcmp(arch, "mixtral");
  add(a, r, "token_embd.weight", "model.embed_tokens.weight", VOCAB, D, 0, -1);
  add(a, r, "output_norm.weight", "model.norm.weight", 1, D, 0, -1);
  add(a, r, "output.weight", "lm_head.weight", VOCAB, D, 0, -1);
  char g[96], h[96];
  for (int l = 0; l < LAYERS; l++) {
#define T(gs, hs, rows, cols, perm)                                                                \
  (snprintf(g, sizeof g, "blk.%d.%s", l, gs), snprintf(h, sizeof h, "model.layers.%d.%s", l, hs),  \
   add(a, r, g, h, rows, cols, perm, -1))
    T("attn_norm.weight", "input_layernorm.weight", 1, D, 0);
    T("attn_q.weight", "self_attn.q_proj.weight", N_HEAD * HD, D, N_HEAD);
    T("attn_k.weight", "self_attn.k_proj.weight", N_KV * HD, D, N_KV);
    T("attn_v.weight", "self_attn.v_proj.weight", N_KV * HD, D, 0);
    T("attn_output.weight", "self_attn.o_proj.weight", D, N_HEAD * HD, 0);
    if (bias) {
      T("attn_q.bias", "self_attn.q_proj.bias", 1, N_HEAD * HD, 0);
      T("attn_k.bias", "self_attn.k_proj.bias", 1, N_KV * HD, 0);
      T("attn_v.bias", "self_attn.v_proj.bias", 1, N_KV * HD, 0);
    }
    T("ffn_norm.weight", "post_attention_layernorm.weight", 1, D, 0);
    if (moe) {
      T("ffn_gate_inp.weight", "block_sparse_moe.gate.weight", N_EXP, D, 0);
      for (int e = 0; e < N_EXP; e++) {
        static const char *gg[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
        static const char *hw[] = {"w1", "w3", "w2"};
        for (int k = 0; k < 3; k++) {
          snprintf(g, sizeof g, "blk.%d.%s.weight", l, gg[k]);
          snprintf(h, sizeof h, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e,
                   hw[k]);
          add(a, r, g, h, k == 2 ? D : FF, k == 2 ? FF : D, 0, e);
        }
      }
    } else {
      T("ffn_gate.weight", "mlp.gate_proj.weight", FF, D, 0);
      T("ffn_up.weight", "mlp.up_proj.weight", FF, D, 0);
      T("ffn_down.weight", "mlp.down_proj.weight", D, FF, 0);
    }
#undef T
  }
}

static void free_arrays(arrays *a) {
  for (int i = 0; i < a->n_tensors; i++) free(a->t[i].data);
}

/* llama.cpp's converter: within each head, rows (i, i + hd/2) become
 * (2i, 2i + 1), so that adjacent-pair RoPE rotates what rotate_half did. */
static void permute_rows(const float *src, float *dst, uint64_t n_heads, uint64_t rows,
                         uint64_t cols) {
  uint64_t hd = rows / n_heads;
  for (uint64_t h = 0; h < n_heads; h++)
    for (uint64_t j = 0; j < hd / 2; j++)
      for (uint64_t s = 0; s < 2; s++)
        memcpy(dst + (h * hd + 2 * j + s) * cols, src + (h * hd + s * hd / 2 + j) * cols,
               cols * sizeof(float));
}

static void write_gguf(const arrays *a, const char *path) {
  brisk_gguf_writer *w;
  assert_int_equal(brisk_gguf_writer_create(3, 32, &w), BRISK_OK);
  char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", a->arch, s), key)
  brisk_gguf_writer_set_str(w, "general.architecture", a->arch);
  brisk_gguf_writer_set_u32(w, KEY("context_length"), 512);
  brisk_gguf_writer_set_u32(w, KEY("embedding_length"), D);
  brisk_gguf_writer_set_u32(w, KEY("block_count"), LAYERS);
  brisk_gguf_writer_set_u32(w, KEY("feed_forward_length"), FF);
  brisk_gguf_writer_set_u32(w, KEY("attention.head_count"), N_HEAD);
  brisk_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), N_KV);
  brisk_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
  brisk_gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f);
  if (!strcmp(a->arch, "mixtral")) {
    brisk_gguf_writer_set_u32(w, KEY("expert_count"), N_EXP);
    brisk_gguf_writer_set_u32(w, KEY("expert_used_count"), 2);
  }
#undef KEY
  /* GGUF llama q/k are permuted; qwen2 keeps HF order and NeoX RoPE. */
  bool permute = strcmp(a->arch, "qwen2") != 0;
  for (int i = 0; i < a->n_tensors; i++) {
    const array *t = &a->t[i];
    if (t->stacked > 0) continue; /* written with expert 0 */
    uint64_t rows = t->rows, cols = t->cols, n3 = t->stacked == 0 ? N_EXP : 1;
    float *data = malloc(rows * cols * n3 * sizeof(float));
    if (t->stacked == 0) {
      for (int e = 0; e < N_EXP; e++)
        memcpy(data + e * rows * cols, a->t[i + 3 * e].data, rows * cols * 4);
    } else if (t->permute_heads && permute) {
      permute_rows(t->data, data, (uint64_t)t->permute_heads, rows, cols);
    } else {
      memcpy(data, t->data, rows * cols * 4);
    }
    uint64_t ne[3] = {cols, rows, n3};
    uint32_t nd = n3 > 1 ? 3 : rows > 1 ? 2 : 1;
    assert_int_equal(brisk_gguf_writer_add_tensor(w, t->gguf, BRISK_DTYPE_F32, nd, ne, data,
                                                  rows * cols * n3 * 4),
                     BRISK_OK);
    free(data);
  }
  assert_int_equal(brisk_gguf_writer_write_file(w, path), BRISK_OK);
  brisk_gguf_writer_free(w);
}

/* Matrices as `mat_type` (F32, F16 or BF16), vectors as BF16 when the
 * matrices are not F32 (the loader converts those to float32). */
static void write_hf(const arrays *a, const char *dir, uint32_t mat_type) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f,
          "{\"model_type\": \"%s\", \"vocab_size\": %d, \"hidden_size\": %d, "
          "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
          "\"intermediate_size\": %d, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, "
          "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false%s}",
          a->arch, VOCAB, D, LAYERS, N_HEAD, N_KV, FF,
          !strcmp(a->arch, "mixtral") ? ", \"num_local_experts\": 3, \"num_experts_per_tok\": 2"
                                      : "");
  fclose(f);
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  for (int i = 0; i < a->n_tensors; i++) {
    const array *t = &a->t[i];
    uint64_t n = t->rows * t->cols;
    uint32_t type = t->rows == 1
                        ? (mat_type == BRISK_DTYPE_F32 ? BRISK_DTYPE_F32 : BRISK_DTYPE_BF16)
                        : mat_type;
    size_t elt = type == BRISK_DTYPE_F32 ? 4 : 2;
    unsigned char *data = malloc(n * elt);
    for (uint64_t k = 0; k < n; k++) {
      if (type == BRISK_DTYPE_F32)
        memcpy(data + 4 * k, &t->data[k], 4);
      else {
        uint16_t hv =
            type == BRISK_DTYPE_F16 ? brisk_f32_to_f16(t->data[k]) : brisk_f32_to_bf16(t->data[k]);
        memcpy(data + 2 * k, &hv, 2);
      }
    }
    uint64_t shape[2] = {t->rows, t->cols};
    assert_int_equal(brisk_safetensors_writer_add_tensor(w, t->hf, type, t->rows == 1 ? 1 : 2,
                                                         t->rows == 1 ? shape + 1 : shape, data,
                                                         n * elt),
                     BRISK_OK);
    free(data);
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  assert_int_equal(brisk_safetensors_writer_write_file(w, path), BRISK_OK);
  brisk_safetensors_writer_free(w);
}

/* Element (r, c) of a bound weight as float. */
static float elem(const brisk_weight *w, int64_t r, int64_t c) {
  const char *row = (const char *)w->data + (uint64_t)r * w->row_bytes;
  if (w->type == BRISK_DTYPE_F32) {
    float v;
    memcpy(&v, row + 4 * c, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, row + 2 * c, 2);
  return w->type == BRISK_DTYPE_F16 ? brisk_f16_to_f32(h) : brisk_bf16_to_f32(h);
}

/* HF row r of a q/k weight holds GGUF row perm(r). */
static int64_t gguf_row(int64_t r, int64_t hd) {
  int64_t h = r / hd, i = r % hd;
  return h * hd + (i < hd / 2 ? 2 * i : 2 * (i - hd / 2) + 1);
}

static void compare(const brisk_weight *hf, const brisk_weight *gg, int64_t permute_hd,
                    double tol) {
  assert_int_equal(hf->rows, gg->rows);
  assert_int_equal(hf->cols, gg->cols);
  for (int64_t r = 0; r < hf->rows; r++)
    for (int64_t c = 0; c < hf->cols; c++) {
      float a = elem(hf, r, c), b = elem(gg, permute_hd ? gguf_row(r, permute_hd) : r, c);
      if (!(fabs((double)a - (double)b) <= tol * (1.0 + fabs((double)b))))
        fail_msg("%s vs %s at (%lld, %lld): %g vs %g", hf->name, gg->name, (long long)r,
                 (long long)c, (double)a, (double)b);
    }
}

static void check_arch(const char *arch, uint32_t mat_type) {
  test_rng r = test_rng_seeded(arch);
  arrays a;
  build(&a, arch, &r);
  const char *dir = test_tmpdir();
  char gpath[512];
  snprintf(gpath, sizeof gpath, "%s/model.gguf", dir);
  write_gguf(&a, gpath);
  write_hf(&a, dir, mat_type);
  brisk_model *mg = NULL, *mh = NULL;
  assert_int_equal(brisk_model_load(gpath, NULL, &mg), BRISK_OK);
  brisk_status st = brisk_model_load(dir, NULL, &mh);
  if (st) fail_msg("%s: %s", arch, brisk_last_error());
  assert_string_equal(brisk_model_architecture(mh), arch);
  assert_int_equal(brisk_model_n_params(mh), brisk_model_n_params(mg));
  assert_int_equal(mh->hp.n_expert, mg->hp.n_expert);
  assert_true(mh->hp.rms_eps == mg->hp.rms_eps);
  assert_int_equal(mh->hp.head_dim, HD);
  /* The one intended difference: HF checkpoints pair dimensions NeoX-style. */
  assert_int_equal(mh->hp.rope_style, BRISK_HP_ROPE_NEOX);
  bool gguf_neox = !strcmp(arch, "qwen2");
  assert_int_equal(mg->hp.rope_style, gguf_neox ? BRISK_HP_ROPE_NEOX : BRISK_HP_ROPE_NORMAL);
  int64_t qk_perm = gguf_neox ? 0 : HD;
  /* bf16 keeps 8 significant bits (vectors are bf16 whenever matrices are not f32). */
  double tol = mat_type == BRISK_DTYPE_F32 ? 0 : 8e-3;
  compare(&mh->token_embd, &mg->token_embd, 0, tol);
  compare(&mh->output, &mg->output, 0, tol);
  compare(&mh->output_norm, &mg->output_norm, 0, tol);
  for (int l = 0; l < LAYERS; l++) {
    const brisk_layer *h = &mh->layers[l], *g = &mg->layers[l];
    compare(&h->attn_norm, &g->attn_norm, 0, tol);
    compare(&h->wq, &g->wq, qk_perm, tol);
    compare(&h->wk, &g->wk, qk_perm, tol);
    compare(&h->wv, &g->wv, 0, tol);
    compare(&h->wo, &g->wo, 0, tol);
    compare(&h->ffn_norm, &g->ffn_norm, 0, tol);
    if (h->bq.data) {
      compare(&h->bq, &g->bq, 0, tol);
      compare(&h->bk, &g->bk, 0, tol);
      compare(&h->bv, &g->bv, 0, tol);
    }
    if (mh->hp.n_expert) {
      compare(&h->moe_router, &g->moe_router, 0, tol);
      for (int e = 0; e < N_EXP; e++) {
        compare(&h->expert_gate[e], &g->expert_gate[e], 0, tol);
        compare(&h->expert_up[e], &g->expert_up[e], 0, tol);
        compare(&h->expert_down[e], &g->expert_down[e], 0, tol);
      }
    } else {
      compare(&h->ffn_gate, &g->ffn_gate, 0, tol);
      compare(&h->ffn_down, &g->ffn_down, 0, tol);
    }
    if (mat_type != BRISK_DTYPE_F32) assert_int_equal(h->attn_norm.type, BRISK_DTYPE_F32);
  }
  /* The proof of the q/k handling: both models compute the same logits
   * (up to float32 summation order), the HF one with NeoX pairing on
   * unpermuted rows, the GGUF one with adjacent pairs on permuted rows. */
  {
    brisk_context_params cp;
    brisk_context_params_init(&cp);
    cp.kv_type = BRISK_KV_F32;
    cp.kv_tokens = 64;
    cp.n_threads = 1;
    brisk_context *ch = NULL, *cg = NULL;
    brisk_batch *b = NULL;
    assert_int_equal(brisk_context_create(mh, &cp, &ch), BRISK_OK);
    assert_int_equal(brisk_context_create(mg, &cp, &cg), BRISK_OK);
    assert_int_equal(brisk_batch_create(16, &b), BRISK_OK);
    for (int i = 0; i < 12; i++) brisk_batch_add(b, (int32_t)(test_rng_u64(&r) % VOCAB), i, 0, 1);
    assert_int_equal(brisk_decode(ch, b), BRISK_OK);
    assert_int_equal(brisk_decode(cg, b), BRISK_OK);
    /* bf16/f16 checkpoints differ from the f32 GGUF by their own rounding
     * (seen up to 7e-3); a wrong pairing moves f32 by 1.6e-2, bf16 by 3e-2. */
    double bound = mat_type == BRISK_DTYPE_F32 ? 1e-5 : 1.5e-2;
    for (int i = 0; i < 12; i++) {
      const float *lh = brisk_get_logits(ch, i), *lg = brisk_get_logits(cg, i);
      double num = 0, den = 0;
      for (int v = 0; v < VOCAB; v++) {
        num += ((double)lh[v] - lg[v]) * ((double)lh[v] - lg[v]);
        den += (double)lg[v] * lg[v];
      }
      if (!(sqrt(num / den) < bound))
        fail_msg("%s: position %d logits differ by %g (relative L2)", arch, i, sqrt(num / den));
    }
    brisk_batch_free(b);
    brisk_context_free(ch);
    brisk_context_free(cg);
  }
  /* Metadata lookups read config.json; tensors list the checkpoint's. */
  char buf[64];
  assert_int_equal(brisk_model_meta(mh, "model_type", buf, sizeof buf, NULL), BRISK_OK);
  assert_string_equal(buf, arch);
  assert_int_equal(brisk_model_meta(mh, "hidden_size", buf, sizeof buf, NULL), BRISK_OK);
  assert_string_equal(buf, "64");
  assert_int_equal(brisk_model_n_tensors(mh), a.n_tensors);
  brisk_tensor_info ti = {.struct_size = sizeof ti};
  assert_int_equal(brisk_model_tensor(mh, 0, &ti), BRISK_OK);
  assert_true(ti.n_dims >= 1);
  brisk_model_free(mh);
  brisk_model_free(mg);
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

static void test_llama_f32(void **state) {
  (void)state;
  check_arch("llama", BRISK_DTYPE_F32);
}
static void test_llama_bf16(void **state) {
  (void)state;
  check_arch("llama", BRISK_DTYPE_BF16);
}
static void test_qwen2_f16(void **state) {
  (void)state;
  check_arch("qwen2", BRISK_DTYPE_F16);
}
static void test_mixtral_f32(void **state) {
  (void)state;
  check_arch("mixtral", BRISK_DTYPE_F32);
}

static void test_hf_errors(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_errors");
  arrays a;
  build(&a, "llama", &r);
  const char *dir = test_tmpdir();
  write_hf(&a, dir, BRISK_DTYPE_F32);
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"model_type\": \"gpt_bigcode\", \"vocab_size\": 80}");
  fclose(f);
  brisk_model *m = NULL;
  uint64_t live = brisk_alloc_live_count();
  assert_int_equal(brisk_model_load(dir, NULL, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "gpt_bigcode"));
  f = fopen(path, "w");
  fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 80, \"hidden_size\": 64}");
  fclose(f);
  assert_int_equal(brisk_model_load(dir, NULL, &m), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "num_hidden_layers"));
  /* A shape that disagrees with config.json names the tensor. */
  f = fopen(path, "w");
  fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 80, \"hidden_size\": 64, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
             "\"intermediate_size\": 96}");
  fclose(f);
  assert_int_equal(brisk_model_load(dir, NULL, &m), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "k_proj"));
  assert_null(m);
  assert_int_equal(brisk_model_load("/nonexistent-folder/", NULL, &m), BRISK_E_IO);
  assert_int_equal(brisk_alloc_live_count(), live);
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

/* Rewrites config.json with a rope_scaling object; loads the folder. */
static brisk_status load_with_scaling(const char *dir, const char *scaling, brisk_model **m) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f,
          "{\"model_type\": \"llama\", \"vocab_size\": %d, \"hidden_size\": %d, "
          "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
          "\"intermediate_size\": %d, \"max_position_embeddings\": 512, \"rope_scaling\": %s}",
          VOCAB, D, LAYERS, N_HEAD, N_KV, FF, scaling);
  fclose(f);
  return brisk_model_load(dir, NULL, m);
}

/* RoPE scaling a decode would refuse is refused at load, naming the values;
 * sane values load and decode. */
static void test_hf_rope_validation(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_rope_validation");
  arrays a;
  build(&a, "llama", &r);
  const char *dir = test_tmpdir();
  write_hf(&a, dir, BRISK_DTYPE_F32);
  brisk_model *m = NULL;
  uint64_t live = brisk_alloc_live_count();
  static const struct {
    const char *scaling, *needle;
  } bad[] = {
      {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
       "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 128}",
       "low_freq_factor 4 < high_freq_factor 4"},
      {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
       "\"high_freq_factor\": 1, \"original_max_position_embeddings\": 128}",
       "low_freq_factor 4 < high_freq_factor 1"},
      {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": -1, "
       "\"high_freq_factor\": 4}",
       "low_freq_factor -1"},
      {"{\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": -32, \"beta_slow\": 1}",
       "beta_fast -32"},
      {"{\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": 32, \"beta_slow\": 0}",
       "beta_slow 0"},
      {"{\"rope_type\": \"linear\", \"factor\": -2}", "rope scaling factor -2"},
      {"{\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": "
       "3000000000}",
       "rope original context 3000000000"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    brisk_status st = load_with_scaling(dir, bad[i].scaling, &m);
    if (st != BRISK_E_FORMAT || !strstr(brisk_last_error(), bad[i].needle))
      fprintf(stderr, "case %zu: got %d: %s\n", i, st, brisk_last_error());
    assert_int_equal(st, BRISK_E_FORMAT);
    assert_non_null(strstr(brisk_last_error(), bad[i].needle));
    assert_null(m);
  }
  assert_int_equal(brisk_alloc_live_count(), live);
  static const char *good[] = {
      "{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
      "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 128}",
      "{\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": 32, \"beta_slow\": 1, "
      "\"original_max_position_embeddings\": 128}",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    assert_int_equal(load_with_scaling(dir, good[i], &m), BRISK_OK);
    brisk_context *ctx = NULL;
    brisk_batch *b = NULL;
    assert_int_equal(brisk_context_create(m, NULL, &ctx), BRISK_OK);
    assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
    for (int32_t t = 0; t < 4; t++) assert_int_equal(brisk_batch_add(b, t, t, 0, t == 3), BRISK_OK);
    assert_int_equal(brisk_decode(ctx, b), BRISK_OK);
    brisk_batch_free(b);
    brisk_context_free(ctx);
    brisk_model_free(m);
    m = NULL;
  }
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

/* Rewrites config.json with `extra` members (transformers 5 style); loads. */
static brisk_status load_with(const char *dir, const char *extra, brisk_model **m) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f,
          "{\"model_type\": \"llama\", \"vocab_size\": %d, \"hidden_size\": %d, "
          "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
          "\"intermediate_size\": %d, \"max_position_embeddings\": 512, %s}",
          VOCAB, D, LAYERS, N_HEAD, N_KV, FF, extra);
  fclose(f);
  return brisk_model_load(dir, NULL, m);
}

/* transformers 5 keeps RoPE under "rope_parameters": its theta and scaling
 * are read (a folder saved that way once loaded with the default base), and
 * any setting brisk cannot honour is refused naming the key. */
static void test_hf_rope_parameters(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_rope_parameters");
  arrays a;
  build(&a, "llama", &r);
  const char *dir = test_tmpdir();
  write_hf(&a, dir, BRISK_DTYPE_F32);
  brisk_model *m = NULL;
  uint64_t live = brisk_alloc_live_count();
  assert_int_equal(
      load_with(dir, "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}",
                &m),
      BRISK_OK);
  assert_true(m->hp.rope_base == 500000.0f);
  assert_int_equal(m->hp.rope_scaling, BRISK_HP_ROPE_SCALING_NONE);
  brisk_model_free(m);
  assert_int_equal(load_with(dir,
                             "\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": "
                             "500000.0, \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                             "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}",
                             &m),
                   BRISK_OK);
  assert_true(m->hp.rope_base == 500000.0f && m->hp.rope_factor == 8.0f);
  assert_int_equal(m->hp.rope_scaling, BRISK_HP_ROPE_SCALING_LLAMA3);
  assert_int_equal(m->hp.rope_orig_ctx, 64);
  brisk_model_free(m);
  /* partial_rotary_factor inside rope_parameters (phi3 style). */
  assert_int_equal(load_with(dir,
                             "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": "
                             "10000.0, \"partial_rotary_factor\": 0.5}",
                             &m),
                   BRISK_OK);
  assert_int_equal(m->hp.rope_dim, HD / 2);
  brisk_model_free(m);
  m = NULL;
  static const struct {
    const char *extra, *needle;
  } bad[] = {
      {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e4, \"mrope_section\": "
       "[1, 2]}",
       "'rope_parameters.mrope_section'"},
      {"\"rope_parameters\": {\"rope_type\": \"dynamic\", \"rope_theta\": 1e4, \"factor\": 2}",
       "'rope_parameters.rope_type' 'dynamic'"},
      {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e4, \"factor\": 4, "
       "\"mscale\": 0.7}",
       "'rope_parameters.mscale'"},
      {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e4, \"factor\": 4, "
       "\"truncate\": false}",
       "'rope_parameters.truncate'"},
      {"\"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e4}}",
       "per-layer-type 'rope_parameters'"},
      {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e4, "
       "\"partial_rotary_factor\": 0.3}",
       "partial_rotary_factor"},
      {"\"rope_theta\": 1e4, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2, "
       "\"finetuned\": "
       "true}",
       "'rope_scaling.finetuned'"},
      {"\"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 1e4, \"short_factor\": "
       "[1], \"long_factor\": [1]}",
       "'rope_parameters.short_factor' must be a list of 8"},
      {"\"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 1e4, \"short_factor\": "
       "[1, 1, 1, 1, 1, 1, 1, 1], \"long_factor\": [2, 2, 2, 2, 2, 2, 2, 2]}",
       "needs original_max_position_embeddings"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    brisk_status st = load_with(dir, bad[i].extra, &m);
    if (st == BRISK_OK || !strstr(brisk_last_error(), bad[i].needle))
      fprintf(stderr, "case %zu: got %d: %s\n", i, st, brisk_last_error());
    assert_int_not_equal(st, BRISK_OK);
    assert_non_null(strstr(brisk_last_error(), bad[i].needle));
    assert_null(m);
  }
  assert_int_equal(brisk_alloc_live_count(), live);
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

/* An unknown architecture is refused naming it and the ones brisk runs;
 * that list is the architecture table. */
static void test_hf_unknown_arch(void **state) {
  (void)state;
  const char *dir = test_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"model_type\": \"falcon_mamba\"}");
  fclose(f);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  f = fopen(path, "w");
  fprintf(f, "%c%c%c%c%c%c%c%c{}", 2, 0, 0, 0, 0, 0, 0, 0);
  fclose(f);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(dir, NULL, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "'falcon_mamba'"));
  for (int a = 0; a < BRISK_ARCH_COUNT; a++)
    assert_non_null(strstr(brisk_last_error(), brisk_arch_get((brisk_arch)a)->name));
  test_tmpdir_remove(dir);
}

/* deepseek_v2 settings brisk does not compute are refused naming them,
 * before any tensor is read. */
/* YaRN's magnitude on cos and sin as transformers applies it: an explicit
 * attention_factor alone, else get_mscale(factor) = 1 + 0.1 ln factor, else
 * (mscale, mscale_all_dim) the ratio of the two get_mscale. What brisk keeps
 * goes through the backend's frequency table, which multiplies attn_factor
 * by get_mscale(factor) as llama.cpp does. */
static void test_hf_yarn_magnitude(void **state) {
  (void)state;
  const double l4 = log(4.0);
  static const char *cfg[] = {
      "{\"rope_type\": \"yarn\", \"factor\": 4, \"attention_factor\": 1.3}",
      "{\"rope_type\": \"yarn\", \"factor\": 4}",
      "{\"rope_type\": \"yarn\", \"factor\": 4, \"mscale\": 0.707, \"mscale_all_dim\": 1}",
      "{\"rope_type\": \"yarn\", \"factor\": 1, \"attention_factor\": 0.5}",
  };
  const double want[] = {1.3, 1 + 0.1 * l4, (1 + 0.1 * 0.707 * l4) / (1 + 0.1 * l4), 0.5};
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    struct json_object *o = NULL;
    assert_int_equal(brisk_json_parse(cfg[i], strlen(cfg[i]), true, "rope", &o), BRISK_OK);
    brisk_hf_rope *r = brisk_calloc(1, sizeof *r);
    assert_non_null(r);
    r->base = 10000.0f;
    r->allow_mscale = true;
    assert_int_equal(brisk_hf_rope_read(o, "rope_parameters", 16, r), BRISK_OK);
    brisk_rope_params p;
    brisk_rope_params_init(&p);
    p.n_rot = 16;
    p.scaling = BRISK_ROPE_SCALING_YARN;
    p.factor = r->factor;
    p.orig_ctx = 128;
    p.attn_factor = r->attn_factor;
    double inv_freq[8], mscale = 0;
    assert_int_equal(brisk_rope_frequencies(&p, 16, inv_freq, &mscale), BRISK_OK);
    if (fabs(mscale - want[i]) > 1e-6 * want[i])
      fail_msg("case %zu: magnitude %.9f, transformers %.9f", i, mscale, want[i]);
    brisk_free(r);
    brisk_json_free(o);
  }
}

static void test_hf_deepseek2_refusals(void **state) {
  (void)state;
  static const struct {
    const char *extra, *needle;
    brisk_status st;
  } bad[] = {
      {"\"topk_method\": \"noaux_tc\"", "'noaux_tc'", BRISK_E_UNSUPPORTED},
      {"\"scoring_func\": \"sigmoid\"", "'sigmoid'", BRISK_E_UNSUPPORTED},
      {"\"attention_bias\": true", "attention_bias", BRISK_E_UNSUPPORTED},
      {"\"topk_method\": \"group_limited_greedy\", \"n_group\": 3, \"topk_group\": 1", "n_group 3",
       BRISK_E_FORMAT},
      {"\"topk_method\": \"group_limited_greedy\"", "'n_group'", BRISK_E_FORMAT},
      {"\"qk_rope_head_dim\": 3", "qk_rope_head_dim 3", BRISK_E_UNSUPPORTED},
      {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e4, \"factor\": 4, "
       "\"original_max_position_embeddings\": 16, \"mscale\": 1, \"mscale_all_dim\": -100}",
       "mscale_all_dim", BRISK_E_FORMAT},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *dir = test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"model_type\": \"deepseek_v2\", \"vocab_size\": 32, \"hidden_size\": 16, "
            "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 32, "
            "\"kv_lora_rank\": 8, \"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 4, "
            "\"v_head_dim\": 4, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, "
            "\"moe_intermediate_size\": 8, %s}",
            bad[i].extra);
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "w");
    fprintf(f, "%c%c%c%c%c%c%c%c{}", 2, 0, 0, 0, 0, 0, 0, 0);
    fclose(f);
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(dir, NULL, &m), bad[i].st);
    if (!strstr(brisk_last_error(), bad[i].needle))
      fail_msg("case %zu: '%s' does not name %s", i, brisk_last_error(), bad[i].needle);
    test_tmpdir_remove(dir);
  }
}

/* Last-token logits of a 4-token prompt into out[VOCAB]. */
static void decode4(const brisk_model *m, float *out) {
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(m, NULL, &ctx), BRISK_OK);
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  for (int32_t t = 0; t < 4; t++)
    assert_int_equal(brisk_batch_add(b, 3 * t, t, 0, t == 3), BRISK_OK);
  assert_int_equal(brisk_decode(ctx, b), BRISK_OK);
  memcpy(out, brisk_get_logits(ctx, 3), VOCAB * sizeof *out);
  brisk_batch_free(b);
  brisk_context_free(ctx);
}

/* use_mmap = 0 copies every weight of a folder at load: truncating
 * model.safetensors afterwards changes no logit. */
static void test_hf_read_at_load(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_read_at_load");
  arrays a;
  build(&a, "llama", &r);
  const char *dir = test_tmpdir();
  for (int k = 0; k < 2; k++) {
    write_hf(&a, dir, k ? BRISK_DTYPE_BF16 : BRISK_DTYPE_F32);
    brisk_model_params mp;
    brisk_model_params_init(&mp);
    mp.use_mmap = 0;
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(dir, &mp, &m), BRISK_OK);
    float want[VOCAB], got[VOCAB];
    decode4(m, want);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(truncate(path, 0), 0);
    decode4(m, got);
    assert_memory_equal(got, want, sizeof got);
    brisk_model_free(m);
  }
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

/* num_kv_shared_layers (Gemma 3n's key) on a llama folder: layer 1 reads
 * layer 0's K/V, holds none, and the logits of a prompt and its decode
 * match the float64 reference, which shares on its own; a count that
 * leaves no layer to read from is refused. */
static void test_hf_kv_shared(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_kv_shared");
  arrays a;
  build(&a, "llama", &r);
  const char *dir = test_tmpdir();
  write_hf(&a, dir, BRISK_DTYPE_F32);
  brisk_model *m = NULL, *plain = NULL;
  assert_int_equal(load_with(dir, "\"num_kv_shared_layers\": 0", &plain), BRISK_OK);
  assert_int_equal(load_with(dir, "\"num_kv_shared_layers\": 1", &m), BRISK_OK);
  assert_int_equal(m->hp.n_kv_shared, 1);
  assert_int_equal(m->layers[0].kv_source, 0);
  assert_int_equal(m->layers[1].kv_source, 0);
  assert_int_equal(ref_kv_source(m, 1), 0);
  brisk_context *ctx = NULL, *pctx = NULL;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_type = BRISK_KV_F32; /* the reference's cache is float64 */
  assert_int_equal(brisk_context_create(m, &cp, &ctx), BRISK_OK);
  assert_int_equal(brisk_context_create(plain, &cp, &pctx), BRISK_OK);
  brisk_kv_stats ks = {.struct_size = sizeof ks}, pks = {.struct_size = sizeof pks};
  assert_int_equal(brisk_context_kv_stats(ctx, &ks), BRISK_OK);
  assert_int_equal(brisk_context_kv_stats(pctx, &pks), BRISK_OK);
  assert_true(ks.bytes_per_token * 2 == pks.bytes_per_token);
  enum { N = 24 };
  ref_model *ref = ref_create(m, N);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(N, &b), BRISK_OK);
  double want[VOCAB], worst = 0;
  for (int32_t t = 0; t < 16; t++)
    assert_int_equal(brisk_batch_add(b, (7 * t) % VOCAB, t, 0, 1), BRISK_OK);
  assert_int_equal(brisk_decode(ctx, b), BRISK_OK);
  for (int32_t t = 0; t < N; t++) {
    if (t >= 16) {
      brisk_batch_clear(b);
      assert_int_equal(brisk_batch_add(b, (7 * t) % VOCAB, t, 0, 1), BRISK_OK);
      assert_int_equal(brisk_decode(ctx, b), BRISK_OK);
    }
    ref_eval(ref, (7 * t) % VOCAB, want);
    const float *got = brisk_get_logits(ctx, t >= 16 ? 0 : t);
    double num = 0, den = 0;
    for (int i = 0; i < VOCAB; i++) {
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
    }
    if (sqrt(num / den) > worst) worst = sqrt(num / den);
  }
  assert_true(worst < 1e-4);
  ref_free(ref);
  brisk_batch_free(b);
  brisk_context_free(ctx);
  brisk_context_free(pctx);
  brisk_model_free(m);
  brisk_model_free(plain);
  assert_int_equal(load_with(dir, "\"num_kv_shared_layers\": 2", &m), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "share K/V"));
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

static char oom_dir[256];
static brisk_status load_and_free(void *ctx) {
  (void)ctx;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(oom_dir, NULL, &m);
  brisk_model_free(m);
  return st;
}

/* Every brisk allocation of an HF load can fail cleanly (json-c's own
 * allocations are outside the hook). */
static void test_hf_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_oom");
  arrays a;
  build(&a, "qwen2", &r);
  const char *dir = test_tmpdir();
  snprintf(oom_dir, sizeof oom_dir, "%s", dir);
  write_hf(&a, dir, BRISK_DTYPE_BF16);
  assert_true(test_every_allocation_fails(load_and_free, NULL) > 5);
  test_tmpdir_remove(dir);
  free_arrays(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_f32),
      cmocka_unit_test(test_llama_bf16),
      cmocka_unit_test(test_qwen2_f16),
      cmocka_unit_test(test_mixtral_f32),
      cmocka_unit_test(test_hf_errors),
      cmocka_unit_test(test_hf_rope_validation),
      cmocka_unit_test(test_hf_rope_parameters),
      cmocka_unit_test(test_hf_unknown_arch),
      cmocka_unit_test(test_hf_deepseek2_refusals),
      cmocka_unit_test(test_hf_yarn_magnitude),
      cmocka_unit_test(test_hf_read_at_load),
      cmocka_unit_test(test_hf_kv_shared),
      cmocka_unit_test(test_hf_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
