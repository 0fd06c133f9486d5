/* Speculative decoding with a draft model in the engine: greedy runs are
 * compared token for token (and text, finish reason, log-probabilities)
 * with the same requests run without speculation, for one and two
 * completions and under preemption (recompute and swap); drafts must be
 * accepted (the draft is the target's weights quantized to Q8_0). Sampled
 * runs (whose tokens differ from plain sampling by design) must finish
 * with valid tokens and, over many seeds, match plain sampling's
 * distribution (chi-square). Every run ends with both KV pools, the target's and
 * the draft's, empty; vocabulary mismatches, bad parameters, cancel and
 * allocation failures are checked. Models: random weights (test_models.h). */
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "engine/engine_internal.h"
#include "spec/spec_internal.h"

#include <math.h>
#include <string.h>

enum { MAXT = 48, MAXN = 2, MAXJ = 32, BS = 4 };

static char dir[64];
/* The target (F32), the same weights in Q8_0 (a close draft) and in Q4_0
 * (a rougher one: about a fifth of its drafts rejected), and models whose
 * vocabularies differ from the target's (smaller; none). */
static brisk_model *target, *draft_q8, *draft_q4, *draft_small, *draft_novocab;
static int32_t n_vocab;

static int load(const char *name, uint32_t type, uint32_t vocab, bool no_vocab, uint64_t seed,
                brisk_model **m) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  test_model_spec s = test_model_default("llama");
  s.weight_type = type;
  if (vocab) s.n_vocab = vocab;
  s.no_vocab = no_vocab;
  test_rng r = {seed}; /* fixed: the draft must share the target's weights */
  if (test_model_write(path, &s, &r, NULL)) return -1;
  return brisk_model_load(path, NULL, m) ? -1 : 0;
}

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  const uint64_t w = 7;
  if (load("target.gguf", BRISK_DTYPE_F32, 0, false, w, &target) ||
      load("q8.gguf", BRISK_DTYPE_Q8_0, 0, false, w, &draft_q8) ||
      load("q4.gguf", BRISK_DTYPE_Q4_0, 0, false, w, &draft_q4) ||
      load("small.gguf", BRISK_DTYPE_F32, 90, false, w, &draft_small) ||
      load("novocab.gguf", BRISK_DTYPE_F32, 0, true, w, &draft_novocab))
    return -1;
  n_vocab = brisk_model_n_vocab(target);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(target);
  brisk_model_free(draft_q8);
  brisk_model_free(draft_q4);
  brisk_model_free(draft_small);
  brisk_model_free(draft_novocab);
  test_tmpdir_remove(dir);
  return 0;
}

typedef struct completion {
  int32_t out[MAXT];
  int32_t n_out;
  char text[2048];
  size_t text_len;
  int n_finished;
  brisk_finish_reason reason;
  float lp[MAXT];
} completion;

typedef struct job {
  int32_t prompt[64];
  int32_t n_prompt, max_tokens, n, logprobs;
  float temperature; /* > 0: sampled from the top 2 */
  uint64_t seed;
  int adaptive;
  uint64_t id;
  completion c[MAXN];
} job;

typedef struct config {
  int32_t kv_tokens, max_batch, max_running, reserve_blocks;
  brisk_preempt_mode mode;
} config;

static const config roomy = {512, 64, 8, 1, BRISK_PREEMPT_RECOMPUTE};

static brisk_status make_engine(const config *c, const brisk_model *draft, brisk_engine **e) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_null(p.draft_model);
  p.n_threads = 2;
  p.kv_tokens = c->kv_tokens;
  p.block_size = BS;
  p.max_batch_tokens = c->max_batch;
  p.max_running = c->max_running;
  p.reserve_blocks = c->reserve_blocks;
  p.prefix_cache = 0;
  p.preempt_mode = c->mode;
  p.swap_bytes = 1u << 24;
  p.draft_model = draft;
  return brisk_engine_create(target, &p, e);
}

static brisk_status submit(brisk_engine *e, job *j, int32_t k, int use_draft) {
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = j->temperature;
  sp.seed = j->seed;
  if (j->temperature > 0) sp.top_k = 2;
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  assert_int_equal(rp.spec_draft_model, 0);
  rp.prompt_tokens = j->prompt;
  rp.n_prompt_tokens = (size_t)j->n_prompt;
  rp.sampler = &sp;
  rp.max_tokens = j->max_tokens;
  rp.stop_at_eog = 0;
  rp.user_data = j;
  rp.n = j->n ? j->n : 1;
  rp.logprobs = j->logprobs;
  rp.spec_n_draft = k;
  rp.spec_adaptive = j->adaptive;
  rp.spec_draft_model = use_draft;
  memset(j->c, 0, sizeof j->c);
  return brisk_engine_submit(e, &rp, &j->id);
}

static void take_events(brisk_engine *e) {
  brisk_engine_event ev[8];
  size_t n;
  do {
    assert_int_equal(brisk_engine_poll(e, ev, 8, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      job *j = ev[i].user_data;
      completion *c = &j->c[ev[i].index];
      assert_int_equal(c->n_finished, 0);
      assert_true(c->text_len + ev[i].text_len <= sizeof c->text);
      memcpy(c->text + c->text_len, ev[i].text, ev[i].text_len);
      c->text_len += ev[i].text_len;
      if (ev[i].token >= 0) {
        assert_true(c->n_out < MAXT);
        assert_true(ev[i].token < n_vocab);
        c->lp[c->n_out] = ev[i].logprob;
        c->out[c->n_out++] = ev[i].token;
      }
      if (ev[i].finished) {
        c->n_finished++;
        c->reason = ev[i].reason;
      }
    }
  } while (n == 8);
}

static int all_done(const job *j, int nj) {
  for (int i = 0; i < nj; i++)
    for (int32_t k = 0; k < (j[i].n ? j[i].n : 1); k++)
      if (!j[i].c[k].n_finished) return 0;
  return 1;
}

/* Both KV pools are empty: no sequence left anything behind, rejected
 * drafts included. */
static void expect_pools_empty(brisk_engine *e) {
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
  if (!e->spec) return;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(e->spec->dctx, &ks), BRISK_OK);
  assert_int_equal(ks.n_free_blocks, ks.n_blocks);
  for (int32_t i = 0; i < e->max_running; i++) assert_int_equal(e->spec->seqs[i].n_held, 0);
}

/* Runs the jobs to the end (draft length k, with the draft model when
 * `draft`); returns the engine counters. */
static brisk_engine_counters run_jobs(const config *cfg, const brisk_model *draft, job *j, int nj,
                                      int32_t k) {
  brisk_engine *e = NULL;
  if (make_engine(cfg, draft, &e)) fail_msg("engine: %s", brisk_last_error());
  for (int i = 0; i < nj; i++) assert_int_equal(submit(e, &j[i], k, draft != NULL), BRISK_OK);
  for (int steps = 0; !all_done(j, nj); steps++) {
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
    take_events(e);
    assert_true(steps < 20000);
  }
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  assert_int_equal(s.n_running, 0);
  assert_true(s.n_spec_accepted <= s.n_spec_drafted);
  expect_pools_empty(e);
  brisk_engine_free(e);
  return s;
}

static void expect_same(const job *a, const job *b, int nj) {
  for (int i = 0; i < nj; i++)
    for (int32_t k = 0; k < (a[i].n ? a[i].n : 1); k++) {
      const completion *x = &a[i].c[k], *y = &b[i].c[k];
      assert_int_equal(x->n_finished, 1);
      assert_int_equal(y->n_finished, 1);
      assert_int_equal(x->reason, y->reason);
      assert_int_equal(x->n_out, y->n_out);
      assert_memory_equal(x->out, y->out, (size_t)x->n_out * sizeof *x->out);
      assert_int_equal(x->text_len, y->text_len);
      assert_memory_equal(x->text, y->text, x->text_len);
      for (int32_t t = 0; t < x->n_out; t++) assert_true(fabsf(x->lp[t] - y->lp[t]) <= 1e-4f);
    }
}

/* Runs jobs without speculation and with the Q8_0 draft (k = 4) and
 * compares; returns the speculative run's counters. */
static brisk_engine_counters compare_runs(const config *cfg, job *jobs, int nj) {
  static job ref[MAXJ];
  memcpy(ref, jobs, (size_t)nj * sizeof *jobs);
  brisk_engine_counters plain = run_jobs(cfg, NULL, ref, nj, 0);
  assert_int_equal(plain.n_spec_drafted, 0);
  brisk_engine_counters s = run_jobs(cfg, draft_q8, jobs, nj, 4);
  expect_same(ref, jobs, nj);
  return s;
}

/* Random prompts: the draft model, not repetition, has to find the
 * continuation. */
static void make_jobs(const char *seed, job *j, int nj, float temperature, int32_t n) {
  test_rng r = test_rng_seeded(seed);
  memset(j, 0, (size_t)nj * sizeof *j);
  for (int i = 0; i < nj; i++) {
    j[i].n_prompt = 12 + 6 * (i % 3);
    for (int32_t t = 0; t < j[i].n_prompt; t++)
      j[i].prompt[t] = 3 + (int32_t)(test_rng_u64(&r) % (uint64_t)(n_vocab - 3));
    j[i].max_tokens = 40;
    j[i].temperature = temperature;
    j[i].seed = 100 + (uint64_t)i;
    j[i].n = n;
    j[i].logprobs = i % 2 ? 3 : 0;
  }
}

static void test_greedy_identical(void **state) {
  (void)state;
  static job j[6];
  make_jobs("draft_greedy", j, 6, 0.0f, 1);
  brisk_engine_counters s = compare_runs(&roomy, j, 6);
  assert_true(s.n_spec_accepted > 0);
  assert_true(s.n_generated_tokens > s.n_spec_accepted);
  /* Fewer target steps than a step per token. */
  assert_true(s.n_steps < 6 * 40);
}

static void test_adaptive(void **state) {
  (void)state;
  static job j[4];
  make_jobs("draft_adaptive", j, 4, 0.0f, 1);
  for (int i = 0; i < 4; i++) j[i].adaptive = 1;
  brisk_engine_counters s = compare_runs(&roomy, j, 4);
  assert_true(s.n_spec_accepted > 0);
}

static void test_two_completions(void **state) {
  (void)state;
  static job j[3];
  make_jobs("draft_n2", j, 3, 0.0f, 2);
  brisk_engine_counters s = compare_runs(&roomy, j, 3);
  assert_true(s.n_spec_accepted > 0);
}

/* A pool of a quarter of what the requests need: they preempt each other
 * (recompute, then swap); the draft's copies are dropped with them and
 * rebuilt, and the output is still the non-speculative one. */
static void test_oversubscribed(void **state) {
  (void)state;
  static job j[8];
  for (int mode = 0; mode < 2; mode++) {
    make_jobs(mode ? "draft_swap" : "draft_recompute", j, 8, 0.0f, 1);
    /* 8 requests of up to 24 + 40 tokens: about 128 blocks of 4. */
    config c = {128, 32, 8, 0, mode ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE};
    brisk_engine_counters s = compare_runs(&c, j, 8);
    assert_true(s.n_preemptions > 0);
    assert_true(s.n_spec_accepted > 0);
    if (mode) assert_true(s.n_swapped_out > 0);
  }
}

/* Sampling: the rejection rule keeps the target's distribution but not the
 * seed's token sequence, so only validity is checked here: every
 * completion runs to max_tokens with tokens of the vocabulary, drafts are
 * made and some kept, and the same seed gives the same output again. */
static void test_sampled_runs(void **state) {
  (void)state;
  static job j[4], again[4];
  make_jobs("draft_sampled", j, 4, 0.8f, 2);
  memcpy(again, j, sizeof j);
  brisk_engine_counters s = run_jobs(&roomy, draft_q8, j, 4, 4);
  assert_true(s.n_spec_drafted > 0);
  assert_true(s.n_spec_accepted > 0);
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++) {
      assert_int_equal(j[i].c[k].reason, BRISK_FINISH_LENGTH);
      assert_int_equal(j[i].c[k].n_out, j[i].max_tokens);
    }
  run_jobs(&roomy, draft_q8, again, 4, 4);
  expect_same(j, again, 4);
}

/* The first four sampled tokens of one prompt over many seeds: counts of
 * each distinct triple, indexed by `cells` (up to 16 with top-2 sampling;
 * shared between runs so that indices agree). */
enum { NT = 4, MAXCELLS = 16 };
static int32_t cells[MAXCELLS][NT];
static int n_cells;

static int cell_of(const int32_t *o) {
  for (int k = 0; k < n_cells; k++)
    if (!memcmp(cells[k], o, sizeof cells[k])) return k;
  assert_true(n_cells < MAXCELLS);
  memcpy(cells[n_cells], o, sizeof cells[n_cells]);
  return n_cells++;
}

static void first_tokens(const job *base, const brisk_model *draft, uint64_t seed0, int n_seeds,
                         double *counts, uint64_t *drafted, uint64_t *accepted) {
  enum { NJ = 32 };
  static job j[NJ];
  static const config wide = {1024, 128, NJ, 1, BRISK_PREEMPT_RECOMPUTE};
  memset(counts, 0, MAXCELLS * sizeof *counts);
  *drafted = *accepted = 0;
  for (int s0 = 0; s0 < n_seeds; s0 += NJ) {
    for (int i = 0; i < NJ; i++) {
      j[i] = *base;
      j[i].seed = seed0 + (uint64_t)(s0 + i);
    }
    brisk_engine_counters c = run_jobs(&wide, draft, j, NJ, draft ? NT - 1 : 0);
    *drafted += c.n_spec_drafted;
    *accepted += c.n_spec_accepted;
    for (int i = 0; i < NJ; i++) {
      assert_int_equal(j[i].c[0].n_out, NT);
      counts[cell_of(j[i].c[0].out)]++;
    }
  }
}

/* Sampling: the rejection rule gives the target's distribution. The
 * first four tokens (top-2, temperature 1) are counted over seeds with
 * and without a draft model, and a two-sample chi-square compares them,
 * for the Q8_0 and the Q4_0 draft. */
static void test_sampled_distribution(void **state) {
  (void)state;
  enum { N = 800 };
  double plain[MAXCELLS], spec[MAXCELLS];
  /* 0.999 quantiles of chi-square with 1..15 degrees of freedom. */
  static const double q999[16] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                  26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
  static job base;
  test_rng r = {11}; /* fixed, as the models: the test must not flake */
  memset(&base, 0, sizeof base);
  base.n_prompt = 10;
  for (int32_t t = 0; t < base.n_prompt; t++)
    base.prompt[t] = 3 + (int32_t)(test_rng_u64(&r) % (uint64_t)(n_vocab - 3));
  base.max_tokens = NT;
  base.temperature = 1.0f;
  n_cells = 0;
  uint64_t drafted, accepted;
  first_tokens(&base, NULL, 1000, N, plain, &drafted, &accepted);
  assert_int_equal(drafted, 0);
  const brisk_model *drafts[2] = {draft_q8, draft_q4};
  for (int d = 0; d < 2; d++) {
    first_tokens(&base, drafts[d], 50000, N, spec, &drafted, &accepted);
    /* Both mostly kept; the Q4_0 draft's rejections exercise the
     * residual distribution (drawing from p there instead fails this). */
    assert_true(accepted * 2 > drafted);
    if (d == 1) assert_true(accepted * 10 < drafted * 9);
    double chi2 = 0;
    int df = -1;
    for (int k = 0; k < n_cells; k++) {
      if (plain[k] + spec[k] == 0) continue;
      chi2 += (plain[k] - spec[k]) * (plain[k] - spec[k]) / (plain[k] + spec[k]);
      df++;
    }
    assert_true(df >= 1 && df < 16);
    if (chi2 > q999[df]) fail_msg("draft %d: chi2 %.2f with %d dof", d, chi2, df);
  }
}

static void test_vocab_mismatch(void **state) {
  (void)state;
  brisk_engine *e = NULL;
  assert_int_equal(make_engine(&roomy, draft_small, &e), BRISK_E_INVALID_ARGUMENT);
  assert_null(e);
  assert_non_null(strstr(brisk_last_error(), "brisk_engine_create: draft_model"));
  assert_non_null(strstr(brisk_last_error(), "first differing token id 90"));
  assert_int_equal(make_engine(&roomy, draft_novocab, &e), BRISK_E_INVALID_ARGUMENT);
  assert_null(e);
  assert_non_null(strstr(brisk_last_error(), "vocabulary"));
  /* The target drafting for itself is fine. */
  assert_int_equal(make_engine(&roomy, target, &e), BRISK_OK);
  brisk_engine_free(e);
}

static void test_bad_params(void **state) {
  (void)state;
  static job j[1];
  make_jobs("draft_bad", j, 1, 0.0f, 1);
  brisk_engine *e = NULL;
  assert_int_equal(make_engine(&roomy, NULL, &e), BRISK_OK);
  assert_int_equal(submit(e, &j[0], 4, 1), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "it has none"));
  brisk_engine_free(e);
  assert_int_equal(make_engine(&roomy, draft_q8, &e), BRISK_OK);
  assert_int_equal(submit(e, &j[0], 0, 1), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "spec_n_draft >= 1 (it is 0)"));
  /* Prompt lookup still works on an engine with a draft model. */
  assert_int_equal(submit(e, &j[0], 4, 0), BRISK_OK);
  while (!all_done(j, 1)) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e);
  }
  expect_pools_empty(e);
  brisk_engine_free(e);
}

/* Cancelling a request whose drafts are accepted: its blocks in both
 * pools are free. */
static void test_cancel(void **state) {
  (void)state;
  static job j[2];
  make_jobs("draft_cancel", j, 2, 0.0f, 1);
  brisk_engine *e = NULL;
  assert_int_equal(make_engine(&roomy, draft_q8, &e), BRISK_OK);
  for (int i = 0; i < 2; i++) assert_int_equal(submit(e, &j[i], 4, 1), BRISK_OK);
  brisk_engine_counters s = {.struct_size = sizeof s};
  for (int steps = 0; steps < 200; steps++) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e);
    assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
    if (s.n_spec_accepted > 0) break;
  }
  assert_true(s.n_spec_accepted > 0);
  size_t held = 0; /* the draft's copies of the running sequences */
  for (int32_t i = 0; i < e->max_running; i++) held += e->spec->seqs[i].n_held;
  assert_true(held > 0);
  assert_int_equal(brisk_engine_cancel(e, j[0].id), BRISK_OK);
  while (!all_done(j, 2)) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e);
  }
  assert_int_equal(j[0].c[0].reason, BRISK_FINISH_CANCELLED);
  assert_int_equal(j[1].c[0].reason, BRISK_FINISH_LENGTH);
  expect_pools_empty(e);
  brisk_engine_free(e);
}

static brisk_status create_op(void *ctx) {
  (void)ctx;
  brisk_engine *e = NULL;
  brisk_status st = make_engine(&roomy, draft_q8, &e);
  brisk_engine_free(e);
  return st;
}

/* Every allocation failing in turn: engine creation returns out of memory
 * with nothing leaked; in a run, steps return out of memory or a request
 * ends (with an error, or without the failed draft), nothing leaks, and
 * each completion gets one finished event. */
static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_op, NULL);
  static job j[2];
  for (uint64_t k = 1; k <= 60; k++) {
    uint64_t live = brisk_alloc_live_count();
    make_jobs("draft_alloc", j, 2, 0.0f, 1);
    for (int i = 0; i < 2; i++) j[i].max_tokens = 16;
    brisk_engine *e = NULL;
    assert_int_equal(make_engine(&roomy, draft_q8, &e), BRISK_OK);
    for (int i = 0; i < 2; i++) assert_int_equal(submit(e, &j[i], 4, 1), BRISK_OK);
    brisk_alloc_fail_at(k, 0);
    for (int s = 0; s < 300 && !all_done(j, 2); s++) {
      brisk_status st = brisk_engine_step(e, NULL);
      if (st) assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      brisk_engine_event ev[16];
      size_t n;
      st = brisk_engine_poll(e, ev, 16, &n);
      if (st) {
        assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
        continue;
      }
      for (size_t i = 0; i < n; i++) {
        job *q = ev[i].user_data;
        assert_int_equal(q->c[0].n_finished, 0);
        if (ev[i].finished) q->c[0].n_finished++;
      }
    }
    brisk_alloc_fail_at(0, 0);
    assert_true(all_done(j, 2));
    expect_pools_empty(e);
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_identical), cmocka_unit_test(test_adaptive),
      cmocka_unit_test(test_two_completions),  cmocka_unit_test(test_oversubscribed),
      cmocka_unit_test(test_sampled_runs),     cmocka_unit_test(test_sampled_distribution),
      cmocka_unit_test(test_vocab_mismatch),   cmocka_unit_test(test_bad_params),
      cmocka_unit_test(test_cancel),           cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
