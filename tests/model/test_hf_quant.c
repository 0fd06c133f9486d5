/* GPTQ / AWQ layers (model/hf_quant.c): packed here from random integers by
 * the formats' rules, repacked by brisk into Q4_1, dequantized by the Q4_1
 * reference and compared with scale * (q - zero) in float64 (act-order
 * layers: column j of the repacked rows against stored column perm[j], the
 * order brisk returns, checked to sort the columns by group); and whole
 * GPTQ models (with and without act-order) loading with every allocation
 * failing in turn, and refusing tensor parallelism for act-order. The
 * logits of such models are checked in tests/model/test_hf_quantized.py. */
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "format/hf.h"
#include "format/safetensors.h"
#include "model/hf_quant.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer_case {
  const char *qc; /* quantization_config */
  bool awq, sym;
  int offset, group, rows, cols;
  bool act_order; /* g_idx in a random column order, as desc_act makes it */
} layer_case;

typedef struct layer {
  int rows, cols, groups, group;
  int *q, *z;  /* [rows][cols], [groups][rows] (the value dequantization subtracts) */
  uint16_t *s; /* [groups][rows] */
  int *g_idx;  /* [cols] the group of each stored column */
} layer;

static void put_config(const char *dir, const char *qc) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "{\"model_type\": \"llama\", \"vocab_size\": 16, \"hidden_size\": 64, "
          "\"intermediate_size\": 128, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
          "\"num_key_value_heads\": 1, \"rms_norm_eps\": 1e-5, \"quantization_config\": %s}",
          qc);
  assert_int_equal(fclose(f), 0);
}

static layer make_layer(test_rng *r, const layer_case *c) {
  layer L = {c->rows, c->cols, 0, c->group == -1 ? c->cols : c->group, NULL, NULL, NULL, NULL};
  L.groups = c->cols / L.group;
  L.q = malloc(sizeof(int) * (size_t)(c->rows * c->cols));
  L.z = malloc(sizeof(int) * (size_t)(L.groups * c->rows));
  L.s = malloc(2 * (size_t)(L.groups * c->rows));
  L.g_idx = malloc(sizeof(int) * (size_t)c->cols);
  assert_true(L.q && L.z && L.s && L.g_idx);
  /* AutoGPTQ's act-order: the columns are quantized in the order of a
   * permutation p (group i: p[i * group .. (i + 1) * group)), and g_idx
   * stored per column: g_idx[p[i]] = i / group. */
  for (int k = 0; k < c->cols; k++) L.g_idx[k] = k;
  for (int k = c->cols - 1; c->act_order && k > 0; k--) { /* Fisher-Yates */
    int j = (int)(test_rng_u64(r) % (uint64_t)(k + 1)), t = L.g_idx[k];
    L.g_idx[k] = L.g_idx[j];
    L.g_idx[j] = t;
  }
  if (c->act_order) {
    int *p = malloc(sizeof(int) * (size_t)c->cols);
    assert_non_null(p);
    memcpy(p, L.g_idx, sizeof(int) * (size_t)c->cols);
    for (int i = 0; i < c->cols; i++) L.g_idx[p[i]] = i / L.group;
    free(p);
  } else {
    for (int k = 0; k < c->cols; k++) L.g_idx[k] = k / L.group;
  }
  for (int i = 0; i < c->rows * c->cols; i++) L.q[i] = (int)(test_rng_u64(r) % 16);
  for (int i = 0; i < L.groups * c->rows; i++) {
    L.z[i] = c->sym ? 8 : (int)(test_rng_u64(r) % 16) + c->offset;
    L.s[i] = brisk_f32_to_f16((float)test_rng_uniform(r, 0.002, 0.05));
  }
  return L;
}

static void free_layer(layer *L) {
  free(L->q);
  free(L->z);
  free(L->s);
  free(L->g_idx);
}

/* The nibble of output n in AWQ's interleave: word nibble j holds output
 * 8i + order[j]. */
static int awq_nibble(int n) {
  static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int j = 0; j < 8; j++)
    if (order[j] == n % 8) return j;
  return -1;
}

static void add_layer(brisk_safetensors_writer *w, const char *prefix, const layer *L,
                      const layer_case *c) {
  const int R = L->rows, C = L->cols, G = L->groups;
  uint32_t *qw = calloc((size_t)(R * C / 8), 4), *qz = calloc((size_t)(G * R / 8), 4);
  int32_t *g_idx = malloc(4 * (size_t)C);
  assert_true(qw && qz && g_idx);
  for (int n = 0; n < R; n++)
    for (int k = 0; k < C; k++) {
      uint32_t v = (uint32_t)L->q[n * C + k];
      if (c->awq) /* [cols][rows / 8] */
        qw[k * (R / 8) + n / 8] |= v << (4 * awq_nibble(n));
      else /* [cols / 8][rows] */
        qw[(k / 8) * R + n] |= v << (4 * (k % 8));
    }
  for (int g = 0; g < G; g++)
    for (int n = 0; n < R; n++) {
      uint32_t v = (uint32_t)(L->z[g * R + n] - c->offset) & 15;
      qz[g * (R / 8) + n / 8] |= v << (4 * (c->awq ? awq_nibble(n) : n % 8));
    }
  for (int k = 0; k < C; k++) g_idx[k] = L->g_idx[k];
  char name[256];
  uint64_t s_qw[2] = {c->awq ? (uint64_t)C : (uint64_t)C / 8,
                      c->awq ? (uint64_t)R / 8 : (uint64_t)R};
  uint64_t s_qz[2] = {(uint64_t)G, (uint64_t)R / 8}, s_s[2] = {(uint64_t)G, (uint64_t)R},
           s_g[1] = {(uint64_t)C};
  snprintf(name, sizeof name, "%s.qweight", prefix);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, name, BRISK_DTYPE_I32, 2, s_qw, qw,
                                                       4 * (uint64_t)(R * C / 8)),
                   BRISK_OK);
  snprintf(name, sizeof name, "%s.qzeros", prefix);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, name, BRISK_DTYPE_I32, 2, s_qz, qz,
                                                       4 * (uint64_t)(G * R / 8)),
                   BRISK_OK);
  snprintf(name, sizeof name, "%s.scales", prefix);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, name, BRISK_DTYPE_F16, 2, s_s, L->s,
                                                       2 * (uint64_t)(G * R)),
                   BRISK_OK);
  if (!c->awq) {
    snprintf(name, sizeof name, "%s.g_idx", prefix);
    assert_int_equal(brisk_safetensors_writer_add_tensor(w, name, BRISK_DTYPE_I32, 1, s_g, g_idx,
                                                         4 * (uint64_t)C),
                     BRISK_OK);
  }
  free(qw);
  free(qz);
  free(g_idx);
}

static void write_file(brisk_safetensors_writer *w, const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  assert_int_equal(brisk_safetensors_writer_write_file(w, path), BRISK_OK);
  brisk_safetensors_writer_free(w);
}

static const layer_case cases[] = {
    {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"sym\": false}", false, false,
     1, 32, 24, 128, false},
    {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": -1, \"sym\": true}", false, true, 1,
     -1, 16, 96, false},
    {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 64, \"checkpoint_format\": "
     "\"gptq_v2\"}",
     false, false, 0, 64, 8, 128, false},
    {"{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"version\": \"gemm\"}", true,
     false, 0, 32, 40, 64, false},
    {"{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, \"zero_point\": true}", true,
     false, 0, 128, 16, 256, false},
    {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true}", false,
     false, 1, 32, 24, 128, true},
    {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 64, \"desc_act\": true, "
     "\"sym\": true, \"checkpoint_format\": \"gptq_v2\"}",
     false, true, 0, 64, 16, 192, true},
};

/* Every weight within the float16 rounding of m = -s * z of the exact value;
 * exact where s * z fits float16 (symmetric: z = 8). */
static void test_repack_against_float64(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_quant_repack");
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const layer_case *c = &cases[ci];
    const char *dir = test_tmpdir();
    put_config(dir, c->qc);
    layer L = make_layer(&r, c);
    brisk_safetensors_writer *w;
    assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
    add_layer(w, "x", &L, c);
    write_file(w, dir);
    brisk_hf *hf = NULL;
    brisk_hf_quant q;
    assert_int_equal(brisk_hf_open(dir, &hf), BRISK_OK);
    assert_int_equal(brisk_hf_quant_read(hf, &q), BRISK_OK);
    assert_int_equal(q.method, c->awq ? BRISK_HF_QUANT_AWQ : BRISK_HF_QUANT_GPTQ);
    assert_int_equal(q.zero_offset, (uint32_t)c->offset);
    void *blocks = NULL;
    int32_t *perm = NULL;
    const char *name = NULL;
    assert_int_equal(brisk_hf_quant_repack(hf, &q, "x", L.cols, L.rows, &blocks, &perm, &name),
                     BRISK_OK);
    assert_string_equal(name, "x.qweight");
    /* Columns in group order need no order; act-order gets a permutation
     * that sorts the columns by group. */
    assert_int_equal(perm != NULL, c->act_order);
    if (perm) {
      int *seen = calloc((size_t)L.cols, sizeof *seen);
      assert_non_null(seen);
      for (int j = 0; j < L.cols; j++) {
        assert_true(perm[j] >= 0 && perm[j] < L.cols);
        assert_int_equal(seen[perm[j]]++, 0);
        assert_int_equal(L.g_idx[perm[j]], j / L.group);
      }
      free(seen);
    }
    float *row = malloc(sizeof(float) * (size_t)L.cols);
    assert_non_null(row);
    double worst = 0;
    for (int n = 0; n < L.rows; n++) {
      assert_int_equal(brisk_dequantize_row(BRISK_DTYPE_Q4_1,
                                            (const char *)blocks + (size_t)n * (L.cols / 32) * 20,
                                            row, L.cols),
                       BRISK_OK);
      for (int j = 0; j < L.cols; j++) {
        int k = perm ? perm[j] : j, g = L.g_idx[k];
        double s = brisk_f16_to_f32(L.s[g * L.rows + n]), z = L.z[g * L.rows + n];
        double want = s * (L.q[n * L.cols + k] - z), err = fabs(row[j] - want);
        /* half an ulp of s * z in float16, plus float32 rounding of d * q + m */
        double bound = ldexp(fabs(s * z), -11) + ldexp(16 * s, -24);
        if (c->sym) bound = 0;
        if (err > bound)
          fail_msg("case %zu: w[%d][%d] (stored column %d) = %.9g, want %.9g", ci, n, j, k,
                   (double)row[j], want);
        if (err / s > worst) worst = err / s;
      }
    }
    print_message("case %zu: max |Q4_1 - exact| = %.5f scale\n", ci, worst);
    free(row);
    brisk_aligned_free(blocks);
    brisk_aligned_free(perm);
    brisk_hf_close(hf);
    free_layer(&L);
    test_tmpdir_remove(dir);
  }
}

/* Whole one-layer GPTQ models (columns in order and act-order): load, and
 * fail cleanly at every allocation. */
static char oom_dir[512];
static brisk_status load_and_free(void *ctx) {
  (void)ctx;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(oom_dir, NULL, &m);
  brisk_model_free(m);
  return st;
}

/* A one-layer llama folder in dir whose linears are made as case c says. */
static void write_model(const char *dir, const layer_case *c, test_rng *rp) {
  test_rng r = *rp;
  put_config(dir, c->qc);
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  const struct {
    const char *name;
    int rows, cols;
  } lin[] = {{"self_attn.q_proj", 64, 64}, {"self_attn.k_proj", 32, 64},
             {"self_attn.v_proj", 32, 64}, {"self_attn.o_proj", 64, 64},
             {"mlp.gate_proj", 128, 64},   {"mlp.up_proj", 128, 64},
             {"mlp.down_proj", 64, 128}};
  for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
    layer_case lc = *c;
    lc.rows = lin[i].rows;
    lc.cols = lin[i].cols;
    layer L = make_layer(&r, &lc);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "model.layers.0.%s", lin[i].name);
    add_layer(w, prefix, &L, &lc);
    free_layer(&L);
  }
  static float emb[16 * 64], ones[64];
  for (int i = 0; i < 16 * 64; i++) emb[i] = (float)test_rng_normal(&r);
  for (int i = 0; i < 64; i++) ones[i] = 1.0f;
  uint64_t s_emb[2] = {16, 64}, s_vec[1] = {64};
  const char *vecs[] = {"model.norm.weight", "model.layers.0.input_layernorm.weight",
                        "model.layers.0.post_attention_layernorm.weight"};
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "model.embed_tokens.weight",
                                                       BRISK_DTYPE_F32, 2, s_emb, emb, sizeof emb),
                   BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "lm_head.weight", BRISK_DTYPE_F32, 2,
                                                       s_emb, emb, sizeof emb),
                   BRISK_OK);
  for (int i = 0; i < 3; i++)
    assert_int_equal(brisk_safetensors_writer_add_tensor(w, vecs[i], BRISK_DTYPE_F32, 1, s_vec,
                                                         ones, sizeof ones),
                     BRISK_OK);
  write_file(w, dir);
  *rp = r;
}

static void test_model_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_quant_oom");
  /* cases[5]: act-order, whose column orders the model owns too. */
  const size_t which[] = {0, 5};
  for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
    const char *dir = test_tmpdir();
    snprintf(oom_dir, sizeof oom_dir, "%s", dir);
    write_model(dir, &cases[which[i]], &r);
    assert_int_equal(load_and_free(NULL), BRISK_OK);
    assert_true(test_every_allocation_fails(load_and_free, NULL) > 5);
    test_tmpdir_remove(dir);
  }
}

/* Tensor parallelism cuts o_proj and down_proj by input columns, which an
 * act-order matrix has sorted over the whole input: refused with the
 * tensor's name; the same folder loads with tp_size 1 and pp_size 2. */
static void test_act_order_refuses_tp(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hf_quant_tp");
  const char *dir = test_tmpdir();
  write_model(dir, &cases[5], &r);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = 2;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(dir, &mp, &m), BRISK_E_UNSUPPORTED);
  assert_null(m);
  assert_non_null(strstr(brisk_last_error(), "'model.layers.0.self_attn.o_proj.qweight'"));
  assert_non_null(strstr(brisk_last_error(), "tp_size 2 is not supported"));
  mp.tp_size = 1;
  assert_int_equal(brisk_model_load(dir, &mp, &m), BRISK_OK);
  brisk_model_free(m);
  test_tmpdir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repack_against_float64),
      cmocka_unit_test(test_model_allocation_failures),
      cmocka_unit_test(test_act_order_refuses_tp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
