/* The engine's prefix cache: requests sharing long prefixes give the same
 * tokens with the cache on and off, reuse the shared blocks (counted in the
 * hit counters), are admitted on the blocks they still need, complete under
 * 4x oversubscription (re-admitted requests reuse cached blocks), and a pool
 * full of cached blocks still admits new work (cached blocks are evicted). */
#include "test_models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model; /* llama, 96-token vocabulary, random weights */

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_prefix_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

enum { MAXP = 96, MAXOUT = 32 };

typedef struct job {
  int32_t prompt[MAXP];
  int32_t n_prompt, max_tokens;
  brisk_sampler_params sp;
  uint64_t id;
  int32_t out[MAXOUT];
  int32_t n_out, finished;
  int32_t n_cached; /* brisk_request_stats.n_cached_tokens at its finish */
} job;

/* Jobs whose prompts are `shared` (a common prefix of n_shared tokens)
 * followed by 1..max_tail tokens of their own; odd ones sample. */
static void make_jobs(test_rng *r, job *jobs, int n, const int32_t *shared, int32_t n_shared,
                      int32_t max_tail, int32_t max_out) {
  int32_t nv = brisk_model_n_vocab(model);
  for (int i = 0; i < n; i++) {
    job *j = &jobs[i];
    memset(j, 0, sizeof *j);
    memcpy(j->prompt, shared, (size_t)n_shared * sizeof *shared);
    j->n_prompt = n_shared + 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_tail);
    for (int32_t k = n_shared; k < j->n_prompt; k++)
      j->prompt[k] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
    j->max_tokens = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_out);
    brisk_sampler_params_init(&j->sp);
    if (i % 2) {
      j->sp.seed = test_rng_u64(r);
      j->sp.temperature = 0.9f;
    } else {
      j->sp.temperature = 0;
    }
  }
}

static brisk_engine *make_engine(int32_t kv_tokens, int32_t max_running, int prefix_cache) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_int_equal(p.prefix_cache, 1); /* on by default */
  p.n_threads = 1;
  p.kv_tokens = kv_tokens;
  p.block_size = 4;
  p.max_batch_tokens = 48;
  p.max_running = max_running;
  p.prefill_chunk = 16;
  p.prefix_cache = prefix_cache;
  /* No growth reserve: admission then fills the pool and the
   * oversubscription test preempts, which exercises re-admission. */
  p.reserve_blocks = 0;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

static void submit(brisk_engine *e, job *j) {
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = j->prompt;
  p.n_prompt_tokens = (size_t)j->n_prompt;
  p.sampler = &j->sp;
  p.max_tokens = j->max_tokens;
  p.stop_at_eog = 0;
  p.user_data = j;
  if (brisk_engine_submit(e, &p, &j->id)) fail_msg("submit: %s", brisk_last_error());
}

static void run(brisk_engine *e, job *jobs, int n) {
  for (int steps = 0;; steps++) {
    assert_true(steps < 100000);
    brisk_engine_event ev[16];
    size_t got;
    do {
      assert_int_equal(brisk_engine_poll(e, ev, 16, &got), BRISK_OK);
      for (size_t i = 0; i < got; i++) {
        job *j = ev[i].user_data;
        assert_true(ev[i].token >= 0 && j->n_out < MAXOUT);
        j->out[j->n_out++] = ev[i].token;
        if (ev[i].finished) {
          assert_int_equal(ev[i].reason, BRISK_FINISH_LENGTH);
          brisk_request_stats rs = {.struct_size = sizeof rs};
          assert_int_equal(brisk_engine_request_stats(e, j->id, &rs), BRISK_OK);
          j->n_cached = rs.n_cached_tokens;
          j->finished = 1;
        }
      }
    } while (got == 16);
    int done = 1;
    for (int i = 0; i < n; i++) done &= jobs[i].finished;
    if (done) return;
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
  }
}

static brisk_engine_counters counters(brisk_engine *e) {
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  return s;
}

static void expect_same_tokens(const job *a, const job *b, int n) {
  for (int i = 0; i < n; i++) {
    assert_int_equal(a[i].n_out, a[i].max_tokens);
    assert_int_equal(a[i].n_out, b[i].n_out);
    assert_memory_equal(a[i].out, b[i].out, (size_t)a[i].n_out * sizeof a[i].out[0]);
  }
}

/* One request warms the cache; the next wave shares its 40-token prefix
 * (10 blocks of 4) and reuses exactly those blocks; tokens are the same as
 * with the cache off. */
static void test_same_outputs_and_hits(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_prefix_hits");
  enum { N = 7, SHARED = 41 };
  int32_t shared[SHARED];
  for (int32_t i = 0; i < SHARED; i++)
    shared[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)brisk_model_n_vocab(model));
  job on[N], off[N];
  make_jobs(&r, on, N, shared, SHARED, 20, MAXOUT);
  memcpy(off, on, sizeof on);
  brisk_engine *e_on = make_engine(1024, 8, 1), *e_off = make_engine(1024, 8, 0);
  brisk_engine *es[2] = {e_on, e_off};
  job *js[2] = {on, off};
  for (int k = 0; k < 2; k++) {
    submit(es[k], &js[k][0]);
    run(es[k], js[k], 1);
    for (int i = 1; i < N; i++) submit(es[k], &js[k][i]);
    run(es[k], js[k], N);
  }
  expect_same_tokens(on, off, N);
  /* Each request's own count: the first computed everything, the others
   * reused the 40 shared tokens; none with the cache off. */
  for (int i = 0; i < N; i++) {
    assert_int_equal(on[i].n_cached, i ? 40 : 0);
    assert_int_equal(off[i].n_cached, 0);
  }
  brisk_engine_counters c_on = counters(e_on), c_off = counters(e_off);
  uint64_t prompts = 0;
  for (int i = 0; i < N; i++) prompts += (uint64_t)on[i].n_prompt;
  assert_int_equal(c_on.n_prefix_lookup_tokens, prompts);
  assert_int_equal(c_on.n_prefix_hit_tokens, (N - 1) * 40);
  assert_int_equal(c_on.n_computed_tokens + c_on.n_prefix_hit_tokens, c_off.n_computed_tokens);
  assert_int_equal(c_off.n_prefix_lookup_tokens, 0);
  assert_int_equal(c_off.n_prefix_hit_tokens, 0);
  assert_int_equal(c_on.n_free_kv_blocks, c_on.n_kv_blocks); /* cached blocks are available */
  /* The metrics window sees the same lookups and hits. */
  brisk_engine_metrics m = {.struct_size = sizeof m};
  assert_int_equal(brisk_engine_get_metrics(e_on, &m), BRISK_OK);
  assert_int_equal(m.n_prefix_lookup_tokens, prompts);
  assert_int_equal(m.n_prefix_hit_tokens, (N - 1) * 40);
  assert_true(fabs(m.prefix_hit_rate - (double)((N - 1) * 40) / (double)prompts) < 1e-12);
  assert_int_equal(brisk_engine_reset_metrics(e_on), BRISK_OK);
  assert_int_equal(brisk_engine_get_metrics(e_on, &m), BRISK_OK);
  assert_int_equal(m.n_prefix_lookup_tokens, 0);
  assert_true(m.prefix_hit_rate == 0);
  /* Resubmitting a finished request reuses its prompt and output too. */
  job again = on[0];
  again.n_out = again.finished = 0;
  memcpy(again.prompt + again.n_prompt, on[0].out, (size_t)on[0].n_out * sizeof(int32_t));
  again.n_prompt += on[0].n_out - 1; /* its last token was never fed */
  again.max_tokens = 1;
  submit(e_on, &again);
  run(e_on, &again, 1);
  brisk_engine_counters c2 = counters(e_on);
  assert_int_equal(c2.n_prefix_hit_tokens - c_on.n_prefix_hit_tokens,
                   (uint64_t)((again.n_prompt - 1) / 4 * 4));
  assert_int_equal(again.n_cached, (again.n_prompt - 1) / 4 * 4);
  brisk_engine_free(e_on);
  brisk_engine_free(e_off);
}

/* A pool 4x oversubscribed by requests sharing a prefix: every request
 * completes with the same tokens as without the cache; preempted requests
 * re-admitted reuse cached blocks. */
static void test_oversubscribed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_prefix_oversub");
  enum { N = 12, SHARED = 24 };
  int32_t shared[SHARED];
  for (int32_t i = 0; i < SHARED; i++)
    shared[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)brisk_model_n_vocab(model));
  job on[N], off[N];
  make_jobs(&r, on, N, shared, SHARED, 16, MAXOUT);
  memcpy(off, on, sizeof on);
  int32_t total = 0;
  for (int i = 0; i < N; i++) total += on[i].n_prompt + on[i].max_tokens;
  int32_t pool = total / 4 > 72 ? total / 4 : 72;
  brisk_engine *e_on = make_engine(pool, N, 1), *e_off = make_engine(pool, N, 0);
  for (int i = 0; i < N; i++) {
    submit(e_on, &on[i]);
    submit(e_off, &off[i]);
  }
  run(e_on, on, N);
  run(e_off, off, N);
  expect_same_tokens(on, off, N);
  brisk_engine_counters c_on = counters(e_on), c_off = counters(e_off);
  assert_true(c_on.n_prefix_hit_tokens > 0);
  assert_true(c_on.n_preemptions > 0);
  assert_true(c_off.n_preemptions > 0);
  assert_int_equal(c_on.n_free_kv_blocks, c_on.n_kv_blocks);
  brisk_engine_free(e_on);
  brisk_engine_free(e_off);
}

/* After a wave leaves the pool full of cached blocks, requests with other
 * prompts that need the whole pool are admitted and complete. */
static void test_cached_blocks_are_evicted(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_prefix_evict");
  int32_t nv = brisk_model_n_vocab(model);
  enum { N = 4 };
  job warm[N], big;
  int32_t none[1] = {0};
  make_jobs(&r, warm, N, none, 0, 15, 1); /* 1..15 prompt tokens, 1 output */
  for (int i = 0; i < N; i++) warm[i].n_prompt = 16, warm[i].max_tokens = 1;
  brisk_engine *e = make_engine(64, 4, 1);
  for (int i = 0; i < N; i++) submit(e, &warm[i]);
  run(e, warm, N);
  brisk_engine_counters c = counters(e);
  assert_int_equal(c.n_free_kv_blocks, c.n_kv_blocks);
  /* The whole pool: 60 prompt tokens + 4 generated. */
  make_jobs(&r, &big, 1, none, 0, 1, 1);
  big.n_prompt = 60;
  for (int32_t i = 0; i < 60; i++) big.prompt[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  big.max_tokens = 4;
  submit(e, &big);
  run(e, &big, 1);
  /* The warm prompts' blocks were evicted: nothing of them is reused. */
  for (int i = 0; i < N; i++) warm[i].n_out = warm[i].finished = 0;
  submit(e, &warm[0]);
  run(e, &warm[0], 1);
  brisk_engine_counters c2 = counters(e);
  assert_int_equal(c2.n_prefix_hit_tokens, c.n_prefix_hit_tokens);
  brisk_engine_free(e);
}

/* Admission counts only the blocks a request still needs after its match:
 * B shares 9 of the 11 blocks of its prompt with running A, so it fits in
 * the 5 blocks left with the cache on and waits with it off; both ways give
 * the same tokens. */
static void test_admission_counts_reused_blocks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_prefix_admit");
  int32_t nv = brisk_model_n_vocab(model), none[1] = {0};
  job jobs[2][2]; /* [cache on][A, B] */
  job *a = &jobs[1][0], *b = &jobs[1][1];
  make_jobs(&r, a, 1, none, 0, 1, 1);
  a->n_prompt = 40;
  a->max_tokens = 20;
  for (int32_t i = 0; i < 40; i++) a->prompt[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  make_jobs(&r, b, 1, a->prompt, 36, 1, 1);
  b->n_prompt = 44;
  for (int32_t i = 36; i < 44; i++) b->prompt[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  b->max_tokens = 4;
  memcpy(jobs[0], jobs[1], sizeof jobs[1]);
  for (int on = 0; on < 2; on++) {
    brisk_engine *e = make_engine(64, 4, on); /* 16 blocks of 4 */
    submit(e, &jobs[on][0]);
    brisk_engine_step_info si = {.struct_size = sizeof si};
    for (int k = 0; k < 3; k++) /* A's prompt in chunks of 16: 40 tokens in 10 blocks */
      assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_int_equal(si.n_decode_tokens, 1);
    submit(e, &jobs[on][1]);
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_int_equal(si.n_running, on ? 2 : 1);
    assert_int_equal(si.n_waiting, on ? 0 : 1);
    run(e, jobs[on], 2);
    brisk_engine_free(e);
  }
  expect_same_tokens(jobs[1], jobs[0], 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_outputs_and_hits),
      cmocka_unit_test(test_oversubscribed),
      cmocka_unit_test(test_cached_blocks_are_evicted),
      cmocka_unit_test(test_admission_counts_reused_blocks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
