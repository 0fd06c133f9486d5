/* brisk_embed on a decoder model (stories260K, F32 llama from ../shared):
 * its vectors are the final normed hidden states, so by linearity the
 * logits brisk_decode gives equal them times the output matrix: the LAST
 * vector times W is the last position's logits, and the MEAN vector times
 * W the mean of every position's logits (float64 sums, compared within
 * float32 rounding). Also the normalised vector is the raw one over its
 * norm, CLS is position 0's, and the ids are the vocabulary's (BOS first
 * when it adds one). */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "model/embed_tok.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void logits_of(const brisk_model *m, const float *h, double *out) {
  const brisk_weight *w = &m->output;
  assert_int_equal(w->type, BRISK_DTYPE_F32);
  for (int64_t v = 0; v < w->rows; v++) {
    const float *row = (const float *)((const char *)w->data + v * w->row_bytes);
    double s = 0;
    for (int64_t i = 0; i < w->cols; i++) s += (double)h[i] * row[i];
    out[v] = s;
  }
}

static void expect_close(const double *got, const float *want, int64_t n, const char *what) {
  double scale = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  for (int64_t i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > 2e-5 * scale + 1e-6)
      fail_msg("%s: logit %lld is %.9g from the vector, %.9g from brisk_decode", what, (long long)i,
               got[i], (double)want[i]);
}

static void test_decoder_pooling(void **state) {
  (void)state;
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.repack = 0; /* the output matrix is read here as F32 */
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  const char *text = "Once upon a time, there was a little girl named Lily.";
  int32_t *ids = NULL;
  size_t n = 0;
  assert_int_equal(brisk_model_embed_tokens(m, text, strlen(text), 1u << 20, &ids, &n), BRISK_OK);
  int32_t want_ids[64];
  size_t n_want = 0;
  assert_int_equal(
      brisk_tokenize(m, text, strlen(text), want_ids, 64, BRISK_TOKENIZE_ADD_SPECIAL, &n_want),
      BRISK_OK);
  assert_int_equal(n, n_want);
  assert_memory_equal(ids, want_ids, n * sizeof *ids);

  const int64_t d = brisk_model_n_embd(m), nv = brisk_model_n_vocab(m);
  float *last = malloc((size_t)d * sizeof *last), *mean = malloc((size_t)d * sizeof *mean);
  float *cls = malloc((size_t)d * sizeof *cls), *unit = malloc((size_t)d * sizeof *unit);
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  assert_int_equal(brisk_embed(m, &p, &text, 1, last, (size_t)d), BRISK_OK); /* default: last */
  p.pooling = BRISK_EMBED_POOLING_MEAN;
  assert_int_equal(brisk_embed(m, &p, &text, 1, mean, (size_t)d), BRISK_OK);
  p.pooling = BRISK_EMBED_POOLING_CLS;
  assert_int_equal(brisk_embed(m, &p, &text, 1, cls, (size_t)d), BRISK_OK);
  p.pooling = BRISK_EMBED_POOLING_LAST;
  p.normalize = 1;
  assert_int_equal(brisk_embed(m, &p, &text, 1, unit, (size_t)d), BRISK_OK);

  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_type = BRISK_KV_F32;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  assert_int_equal(brisk_batch_create((int32_t)n, &b), BRISK_OK);
  for (size_t t = 0; t < n; t++)
    assert_int_equal(brisk_batch_add(b, ids[t], (int32_t)t, 0, true), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  double *got = malloc((size_t)nv * sizeof *got);
  float *want = calloc((size_t)nv, sizeof *want);
  logits_of(m, last, got);
  expect_close(got, brisk_get_logits(c, (int32_t)n - 1), nv, "last");
  logits_of(m, cls, got);
  expect_close(got, brisk_get_logits(c, 0), nv, "cls");
  for (size_t t = 0; t < n; t++) {
    const float *l = brisk_get_logits(c, (int32_t)t);
    for (int64_t v = 0; v < nv; v++) want[v] += l[v] / (float)n;
  }
  logits_of(m, mean, got);
  expect_close(got, want, nv, "mean");
  double norm = 0;
  for (int64_t i = 0; i < d; i++) norm += (double)last[i] * last[i];
  for (int64_t i = 0; i < d; i++)
    assert_true(fabs(unit[i] - last[i] / sqrt(norm)) <= 1e-6 * fabs(last[i] / sqrt(norm)) + 1e-9);
  free(got), free(want), free(last), free(mean), free(cls), free(unit);
  brisk_free(ids);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_decoder_pooling)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
