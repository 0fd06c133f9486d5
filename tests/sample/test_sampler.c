/* The public sampler API without a model: greedy ties, seeds, penalties
 * and bias on hand-computed cases, log-probabilities, the penalty window,
 * every parameter check, error atomicity and allocation failures. */
#include "ref_sample.h"
#include "test_support.h"

#include "core/alloc.h"
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static brisk_sampler *make(int32_t n_vocab, const brisk_sampler_params *p) {
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sample_create(n_vocab, p, &s);
  if (st) fail_msg("create: %s", brisk_last_error());
  return s;
}

static int32_t sample(brisk_sampler *s, const float *logits, int32_t n) {
  int32_t tok = -1;
  brisk_status st = brisk_sampler_sample_logits(s, logits, n, &tok);
  if (st) fail_msg("sample: %s", brisk_last_error());
  return tok;
}

static brisk_sampler_params greedy(void) {
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.temperature = 0;
  return p;
}

/* Temperature 0 is the argmax, ties to the lowest id, whatever the
 * truncation settings (they are ignored), and it draws no random number. */
static void test_greedy(void **state) {
  (void)state;
  const float l[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 2.0f};
  brisk_sampler_params p = greedy();
  brisk_sampler *s = make(6, &p);
  assert_int_equal(sample(s, l, 6), 1);
  brisk_sampler_free(s);
  p.top_k = 2;
  p.typical_p = 0.1f;
  p.min_p = 0.9f;
  s = make(6, &p);
  assert_int_equal(sample(s, l, 6), 1);
  brisk_sampler_free(s);

  test_rng r = test_rng_seeded("sample_greedy");
  p = greedy();
  s = make(1000, &p);
  float big[1000];
  for (int trial = 0; trial < 50; trial++) {
    int32_t best = 0;
    for (int t = 0; t < 1000; t++) {
      /* Coarse values so that ties happen. */
      big[t] = (float)floor(test_rng_uniform(&r, -20, 20));
      if (big[t] > big[best]) best = t;
    }
    assert_int_equal(sample(s, big, 1000), best);
  }
  brisk_sampler_free(s);
}

/* Same seed -> the same sequence (also after reset); another seed -> a
 * different one (64 draws over 50 near-uniform tokens: equal by chance with
 * probability ~50^-64). */
static void test_seeds(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("sample_seeds");
  float l[50];
  for (int t = 0; t < 50; t++) l[t] = (float)(0.3 * test_rng_normal(&r));
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.seed = 7;
  p.top_k = 45;
  brisk_sampler *a = make(50, &p), *b = make(50, &p);
  p.seed = 8;
  brisk_sampler *c = make(50, &p);
  int32_t seq[64];
  int differ = 0;
  for (int i = 0; i < 64; i++) {
    seq[i] = sample(a, l, 50);
    assert_int_equal(sample(b, l, 50), seq[i]);
    differ |= sample(c, l, 50) != seq[i];
  }
  assert_true(differ);
  brisk_sampler_reset(a);
  for (int i = 0; i < 64; i++) assert_int_equal(sample(a, l, 50), seq[i]);
  brisk_sampler_free(a);
  brisk_sampler_free(b);
  brisk_sampler_free(c);
}

/* The token stream of a fixed seed and fixed logits is part of the
 * contract (cross-platform reproducibility), so it is pinned here. The
 * expected tokens were computed by an independent Python implementation of
 * the generator and of the draw (cumulative weights in id order). */
static void test_golden_tokens(void **state) {
  (void)state;
  float l[16];
  for (int t = 0; t < 16; t++) l[t] = (float)((t * 7) % 16) / 8.0f;
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.seed = 12345;
  brisk_sampler *s = make(16, &p);
  int32_t got[12];
  for (int i = 0; i < 12; i++) got[i] = sample(s, l, 16);
  const int32_t want[12] = {11, 2, 15, 1, 9, 0, 2, 4, 6, 14, 11, 9};
  for (int i = 0; i < 12; i++) {
    if (got[i] != want[i]) {
      for (int j = 0; j < 12; j++) fprintf(stderr, "%d, ", got[j]);
      fail_msg("draw %d: %d, want %d", i, got[i], want[i]);
    }
  }
  brisk_sampler_free(s);
}

/* Log-probabilities of the whole (6-token) vocabulary give the adjusted
 * logits up to a constant: compare with the log-softmax in double of
 * values computed by hand. */
static void check_logprobs_equal(brisk_sampler *s, const double *want_logits, int32_t n) {
  double m = -INFINITY, z = 0;
  for (int32_t t = 0; t < n; t++) m = want_logits[t] > m ? want_logits[t] : m;
  for (int32_t t = 0; t < n; t++) z += exp(want_logits[t] - m);
  int32_t toks[16];
  float lp[16];
  size_t k = 0;
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 16, &k), BRISK_OK);
  assert_int_equal(k, (size_t)n + 1);
  for (size_t j = 0; j < k; j++) {
    double want = want_logits[toks[j]] - m - log(z);
    if (isinf(want)) {
      assert_true(lp[j] == -INFINITY); /* a forbidden token */
      continue;
    }
    if (fabs(lp[j] - want) > 1e-5)
      fail_msg("entry %zu token %d: %g want %g", j, toks[j], lp[j], want);
  }
}

/* llama.cpp penalty semantics on a hand-computed case, including the
 * window dropping its oldest token. */
static void test_penalties(void **state) {
  (void)state;
  const float l[6] = {2.0f, -1.0f, 0.5f, -3.0f, 1.0f, 0.0f};
  brisk_sampler_params p = greedy();
  p.penalty_last_n = 4;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.n_logprobs = 6;
  brisk_sampler *s = make(6, &p);
  /* Sampling does not accept: without accept the window stays empty. */
  assert_int_equal(sample(s, l, 6), 0);
  assert_int_equal(sample(s, l, 6), 0);
  const double plain[6] = {2.0, -1.0, 0.5, -3.0, 1.0, 0.0};
  check_logprobs_equal(s, plain, 6);
  /* The window keeps the last 4 of 2, 0, 0, 1, 3, 0: {0, 1, 3, 0}. */
  const int32_t acc[] = {2, 0, 0, 1, 3, 0};
  for (int i = 0; i < 6; i++) assert_int_equal(brisk_sampler_accept(s, acc[i]), BRISK_OK);
  /* 0: 2/2 - 2*0.5 - 0.25; 1: -1*2 - 0.5 - 0.25; 3: -3*2 - 0.5 - 0.25. */
  const double pen[6] = {-0.25, -2.75, 0.5, -6.75, 1.0, 0.0};
  assert_int_equal(sample(s, l, 6), 4);
  check_logprobs_equal(s, pen, 6);
  /* Reset empties the window. */
  brisk_sampler_reset(s);
  assert_int_equal(sample(s, l, 6), 0);
  check_logprobs_equal(s, plain, 6);
  brisk_sampler_free(s);

  /* penalty_last_n 0: accept only checks the token. */
  p.penalty_last_n = 0;
  s = make(6, &p);
  assert_int_equal(brisk_sampler_accept(s, 0), BRISK_OK);
  assert_int_equal(sample(s, l, 6), 0);
  check_logprobs_equal(s, plain, 6);
  brisk_sampler_free(s);
}

/* Logit bias adds; a repeated token gets both; -inf forbids. */
static void test_logit_bias(void **state) {
  (void)state;
  const float l[6] = {2.0f, -1.0f, 0.5f, -3.0f, 1.0f, 0.0f};
  brisk_logit_bias bias[] = {{5, 1.5f}, {0, -INFINITY}, {5, 1.0f}, {3, 0.5f}};
  brisk_sampler_params p = greedy();
  p.n_logit_bias = 4;
  p.logit_bias = bias;
  p.n_logprobs = 6;
  brisk_sampler *s = make(6, &p);
  /* The sampler copied the array. */
  bias[0].bias = -100;
  assert_int_equal(sample(s, l, 6), 5);
  const double want[6] = {-INFINITY, -1.0, 0.5, -2.5, 1.0, 2.5};
  check_logprobs_equal(s, want, 6);
  brisk_sampler_free(s);

  /* Bias comes before penalties: 5 gets 0 + 2.5, then / 2 for one use. */
  bias[0].bias = 1.5f;
  p.penalty_last_n = 8;
  p.repeat_penalty = 2.0f;
  s = make(6, &p);
  assert_int_equal(brisk_sampler_accept(s, 5), BRISK_OK);
  assert_int_equal(sample(s, l, 6), 5);
  const double want2[6] = {-INFINITY, -1.0, 0.5, -2.5, 1.0, 1.25};
  check_logprobs_equal(s, want2, 6);
  brisk_sampler_free(s);

  /* Sampling with temperature never picks a forbidden token. */
  brisk_logit_bias ban[] = {{0, -INFINITY}, {4, -INFINITY}};
  brisk_sampler_params_init(&p);
  p.n_logit_bias = 2;
  p.logit_bias = ban;
  s = make(6, &p);
  for (int i = 0; i < 2000; i++) {
    int32_t t = sample(s, l, 6);
    assert_true(t != 0 && t != 4);
  }
  brisk_sampler_free(s);
}

/* Log-probabilities: the sampled token first, then the n largest in order,
 * equal to the log-softmax in double (1e-5: float32 results); truncation
 * and temperature do not change them. */
static void test_logprobs(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("sample_logprobs");
  const int32_t sizes[] = {1, 3, 10, 777, 5000};
  for (int trial = 0; trial < 20; trial++) {
    int32_t n = sizes[trial % 5];
    float *l = malloc((size_t)n * sizeof *l); // [n]
    for (int32_t t = 0; t < n; t++) l[t] = (float)(4 * test_rng_normal(&r));
    brisk_sampler_params p;
    brisk_sampler_params_init(&p);
    p.seed = test_rng_u64(&r);
    p.n_logprobs = n < 10 ? n : 10;
    p.temperature = trial % 3 ? 0.5f : 0.0f;
    p.top_k = trial % 2 ? 3 : 0;
    p.min_p = 0.05f;
    brisk_sampler *s = make(n, &p);
    double *want = malloc((size_t)n * sizeof *want);
    ref_sample_adjusted(&p, l, n, NULL, 0, want);
    double m = -INFINITY, z = 0;
    for (int32_t t = 0; t < n; t++) m = want[t] > m ? want[t] : m;
    for (int32_t t = 0; t < n; t++) z += exp(want[t] - m);
    for (int32_t t = 0; t < n; t++) want[t] -= m + log(z);
    for (int rep = 0; rep < 3; rep++) {
      int32_t tok = sample(s, l, n);
      int32_t toks[11];
      float lp[11];
      size_t k = 0;
      assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 11, &k), BRISK_OK);
      assert_int_equal(k, (size_t)p.n_logprobs + 1);
      assert_int_equal(toks[0], tok);
      for (size_t j = 0; j < k; j++) assert_true(fabs(lp[j] - want[toks[j]]) < 1e-5);
      /* Entries 1.. are the largest, in decreasing order: every other
       * token is at most the last one. */
      for (size_t j = 2; j < k; j++) assert_true(want[toks[j]] <= want[toks[j - 1]]);
      for (int32_t t = 0; t < n; t++) {
        int listed = 0;
        for (size_t j = 1; j < k; j++) listed |= toks[j] == t;
        if (!listed) assert_true(want[t] <= want[toks[k - 1]]);
      }
    }
    free(want);
    free(l);
    brisk_sampler_free(s);
  }
}

static void test_logprobs_api(void **state) {
  (void)state;
  const float l[4] = {1, 2, 3, 4};
  brisk_sampler_params p = greedy();
  brisk_sampler *s = make(4, &p);
  int32_t toks[4];
  float lp[4];
  size_t k = 99;
  /* Off. */
  assert_int_equal(sample(s, l, 4), 3);
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 4, &k), BRISK_E_INVALID_STATE);
  assert_non_null(strstr(brisk_last_error(), "n_logprobs"));
  brisk_sampler_free(s);
  p.n_logprobs = 2;
  s = make(4, &p);
  /* Nothing sampled yet. */
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 4, &k), BRISK_E_INVALID_STATE);
  assert_int_equal(sample(s, l, 4), 3);
  assert_int_equal(brisk_sampler_last_logprobs(NULL, toks, lp, 4, &k), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 4, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_last_logprobs(s, NULL, lp, 4, &k), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, NULL, 4, &k), BRISK_E_INVALID_ARGUMENT);
  /* Asking for the size. */
  assert_int_equal(brisk_sampler_last_logprobs(s, NULL, NULL, 0, &k), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(k, 3);
  /* A short buffer gets the first entries. */
  toks[1] = -1;
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 2, &k), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(k, 3);
  assert_int_equal(toks[0], 3);
  assert_int_equal(toks[1], 3);
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 4, &k), BRISK_OK);
  assert_int_equal(toks[2], 2);
  /* Reset forgets them. */
  brisk_sampler_reset(s);
  assert_int_equal(brisk_sampler_last_logprobs(s, toks, lp, 4, &k), BRISK_E_INVALID_STATE);
  brisk_sampler_free(s);
}

/* Expects create to fail with INVALID_ARGUMENT and a message naming the
 * field and showing its value. */
static void expect_rejected(const brisk_sampler_params *p, const char *field, const char *value) {
  brisk_sampler *s = (brisk_sampler *)(uintptr_t)1;
  brisk_status st = brisk_sample_create(10, p, &s);
  if (st != BRISK_E_INVALID_ARGUMENT) fail_msg("%s=%s: status %d", field, value, st);
  assert_ptr_equal(s, (brisk_sampler *)(uintptr_t)1);
  const char *msg = brisk_last_error();
  if (!strstr(msg, field) || !strstr(msg, value))
    fail_msg("%s=%s: message \"%s\" does not name both", field, value, msg);
}

#define REJECT(field, val, text)                                                                   \
  do {                                                                                             \
    brisk_sampler_params p;                                                                        \
    brisk_sampler_params_init(&p);                                                                 \
    p.field = val;                                                                                 \
    expect_rejected(&p, #field, text);                                                             \
  } while (0)

static void test_param_validation(void **state) {
  (void)state;
  REJECT(temperature, -0.5f, "-0.5");
  REJECT(temperature, NAN, "nan");
  REJECT(temperature, INFINITY, "inf");
  REJECT(top_k, -1, "-1");
  REJECT(top_p, 0.0f, "0");
  REJECT(top_p, 1.5f, "1.5");
  REJECT(top_p, NAN, "nan");
  REJECT(min_p, -0.25f, "-0.25");
  REJECT(min_p, 1.25f, "1.25");
  REJECT(min_p, NAN, "nan");
  REJECT(typical_p, 0.0f, "0");
  REJECT(typical_p, 2.0f, "2");
  REJECT(penalty_last_n, -1, "-1");
  REJECT(repeat_penalty, 0.0f, "0");
  REJECT(repeat_penalty, -1.0f, "-1");
  REJECT(repeat_penalty, INFINITY, "inf");
  REJECT(frequency_penalty, INFINITY, "inf");
  REJECT(frequency_penalty, NAN, "nan");
  REJECT(presence_penalty, -INFINITY, "-inf");
  REJECT(n_logprobs, -1, "-1");
  REJECT(n_logprobs, 11, "11");
  REJECT(struct_size, 0, "0");
  REJECT(struct_size, 100000, "100000");
  REJECT(n_logit_bias, 2, "2"); /* logit_bias is NULL */

  brisk_logit_bias bad[][1] = {{{-1, 0}}, {{10, 0}}, {{3, NAN}}, {{3, INFINITY}}};
  const char *text[] = {"-1", "10", "nan", "inf"};
  const char *field[] = {"token", "token", "bias", "bias"};
  for (int i = 0; i < 4; i++) {
    brisk_sampler_params p;
    brisk_sampler_params_init(&p);
    brisk_logit_bias two[2] = {{1, 0.5f}, bad[i][0]};
    p.logit_bias = two;
    p.n_logit_bias = 2;
    expect_rejected(&p, field[i], text[i]);
    assert_non_null(strstr(brisk_last_error(), "logit_bias[1]"));
  }

  /* Boundary values are accepted. */
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.temperature = 0;
  p.top_k = 1000;
  p.top_p = 1;
  p.min_p = 1;
  p.typical_p = 1;
  p.penalty_last_n = 0;
  p.n_logprobs = 10;
  p.frequency_penalty = -2;
  p.presence_penalty = 2;
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sample_create(10, &p, &s), BRISK_OK);
  brisk_sampler_free(s);
  /* NULL params: defaults. */
  assert_int_equal(brisk_sample_create(10, NULL, &s), BRISK_OK);
  brisk_sampler_free(s);
  assert_int_equal(brisk_sample_create(0, NULL, &s), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sample_create(10, NULL, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_create(NULL, NULL, &s), BRISK_E_INVALID_ARGUMENT);
  brisk_sampler_free(NULL);
  brisk_sampler_reset(NULL);
  brisk_sampler_params_init(NULL);
}

/* Errors at sample time leave the sampler as it was: the next successful
 * sample matches a twin that never saw the error. */
static void test_sample_errors(void **state) {
  (void)state;
  const float good[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  float bad[4] = {0.1f, NAN, 0.3f, 0.4f};
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.seed = 99;
  p.n_logprobs = 1;
  brisk_sampler *s = make(4, &p), *twin = make(4, &p);
  int32_t tok = -7;
  assert_int_equal(sample(s, good, 4), sample(twin, good, 4));
  int32_t lt[2], lt2[2];
  float lp[2], lp2[2];
  size_t k;
  assert_int_equal(brisk_sampler_last_logprobs(s, lt, lp, 2, &k), BRISK_OK);

  assert_int_equal(brisk_sampler_sample_logits(s, bad, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "token 1"));
  bad[1] = INFINITY;
  assert_int_equal(brisk_sampler_sample_logits(s, bad, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  const float none[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  assert_int_equal(brisk_sampler_sample_logits(s, none, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "-inf"));
  assert_int_equal(brisk_sampler_sample_logits(s, good, 3, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "n_vocab 3"));
  assert_int_equal(brisk_sampler_sample_logits(s, NULL, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_sample_logits(s, good, 4, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_sample_logits(NULL, good, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_sample(s, NULL, 0, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(tok, -7);
  assert_int_equal(brisk_sampler_last_logprobs(s, lt2, lp2, 2, &k), BRISK_OK);
  assert_memory_equal(lt, lt2, sizeof lt);
  assert_memory_equal(lp, lp2, sizeof lp);
  for (int i = 0; i < 20; i++) assert_int_equal(sample(s, good, 4), sample(twin, good, 4));

  assert_int_equal(brisk_sampler_accept(s, 4), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "token 4"));
  assert_int_equal(brisk_sampler_accept(s, -1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_accept(NULL, 0), BRISK_E_INVALID_ARGUMENT);
  brisk_sampler_free(s);
  brisk_sampler_free(twin);

  /* Bias or penalties that overflow a logit to +inf are an error, not a
   * silent NaN distribution. */
  brisk_logit_bias big[] = {{2, 3e38f}};
  p.logit_bias = big;
  p.n_logit_bias = 1;
  const float huge[4] = {0, 0, 3e38f, 0};
  s = make(4, &p);
  assert_int_equal(brisk_sampler_sample_logits(s, huge, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "token 2"));
  brisk_sampler_free(s);
  p.n_logit_bias = 0;
  p.repeat_penalty = 1e-30f;
  s = make(4, &p);
  assert_int_equal(brisk_sampler_accept(s, 2), BRISK_OK);
  assert_int_equal(brisk_sampler_sample_logits(s, huge, 4, &tok), BRISK_E_INVALID_ARGUMENT);
  brisk_sampler_free(s);
}

static brisk_status create_everything(void *ctx) {
  (void)ctx;
  brisk_logit_bias bias[] = {{1, 1.0f}, {2, -1.0f}};
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.n_logit_bias = 2;
  p.logit_bias = bias;
  p.n_logprobs = 5;
  p.penalty_last_n = 16;
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sample_create(1000, &p, &s);
  if (st) return st;
  /* Sampling and accepting allocate nothing. */
  float l[1000];
  for (int t = 0; t < 1000; t++) l[t] = (float)(t % 17) * 0.25f;
  int32_t tok;
  uint64_t before = brisk_alloc_live_count();
  st = brisk_sampler_sample_logits(s, l, 1000, &tok);
  if (!st) st = brisk_sampler_accept(s, tok);
  if (!st && brisk_alloc_live_count() != before) st = BRISK_E_INTERNAL;
  brisk_sampler_free(s);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  uint64_t n = test_every_allocation_fails(create_everything, NULL);
  assert_true(n >= 5); /* sampler, candidates, bias, window x2, logprobs x2 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy),        cmocka_unit_test(test_seeds),
      cmocka_unit_test(test_golden_tokens), cmocka_unit_test(test_penalties),
      cmocka_unit_test(test_logit_bias),    cmocka_unit_test(test_logprobs),
      cmocka_unit_test(test_logprobs_api),  cmocka_unit_test(test_param_validation),
      cmocka_unit_test(test_sample_errors), cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
