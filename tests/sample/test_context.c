/* The sampler on a model's logits: brisk_sampler_create from a model,
 * brisk_sampler_sample over a decoded batch (entries with and without
 * logits), a short generation loop, and allocation failures over create. */
#include "test_models.h"

#include "core/alloc.h"
#include "sample/sampler.h"

#include <string.h>

static char dir[64];
static brisk_model *model;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  char path[256];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("sample_context_model");
  if (test_model_write(path, &s, &r, NULL)) return -1;
  return brisk_model_load(path, NULL, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_context *make_ctx(void) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 128;
  p.n_threads = 2;
  p.max_batch_tokens = 32;
  p.n_seq_max = 2;
  brisk_context *c = NULL;
  if (brisk_context_create(model, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* Sampling entry i of a batch is sampling the row brisk_get_logits gives;
 * entries without logits, out of range or before any decode are rejected
 * without touching the sampler. */
static void test_sample_from_context(void **state) {
  (void)state;
  int32_t n_vocab = brisk_model_n_vocab(model);
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.seed = 5;
  p.top_k = 20;
  p.n_logprobs = 3;
  brisk_sampler *s = NULL, *twin = NULL;
  assert_int_equal(brisk_sampler_create(model, &p, &s), BRISK_OK);
  assert_int_equal(brisk_sampler_create(model, &p, &twin), BRISK_OK);
  brisk_context *c = make_ctx();
  int32_t tok = -3;
  assert_int_equal(brisk_sampler_sample(s, c, 0, &tok), BRISK_E_INVALID_ARGUMENT);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
  const int32_t prompt[4] = {1, 17, 42, 5};
  for (int i = 0; i < 4; i++) assert_int_equal(brisk_batch_add(b, prompt[i], i, 0, i % 2), 0);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  assert_int_equal(brisk_sampler_sample(s, c, 0, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "entry 0"));
  assert_int_equal(brisk_sampler_sample(s, c, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_sample(s, c, -1, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(tok, -3);
  for (int rep = 0; rep < 10; rep++) {
    for (int32_t i = 1; i < 4; i += 2) {
      int32_t want = -1;
      assert_int_equal(brisk_sampler_sample(s, c, i, &tok), BRISK_OK);
      assert_int_equal(brisk_sampler_sample_logits(twin, brisk_get_logits(c, i), n_vocab, &want),
                       BRISK_OK);
      assert_int_equal(tok, want);
      assert_true(tok >= 0 && tok < n_vocab);
    }
  }
  /* A sampler made for another vocabulary size is refused, not overread. */
  brisk_sampler *other = NULL;
  assert_int_equal(brisk_sample_create(n_vocab + 5, &p, &other), BRISK_OK);
  assert_int_equal(brisk_sampler_sample(other, c, 1, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "context's model"));
  assert_ptr_equal(brisk_context_model(c), model);
  assert_null(brisk_context_model(NULL));
  brisk_sampler_free(other);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_sampler_free(s);
  brisk_sampler_free(twin);
}

/* A greedy generation loop through the public API: each sampled token is
 * the argmax of its logits (ties to the lowest id), accepted, and decoded
 * next. With a repetition penalty the loop still runs and never samples
 * outside the vocabulary. */
static void test_generation_loop(void **state) {
  (void)state;
  int32_t n_vocab = brisk_model_n_vocab(model);
  for (int variant = 0; variant < 2; variant++) {
    brisk_sampler_params p;
    brisk_sampler_params_init(&p);
    p.temperature = 0;
    if (variant) p.repeat_penalty = 1.5f;
    brisk_sampler *s = NULL;
    assert_int_equal(brisk_sampler_create(model, &p, &s), BRISK_OK);
    brisk_context *c = make_ctx();
    brisk_batch *b = NULL;
    assert_int_equal(brisk_batch_create(1, &b), BRISK_OK);
    int32_t tok = 1;
    for (int pos = 0; pos < 16; pos++) {
      assert_int_equal(brisk_sampler_accept(s, tok), BRISK_OK);
      brisk_batch_clear(b);
      assert_int_equal(brisk_batch_add(b, tok, pos, 0, 1), BRISK_OK);
      if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
      assert_int_equal(brisk_sampler_sample(s, c, 0, &tok), BRISK_OK);
      assert_true(tok >= 0 && tok < n_vocab);
      if (!variant) {
        const float *l = brisk_get_logits(c, 0);
        int32_t best = 0;
        for (int32_t t = 1; t < n_vocab; t++)
          if (l[t] > l[best]) best = t;
        assert_int_equal(tok, best);
      }
    }
    brisk_batch_free(b);
    brisk_context_free(c);
    brisk_sampler_free(s);
  }
}

static brisk_status create_from_model(void *ctx) {
  (void)ctx;
  brisk_logit_bias bias[] = {{3, 2.0f}};
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.logit_bias = bias;
  p.n_logit_bias = 1;
  p.n_logprobs = 2;
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sampler_create(model, &p, &s);
  brisk_sampler_free(s);
  return st;
}

static void test_create_checks(void **state) {
  (void)state;
  test_every_allocation_fails(create_from_model, NULL);
  /* Bias tokens are checked against the model's vocabulary. */
  int32_t n_vocab = brisk_model_n_vocab(model);
  brisk_logit_bias bias[] = {{n_vocab, 1.0f}};
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.logit_bias = bias;
  p.n_logit_bias = 1;
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sampler_create(model, &p, &s), BRISK_E_INVALID_ARGUMENT);
  assert_null(s);
  assert_int_equal(brisk_sampler_create(model, &p, NULL), BRISK_E_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_from_context),
      cmocka_unit_test(test_generation_loop),
      cmocka_unit_test(test_create_checks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
