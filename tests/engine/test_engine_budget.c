/* The step time budget: the cost model recovers known per-token costs,
 * never fits a negative one, and its "how many tokens fit" answer is the
 * largest that fits (checked against a linear scan on fresh random plans);
 * an engine with a budget gives exactly the tokens of one without, keeps
 * every step it sizes within the budget by its own prediction, takes fewer
 * tokens a step as the budget shrinks; how often steps stay within the
 * budget in wall time is printed, not asserted (a timing, not a result). */
#include "test_models.h"

#include "engine/budget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
/* A llama large enough that a step's time grows measurably with its tokens. */
static brisk_model *model;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  s.n_embd = 256;
  s.n_head = 8;
  s.n_head_kv = 4;
  s.head_dim = 32;
  s.n_ff = 768;
  s.n_layer = 4;
  test_rng r = test_rng_seeded("budget_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* ---- the cost model ----------------------------------------------------- */

static double true_cost(const double *w, const brisk_step_plan *p) {
  double s = 0;
  for (int i = 0; i < BRISK_COST_N; i++) s += w[i] * p->x[i];
  return s;
}

/* A random batch: some decode tokens, maybe a prompt chunk. */
static void random_plan(test_rng *r, brisk_step_plan *p) {
  brisk_step_plan_begin(p);
  int32_t n_dec = (int32_t)(test_rng_u64(r) % 9);
  for (int32_t i = 0; i < n_dec; i++)
    brisk_step_plan_add(p, (int32_t)(test_rng_u64(r) % 200), 1, 1);
  if (test_rng_u64(r) % 2 || n_dec == 0)
    brisk_step_plan_add(p, (int32_t)(test_rng_u64(r) % 100), 1 + (int32_t)(test_rng_u64(r) % 64),
                        (int)(test_rng_u64(r) % 2));
}

/* Exact linear costs of varied batches: the fit predicts them closely. */
static void test_model_recovers_costs(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("budget_fit");
  double w[BRISK_COST_N] = {test_rng_uniform(&r, 2e4, 2e5), test_rng_uniform(&r, 1e3, 2e4),
                            test_rng_uniform(&r, 5e2, 1e4), test_rng_uniform(&r, 1, 50)};
  brisk_step_cost m;
  memset(&m, 0, sizeof m);
  brisk_step_plan p;
  random_plan(&r, &p);
  assert_true(brisk_step_cost_predict(&m, &p) == 0); /* no data yet */
  for (int i = 0; i < 200; i++) {
    random_plan(&r, &p);
    brisk_step_cost_observe(&m, &p, true_cost(w, &p));
  }
  for (int i = 0; i < BRISK_COST_N; i++) assert_true(m.w[i] >= 0);
  for (int i = 0; i < 50; i++) {
    random_plan(&r, &p);
    double want = true_cost(w, &p), got = brisk_step_cost_predict(&m, &p);
    if (fabs(got - want) > 0.02 * want) fail_msg("predicted %.0f ns for %.0f", got, want);
  }
}

/* Data in which more tokens took less time: no coefficient goes negative,
 * so a longer batch is never predicted cheaper. */
static void test_model_non_negative(void **state) {
  (void)state;
  brisk_step_cost m;
  memset(&m, 0, sizeof m);
  for (int i = 0; i < 40; i++) {
    brisk_step_plan p;
    brisk_step_plan_begin(&p);
    int32_t n = 1 + i % 8;
    brisk_step_plan_add(&p, 0, n, 0);
    brisk_step_cost_observe(&m, &p, 1e6 - 1e4 * n);
  }
  for (int i = 0; i < BRISK_COST_N; i++) assert_true(m.w[i] >= 0);
}

/* fit() against a scan over every prefix length, on random models and
 * plans; an empty plan always gets at least one token. */
static void test_fit_is_largest(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("budget_scan");
  for (int trial = 0; trial < 300; trial++) {
    brisk_step_cost m;
    memset(&m, 0, sizeof m);
    m.n_obs = BRISK_COST_MIN_OBS;
    for (int i = 0; i < BRISK_COST_N; i++) m.w[i] = test_rng_uniform(&r, 0, 1e4);
    brisk_step_plan p;
    if (trial % 4 == 0)
      brisk_step_plan_begin(&p);
    else
      random_plan(&r, &p);
    double budget = test_rng_uniform(&r, 0, 4e5);
    int32_t pos0 = (int32_t)(test_rng_u64(&r) % 300), count = 1 + (int32_t)(test_rng_u64(&r) % 80);
    int logits = (int)(test_rng_u64(&r) % 2);
    int32_t want = 0;
    for (int32_t c = 1; c <= count; c++) {
      brisk_step_plan q = p;
      brisk_step_plan_add(&q, pos0, c, c == count && logits);
      if (true_cost(m.w, &q) <= budget) want = c;
    }
    if (want == 0 && p.n_tokens == 0) want = 1;
    assert_int_equal(brisk_step_cost_fit(&m, &p, budget, pos0, count, logits), want);
  }
  /* Untrained: a probe of at most BRISK_COST_PROBE_TOKENS tokens. */
  brisk_step_cost m;
  memset(&m, 0, sizeof m);
  brisk_step_plan p;
  brisk_step_plan_begin(&p);
  assert_int_equal(brisk_step_cost_fit(&m, &p, 1, 0, 100, 1), BRISK_COST_PROBE_TOKENS);
  brisk_step_plan_add(&p, 0, 10, 0);
  assert_int_equal(brisk_step_cost_fit(&m, &p, 1, 0, 100, 1), BRISK_COST_PROBE_TOKENS - 10);
}

/* ---- the engine --------------------------------------------------------- */

enum { N = 6, PROMPT = 32, OUT = 10 };

typedef struct job {
  int32_t prompt[PROMPT];
  uint64_t id;
  int32_t out[OUT];
  int32_t n_out, finished;
} job;

typedef struct run_result {
  job jobs[N];
  int32_t steps;
  int64_t tokens;
  int32_t sized_steps, over_prediction, within_wall;
  uint64_t max_tokens_early;
} run_result;

/* Runs N requests (long prompts, a few sampled tokens each) to the end
 * with a step budget of budget_us (0: none). */
static void run(const job *jobs, int64_t budget_us, run_result *res) {
  memset(res, 0, sizeof *res);
  memcpy(res->jobs, jobs, sizeof res->jobs);
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 1;
  p.kv_tokens = 1024;
  p.block_size = 16;
  p.max_batch_tokens = 256;
  p.max_running = N;
  p.step_time_budget_us = budget_us;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  for (int i = 0; i < N; i++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_tokens = res->jobs[i].prompt;
    rp.n_prompt_tokens = PROMPT;
    rp.max_tokens = OUT;
    rp.stop_at_eog = 0;
    rp.user_data = &res->jobs[i];
    assert_int_equal(brisk_engine_submit(e, &rp, &res->jobs[i].id), BRISK_OK);
  }
  int done = 0;
  while (done < N) {
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_true(si.n_tokens >= 1); /* the budget never stalls the engine */
    res->steps++;
    res->tokens += si.n_tokens;
    if (res->steps <= BRISK_COST_MIN_OBS) {
      if ((uint64_t)si.n_tokens > res->max_tokens_early) res->max_tokens_early = si.n_tokens;
    } else if (budget_us > 0) {
      /* What the scheduler sized: within the budget by its own model, unless
       * it took the one token that keeps the engine moving. */
      res->sized_steps++;
      if (si.n_tokens > 1 && si.predicted_ns > (uint64_t)budget_us * 1000) res->over_prediction++;
      /* Wall time: a generous tolerance for a shared, noisy machine. */
      if (si.duration_ns <= (uint64_t)budget_us * 1500 + 300000) res->within_wall++;
    }
    brisk_engine_event ev[16];
    size_t n = 16;
    while (n == 16) {
      assert_int_equal(brisk_engine_poll(e, ev, 16, &n), BRISK_OK);
      for (size_t i = 0; i < n; i++) {
        job *j = ev[i].user_data;
        assert_true(j->n_out < OUT);
        j->out[j->n_out++] = ev[i].token;
        if (ev[i].finished) j->finished = 1, done++;
      }
    }
    assert_true(res->steps < 100000);
  }
  brisk_engine_free(e);
}

static void test_engine_budget(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("budget_engine");
  job jobs[N];
  memset(jobs, 0, sizeof jobs);
  int32_t nv = brisk_model_n_vocab(model);
  for (int i = 0; i < N; i++)
    for (int k = 0; k < PROMPT; k++) jobs[i].prompt[k] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  static run_result free_run, big, small;
  run(jobs, 0, &free_run);
  /* Budgets of about 24 and 6 prompt tokens' worth, from a timed run. */
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 1;
  p.kv_tokens = 1024;
  p.max_batch_tokens = 256;
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
  uint64_t best = UINT64_MAX;
  for (int rep = 0; rep < 5; rep++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_tokens = jobs[rep].prompt;
    rp.n_prompt_tokens = PROMPT;
    rp.max_tokens = 1;
    uint64_t id;
    assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_int_equal(si.n_tokens, PROMPT);
    if (si.duration_ns < best) best = si.duration_ns;
    brisk_engine_event ev[4];
    size_t n;
    assert_int_equal(brisk_engine_poll(e, ev, 4, &n), BRISK_OK);
  }
  brisk_engine_free(e);
  double per_token_us = (double)best / PROMPT / 1000.0;
  int64_t big_us = (int64_t)ceil(per_token_us * 24), small_us = (int64_t)ceil(per_token_us * 6);
  fprintf(stderr, "%.1f us a prompt token; budgets %lld and %lld us\n", per_token_us,
          (long long)big_us, (long long)small_us);
  run(jobs, big_us, &big);
  run(jobs, small_us, &small);
  for (int i = 0; i < N; i++) {
    assert_int_equal(big.jobs[i].n_out, OUT);
    assert_memory_equal(big.jobs[i].out, free_run.jobs[i].out, sizeof jobs[i].out);
    assert_memory_equal(small.jobs[i].out, free_run.jobs[i].out, sizeof jobs[i].out);
  }
  /* Every run feeds the same tokens, in more steps the smaller the budget. */
  assert_int_equal(big.tokens, free_run.tokens);
  assert_int_equal(small.tokens, free_run.tokens);
  fprintf(stderr,
          "steps: %d unbudgeted, %d big, %d small; predicted over budget %d / %d and %d / %d; "
          "wall within tolerance %d / %d and %d / %d\n",
          free_run.steps, big.steps, small.steps, big.over_prediction, big.sized_steps,
          small.over_prediction, small.sized_steps, big.within_wall, big.sized_steps,
          small.within_wall, small.sized_steps);
  assert_true(free_run.steps < big.steps);
  assert_true(big.steps < small.steps);
  /* The probe steps before the model has data are small. */
  assert_true(big.max_tokens_early <= BRISK_COST_PROBE_TOKENS);
  assert_int_equal(big.over_prediction, 0);
  assert_int_equal(small.over_prediction, 0);
  /* Wall time is printed above, not asserted: speed is a benchmark, and a
   * loaded machine (CI runs tests in parallel) stretches any step. */
}

static void test_params(void **state) {
  (void)state;
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_int_equal(p.step_time_budget_us, 0);
  p.kv_tokens = 64;
  p.step_time_budget_us = -1;
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "step_time_budget_us"));
  p.step_time_budget_us = INT64_MAX;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_null(e);
  /* A step_info from before the swap and budget fields is filled up to its
   * size; one ending inside a field is refused. */
  p.step_time_budget_us = 0;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
  brisk_engine_step_info si;
  memset(&si, 0xab, sizeof si);
  si.struct_size = (uint32_t)offsetof(brisk_engine_step_info, n_swapped_out);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, 0);
  assert_int_equal(si.n_swapped_in, (int32_t)0xabababab); /* untouched */
  si.struct_size = (uint32_t)offsetof(brisk_engine_step_info, duration_ns) + 4;
  assert_int_equal(brisk_engine_step(e, &si), BRISK_E_INVALID_ARGUMENT);
  brisk_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_recovers_costs),
      cmocka_unit_test(test_model_non_negative),
      cmocka_unit_test(test_fit_is_largest),
      cmocka_unit_test(test_engine_budget),
      cmocka_unit_test(test_params),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
