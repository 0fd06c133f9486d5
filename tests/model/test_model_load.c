/* Model loading: every architecture from files our own writer makes, the
 * shared stories260K model, metadata, tensor listing, progress and cancel,
 * malformed models, and allocation failures. */
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static char dir[64];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

static const char *write_model(const char *file, const test_model_spec *spec, uint64_t *n_params) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  test_rng r = test_rng_seeded(file);
  assert_int_equal(test_model_write(path, spec, &r, n_params), BRISK_OK);
  return path;
}

static void test_every_architecture(void **state) {
  (void)state;
  const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral"};
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    for (int tied = 0; tied < 2; tied++) {
      test_model_spec s = test_model_default(archs[a]);
      s.tied = tied;
      uint64_t n_params = 0;
      const char *path = write_model("arch.gguf", &s, &n_params);
      brisk_model *m = NULL;
      brisk_status st = brisk_model_load(path, NULL, &m);
      if (st) fprintf(stderr, "%s: %s\n", archs[a], brisk_last_error());
      assert_int_equal(st, BRISK_OK);
      assert_string_equal(brisk_model_architecture(m), archs[a]);
      assert_int_equal(brisk_model_n_vocab(m), s.n_vocab);
      assert_int_equal(brisk_model_n_embd(m), s.n_embd);
      assert_int_equal(brisk_model_n_layer(m), s.n_layer);
      assert_int_equal(brisk_model_n_head(m), s.n_head);
      assert_int_equal(brisk_model_n_head_kv(m), s.n_head_kv);
      assert_int_equal(brisk_model_n_ctx_train(m), s.n_ctx);
      assert_int_equal(brisk_model_n_params(m), n_params);
      assert_int_equal(brisk_model_weight_bytes(m), n_params * 4); /* all f32 */
      /* Internal layout: the pieces each architecture adds are bound. */
      assert_int_equal(m->hp.head_dim, s.head_dim);
      assert_int_equal(m->hp.tied_embeddings, tied);
      assert_ptr_equal(m->output.data == m->token_embd.data, tied);
      assert_int_equal(m->layers[1].bq.data != NULL, !strcmp(archs[a], "qwen2"));
      assert_int_equal(m->layers[0].k_norm.data != NULL, !strcmp(archs[a], "qwen3"));
      assert_int_equal(m->hp.n_expert, s.n_expert);
      assert_int_equal(m->layers[0].sliding_window, s.sliding_window);
      assert_int_equal(m->hp.rope_style, !strcmp(archs[a], "qwen2") || !strcmp(archs[a], "qwen3")
                                             ? BRISK_HP_ROPE_NEOX
                                             : BRISK_HP_ROPE_NORMAL);
      if (s.n_expert) {
        /* Stacked expert tensors are split into views, one per expert. */
        const brisk_weight *e0 = &m->layers[1].expert_up[0], *e1 = &m->layers[1].expert_up[1];
        assert_int_equal(e0->rows, s.n_ff);
        assert_int_equal(e0->cols, s.n_embd);
        assert_ptr_equal((const char *)e1->data, (const char *)e0->data + e0->row_bytes * s.n_ff);
      } else {
        assert_int_equal(m->layers[0].ffn_down.cols, s.n_ff);
        assert_int_equal(m->layers[0].ffn_down.rows, s.n_embd);
      }
      brisk_model_free(m);
    }
  }
}

static void test_weight_types(void **state) {
  (void)state;
  const uint32_t ok[] = {BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0,
                         BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    test_model_spec s = test_model_default("llama");
    s.weight_type = ok[i];
    uint64_t n_params;
    const char *path = write_model("types.gguf", &s, &n_params);
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
    /* As stored, or regrouped for the CPU kernels (tests/model/test_repack.c). */
    assert_int_equal(brisk_dtype_base(m->layers[0].wq.type), ok[i]);
    assert_int_equal(brisk_model_n_params(m), n_params);
    assert_true(brisk_model_weight_bytes(m) < n_params * 4);
    brisk_model_free(m);
  }
  /* K-quants need 256-element rows. */
  const uint32_t k_ok[] = {BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  for (size_t i = 0; i < 3; i++) {
    test_model_spec s = test_model_default("llama");
    s.n_embd = 256, s.n_ff = 512, s.head_dim = 64;
    s.weight_type = k_ok[i];
    const char *path = write_model("ktypes.gguf", &s, NULL);
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
    brisk_model_free(m);
  }
  /* Q2_K/Q3_K are parsed but not computed yet: a clear error at load. */
  test_model_spec s = test_model_default("llama");
  s.n_embd = 256, s.n_ff = 512, s.head_dim = 64;
  s.weight_type = BRISK_DTYPE_Q3_K;
  const char *path = write_model("q3k.gguf", &s, NULL);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q3_k"));
  assert_null(m);
}

static void expect_load_error(const test_model_spec *s, brisk_status want, const char *needle) {
  const char *path = write_model("bad.gguf", s, NULL);
  brisk_model *m = NULL;
  uint64_t live = brisk_alloc_live_count();
  brisk_status st = brisk_model_load(path, NULL, &m);
  if (st != want || !strstr(brisk_last_error(), needle))
    fprintf(stderr, "want %d with '%s', got %d: %s\n", want, needle, st, brisk_last_error());
  assert_int_equal(st, want);
  assert_non_null(strstr(brisk_last_error(), needle));
  assert_null(m);
  assert_int_equal(brisk_alloc_live_count(), live);
}

static void test_malformed_models(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.omit_tensor = "blk.1.ffn_up.weight";
  expect_load_error(&s, BRISK_E_FORMAT, "blk.1.ffn_up.weight");
  s = test_model_default("qwen2");
  s.omit_tensor = "blk.0.attn_k.bias";
  expect_load_error(&s, BRISK_E_FORMAT, "blk.0.attn_k.bias");
  s = test_model_default("llama");
  s.misshape_tensor = "blk.0.attn_v.weight";
  expect_load_error(&s, BRISK_E_FORMAT, "blk.0.attn_v.weight");
  s = test_model_default("llama");
  s.misshape_tensor = "output_norm.weight";
  expect_load_error(&s, BRISK_E_FORMAT, "output_norm.weight");
  s = test_model_default("mixtral");
  s.misshape_tensor = "blk.0.ffn_down_exps.weight";
  expect_load_error(&s, BRISK_E_FORMAT, "ffn_down_exps");
  s = test_model_default("llama");
  s.arch = "gpt-neox";
  expect_load_error(&s, BRISK_E_UNSUPPORTED, "gpt-neox");
  s = test_model_default("llama");
  s.n_head_kv = 3; /* 4 heads do not split into 3 groups */
  expect_load_error(&s, BRISK_E_FORMAT, "n_head_kv");
  s = test_model_default("mixtral");
  s.n_expert_used = 5;
  expect_load_error(&s, BRISK_E_FORMAT, "expert");
}

static void test_bad_arguments(void **state) {
  (void)state;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(NULL, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_load("x", NULL, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_load("/nonexistent/model.gguf", NULL, &m), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "/nonexistent/model.gguf"));
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.struct_size = 3;
  assert_int_equal(brisk_model_load("x", &p, &m), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "struct_size"));
  brisk_model_free(NULL);
  assert_string_equal(brisk_model_architecture(NULL), "");
  assert_int_equal(brisk_model_n_vocab(NULL), 0);
  assert_int_equal(brisk_model_n_tensors(NULL), 0);
  assert_null(brisk_model_chat_template(NULL));
  /* A file that is not GGUF at all. */
  char path[256];
  snprintf(path, sizeof path, "%s/not.gguf", dir);
  FILE *f = fopen(path, "wb");
  fputs("hello, this is not a model", f);
  fclose(f);
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_E_FORMAT);
  assert_null(m);
}

typedef struct progress_log {
  int calls, cancel_at;
  float last;
  int monotonic;
} progress_log;

static int on_progress(float f, void *user) {
  progress_log *p = user;
  if (f < p->last || f < 0 || f > 1) p->monotonic = 0;
  p->last = f;
  return ++p->calls != p->cancel_at;
}

static void test_progress_and_cancel(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_layer = 6;
  const char *path = write_model("progress.gguf", &s, NULL);
  brisk_model_params p;
  brisk_model_params_init(&p);
  progress_log log = {0, -1, 0, 1};
  p.progress = on_progress;
  p.progress_user_data = &log;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &p, &m), BRISK_OK);
  assert_true(log.calls >= 8); /* start, one per layer, end */
  assert_true(log.monotonic);
  assert_true(log.last == 1.0f);
  brisk_model_free(m);
  int total = log.calls;
  /* Cancelling at any report frees everything. */
  uint64_t live = brisk_alloc_live_count();
  for (int k = 1; k <= total; k++) {
    progress_log c = {0, k, 0, 1};
    p.progress_user_data = &c;
    m = NULL;
    assert_int_equal(brisk_model_load(path, &p, &m), BRISK_E_CANCELLED);
    assert_null(m);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
  /* Without mmap the same model loads the same way. */
  p.progress = NULL;
  p.use_mmap = 0;
  assert_int_equal(brisk_model_load(path, &p, &m), BRISK_OK);
  assert_int_equal(brisk_model_n_layer(m), 6);
  brisk_model_free(m);
}

static void test_metadata_and_tensors(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  const char *path = write_model("meta.gguf", &s, NULL);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  char buf[64];
  size_t needed = 0;
  assert_int_equal(brisk_model_meta(m, "general.architecture", buf, sizeof buf, &needed), BRISK_OK);
  assert_string_equal(buf, "llama");
  assert_int_equal(needed, 5);
  assert_int_equal(brisk_model_meta(m, "llama.block_count", buf, sizeof buf, NULL), BRISK_OK);
  assert_string_equal(buf, "2");
  assert_int_equal(brisk_model_meta(m, "general.name", buf, 6, &needed), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(needed, strlen("brisk test model"));
  assert_string_equal(buf, "brisk");
  assert_int_equal(brisk_model_meta(m, "general.name", NULL, 0, &needed), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(brisk_model_meta(m, "no.such.key", buf, sizeof buf, NULL), BRISK_E_NOT_FOUND);
  assert_int_equal(brisk_model_meta(m, NULL, buf, sizeof buf, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_null(brisk_model_chat_template(m));

  int64_t n = brisk_model_n_tensors(m);
  assert_int_equal(n, 3 + 9 * 2); /* embd, norm, output + 9 per layer */
  brisk_tensor_info t = {.struct_size = sizeof t};
  int found = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_int_equal(brisk_model_tensor(m, i, &t), BRISK_OK);
    if (!strcmp(t.name, "blk.1.attn_k.weight")) {
      found = 1;
      assert_string_equal(t.type, "f32");
      assert_int_equal(t.n_dims, 2);
      assert_int_equal(t.dims[0], s.n_embd);
      assert_int_equal(t.dims[1], s.n_head_kv * s.head_dim);
      assert_int_equal(t.n_bytes, 4ull * s.n_embd * s.n_head_kv * s.head_dim);
    }
  }
  assert_true(found);
  assert_int_equal(brisk_model_tensor(m, n, &t), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_tensor(m, -1, &t), BRISK_E_INVALID_ARGUMENT);
  t.struct_size = 12; /* ends inside name */
  assert_int_equal(brisk_model_tensor(m, 0, &t), BRISK_E_INVALID_ARGUMENT);
  brisk_model_free(m);
}

static void test_stories260k(void **state) {
  (void)state;
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  assert_string_equal(brisk_model_architecture(m), "llama");
  assert_int_equal(brisk_model_n_vocab(m), 512);
  assert_int_equal(brisk_model_n_embd(m), 64);
  assert_int_equal(brisk_model_n_layer(m), 5);
  assert_int_equal(brisk_model_n_head(m), 8);
  assert_int_equal(brisk_model_n_head_kv(m), 4);
  assert_int_equal(brisk_model_n_ctx_train(m), 512);
  assert_true(m->hp.tied_embeddings);
  assert_true(fabsf(m->hp.rms_eps - 1e-5f) < 1e-10f);
  assert_int_equal(m->hp.rope_style, BRISK_HP_ROPE_NORMAL);
  /* Tied output counted once: 512*64 embd + 64 norm + 5 * (2*64 norms +
   * q 64*64 + k,v 2*32*64 + o 64*64 + 3 * ffn 64*172). */
  uint64_t per_layer = 2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 172;
  assert_int_equal(brisk_model_n_params(m), 512 * 64 + 64 + 5 * per_layer);
  assert_int_equal(brisk_model_weight_bytes(m), 4 * brisk_model_n_params(m));
  char buf[32];
  assert_int_equal(brisk_model_meta(m, "tokenizer.ggml.model", buf, sizeof buf, NULL), BRISK_OK);
  assert_string_equal(buf, "llama");
  brisk_model_free(m);
}

static const char *oom_path;
static brisk_status load_and_free(void *ctx) {
  (void)ctx;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(oom_path, NULL, &m);
  brisk_model_free(m);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_model_spec s = test_model_default("mixtral");
  oom_path = write_model("oom.gguf", &s, NULL);
  assert_true(test_every_allocation_fails(load_and_free, NULL) > 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_architecture),  cmocka_unit_test(test_weight_types),
      cmocka_unit_test(test_malformed_models),    cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_progress_and_cancel), cmocka_unit_test(test_metadata_and_tensors),
      cmocka_unit_test(test_stories260k),         cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
