/* Speculative decoding by prompt lookup in the engine: every run is
 * compared token for token (and text, finish reason, log-probabilities)
 * with the same requests run without speculation, under greedy and seeded
 * sampling, n completions, preemption (recompute and swap), the prefix
 * cache, stop strings and max_tokens; drafts must be accepted (the prompts
 * repeat, so lookup fires), the KV pool ends empty, cancel and allocation
 * failures leave nothing behind. Model: random weights (test_models.h). */
#include "test_models.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

enum { MAXT = 48, MAXN = 2, MAXJ = 8, BS = 4 };

static char dir[64];
static brisk_model *model; /* llama, 96-token SPM vocabulary, random weights */
static int32_t n_vocab;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_spec_model");
  if (test_model_load(dir, "llama", &s, &r, &model)) return -1;
  n_vocab = brisk_model_n_vocab(model);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
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

/* One request: what is submitted and what came back. */
typedef struct job {
  int32_t prompt[64];
  int32_t n_prompt, max_tokens, n, logprobs;
  float temperature; /* > 0: sampled from the top 2 */
  uint64_t seed;
  const char *stop; /* NULL: none */
  int adaptive;
  uint64_t id;
  completion c[MAXN];
  uint64_t drafted, accepted; /* request stats */
} job;

typedef struct config {
  int32_t kv_tokens, max_batch, max_running, reserve_blocks;
  int prefix_cache;
  brisk_preempt_mode mode;
  int64_t step_time_budget_us;
} config;

static const config roomy = {512, 64, 8, 1, 0, BRISK_PREEMPT_RECOMPUTE, 0};

/* A prompt of a random 5-token phrase repeated with a random token
 * between repeats, so that its text and the greedy loops of a random
 * model give prompt lookup matches. */
static void repeating_prompt(test_rng *r, job *j, int32_t len) {
  int32_t phrase[5];
  for (int i = 0; i < 5; i++) phrase[i] = 3 + (int32_t)(test_rng_u64(r) % (uint64_t)(n_vocab - 3));
  for (int32_t i = 0; i < len; i++)
    j->prompt[i] =
        i % 6 == 5 ? 3 + (int32_t)(test_rng_u64(r) % (uint64_t)(n_vocab - 3)) : phrase[i % 6];
  j->n_prompt = len;
}

static brisk_engine *make_engine(const config *c) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = c->kv_tokens;
  p.block_size = BS;
  p.max_batch_tokens = c->max_batch;
  p.max_running = c->max_running;
  p.reserve_blocks = c->reserve_blocks;
  p.prefix_cache = c->prefix_cache;
  p.preempt_mode = c->mode;
  p.swap_bytes = 1u << 24;
  p.step_time_budget_us = c->step_time_budget_us;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

static brisk_status submit(brisk_engine *e, job *j, int32_t k) {
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = j->temperature;
  sp.seed = j->seed;
  if (j->temperature > 0) sp.top_k = 2;
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_tokens = j->prompt;
  rp.n_prompt_tokens = (size_t)j->n_prompt;
  rp.sampler = &sp;
  rp.max_tokens = j->max_tokens;
  rp.stop_at_eog = 0;
  rp.user_data = j;
  rp.n = j->n ? j->n : 1;
  rp.logprobs = j->logprobs;
  rp.stop = &j->stop;
  rp.n_stop = j->stop ? 1 : 0;
  rp.spec_n_draft = k;
  rp.spec_adaptive = j->adaptive;
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

/* Runs the jobs to the end with draft length k; the pool ends empty.
 * Returns the engine counters. */
static brisk_engine_counters run_jobs(const config *cfg, job *j, int nj, int32_t k) {
  brisk_engine *e = make_engine(cfg);
  for (int i = 0; i < nj; i++) assert_int_equal(submit(e, &j[i], k), BRISK_OK);
  for (int steps = 0; !all_done(j, nj); steps++) {
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
    for (int i = 0; i < nj; i++) {
      brisk_request_stats rs = {.struct_size = sizeof rs};
      if (brisk_engine_request_stats(e, j[i].id, &rs) == BRISK_OK) {
        assert_true(rs.n_spec_accepted <= rs.n_spec_drafted);
        j[i].drafted = rs.n_spec_drafted;
        j[i].accepted = rs.n_spec_accepted;
      }
    }
    take_events(e);
    assert_true(steps < 20000);
  }
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  assert_int_equal(s.n_running, 0);
  assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks); /* rejected drafts left no blocks */
  assert_true(s.n_spec_accepted <= s.n_spec_drafted);
  if (k == 0) assert_int_equal(s.n_spec_drafted, 0);
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

/* Runs jobs without and with speculation (k = 4) under cfg and compares;
 * returns the speculative run's counters. */
static brisk_engine_counters compare_runs(const config *cfg, job *jobs, int nj) {
  static job ref[MAXJ];
  memcpy(ref, jobs, (size_t)nj * sizeof *jobs);
  run_jobs(cfg, ref, nj, 0);
  brisk_engine_counters s = run_jobs(cfg, jobs, nj, 4);
  expect_same(ref, jobs, nj);
  return s;
}

static void make_jobs(const char *seed, job *j, int nj, float temperature, int32_t n) {
  test_rng r = test_rng_seeded(seed);
  memset(j, 0, (size_t)nj * sizeof *j);
  for (int i = 0; i < nj; i++) {
    repeating_prompt(&r, &j[i], 18 + 6 * (i % 3));
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
  make_jobs("spec_greedy", j, 6, 0.0f, 1);
  brisk_engine_counters s = compare_runs(&roomy, j, 6);
  assert_true(s.n_spec_accepted > 0);
  uint64_t d = 0, a = 0;
  for (int i = 0; i < 6; i++) d += j[i].drafted, a += j[i].accepted;
  assert_int_equal(d, s.n_spec_drafted); /* request stats sum to the counters */
  assert_int_equal(a, s.n_spec_accepted);
  /* Fewer steps ran than tokens were generated: accepted drafts are free. */
  assert_true(s.n_generated_tokens > s.n_spec_accepted);
}

/* Adaptive draft length: the same output, and drafts still accepted. */
static void test_adaptive(void **state) {
  (void)state;
  static job j[6];
  make_jobs("spec_adaptive", j, 6, 0.0f, 1);
  for (int i = 0; i < 6; i++) j[i].adaptive = 1;
  brisk_engine_counters s = compare_runs(&roomy, j, 6);
  assert_true(s.n_spec_accepted > 0);
}

/* Seeded sampling: prompt lookup draws each token with the sampler's own
 * draw, so the output is the non-speculative one for the seed. */
static void test_sampling_identical(void **state) {
  (void)state;
  static job j[6];
  make_jobs("spec_sampling", j, 6, 0.3f, 1);
  brisk_engine_counters s = compare_runs(&roomy, j, 6);
  assert_true(s.n_spec_accepted > 0);
}

static void test_two_completions(void **state) {
  (void)state;
  static job j[4];
  make_jobs("spec_n2", j, 4, 0.3f, 2);
  brisk_engine_counters s = compare_runs(&roomy, j, 4);
  assert_true(s.n_spec_accepted > 0);
  make_jobs("spec_n2_greedy", j, 4, 0.0f, 2);
  s = compare_runs(&roomy, j, 4);
  assert_true(s.n_spec_accepted > 0);
}

/* A pool of a quarter of what the requests need: they preempt each other
 * (recompute, then swap) and still produce the non-speculative output. */
static void test_oversubscribed(void **state) {
  (void)state;
  static job j[8];
  for (int mode = 0; mode < 2; mode++) {
    make_jobs(mode ? "spec_swap" : "spec_recompute", j, 8, mode ? 0.3f : 0.0f, 1);
    /* 8 requests of up to 30 + 40 tokens: about 140 blocks of 4. */
    config c = {144, 32, 8, 0, 0, mode ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE, 0};
    brisk_engine_counters s = compare_runs(&c, j, 8);
    assert_true(s.n_preemptions > 0);
    assert_true(s.n_spec_accepted > 0);
    if (mode) assert_true(s.n_swapped_out > 0);
  }
}

/* A step time budget that may cut batches (and so drafts): the output is
 * unchanged. (How much it cuts depends on the machine's speed, so the
 * acceptance is not asserted here.) */
static void test_step_time_budget(void **state) {
  (void)state;
  static job j[6];
  make_jobs("spec_budget", j, 6, 0.0f, 1);
  for (int64_t us = 200; us <= 2000; us *= 10) {
    config c = roomy;
    c.step_time_budget_us = us;
    compare_runs(&c, j, 6);
  }
}

/* With the prefix cache, requests repeating an earlier prompt attach its
 * cached blocks (some written as drafts that were later rolled back). */
static void test_prefix_cache(void **state) {
  (void)state;
  static job j[6];
  make_jobs("spec_prefix", j, 6, 0.0f, 1);
  for (int i = 3; i < 6; i++) memcpy(j[i].prompt, j[i - 3].prompt, sizeof j[i].prompt);
  config c = roomy;
  c.prefix_cache = 1;
  c.max_running = 2;
  brisk_engine_counters s = compare_runs(&c, j, 6);
  assert_true(s.n_prefix_hit_tokens > 0);
  assert_true(s.n_spec_accepted > 0);
}

/* max_tokens and stop strings cut the output anywhere, including inside a
 * run of accepted drafts: the cut is where it is without speculation. */
static void test_max_tokens_and_stop(void **state) {
  (void)state;
  static job cand[8], base[1], j[1];
  /* A prompt whose output speculation accepts drafts in (whether lookup
   * finds matches depends on the random model's output): the first of 8. */
  make_jobs("spec_cut", cand, 8, 0.0f, 1);
  int pick = -1;
  for (int i = 0; i < 8 && pick < 0; i++) {
    memcpy(j, &cand[i], sizeof j);
    run_jobs(&roomy, j, 1, 4);
    if (j[0].accepted > 0) pick = i;
  }
  assert_true(pick >= 0);
  memcpy(base, &cand[pick], sizeof base);
  memcpy(j, base, sizeof j);
  run_jobs(&roomy, j, 1, 0);
  const completion full = j[0].c[0];
  int hit = 0;
  for (int32_t mt = 2; mt <= 30; mt++) {
    memcpy(j, base, sizeof j);
    j[0].max_tokens = mt;
    run_jobs(&roomy, j, 1, 4);
    assert_int_equal(j[0].c[0].reason, BRISK_FINISH_LENGTH);
    assert_int_equal(j[0].c[0].n_out, mt);
    assert_memory_equal(j[0].c[0].out, full.out, (size_t)mt * sizeof *full.out);
    hit += j[0].accepted > 0;
  }
  assert_true(hit > 0);
  /* Stop strings: two characters of the full text at each offset. */
  char stop[3] = {0};
  for (size_t at = 1; at + 2 <= full.text_len && at < 40; at += 3) {
    memcpy(stop, full.text + at, 2);
    static job r[1];
    memcpy(r, base, sizeof r);
    r[0].stop = stop;
    memcpy(j, base, sizeof j);
    j[0].stop = stop;
    run_jobs(&roomy, r, 1, 0);
    run_jobs(&roomy, j, 1, 4);
    expect_same(r, j, 1);
  }
}

/* Cancelling a request whose drafts are accepted: it ends with a cancelled
 * event and its blocks, drafts included, are free. */
static void test_cancel(void **state) {
  (void)state;
  static job j[2];
  make_jobs("spec_cancel", j, 2, 0.0f, 1);
  brisk_engine *e = make_engine(&roomy);
  for (int i = 0; i < 2; i++) assert_int_equal(submit(e, &j[i], 4), BRISK_OK);
  brisk_engine_counters s = {.struct_size = sizeof s};
  for (int steps = 0; steps < 200; steps++) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e);
    assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
    if (s.n_spec_accepted > 0) break;
  }
  assert_true(s.n_spec_accepted > 0);
  assert_int_equal(brisk_engine_cancel(e, j[0].id), BRISK_OK);
  while (!all_done(j, 2)) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e);
  }
  assert_int_equal(j[0].c[0].reason, BRISK_FINISH_CANCELLED);
  assert_int_equal(j[1].c[0].reason, BRISK_FINISH_LENGTH);
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
  brisk_engine_free(e);
}

static void test_bad_params(void **state) {
  (void)state;
  brisk_engine *e = make_engine(&roomy);
  static job j[1];
  make_jobs("spec_bad", j, 1, 0.0f, 1);
  assert_int_equal(submit(e, &j[0], -1), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "spec_n_draft -1"));
  assert_int_equal(submit(e, &j[0], 65), BRISK_E_INVALID_ARGUMENT);
  int32_t bad[3][2] = {{0, 3}, {3, 2}, {2, 17}};
  for (int i = 0; i < 3; i++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    assert_int_equal(rp.spec_n_draft, 0);
    rp.prompt_tokens = j[0].prompt;
    rp.n_prompt_tokens = (size_t)j[0].n_prompt;
    rp.spec_n_draft = 4;
    rp.spec_ngram_min = bad[i][0];
    rp.spec_ngram_max = bad[i][1];
    uint64_t id;
    assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), "spec_ngram_min"));
  }
  brisk_engine_free(e);
}

/* Every allocation of a speculative run failing in turn: steps return out
 * of memory or the request ends with an error; nothing leaks, and each
 * completion gets one finished event. */
static void test_allocation_failures(void **state) {
  (void)state;
  static job j[2];
  for (uint64_t k = 1; k <= 60; k++) {
    uint64_t live = brisk_alloc_live_count();
    make_jobs("spec_alloc", j, 2, 0.0f, 1);
    for (int i = 0; i < 2; i++) j[i].max_tokens = 20;
    brisk_engine *e = make_engine(&roomy);
    for (int i = 0; i < 2; i++) assert_int_equal(submit(e, &j[i], 4), BRISK_OK);
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
    brisk_engine_counters s = {.struct_size = sizeof s};
    assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
    assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_identical),    cmocka_unit_test(test_sampling_identical),
      cmocka_unit_test(test_two_completions),     cmocka_unit_test(test_oversubscribed),
      cmocka_unit_test(test_prefix_cache),        cmocka_unit_test(test_step_time_budget),
      cmocka_unit_test(test_max_tokens_and_stop), cmocka_unit_test(test_cancel),
      cmocka_unit_test(test_bad_params),          cmocka_unit_test(test_adaptive),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
