/* Speculative decoding: the prompt-lookup drafter against a naive search,
 * the acceptance rule's output distribution (exactly, by enumeration, and
 * by sampling through the verification), greedy generation token for token
 * equal with and without speculation for both drafters, seeded sampling
 * equal to plain sampling for prompt lookup, a chi-square test of the first
 * two tokens with a draft model against the target's exact distribution,
 * KV rollback, the vocabulary check, argument checks and allocation
 * failures. Models: random weights from tests/support/test_models.h. */
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "sample/sampler.h"
#include "spec/spec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
/* The target (F32), the same weights quantized to Q8_0 (a close draft),
 * and another random model with the same vocabulary (a poor draft). */
static brisk_model *target, *draft_q8, *draft_other;
static char path_target[256];

static brisk_status write_model(const char *name, uint32_t type, uint64_t seed, uint32_t n_vocab,
                                char *path) {
  snprintf(path, 256, "%s/%s", dir, name);
  test_model_spec s = test_model_default("llama");
  s.weight_type = type;
  if (n_vocab) s.n_vocab = n_vocab;
  test_rng r = {seed};
  return test_model_write(path, &s, &r, NULL);
}

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  char p[256];
  /* Fixed seeds, chosen once: the chi-square test needs a fixed model. */
  if (write_model("target.gguf", BRISK_DTYPE_F32, 7, 0, path_target) ||
      brisk_model_load(path_target, NULL, &target))
    return -1;
  if (write_model("q8.gguf", BRISK_DTYPE_Q8_0, 7, 0, p) || brisk_model_load(p, NULL, &draft_q8))
    return -1;
  if (write_model("other.gguf", BRISK_DTYPE_F32, 8, 0, p) ||
      brisk_model_load(p, NULL, &draft_other))
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(target);
  brisk_model_free(draft_q8);
  brisk_model_free(draft_other);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_context *make_ctx(const brisk_model *m, int32_t kv_tokens) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = kv_tokens;
  p.n_threads = 1;
  p.max_batch_tokens = 64;
  p.n_seq_max = 4;
  brisk_context *c = NULL;
  if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* ---- prompt lookup ------------------------------------------------------ */

/* The drafter's contract written out plainly. */
static size_t naive_lookup(const int32_t *h, size_t n, int32_t gmin, int32_t gmax, size_t k,
                           int32_t *out) {
  for (int32_t g = gmax; g >= gmin; g--) {
    for (long j = (long)n - g - 1; j >= 0; j--) {
      int eq = 1;
      for (int32_t i = 0; i < g && eq; i++) eq = h[j + i] == h[(long)n - g + i];
      if (!eq) continue;
      size_t m = 0;
      for (size_t i = (size_t)j + (size_t)g; i < n && m < k; i++) out[m++] = h[i];
      return m;
    }
  }
  return 0;
}

static void test_lookup(void **state) {
  (void)state;
  const int32_t h[] = {5, 6, 7, 8, 9, 1, 2, 6, 7};
  int32_t out[8];
  /* "6 7" occurred at 1: what followed is 8 9 1 ... */
  assert_int_equal(brisk_spec_lookup(h, 9, 1, 3, 3, out), 3);
  assert_int_equal(out[0], 8);
  assert_int_equal(out[1], 9);
  assert_int_equal(out[2], 1);
  /* The most recent occurrence wins; a match may run up to the end. */
  const int32_t r[] = {3, 4, 3, 5, 3};
  assert_int_equal(brisk_spec_lookup(r, 5, 1, 1, 4, out), 2);
  assert_int_equal(out[0], 5);
  assert_int_equal(out[1], 3);
  /* No match, k = 0, too short. */
  const int32_t u[] = {1, 2, 3, 4};
  assert_int_equal(brisk_spec_lookup(u, 4, 1, 3, 4, out), 0);
  assert_int_equal(brisk_spec_lookup(h, 9, 1, 3, 0, out), 0);
  assert_int_equal(brisk_spec_lookup(h, 1, 1, 3, 4, out), 0);
  /* Fresh random histories over a small alphabet against the naive search. */
  test_rng rng = test_rng_seeded("spec_lookup");
  for (int trial = 0; trial < 2000; trial++) {
    int32_t hist[64], a[8], b[8];
    size_t n = 1 + test_rng_u64(&rng) % 64, k = test_rng_u64(&rng) % 9;
    int32_t alpha = 2 + (int32_t)(test_rng_u64(&rng) % 6);
    int32_t gmin = 1 + (int32_t)(test_rng_u64(&rng) % 4);
    int32_t gmax = gmin + (int32_t)(test_rng_u64(&rng) % 4);
    for (size_t i = 0; i < n; i++) hist[i] = (int32_t)(test_rng_u64(&rng) % (uint64_t)alpha);
    size_t ma = brisk_spec_lookup(hist, n, gmin, gmax, k, a);
    size_t mb = naive_lookup(hist, n, gmin, gmax, k, b);
    assert_int_equal(ma, mb);
    assert_memory_equal(a, b, ma * sizeof *a);
  }
}

/* ---- the acceptance rule ------------------------------------------------ */

/* A random distribution over n outcomes; with_zeros drops about 30% of
 * them, and outcome `zero` (if < n) always. */
static void random_dist(test_rng *r, double *p, size_t n, int with_zeros, size_t zero) {
  double z = 0;
  for (size_t t = 0; t < n; t++) {
    p[t] = with_zeros && test_rng_uniform(r, 0, 1) < 0.3 ? 0 : test_rng_uniform(r, 0, 1);
    if (t == zero) p[t] = 0;
    z += p[t];
  }
  if (z == 0) p[test_rng_u64(r) % n] = z = 1;
  for (size_t t = 0; t < n; t++) p[t] /= z;
}

/* P(out = y) = q(y) min(1, p(y)/q(y)) + P(reject) r(y) must be p(y) for
 * any p and q, computed from the residual the verification draws from. */
static void test_rule_exact(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("spec_rule_exact");
  enum { V = 7 };
  for (int trial = 0; trial < 5000; trial++) {
    double p[V], q[V], r[V], out[V];
    random_dist(&rng, p, V, trial % 2, V);
    random_dist(&rng, q, V, trial % 3 == 0, V);
    double accept_total = 0;
    for (int t = 0; t < V; t++) {
      double a = q[t] > 0 ? (p[t] < q[t] ? p[t] : q[t]) : 0; /* q(t) min(1, p/q) */
      out[t] = a;
      accept_total += a;
    }
    double z = brisk_spec_residual(p, q, V, r);
    /* The residual's mass is exactly the rejection probability. */
    assert_true(fabs(z - (1 - accept_total)) < 1e-12);
    for (int t = 0; t < V; t++) out[t] += (1 - accept_total) * r[t];
    for (int t = 0; t < V; t++) assert_true(fabs(out[t] - p[t]) < 1e-12);
  }
  /* The draw never picks a zero-probability index and covers [0, 1). */
  const double d[4] = {0, 0.25, 0, 0.75};
  assert_int_equal(brisk_spec_draw(d, 4, 0.0), 1);
  assert_int_equal(brisk_spec_draw(d, 4, 0.2499), 1);
  assert_int_equal(brisk_spec_draw(d, 4, 0.25), 3);
  assert_int_equal(brisk_spec_draw(d, 4, 0.9999999), 3);
}

/* Upper 1e-4 quantiles of the chi-square distribution, df = 1..20 (from
 * tests/sample/test_distribution.c). */
static const double chi2_crit_1e4[20] = {15.137, 18.421, 21.108, 23.513, 25.745, 27.856, 29.878,
                                         31.828, 33.720, 35.564, 37.367, 39.134, 40.871, 42.579,
                                         44.263, 45.925, 47.566, 49.189, 50.795, 52.386};

/* Chi-square of counts[n] against probabilities want[n] (bins with an
 * expected count < 5 pooled); fails above the 1e-4 quantile, and on any
 * count outside the support. */
static void chi_square(const char *name, const long *count, const double *want, size_t n,
                       long total) {
  double chi2 = 0, pool_e = 0, pool_o = 0;
  int bins = 0;
  for (size_t t = 0; t < n; t++) {
    if (want[t] == 0) {
      if (count[t])
        fail_msg("%s: outcome %zu has probability 0 but came %ld times", name, t, count[t]);
      continue;
    }
    double e = want[t] * (double)total;
    if (e < 5) {
      pool_e += e;
      pool_o += (double)count[t];
      continue;
    }
    chi2 += ((double)count[t] - e) * ((double)count[t] - e) / e;
    bins++;
  }
  if (pool_e > 0) {
    chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
    bins++;
  }
  assert_true(bins >= 3 && bins <= 21);
  fprintf(stderr, "%s: %d bins, chi2 %.2f (critical %.2f)\n", name, bins, chi2,
          chi2_crit_1e4[bins - 2]);
  assert_true(chi2 < chi2_crit_1e4[bins - 2]);
}

/* The rule through brisk_spec_verify with one drafted token: x drawn from
 * q, p the sampler's distribution; the first produced token must follow p,
 * and when x is accepted a second (bonus) token is produced. */
static void test_rule_sampled(void **state) {
  (void)state;
  enum { V = 8, N = 200000 };
  test_rng rng = {20261129}; /* fixed: the chi-square test is at a fixed significance */
  double p[V], q[V], probs[V], scratch[2 * V];
  random_dist(&rng, p, V, 0, 2);
  random_dist(&rng, q, V, 0, 5);
  float logits[V];
  for (int t = 0; t < V; t++) logits[t] = p[t] > 0 ? (float)log(p[t]) : -INFINITY;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = 99;
  sp.penalty_last_n = 0;
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sample_create(V, &sp, &s), BRISK_OK);
  assert_int_equal(brisk_sample_distribution(s, logits, probs), BRISK_OK);
  for (int t = 0; t < V; t++) assert_true(fabs(probs[t] - p[t]) < 1e-6);
  const float *rows[2] = {logits, logits};
  long count[V] = {0}, accepted = 0;
  for (int i = 0; i < N; i++) {
    int32_t x = brisk_spec_draw(q, V, test_rng_uniform(&rng, 0, 1)), out[2];
    size_t n = 0;
    assert_int_equal(brisk_spec_verify(s, rows, &x, 1, q, scratch, out, &n), BRISK_OK);
    assert_true(n == 1 || n == 2);
    if (n == 2) assert_int_equal(out[0], x);
    accepted += n == 2;
    count[out[0]]++;
  }
  chi_square("rule", count, probs, V, N);
  /* The acceptance rate is sum min(p, q). */
  double beta = 0;
  for (int t = 0; t < V; t++) beta += p[t] < q[t] ? p[t] : q[t];
  assert_true(fabs((double)accepted / N - beta) < 0.01);
  brisk_sampler_free(s);
}

/* ---- generation loops ----------------------------------------------------- */

/* Plain generation: decode the prompt, then sample and decode one token at
 * a time. Writes n_gen tokens to out. */
static void generate_plain(const brisk_model *m, const brisk_sampler_params *sp,
                           const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t *out) {
  brisk_context *c = make_ctx(m, 512);
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sampler_create(m, sp, &s), BRISK_OK);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t i = 0; i < n_prompt; i++)
    assert_int_equal(brisk_batch_add(b, prompt[i], i, 0, i == n_prompt - 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  for (int32_t g = 0; g < n_gen; g++) {
    int32_t t;
    assert_int_equal(brisk_sampler_sample(s, c, g == 0 ? n_prompt - 1 : 0, &t), BRISK_OK);
    assert_int_equal(brisk_sampler_accept(s, t), BRISK_OK);
    out[g] = t;
    brisk_batch_clear(b);
    assert_int_equal(brisk_batch_add(b, t, n_prompt + g, 0, 1), BRISK_OK);
    if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  }
  brisk_batch_free(b);
  brisk_sampler_free(s);
  brisk_context_free(c);
}

/* Speculative generation of n_gen tokens on seq 0 of c; the first token is
 * sampled from the prompt's logits as in the plain loop, then rounds run
 * with capacity = the tokens still wanted. Checks the KV invariants after
 * every round: the sequence holds all tokens but the pending one, and the
 * pool holds exactly its blocks (nothing rejected is left behind). */
static void generate_spec(brisk_context *c, brisk_spec *spec, const brisk_sampler_params *sp,
                          const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t *out) {
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sampler_create(brisk_context_model(c), sp, &s), BRISK_OK);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t i = 0; i < n_prompt; i++)
    assert_int_equal(brisk_batch_add(b, prompt[i], i, 0, i == n_prompt - 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  int32_t *hist = calloc((size_t)(n_prompt + n_gen + 1), sizeof *hist);
  memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
  int32_t t;
  assert_int_equal(brisk_sampler_sample(s, c, n_prompt - 1, &t), BRISK_OK);
  assert_int_equal(brisk_sampler_accept(s, t), BRISK_OK);
  size_t n = (size_t)n_prompt;
  hist[n++] = t;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  while (n < (size_t)(n_prompt + n_gen)) {
    size_t want = (size_t)(n_prompt + n_gen) - n, got = 0;
    brisk_status st = brisk_spec_round(spec, 0, s, hist, n, hist + n, want, &got);
    if (st) fail_msg("round: %s", brisk_last_error());
    assert_true(got >= 1 && got <= want);
    n += got;
    assert_int_equal(brisk_seq_len(c, 0), (int32_t)n - 1);
    assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
    assert_int_equal(ks.n_blocks - ks.n_free_blocks,
                     ((int32_t)n - 1 + ks.block_size - 1) / ks.block_size);
  }
  memcpy(out, hist + n_prompt, (size_t)n_gen * sizeof *out);
  free(hist);
  brisk_batch_free(b);
  brisk_sampler_free(s);
}

static brisk_spec *make_spec(brisk_context *c, brisk_spec_drafter kind, const brisk_model *dm,
                             int32_t k, int adaptive) {
  brisk_spec_params p;
  brisk_spec_params_init(&p);
  p.drafter = kind;
  p.draft_model = dm;
  p.n_draft = k;
  p.adaptive = adaptive;
  brisk_spec *spec = NULL;
  if (brisk_spec_create(c, &p, &spec)) fail_msg("spec: %s", brisk_last_error());
  return spec;
}

/* A prompt with repeats: a random phrase three times, then its start. */
static int32_t repeat_prompt(test_rng *r, int32_t *prompt) {
  int32_t phrase[8], n = 0, len = 4 + (int32_t)(test_rng_u64(r) % 5);
  for (int32_t i = 0; i < len; i++) phrase[i] = 3 + (int32_t)(test_rng_u64(r) % 93);
  prompt[n++] = 1;
  for (int rep = 0; rep < 3; rep++)
    for (int32_t i = 0; i < len; i++) prompt[n++] = phrase[i];
  prompt[n++] = phrase[0];
  prompt[n++] = phrase[1];
  return n;
}

/* Greedy: speculation changes nothing, token for token, for both drafters,
 * fixed and adaptive k, with and without a repetition penalty (whose window
 * must advance token by token inside a round). */
static void test_greedy_identical(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("spec_greedy");
  enum { GEN = 48 };
  uint64_t drafted[2] = {0}, accepted[2] = {0};
  for (int trial = 0; trial < 8; trial++) {
    int32_t prompt[32], want[GEN], got[GEN];
    int32_t n_prompt = repeat_prompt(&rng, prompt);
    brisk_sampler_params sp;
    brisk_sampler_params_init(&sp);
    sp.temperature = 0;
    if (trial % 2) sp.repeat_penalty = 1.3f;
    generate_plain(target, &sp, prompt, n_prompt, GEN, want);
    for (int kind = 0; kind < 2; kind++) {
      brisk_context *c = make_ctx(target, 512);
      brisk_spec *spec = make_spec(c, kind ? BRISK_SPEC_DRAFT_MODEL : BRISK_SPEC_PROMPT_LOOKUP,
                                   kind ? draft_q8 : NULL, 1 + trial % 6, trial % 4 >= 2);
      generate_spec(c, spec, &sp, prompt, n_prompt, GEN, got);
      for (int i = 0; i < GEN; i++)
        if (got[i] != want[i])
          fail_msg("trial %d drafter %d: token %d is %d, plain greedy gave %d", trial, kind, i,
                   got[i], want[i]);
      brisk_spec_stats st = {.struct_size = sizeof st};
      assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
      assert_int_equal(st.n_produced, GEN - 1);
      assert_int_equal(st.n_produced, st.n_accepted + st.n_rounds);
      assert_true(st.n_accepted <= st.n_drafted);
      drafted[kind] += st.n_drafted;
      accepted[kind] += st.n_accepted;
      brisk_spec_free(spec);
      brisk_context_free(c);
    }
  }
  fprintf(stderr, "greedy: lookup accepted %llu of %llu drafted, Q8_0 draft %llu of %llu\n",
          (unsigned long long)accepted[0], (unsigned long long)drafted[0],
          (unsigned long long)accepted[1], (unsigned long long)drafted[1]);
  /* The comparison means something only if drafts were made and some were
   * accepted (the Q8_0 copy agrees with its F32 original most of the time). */
  assert_true(drafted[0] > 0 && accepted[0] > 0);
  assert_true(drafted[1] > 0 && accepted[1] > drafted[1] / 2);
}

/* Prompt lookup with sampling draws each token with the sampler's own
 * draw: the same seed gives exactly the plain output. */
static void test_lookup_sampling_identical(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("spec_lookup_sampling");
  enum { GEN = 40 };
  uint64_t drafted = 0;
  for (int trial = 0; trial < 6; trial++) {
    int32_t prompt[32], want[GEN], got[GEN];
    int32_t n_prompt = repeat_prompt(&rng, prompt);
    brisk_sampler_params sp;
    brisk_sampler_params_init(&sp);
    sp.seed = test_rng_u64(&rng);
    sp.temperature = 0.3f + 0.2f * (float)(trial % 3);
    sp.top_k = trial % 2 ? 5 : 0;
    sp.repeat_penalty = trial % 3 ? 1.2f : 1.0f;
    generate_plain(target, &sp, prompt, n_prompt, GEN, want);
    brisk_context *c = make_ctx(target, 512);
    brisk_spec *spec = make_spec(c, BRISK_SPEC_PROMPT_LOOKUP, NULL, 4, 0);
    generate_spec(c, spec, &sp, prompt, n_prompt, GEN, got);
    assert_memory_equal(got, want, sizeof want);
    brisk_spec_stats st = {.struct_size = sizeof st};
    assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
    drafted += st.n_drafted;
    brisk_spec_free(spec);
    brisk_context_free(c);
  }
  assert_true(drafted > 0);
}

/* With a draft model and sampling, the first two tokens after a prompt
 * follow the target's joint distribution p(t1) p(t2 | t1), computed exactly
 * from the target's logits. A poor draft (another random model) makes many
 * rejections, so the residual draw is exercised as much as acceptance. */
static void test_draft_sampling_distribution(void **state) {
  (void)state;
  enum { N = 3000, V = 96 };
  const int32_t prompt[] = {1, 40, 41, 42, 43, 40, 41};
  const int32_t n_prompt = 7;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  /* Four allowed tokens: their 16 pairs are the chi-square's cells, and
   * the draft's and the target's distributions over them overlap without
   * being equal. */
  static brisk_logit_bias bias[96];
  size_t nb = 0;
  for (int32_t t = 0; t < 96; t++)
    if (t % 10 != 0 || t == 0 || t > 40) bias[nb++] = (brisk_logit_bias){t, -INFINITY};
  sp.logit_bias = bias;
  sp.n_logit_bias = nb;
  brisk_context *c = make_ctx(target, 1024);
  /* The exact joint distribution, from seq 1. */
  brisk_sampler *ref = NULL;
  assert_int_equal(brisk_sampler_create(target, &sp, &ref), BRISK_OK);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t i = 0; i < n_prompt; i++)
    assert_int_equal(brisk_batch_add(b, prompt[i], i, 1, i == n_prompt - 1), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  static double p1[V], p2[V], joint[V * V];
  assert_int_equal(brisk_sample_distribution(ref, brisk_get_logits(c, n_prompt - 1), p1), 0);
  for (int32_t t1 = 0; t1 < V; t1++) {
    for (int32_t t2 = 0; t2 < V; t2++) joint[t1 * V + t2] = 0;
    if (p1[t1] == 0) continue;
    brisk_batch_clear(b);
    assert_int_equal(brisk_batch_add(b, t1, n_prompt, 1, 1), BRISK_OK);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    assert_int_equal(brisk_sample_distribution(ref, brisk_get_logits(c, 0), p2), 0);
    for (int32_t t2 = 0; t2 < V; t2++) joint[t1 * V + t2] = p1[t1] * p2[t2];
    assert_int_equal(brisk_seq_truncate(c, 1, n_prompt), BRISK_OK);
  }
  /* Speculative runs fork seq 1, which holds the prompt but its last
   * token: that is pending, so the first round produces t1 (and t2 too
   * when its draft token is accepted). */
  assert_int_equal(brisk_seq_truncate(c, 1, n_prompt - 1), BRISK_OK);
  brisk_spec *spec = make_spec(c, BRISK_SPEC_DRAFT_MODEL, draft_other, 3, 0);
  static long count[V * V];
  memset(count, 0, sizeof count);
  for (int i = 0; i < N; i++) {
    sp.seed = 1000 + (uint64_t)i;
    brisk_sampler *s = NULL;
    assert_int_equal(brisk_sampler_create(target, &sp, &s), BRISK_OK);
    assert_int_equal(brisk_seq_fork(c, 1, 0), BRISK_OK);
    int32_t hist[16], got[2];
    memcpy(hist, prompt, sizeof prompt);
    size_t n = (size_t)n_prompt, have = 0;
    while (have < 2) {
      size_t k = 0;
      assert_int_equal(brisk_spec_round(spec, 0, s, hist, n, hist + n, 2 - have, &k), BRISK_OK);
      for (size_t j = 0; j < k; j++) got[have++] = hist[n + j];
      n += k;
    }
    count[got[0] * V + got[1]]++;
    assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
    brisk_sampler_free(s);
  }
  brisk_spec_stats st = {.struct_size = sizeof st};
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
  fprintf(stderr, "draft sampling: accepted %llu of %llu drafted\n",
          (unsigned long long)st.n_accepted, (unsigned long long)st.n_drafted);
  /* Both paths of the rule must have run many times. */
  assert_true(st.n_accepted > N / 20 && st.n_drafted - st.n_accepted > N / 20);
  chi_square("first two tokens", count, joint, V * V, N);
  brisk_spec_free(spec);
  brisk_batch_free(b);
  brisk_sampler_free(ref);
  brisk_context_free(c);
}

/* Rollback: after speculative generation on two sequences and freeing
 * them, the target's and the draft's pools are back to all free; a target
 * pool too small for the draft still makes progress one token at a time. */
static void test_rollback(void **state) {
  (void)state;
  brisk_context *c = make_ctx(target, 256);
  brisk_kv_stats before = {.struct_size = sizeof before}, after = before, dbefore = before,
                 dafter = before;
  assert_int_equal(brisk_context_kv_stats(c, &before), BRISK_OK);
  brisk_spec *spec = make_spec(c, BRISK_SPEC_DRAFT_MODEL, draft_other, 6, 1);
  assert_int_equal(brisk_context_kv_stats(spec->dctx, &dbefore), BRISK_OK);
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = 3;
  int32_t prompt[] = {1, 10, 11, 12, 10, 11, 12}, out[40];
  generate_spec(c, spec, &sp, prompt, 7, 40, out);
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_OK);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(brisk_seq_free(c, 1), BRISK_OK);
  assert_int_equal(brisk_spec_seq_reset(spec, 0), BRISK_OK);
  assert_int_equal(brisk_context_kv_stats(c, &after), BRISK_OK);
  assert_int_equal(brisk_context_kv_stats(spec->dctx, &dafter), BRISK_OK);
  assert_int_equal(after.n_free_blocks, before.n_free_blocks);
  assert_int_equal(dafter.n_free_blocks, dbefore.n_free_blocks);
  brisk_spec_free(spec);
  brisk_context_free(c);

  /* 32 tokens of pool (2 blocks): rounds near the end fall back to k = 0. */
  c = make_ctx(target, 32);
  spec = make_spec(c, BRISK_SPEC_PROMPT_LOOKUP, NULL, 8, 0);
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  int32_t want[24];
  generate_plain(target, &sp, prompt, 7, 24, want);
  generate_spec(c, spec, &sp, prompt, 7, 24, out);
  assert_memory_equal(out, want, sizeof want);
  brisk_spec_free(spec);
  brisk_context_free(c);
}

/* brisk_spec_prefill feeds the draft ahead of the first round, which then
 * decodes only the pending token before drafting; lookup ignores it. */
static void test_prefill(void **state) {
  (void)state;
  brisk_context *c = make_ctx(target, 128);
  brisk_spec *spec = make_spec(c, BRISK_SPEC_DRAFT_MODEL, draft_q8, 3, 0);
  const int32_t toks[7] = {1, 30, 31, 32, 30, 31, 32};
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(8, &b), BRISK_OK);
  for (int32_t i = 0; i < 6; i++) assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 0), 0);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  assert_int_equal(brisk_spec_prefill(spec, 0, toks, 6), BRISK_OK);
  assert_int_equal(brisk_seq_len(spec->dctx, 0), 6);
  brisk_spec_stats st = {.struct_size = sizeof st};
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
  assert_int_equal(st.n_draft_decodes, 1);
  /* Feeding the same tokens again decodes nothing. */
  assert_int_equal(brisk_spec_prefill(spec, 0, toks, 6), BRISK_OK);
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
  assert_int_equal(st.n_draft_decodes, 1);
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sampler_create(target, &sp, &s), BRISK_OK);
  int32_t out[4];
  size_t n = 0;
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 7, out, 4, &n), BRISK_OK);
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
  assert_int_equal(st.n_draft_decodes, 1 + 1 + 2); /* the pending token, then 2 drafted */
  assert_int_equal(brisk_spec_prefill(NULL, 0, toks, 6), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_prefill(spec, 9, toks, 6), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_prefill(spec, 0, NULL, 6), BRISK_E_INVALID_ARGUMENT);
  const int32_t bad[2] = {1, -1};
  assert_int_equal(brisk_spec_prefill(spec, 0, bad, 2), BRISK_E_INVALID_ARGUMENT);
  brisk_sampler_free(s);
  brisk_spec_free(spec);
  /* Prompt lookup: nothing to feed. */
  spec = make_spec(c, BRISK_SPEC_PROMPT_LOOKUP, NULL, 3, 0);
  assert_int_equal(brisk_spec_prefill(spec, 0, toks, 6), BRISK_OK);
  brisk_spec_free(spec);
  brisk_batch_free(b);
  brisk_context_free(c);
}

/* ---- vocabulary check, arguments, allocation failures ---------------------- */

/* Swaps the single-character token texts a and b in a model file. */
static void swap_tokens(const char *path, char a, char b) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  int found = 0;
  /* A GGUF string: u64 little-endian length 1, then the byte. */
  for (size_t i = 0; i + 9 <= n && found < 2; i++) {
    if (buf[i] != 1 || memcmp(buf + i + 1, "\0\0\0\0\0\0\0", 7) != 0) continue;
    if (buf[i + 8] == (unsigned char)a)
      buf[i + 8] = (unsigned char)b, found++;
    else if (buf[i + 8] == (unsigned char)b)
      buf[i + 8] = (unsigned char)a, found++;
  }
  assert_int_equal(found, 2);
  fseek(f, 0, SEEK_SET);
  assert_int_equal(fwrite(buf, 1, n, f), n);
  fclose(f);
}

static void test_vocab_mismatch(void **state) {
  (void)state;
  char p[256];
  brisk_context *c = make_ctx(target, 128);
  brisk_spec_params sp;
  brisk_spec_params_init(&sp);
  sp.drafter = BRISK_SPEC_DRAFT_MODEL;
  brisk_spec *spec = (brisk_spec *)&sp; /* must stay untouched */
  brisk_model *big = NULL, *swapped = NULL;
  assert_int_equal(write_model("big.gguf", BRISK_DTYPE_F32, 7, 128, p), BRISK_OK);
  assert_int_equal(brisk_model_load(p, NULL, &big), BRISK_OK);
  sp.draft_model = big;
  assert_int_equal(brisk_spec_create(c, &sp, &spec), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "128 tokens, the target's 96"));
  assert_non_null(strstr(brisk_last_error(), "token id 96"));
  assert_int_equal(write_model("swapped.gguf", BRISK_DTYPE_F32, 7, 0, p), BRISK_OK);
  swap_tokens(p, 'c', 'd');
  assert_int_equal(brisk_model_load(p, NULL, &swapped), BRISK_OK);
  sp.draft_model = swapped;
  assert_int_equal(brisk_spec_create(c, &sp, &spec), BRISK_E_INVALID_ARGUMENT);
  /* Token 4 is U+2581, then 'a' is 4 ... 'c' is id 6. */
  assert_non_null(strstr(brisk_last_error(), "token id 6: target \"c\", draft \"d\""));
  assert_ptr_equal(spec, (brisk_spec *)&sp);
  brisk_model_free(big);
  brisk_model_free(swapped);
  brisk_context_free(c);
}

static void test_arguments(void **state) {
  (void)state;
  brisk_spec_free(NULL);
  brisk_spec_params_init(NULL);
  brisk_context *c = make_ctx(target, 128);
  brisk_spec *spec = NULL;
  brisk_spec_params p;
  assert_int_equal(brisk_spec_create(NULL, NULL, &spec), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_create(c, NULL, NULL), BRISK_E_INVALID_ARGUMENT);
  struct {
    const char *field, *msg;
  } bad[] = {{"struct_size", "struct_size"},
             {"drafter", "drafter 7"},
             {"n_draft", "n_draft 65"},
             {"n_draft_min", "n_draft_min 9"},
             {"ngram", "ngram_min 3 / ngram_max 2"},
             {"draft_model", "draft_model is NULL"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    brisk_spec_params_init(&p);
    if (i == 0) p.struct_size = 6; /* ends inside drafter */
    if (i == 1) p.drafter = (brisk_spec_drafter)7;
    if (i == 2) p.n_draft = 65;
    if (i == 3) p.n_draft_min = 9;
    if (i == 4) p.ngram_min = 3, p.ngram_max = 2;
    if (i == 5) p.drafter = BRISK_SPEC_DRAFT_MODEL;
    assert_int_equal(brisk_spec_create(c, &p, &spec), BRISK_E_INVALID_ARGUMENT);
    if (!strstr(brisk_last_error(), bad[i].msg))
      fail_msg("%s: message '%s'", bad[i].field, brisk_last_error());
    assert_null(spec);
  }
  assert_int_equal(brisk_spec_create(c, NULL, &spec), BRISK_OK);
  brisk_sampler *s = NULL, *other = NULL;
  assert_int_equal(brisk_sampler_create(target, NULL, &s), BRISK_OK);
  assert_int_equal(brisk_sample_create(50, NULL, &other), BRISK_OK);
  int32_t toks[4] = {1, 5, 6, 7}, out[4];
  size_t n = 77;
  /* The sequence holds 0 tokens: only n_tokens = 1 fits. */
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 4, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "holds 0 tokens"));
  assert_int_equal(brisk_spec_round(spec, 4, s, toks, 1, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 0, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 1, out, 0, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_round(spec, 0, other, toks, 1, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_round(spec, 0, NULL, toks, 1, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  toks[0] = 96;
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 1, out, 4, &n), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "tokens[0] = 96"));
  assert_int_equal(n, 77);
  toks[0] = 1;
  /* Capacity 1: no room for a draft, one plain step. */
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 1, out, 1, &n), BRISK_OK);
  assert_int_equal(n, 1);
  assert_int_equal(brisk_seq_len(c, 0), 1);
  assert_int_equal(brisk_spec_seq_reset(spec, -1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_spec_seq_reset(NULL, 0), BRISK_E_INVALID_ARGUMENT);
  brisk_spec_stats st = {.struct_size = 12}; /* ends inside n_rounds */
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_E_INVALID_ARGUMENT);
  st.struct_size = sizeof st;
  assert_int_equal(brisk_spec_get_stats(spec, &st), BRISK_OK);
  assert_int_equal(st.n_rounds, 1);
  assert_int_equal(st.n_produced, 1);
  assert_int_equal(st.n_drafted, 0);
  brisk_sampler_free(s);
  brisk_sampler_free(other);
  brisk_spec_free(spec);
  brisk_context_free(c);
}

/* A round whose verification fails (the sampler's bias forbids every
 * token) leaves the sequence, the sampler and *n_out as they were. */
static void test_failed_round_restores(void **state) {
  (void)state;
  brisk_context *c = make_ctx(target, 128);
  brisk_spec *spec = make_spec(c, BRISK_SPEC_DRAFT_MODEL, draft_q8, 4, 0);
  static brisk_logit_bias bias[96];
  for (int t = 0; t < 96; t++) bias[t] = (brisk_logit_bias){t, -INFINITY};
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.n_logit_bias = 96;
  sp.logit_bias = bias;
  sp.penalty_last_n = 4;
  brisk_sampler *s = NULL;
  assert_int_equal(brisk_sampler_create(target, &sp, &s), BRISK_OK);
  assert_int_equal(brisk_sampler_accept(s, 9), BRISK_OK);
  brisk_sample_rng rng = s->rng;
  int32_t toks[1] = {1}, out[5];
  size_t n = 77;
  assert_int_equal(brisk_spec_round(spec, 0, s, toks, 1, out, 5, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(n, 77);
  assert_int_equal(brisk_seq_len(c, 0), 0);
  assert_int_equal(s->window_len, 1);
  assert_memory_equal(&s->rng, &rng, sizeof rng);
  brisk_sampler_free(s);
  brisk_spec_free(spec);
  brisk_context_free(c);
}

typedef struct alloc_case {
  brisk_context *c;
  const brisk_model *draft;
} alloc_case;

/* Create, one round, free: every allocation failure is a clean OOM. */
static brisk_status create_and_round(void *arg) {
  alloc_case *a = arg;
  brisk_spec_params p;
  brisk_spec_params_init(&p);
  p.drafter = a->draft ? BRISK_SPEC_DRAFT_MODEL : BRISK_SPEC_PROMPT_LOOKUP;
  p.draft_model = a->draft;
  p.n_draft = 3;
  p.ngram_min = 1;
  brisk_spec *spec = NULL;
  brisk_status st = brisk_spec_create(a->c, &p, &spec);
  if (st) return st;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = 1;
  sp.penalty_last_n = 8;
  brisk_sampler *s = NULL;
  if ((st = brisk_sampler_create(target, &sp, &s))) {
    brisk_spec_free(spec);
    return st;
  }
  int32_t toks[3] = {1, 5, 1}, out[4];
  size_t n = 0;
  /* seq 0 holds {1, 5}; the pending 1 repeats, so lookup drafts. */
  st = brisk_spec_round(spec, 0, s, toks, 3, out, 4, &n);
  if (!st) brisk_seq_truncate(a->c, 0, 2);
  brisk_sampler_free(s);
  brisk_spec_free(spec);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  brisk_context *c = make_ctx(target, 128);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(2, &b), BRISK_OK);
  assert_int_equal(brisk_batch_add(b, 1, 0, 0, 0), BRISK_OK);
  assert_int_equal(brisk_batch_add(b, 5, 1, 0, 0), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  alloc_case lookup = {c, NULL}, model = {c, draft_q8};
  assert_true(test_every_allocation_fails(create_and_round, &lookup) > 3);
  assert_true(test_every_allocation_fails(create_and_round, &model) > 10);
  assert_int_equal(brisk_seq_len(c, 0), 2);
  brisk_batch_free(b);
  brisk_context_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_rule_exact),
      cmocka_unit_test(test_rule_sampled),
      cmocka_unit_test(test_greedy_identical),
      cmocka_unit_test(test_lookup_sampling_identical),
      cmocka_unit_test(test_draft_sampling_distribution),
      cmocka_unit_test(test_rollback),
      cmocka_unit_test(test_prefill),
      cmocka_unit_test(test_vocab_mismatch),
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_failed_round_restores),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
