/* The engine against a plain brisk_decode generation loop: same tokens for
 * greedy and seeded sampling, through chunked prefill, a 4x oversubscribed
 * KV pool (preemption by recompute), cancellation, priorities, the poll
 * buffer protocol, a submitting thread, statistics, argument checks and
 * allocation failures. Models: random weights (tests/support/test_models.h)
 * and ../shared/models/stories260K.gguf for text prompts. */
#include "test_models.h"

#include "core/alloc.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char dir[64];
static brisk_model *model; /* llama, 96-token SPM vocabulary, random weights */

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* One test request: its prompt, sampling and what came out. */
typedef struct job {
  int32_t prompt[64];
  int32_t n_prompt, max_tokens, priority;
  int stop_at_eog;
  brisk_sampler_params sp;
  uint64_t id;
  int32_t out[64]; /* tokens from events */
  int32_t n_out;
  int32_t n_finished_events;
  brisk_finish_reason reason;
  char text[512]; /* concatenated event texts */
  size_t text_len;
  brisk_request_stats stats; /* read right after its finished event */
} job;

static void random_job(test_rng *r, const brisk_model *m, job *j, int32_t max_prompt,
                       int32_t max_out, int sampled) {
  memset(j, 0, sizeof *j);
  int32_t nv = brisk_model_n_vocab(m);
  j->n_prompt = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_prompt);
  for (int32_t i = 0; i < j->n_prompt; i++)
    j->prompt[i] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  j->max_tokens = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_out);
  j->stop_at_eog = 1;
  brisk_sampler_params_init(&j->sp);
  if (sampled) {
    j->sp.seed = test_rng_u64(r);
    j->sp.temperature = 0.9f;
    j->sp.top_k = 40;
    j->sp.repeat_penalty = 1.1f;
  } else {
    j->sp.temperature = 0;
  }
}

static brisk_engine *make_engine(int32_t kv_tokens, int32_t block_size, int32_t max_batch,
                                 int32_t max_running, int32_t chunk) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.max_batch_tokens = max_batch;
  p.max_running = max_running;
  p.prefill_chunk = chunk;
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
  p.stop_at_eog = j->stop_at_eog;
  p.priority = j->priority;
  p.user_data = j;
  uint64_t id = 0;
  if (brisk_engine_submit(e, &p, &id)) fail_msg("submit: %s", brisk_last_error());
  /* Published atomically: the threaded test reads ids from another thread. */
  __atomic_store_n(&j->id, id, __ATOMIC_RELEASE);
}

/* Records polled events into their jobs (found through user_data), checking
 * that nothing follows a finished event. */
static size_t take_events(brisk_engine *e, size_t capacity) {
  brisk_engine_event ev[16];
  size_t n = 99;
  assert_int_equal(brisk_engine_poll(e, ev, capacity, &n), BRISK_OK);
  assert_true(n <= capacity);
  for (size_t i = 0; i < n; i++) {
    job *j = ev[i].user_data;
    assert_int_equal(ev[i].id, j->id);
    assert_int_equal(j->n_finished_events, 0);
    if (ev[i].token >= 0) {
      assert_true(j->n_out < 64);
      j->out[j->n_out++] = ev[i].token;
    }
    assert_true(j->text_len + ev[i].text_len <= sizeof j->text);
    memcpy(j->text + j->text_len, ev[i].text, ev[i].text_len);
    j->text_len += ev[i].text_len;
    if (ev[i].finished) {
      j->n_finished_events++;
      j->reason = ev[i].reason;
      j->stats.struct_size = sizeof j->stats;
      assert_int_equal(brisk_engine_request_stats(e, j->id, &j->stats), BRISK_OK);
    } else {
      assert_int_equal(ev[i].reason, BRISK_FINISH_NONE);
    }
  }
  return n;
}

static int all_finished(const job *jobs, int n) {
  for (int i = 0; i < n; i++)
    if (!jobs[i].n_finished_events) return 0;
  return 1;
}

/* Steps and polls until every job has finished; returns the step count. */
static int run_until_done(brisk_engine *e, job *jobs, int n) {
  int steps = 0;
  while (!all_finished(jobs, n)) {
    brisk_engine_step_info si = {.struct_size = sizeof si};
    if (brisk_engine_step(e, &si)) fail_msg("step: %s", brisk_last_error());
    while (take_events(e, 16) == 16) {
    }
    assert_true(++steps < 100000);
  }
  return steps;
}

/* The reference: prefill the prompt in one batch, then sample and decode one
 * token at a time, with a sampler made from the same params. */
static int32_t reference(const job *j, int32_t *out) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = 256;
  /* Every engine here uses blocks of 4. Logits are bitwise independent of
   * the batch and the thread count, but attention walks keys block by block,
   * so another block size moves them in the last bits, and a sampled token
   * at a near-tie could flip. */
  cp.block_size = 4;
  cp.max_batch_tokens = 64;
  cp.n_seq_max = 1;
  brisk_context *c = NULL;
  brisk_sampler *s = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(model, &cp, &c), BRISK_OK);
  assert_int_equal(brisk_sampler_create(model, &j->sp, &s), BRISK_OK);
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t i = 0; i < j->n_prompt; i++)
    brisk_batch_add(b, j->prompt[i], i, 0, i == j->n_prompt - 1);
  int32_t n = 0, pos = j->n_prompt;
  for (;;) {
    if (brisk_decode(c, b)) fail_msg("reference decode: %s", brisk_last_error());
    int32_t tok;
    assert_int_equal(brisk_sampler_sample(s, c, brisk_batch_size(b) - 1, &tok), BRISK_OK);
    assert_int_equal(brisk_sampler_accept(s, tok), BRISK_OK);
    out[n++] = tok;
    if ((j->stop_at_eog && brisk_token_is_eog(model, tok)) || n == j->max_tokens) break;
    brisk_batch_clear(b);
    brisk_batch_add(b, tok, pos++, 0, 1);
  }
  brisk_batch_free(b);
  brisk_sampler_free(s);
  brisk_context_free(c);
  return n;
}

static void expect_reference(const job *j) {
  int32_t want[64];
  int32_t n = reference(j, want);
  if (n != j->n_out || memcmp(want, j->out, (size_t)n * sizeof *want)) {
    fprintf(stderr, "request %llu: %d tokens, reference %d\n", (unsigned long long)j->id, j->n_out,
            n);
    for (int32_t i = 0; i < n || i < j->n_out; i++)
      fprintf(stderr, "  %d: %d vs %d\n", i, i < j->n_out ? j->out[i] : -1, i < n ? want[i] : -1);
    fail();
  }
  assert_int_equal(j->n_finished_events, 1);
  brisk_finish_reason r = brisk_token_is_eog(model, want[n - 1]) && j->stop_at_eog
                              ? BRISK_FINISH_EOG
                              : BRISK_FINISH_LENGTH;
  assert_int_equal(j->reason, r);
}

static int32_t free_blocks(brisk_engine *e, int32_t *n_blocks) {
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  if (n_blocks) *n_blocks = s.n_kv_blocks;
  return s.n_free_kv_blocks;
}

/* Greedy and seeded-sampling requests of many lengths, with a small step
 * budget and prefill chunks, give exactly the reference tokens. */
static void test_matches_reference(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_reference");
  enum { N = 10 };
  job jobs[N];
  for (int i = 0; i < N; i++) random_job(&r, model, &jobs[i], 40, 24, i % 2);
  brisk_engine *e = make_engine(512, 4, 24, 6, 7);
  for (int i = 0; i < N; i++) submit(e, &jobs[i]);
  run_until_done(e, jobs, N);
  for (int i = 0; i < N; i++) expect_reference(&jobs[i]);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  brisk_engine_free(e);
}

/* Requests whose KV need is 4x the pool all complete, through preemption,
 * with the tokens of an uncontended run; for each growth reserve of
 * admission (brisk_engine_params.reserve_blocks): none (preempts), the
 * default one block, and one covering max_tokens (never preempts). */
static void test_preemption(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_preemption");
  enum { N = 8 };
  job base[N], jobs[N];
  int32_t demand = 0;
  for (int i = 0; i < N; i++) {
    random_job(&r, model, &base[i], 16, 24, i % 2);
    base[i].n_prompt = 8 + base[i].n_prompt; /* 9..24 */
    for (int32_t k = 0; k < base[i].n_prompt; k++)
      base[i].prompt[k] = (int32_t)(test_rng_u64(&r) % 96);
    base[i].max_tokens = 24;
    base[i].stop_at_eog = 0; /* every request runs to its full length */
    demand += base[i].n_prompt + base[i].max_tokens;
  }
  int32_t pool = 64; /* 16 blocks of 4 */
  assert_true(demand >= 4 * pool);
  const int32_t reserve[3] = {0, 1, 6}; /* 6 blocks of 4 = max_tokens */
  for (int v = 0; v < 3; v++) {
    memcpy(jobs, base, sizeof jobs);
    brisk_engine_params p;
    brisk_engine_params_init(&p);
    assert_int_equal(p.reserve_blocks, 1);
    p.n_threads = 2;
    p.kv_tokens = pool;
    p.block_size = 4;
    p.max_batch_tokens = 32;
    p.max_running = 8;
    p.reserve_blocks = reserve[v];
    brisk_engine *e = NULL;
    assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
    for (int i = 0; i < N; i++) submit(e, &jobs[i]);
    run_until_done(e, jobs, N);
    for (int i = 0; i < N; i++) expect_reference(&jobs[i]);
    brisk_engine_counters s = {.struct_size = sizeof s};
    assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
    fprintf(stderr,
            "reserve_blocks %d: %llu preemptions, computed %llu tokens for %d, in %llu steps\n",
            reserve[v], (unsigned long long)s.n_preemptions,
            (unsigned long long)s.n_computed_tokens, demand, (unsigned long long)s.n_steps);
    assert_int_equal(s.n_finished, N);
    assert_int_equal(s.n_free_kv_blocks, s.n_kv_blocks);
    int32_t preempted = 0;
    for (int i = 0; i < N; i++) preempted += jobs[i].stats.n_preemptions;
    assert_int_equal(preempted, (int32_t)s.n_preemptions);
    if (reserve[v] == 0) {
      assert_true(s.n_preemptions > 0);
      /* Recomputation feeds more tokens than a run without preemption. */
      assert_true(s.n_computed_tokens > (uint64_t)(demand - N));
    }
    if (reserve[v] == 6) {
      assert_int_equal(s.n_preemptions, 0);
      assert_int_equal(s.n_computed_tokens, (uint64_t)(demand - N));
    }
    brisk_engine_free(e);
  }
}

/* Cancellation while waiting, mid-prefill and mid-decode: one cancelled
 * event each, nothing after it, and every KV block back in the pool. */
static void test_cancel(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_cancel");
  job jobs[4];
  for (int i = 0; i < 4; i++) {
    random_job(&r, model, &jobs[i], 8, 8, 0);
    jobs[i].stop_at_eog = 0;
    jobs[i].max_tokens = 30;
  }
  jobs[1].n_prompt = 60; /* prefilled 4 tokens a step */
  for (int32_t k = 0; k < 60; k++) jobs[1].prompt[k] = (int32_t)(test_rng_u64(&r) % 96);
  /* Two sequences at most: jobs[2] waits. */
  brisk_engine *e = make_engine(256, 4, 16, 2, 4);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  submit(e, &jobs[0]);
  submit(e, &jobs[1]);
  submit(e, &jobs[2]);
  for (int s = 0; s < 5; s++) assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  take_events(e, 16);
  assert_true(jobs[0].n_out >= 3);    /* decoding */
  assert_int_equal(jobs[1].n_out, 0); /* still prefilling */
  assert_true(free_blocks(e, NULL) < nb);
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, jobs[2].id, &rs), BRISK_OK);
  assert_int_equal(rs.queue_ns, 0); /* never admitted */
  for (int i = 0; i < 3; i++) assert_int_equal(brisk_engine_cancel(e, jobs[i].id), BRISK_OK);
  assert_int_equal(brisk_engine_cancel(e, jobs[0].id), BRISK_OK); /* twice is harmless */
  assert_int_equal(brisk_engine_cancel(e, 0), BRISK_E_NOT_FOUND);
  assert_int_equal(brisk_engine_cancel(e, jobs[2].id + 1), BRISK_E_NOT_FOUND);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, 0);
  assert_int_equal(si.n_finished, 3);
  assert_int_equal(si.n_running, 0);
  assert_int_equal(si.n_waiting, 0);
  take_events(e, 16);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(jobs[i].n_finished_events, 1);
    assert_int_equal(jobs[i].reason, BRISK_FINISH_CANCELLED);
  }
  assert_int_equal(free_blocks(e, NULL), nb);
  /* A finished request: cancelling is a no-op. */
  submit(e, &jobs[3]);
  run_until_done(e, &jobs[3], 1);
  assert_int_equal(brisk_engine_cancel(e, jobs[3].id), BRISK_OK);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(take_events(e, 16), 0);
  expect_reference(&jobs[3]);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_cancelled, 3);
  assert_int_equal(c.n_finished, 4);
  assert_int_equal(c.n_free_kv_blocks, nb);
  brisk_engine_free(e);
}

/* With one sequence slot, the higher priority is served first, then FCFS. */
static void test_priority(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_priority");
  job jobs[3];
  for (int i = 0; i < 3; i++) {
    random_job(&r, model, &jobs[i], 6, 3, 0);
    jobs[i].stop_at_eog = 0;
  }
  jobs[2].priority = 5;
  brisk_engine *e = make_engine(128, 4, 16, 1, 0);
  for (int i = 0; i < 3; i++) submit(e, &jobs[i]);
  int order[3], n_order = 0;
  while (n_order < 3) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e, 16);
    for (int i = 0; i < 3; i++) {
      int seen = 0;
      for (int k = 0; k < n_order; k++) seen |= order[k] == i;
      if (!seen && jobs[i].n_finished_events) order[n_order++] = i;
    }
  }
  assert_int_equal(order[0], 2);
  assert_int_equal(order[1], 0);
  assert_int_equal(order[2], 1);
  for (int i = 0; i < 3; i++) expect_reference(&jobs[i]);
  brisk_engine_free(e);
}

/* Poll hands out at most `capacity` events, oldest first, keeps the rest,
 * and texts stay valid until the next poll even while steps run. */
static void test_poll_protocol(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_poll");
  job jobs[3];
  for (int i = 0; i < 3; i++) {
    random_job(&r, model, &jobs[i], 10, 12, 1);
    /* Prompts of 2+ tokens: all three prefill in step 1, in rank order. */
    jobs[i].n_prompt = 5;
    for (int32_t k = 0; k < 5; k++) jobs[i].prompt[k] = (int32_t)(test_rng_u64(&r) % 96);
    jobs[i].max_tokens = 12;
    jobs[i].stop_at_eog = 0;
  }
  brisk_engine *e = make_engine(256, 4, 64, 4, 0);
  size_t n = 7;
  assert_int_equal(brisk_engine_poll(e, NULL, 0, &n), BRISK_OK);
  assert_int_equal(n, 0);
  assert_int_equal(brisk_engine_poll(e, NULL, 1, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_poll(e, NULL, 0, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_poll(NULL, NULL, 0, &n), BRISK_E_INVALID_ARGUMENT);
  for (int i = 0; i < 3; i++) submit(e, &jobs[i]);
  /* Empty queue, nothing stepped yet. */
  assert_int_equal(brisk_engine_poll(e, NULL, 0, &n), BRISK_OK);
  assert_int_equal(n, 0);
  for (int s = 0; s < 4; s++) assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  /* Four steps, three requests: 12 token events queued, in step order. */
  brisk_engine_event ev[2];
  assert_int_equal(brisk_engine_poll(e, ev, 2, &n), BRISK_OK);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].id, jobs[0].id);
  assert_int_equal(ev[1].id, jobs[1].id);
  char t0[64];
  size_t l0 = ev[0].text_len;
  memcpy(t0, ev[0].text, l0);
  /* Steps append events; earlier text pointers stay valid. */
  assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  assert_memory_equal(ev[0].text, t0, l0);
  /* Hand the two events back to their jobs' records. */
  for (int i = 0; i < 2; i++) {
    job *j = ev[i].user_data;
    j->out[j->n_out++] = ev[i].token;
    memcpy(j->text + j->text_len, ev[i].text, ev[i].text_len);
    j->text_len += ev[i].text_len;
  }
  size_t total = 2;
  for (;;) {
    size_t got = take_events(e, 1);
    if (!got) break;
    total += got;
  }
  assert_int_equal(total, 15); /* 5 steps x 3 requests */
  run_until_done(e, jobs, 3);
  for (int i = 0; i < 3; i++) {
    expect_reference(&jobs[i]);
    /* The streamed text is the detokenized output. */
    char want[512];
    size_t wl = 0;
    assert_int_equal(
        brisk_detokenize(model, jobs[i].out, (size_t)jobs[i].n_out, 0, want, sizeof want, &wl),
        BRISK_OK);
    assert_int_equal(jobs[i].text_len, wl);
    assert_memory_equal(jobs[i].text, want, wl);
  }
  /* Stats of a delivered request go at the next poll. */
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, jobs[0].id, &rs), BRISK_OK);
  assert_int_equal(brisk_engine_poll(e, ev, 2, &n), BRISK_OK);
  assert_int_equal(n, 0);
  assert_int_equal(brisk_engine_request_stats(e, jobs[0].id, &rs), BRISK_E_NOT_FOUND);
  brisk_engine_free(e);
}

typedef struct submitter {
  brisk_engine *e;
  job *jobs;
  int n;
} submitter;

static void *submit_thread(void *arg) {
  submitter *s = arg;
  for (int i = 0; i < s->n; i++) {
    submit(s->e, &s->jobs[i]);
    if (i % 4 == 3) assert_int_equal(brisk_engine_cancel(s->e, s->jobs[i].id), BRISK_OK);
    if (i % 3 == 2) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

/* One thread submits (and cancels every 4th request right away) while the
 * main thread steps and polls (run under ASan; the mutex protects the
 * queues). Outputs match the reference, cancelled ones up to their end. */
static void test_threaded_submit(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_threads");
  enum { N = 12 };
  job jobs[N];
  for (int i = 0; i < N; i++) random_job(&r, model, &jobs[i], 12, 8, i % 2);
  brisk_engine *e = make_engine(256, 4, 32, 4, 8);
  submitter s = {e, jobs, N};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, submit_thread, &s), 0);
  /* Ids are assigned by the other thread: step until every job has one and
   * has finished. */
  int steps = 0;
  time_t t_start = time(NULL);
  for (;;) {
    int done = 1;
    for (int i = 0; i < N; i++) {
      uint64_t id = __atomic_load_n(&jobs[i].id, __ATOMIC_ACQUIRE);
      if (!id || !jobs[i].n_finished_events) done = 0;
    }
    if (done) break;
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    while (take_events(e, 16) == 16) {
    }
    /* Idle while the submitter is descheduled (a loaded machine): yield
     * instead of burning steps, and bound the wait by time, not count. */
    if (si.n_tokens == 0) sched_yield();
    assert_true(++steps < 100000000);
    assert_true(time(NULL) - t_start < 120);
  }
  pthread_join(t, NULL);
  int n_cancelled = 0;
  for (int i = 0; i < N; i++) {
    if (jobs[i].reason != BRISK_FINISH_CANCELLED) {
      expect_reference(&jobs[i]);
      continue;
    }
    /* Cancelled (from the other thread) at some point: a prefix of the
     * reference output. */
    assert_int_equal(i % 4, 3);
    n_cancelled++;
    int32_t want[64];
    int32_t n = reference(&jobs[i], want);
    assert_true(jobs[i].n_out <= n);
    assert_memory_equal(jobs[i].out, want, (size_t)jobs[i].n_out * sizeof *want);
  }
  fprintf(stderr, "%d of %d cancels arrived before their request finished\n", n_cancelled, N / 4);
  brisk_engine_free(e);
}

/* Counters and per-request statistics on inputs with known totals. */
static void test_stats(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_stats");
  job jobs[3];
  const int32_t n_prompt[3] = {5, 9, 3}, max_tokens[3] = {4, 6, 2};
  for (int i = 0; i < 3; i++) {
    random_job(&r, model, &jobs[i], 9, 6, 0);
    jobs[i].n_prompt = n_prompt[i];
    jobs[i].max_tokens = max_tokens[i];
    jobs[i].stop_at_eog = 0;
  }
  brisk_engine *e = make_engine(256, 4, 64, 4, 0);
  for (int i = 0; i < 3; i++) submit(e, &jobs[i]);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_submitted, 3);
  assert_int_equal(c.n_waiting, 3); /* not yet taken in by a step */
  assert_int_equal(c.n_running, 0);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  /* Step 1: all three prompts (17 tokens), each producing its first token. */
  assert_int_equal(si.n_tokens, 17);
  assert_int_equal(si.n_decode_tokens, 3);
  assert_int_equal(si.n_prefill_tokens, 14);
  assert_int_equal(si.n_running, 3);
  assert_int_equal(si.n_finished, 0);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, 3);
  assert_int_equal(si.n_finished, 1); /* max_tokens 2 */
  run_until_done(e, jobs, 3);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK); /* nothing to do */
  assert_int_equal(si.n_tokens, 0);
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_prompt_tokens, 17);
  assert_int_equal(c.n_generated_tokens, 12);
  /* Every prompt token and every generated token but each last one. */
  assert_int_equal(c.n_computed_tokens, 17 + 12 - 3);
  assert_int_equal(c.n_finished, 3);
  assert_int_equal(c.n_cancelled, 0);
  assert_int_equal(c.n_preemptions, 0);
  assert_int_equal(c.n_steps, 6); /* the longest request: 1 prefill + 5 decode steps */
  assert_int_equal(c.n_running, 0);
  assert_int_equal(c.n_waiting, 0);
  for (int i = 0; i < 3; i++) {
    const brisk_request_stats rs = jobs[i].stats;
    assert_int_equal(rs.n_prompt_tokens, n_prompt[i]);
    assert_int_equal(rs.n_generated_tokens, max_tokens[i]);
    assert_int_equal(rs.n_preemptions, 0);
    assert_true(rs.finished);
    assert_int_equal(rs.reason, BRISK_FINISH_LENGTH);
    assert_true(rs.queue_ns > 0 && rs.queue_ns <= rs.ttft_ns && rs.ttft_ns <= rs.e2e_ns);
    expect_reference(&jobs[i]);
  }
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, 999, &rs), BRISK_E_NOT_FOUND);
  /* Sizes that end inside a field are no header's. */
  rs.struct_size = 6;
  assert_int_equal(brisk_engine_request_stats(e, jobs[0].id, &rs), BRISK_E_INVALID_ARGUMENT);
  c.struct_size = 12;
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_E_INVALID_ARGUMENT);
  si.struct_size = 6;
  assert_int_equal(brisk_engine_step(e, &si), BRISK_E_INVALID_ARGUMENT);
  brisk_engine_free(e);
}

/* Bad arguments come back as statuses naming the problem. */
static void test_arguments(void **state) {
  (void)state;
  brisk_engine_free(NULL);
  brisk_engine_params_init(NULL);
  brisk_request_params_init(NULL);
  brisk_engine *e = NULL;
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_int_equal(brisk_engine_create(NULL, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_create(model, &p, NULL), BRISK_E_INVALID_ARGUMENT);
  p.max_running = 0;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "max_running"));
  brisk_engine_params_init(&p);
  p.prefill_chunk = -1;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  brisk_engine_params_init(&p);
  p.reserve_blocks = -1;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "reserve_blocks"));
  brisk_engine_params_init(&p);
  p.struct_size = 6; /* ends inside n_threads */
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_null(e);
  e = make_engine(64, 4, 16, 2, 0);
  int32_t toks[80] = {1, 2, 3};
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  uint64_t id = 0;
  rp.prompt_tokens = toks;
  rp.n_prompt_tokens = 0;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  rp.n_prompt_tokens = 3;
  rp.max_tokens = 0;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  rp.max_tokens = 62; /* 3 + 62 > 64 */
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "KV pool"));
  rp.max_tokens = 61;
  toks[1] = 96;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  toks[1] = -1;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  toks[1] = 2;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.top_p = 0;
  rp.sampler = &sp;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  rp.sampler = NULL;
  rp.prompt_tokens = NULL;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  rp.struct_size = 12; /* ends inside prompt_tokens */
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_submit(e, NULL, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_submit(NULL, &rp, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(id, 0); /* untouched on failure */
  /* Text prompts through the model's vocabulary. */
  brisk_request_params_init(&rp);
  rp.prompt_text = "hello";
  rp.max_tokens = 3;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
  assert_int_equal(id, 1);
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, id, &rs), BRISK_OK);
  size_t n = 0;
  assert_int_equal(brisk_tokenize(model, "hello", 5, NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(rs.n_prompt_tokens, (int32_t)n);
  assert_int_equal(brisk_engine_step(NULL, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_cancel(NULL, 1), BRISK_E_INVALID_ARGUMENT);
  /* Freed with the request still queued: nothing leaks (ASan). */
  brisk_engine_free(e);
}

/* Create, submit, run and free under every allocation failure: each failing
 * run reports out of memory and leaks nothing. */
static brisk_status create_and_submit(void *arg) {
  (void)arg;
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 1;
  p.kv_tokens = 64;
  p.block_size = 4;
  p.max_batch_tokens = 8;
  p.max_running = 2;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(model, &p, &e);
  if (st) return st;
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  int32_t toks[5] = {3, 1, 4, 1, 5};
  rp.prompt_tokens = toks;
  rp.n_prompt_tokens = 5;
  rp.max_tokens = 4;
  uint64_t id;
  if (!(st = brisk_engine_submit(e, &rp, &id))) st = brisk_engine_cancel(e, id);
  brisk_engine_free(e);
  return st;
}

/* Steps under failing allocations never crash or leak: a step returns out
 * of memory with every request kept (and a retry goes on), or a request
 * ends with an error event; each request gets exactly one finished event. */
static void test_step_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_and_submit, NULL);
  test_rng r = test_rng_seeded("engine_alloc");
  for (uint64_t k = 1; k <= 40; k++) {
    uint64_t live = brisk_alloc_live_count();
    job jobs[3];
    for (int i = 0; i < 3; i++) random_job(&r, model, &jobs[i], 10, 6, 1);
    brisk_engine *e = make_engine(64, 4, 16, 3, 4);
    for (int i = 0; i < 3; i++) submit(e, &jobs[i]);
    brisk_alloc_fail_at(k, 0);
    int oom = 0;
    for (int s = 0; s < 200 && !all_finished(jobs, 3); s++) {
      brisk_status st = brisk_engine_step(e, NULL);
      if (st) {
        assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
        oom++;
      }
      brisk_engine_event ev[16];
      size_t n;
      st = brisk_engine_poll(e, ev, 16, &n);
      if (st) {
        assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
        continue;
      }
      for (size_t i = 0; i < n; i++) {
        job *j = ev[i].user_data;
        assert_int_equal(j->n_finished_events, 0);
        if (ev[i].token >= 0) j->out[j->n_out++] = ev[i].token;
        if (ev[i].finished) j->n_finished_events++, j->reason = ev[i].reason;
      }
    }
    brisk_alloc_fail_at(0, 0);
    assert_true(all_finished(jobs, 3));
    for (int i = 0; i < 3; i++)
      if (jobs[i].reason != BRISK_FINISH_ERROR) expect_reference(&jobs[i]);
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
    (void)oom;
  }
}

/* A real model and a text prompt: the engine's greedy story is the
 * reference's, and its streamed text is the detokenized tokens. */
static void test_stories260k(void **state) {
  (void)state;
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = 512;
  p.max_batch_tokens = 32;
  p.max_running = 4;
  p.prefill_chunk = 5;
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(m, &p, &e), BRISK_OK);
  const char *prompts[3] = {"Once upon a time", "The little dog", "Lily wanted to"};
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_text = prompts[i];
    rp.max_tokens = 40;
    brisk_sampler_params sp;
    brisk_sampler_params_init(&sp);
    sp.temperature = 0;
    rp.sampler = &sp;
    assert_int_equal(brisk_engine_submit(e, &rp, &ids[i]), BRISK_OK);
  }
  int32_t out[3][64], n_out[3] = {0, 0, 0}, done = 0;
  char text[3][1024];
  size_t text_len[3] = {0, 0, 0};
  while (done < 3) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    brisk_engine_event ev[8];
    size_t n;
    assert_int_equal(brisk_engine_poll(e, ev, 8, &n), BRISK_OK);
    for (size_t k = 0; k < n; k++) {
      int i = (int)(ev[k].id - ids[0]);
      if (ev[k].token >= 0) out[i][n_out[i]++] = ev[k].token;
      memcpy(text[i] + text_len[i], ev[k].text, ev[k].text_len);
      text_len[i] += ev[k].text_len;
      done += ev[k].finished;
    }
  }
  for (int i = 0; i < 3; i++) {
    /* Reference: tokenize, prefill, greedy one token at a time. */
    int32_t prompt[64];
    size_t np = 0;
    assert_int_equal(brisk_tokenize(m, prompts[i], strlen(prompts[i]), prompt, 64,
                                    BRISK_TOKENIZE_ADD_SPECIAL, &np),
                     BRISK_OK);
    brisk_context_params cp;
    brisk_context_params_init(&cp);
    cp.n_threads = 1;
    cp.kv_tokens = 256;
    cp.n_seq_max = 1;
    brisk_context *c = NULL;
    brisk_batch *b = NULL;
    assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
    assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
    for (size_t k = 0; k < np; k++) brisk_batch_add(b, prompt[k], (int32_t)k, 0, k + 1 == np);
    int32_t want[64], nw = 0, nv = brisk_model_n_vocab(m);
    for (;;) {
      assert_int_equal(brisk_decode(c, b), BRISK_OK);
      const float *l = brisk_get_logits(c, brisk_batch_size(b) - 1);
      int32_t best = 0;
      for (int32_t v = 1; v < nv; v++)
        if (l[v] > l[best]) best = v;
      want[nw++] = best;
      if (brisk_token_is_eog(m, best) || nw == 40) break;
      brisk_batch_clear(b);
      brisk_batch_add(b, best, (int32_t)np + nw - 1, 0, 1);
    }
    brisk_batch_free(b);
    brisk_context_free(c);
    assert_int_equal(n_out[i], nw);
    assert_memory_equal(out[i], want, (size_t)nw * sizeof *want);
    char dt[1024];
    size_t dl = 0;
    assert_int_equal(brisk_detokenize(m, want, (size_t)nw, 0, dt, sizeof dt, &dl), BRISK_OK);
    assert_int_equal(text_len[i], dl);
    assert_memory_equal(text[i], dt, dl);
    fprintf(stderr, "%s|%.*s\n", prompts[i], (int)text_len[i], text[i]);
  }
  brisk_engine_free(e);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_reference),
      cmocka_unit_test(test_preemption),
      cmocka_unit_test(test_cancel),
      cmocka_unit_test(test_priority),
      cmocka_unit_test(test_poll_protocol),
      cmocka_unit_test(test_threaded_submit),
      cmocka_unit_test(test_stats),
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_step_allocation_failures),
      cmocka_unit_test(test_stories260k),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
