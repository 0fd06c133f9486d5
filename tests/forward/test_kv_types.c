/* The quantized KV caches on whole models: logits of a teacher-forced token
 * sequence with INT8 (q8_0) and FP8 E4M3 caches against the same pass with
 * an F32 cache (the shared tiny models and stories260K, and SmolLM2-135M
 * over real English text when it is installed), and on SmolLM2 the greedy
 * next token's agreement with the F16 cache's over 2048 positions, against
 * the F32 cache's agreement as the yardstick. The numbers printed are those
 * include/brisk.h states. */
#include "test_support.h"

#include "../chat/smollm2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 128

static const brisk_kv_type kinds[] = {BRISK_KV_F32, BRISK_KV_F16, BRISK_KV_Q8_0, BRISK_KV_FP8_E4M3};
static const char *const kind_names[] = {"f32", "f16", "q8_0", "fp8"};

static int32_t argmax(const float *x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

/* All logits [n][n_vocab] of tokens fed CHUNK at a time from position 0;
 * with top1 set, only each position's greedy token goes there (and NULL is
 * returned). */
static float *forced_logits(const brisk_model *m, brisk_kv_type kv, const int32_t *toks, int n,
                            int32_t *top1) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = kv;
  p.kv_tokens = n;
  p.max_batch_tokens = CHUNK;
  p.n_seq_max = 1;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  const size_t nv = (size_t)brisk_model_n_vocab(m);
  float *out = top1 ? NULL : malloc((size_t)n * nv * sizeof *out);
  assert_true(top1 || out);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(CHUNK, &b), BRISK_OK);
  for (int t0 = 0; t0 < n; t0 += CHUNK) {
    brisk_batch_clear(b);
    int nt = n - t0 < CHUNK ? n - t0 : CHUNK;
    for (int i = 0; i < nt; i++) brisk_batch_add(b, toks[t0 + i], t0 + i, 0, 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    for (int i = 0; i < nt; i++) {
      if (top1)
        top1[t0 + i] = argmax(brisk_get_logits(c, i), nv);
      else
        memcpy(out + (size_t)(t0 + i) * nv, brisk_get_logits(c, i), nv * sizeof *out);
    }
  }
  brisk_batch_free(b);
  brisk_context_free(c);
  return out;
}

/* Largest |logit - F32's| over all positions, the worst and the mean row
 * relative L2 error, for the F16 cache (the reference's own rounding noise:
 * on models with quantized weights the activations are quantized too, and
 * any change in K/V moves their rounding) and the two 8-bit caches, whose
 * worst-row errors (or, with on_mean, mean-row errors) must stay under the
 * bounds given. */
static void compare(const char *name, const brisk_model *m, const int32_t *toks, int n,
                    double q8_bound, double fp8_bound, bool on_mean) {
  const size_t nv = (size_t)brisk_model_n_vocab(m);
  float *ref = forced_logits(m, BRISK_KV_F32, toks, n, NULL);
  for (int k = 1; k < 4; k++) {
    float *got = forced_logits(m, kinds[k], toks, n, NULL);
    double worst_abs = 0, worst_rel = 0, mean_rel = 0, range = 0;
    for (int t = 0; t < n; t++) {
      double num = 0, den = 0;
      for (size_t v = 0; v < nv; v++) {
        double d = (double)got[t * nv + v] - ref[t * nv + v];
        worst_abs = fmax(worst_abs, fabs(d));
        range = fmax(range, fabs(ref[t * nv + v]));
        num += d * d, den += (double)ref[t * nv + v] * ref[t * nv + v];
      }
      double rel = sqrt(num / (den > 0 ? den : 1));
      worst_rel = fmax(worst_rel, rel);
      mean_rel += rel / n;
    }
    fprintf(stderr,
            "%-22s %-5s vs f32 cache over %d tokens: max |dlogit| %.4f (|logits| up to %.1f), "
            "row rel L2 mean %.2e worst %.2e\n",
            name, kind_names[k], n, worst_abs, range, mean_rel, worst_rel);
    double bound = kinds[k] == BRISK_KV_Q8_0       ? q8_bound
                   : kinds[k] == BRISK_KV_FP8_E4M3 ? fp8_bound
                                                   : 1e9;
    double err = on_mean ? mean_rel : worst_rel;
    if (err > bound)
      fail_msg("%s %s: %s row relative L2 %g (bound %g)", name, kind_names[k],
               on_mean ? "mean" : "worst", err, bound);
    free(got);
  }
  free(ref);
}

/* Deterministic ids for the random-weight models (no vocabulary of text). */
static int32_t *pseudo_tokens(int n, int32_t n_vocab) {
  test_rng r = test_rng_seeded("kv_types_tokens");
  int32_t *t = malloc((size_t)n * sizeof *t);
  for (int i = 0; i < n; i++) t[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  return t;
}

static void test_shared_models(void **state) {
  (void)state;
  const char *models[] = {"models/tiny-f16.gguf", "models/tiny-q8_0.gguf", "models/tiny-q4_0.gguf",
                          "models/stories260K.gguf"};
  int ran = 0;
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    const char *path = test_shared_path(models[i]);
    if (!path) continue;
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
    int n = 200;
    int32_t *toks = pseudo_tokens(n, brisk_model_n_vocab(m));
    /* 8-bit K/V: ~0.4% (INT8) / 3% (FP8) relative error per value, of
     * which the logits keep a fraction. */
    /* stories260K (F32 weights, head_dim 8, sharp attention over random
     * ids) is the most sensitive: over random prompts one row's attention
     * can flip to other keys, and that row's error is then of the row's own
     * size (FP8: worst rows 0.5-1.6 of the row's norm, seed 1798558890 gave
     * 1.63; INT8 with its INT8 query: 0.15-0.53). A worst-row bound cannot
     * tell such a flip from a broken path there, so for this model the
     * bound is on the mean row error (observed: INT8 0.035-0.042, FP8 about
     * 0.15), which a broken path (errors of the logits' own size on every
     * row) exceeds many times over. */
    bool stories = strstr(models[i], "stories") != NULL;
    if (stories)
      compare(models[i], m, toks, n, 0.15, 0.45, true);
    else
      compare(models[i], m, toks, n, 0.05, 0.15, false);
    free(toks);
    brisk_model_free(m);
    ran++;
  }
  if (!ran) SKIP_BECAUSE("no models in the shared folder");
}

/* The first n tokens of the shared design document (real English text). */
static int32_t *text_tokens(const brisk_model *m, int n) {
  const char *path = test_shared_path("DESIGN.md");
  if (!path) return NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = malloc(1 << 20);
  size_t len = fread(text, 1, (1 << 20) - 1, f);
  fclose(f);
  size_t cap = len + 16, got = 0;
  int32_t *toks = malloc(cap * sizeof *toks);
  assert_int_equal(brisk_tokenize(m, text, len, toks, cap, BRISK_TOKENIZE_ADD_SPECIAL, &got),
                   BRISK_OK);
  free(text);
  if (got < (size_t)n) {
    free(toks);
    return NULL;
  }
  return toks;
}

static void test_smollm2(void **state) {
  (void)state;
  char path[4096];
  if (test_smollm2_path(path, sizeof path)) SKIP_BECAUSE("SmolLM2-135M-Instruct is not installed");
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  const int n = 2048;
  int32_t *toks = text_tokens(m, n);
  if (!toks) {
    brisk_model_free(m);
    SKIP_BECAUSE("the shared DESIGN.md is missing or shorter than %d tokens", n);
  }
  /* Logit error on the first 256 tokens (all four caches). */
  compare("SmolLM2-135M", m, toks, 256, 0.5, 0.5, false);
  /* Top-1 agreement with the F16 cache over 2048 teacher-forced positions,
   * and the F32 cache's own as the yardstick: this model's weights are
   * Q4_1, its activations are quantized on the way into every matmul, and
   * any change to K/V moves some of their roundings, so even an exact
   * cache flips the near-ties among the top tokens. */
  int32_t *f16 = malloc(n * sizeof *f16), *q = malloc(n * sizeof *q);
  forced_logits(m, BRISK_KV_F16, toks, n, f16);
  int agree_f32 = 0;
  for (int k = 0; k < 3; k++) { /* F32 (the yardstick) and Q8_0 */
    if (kinds[k] == BRISK_KV_F16) continue;
    forced_logits(m, kinds[k], toks, n, q);
    int agree = 0;
    for (int t = 0; t < n; t++) agree += f16[t] == q[t];
    fprintf(stderr, "SmolLM2-135M %-5s top-1 agreement with the f16 cache: %d / %d (%.2f%%)\n",
            kind_names[k], agree, n, 100.0 * agree / n);
    if (kinds[k] == BRISK_KV_F32)
      agree_f32 = agree;
    else /* within 2 points of the exact cache's agreement */
      assert_true(agree >= agree_f32 - n / 50);
  }
  free(q);
  free(f16);
  free(toks);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_models),
      cmocka_unit_test(test_smollm2),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
