/* Swap-to-host preemption: the context's sequence copy out and back in
 * (F16 and F32 KV, whole and partial blocks) leaves the next logits
 * bitwise unchanged; an engine in swap mode under 4x KV oversubscription
 * gives exactly the tokens of an uncontended run and of recompute mode,
 * while computing fewer tokens; a full host tier falls back to recompute;
 * cancelling a swapped-out request frees its host copy; allocation failures
 * anywhere on the swap path never lose a request or leak. */
#include "test_models.h"

#include "context/swap.h"
#include "core/alloc.h"

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
  test_rng r = test_rng_seeded("swap_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* ---- the context level -------------------------------------------------- */

static brisk_context *make_context(brisk_kv_type type, int32_t block_size, int32_t kv_tokens) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = kv_tokens;
  cp.block_size = block_size;
  cp.kv_type = type;
  cp.max_batch_tokens = 64;
  cp.n_seq_max = 4;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(model, &cp, &c), BRISK_OK);
  return c;
}

/* Feeds tokens[0, n) into seq, from position pos0. */
static void feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t n, int32_t pos0) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t i = 0; i < n; i++) brisk_batch_add(b, tokens[i], pos0 + i, seq, i == n - 1);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  brisk_batch_free(b);
}

static int32_t n_free(const brisk_context *c) {
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  return ks.n_free_blocks;
}

/* A sequence copied out, freed and copied back into another sequence id
 * continues with bitwise the logits of the original. */
static void roundtrip(brisk_kv_type type, int32_t block_size, int32_t n_tokens, test_rng *r) {
  brisk_context *c = make_context(type, block_size, 256);
  int32_t nv = brisk_model_n_vocab(model), tokens[41];
  for (int32_t i = 0; i < 41; i++) tokens[i] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  int32_t all = n_free(c);
  feed(c, 0, tokens, n_tokens, 0);
  brisk_seq_swap sw = {0};
  assert_int_equal(brisk_seq_swap_out(c, 0, &sw), BRISK_OK);
  assert_int_equal(sw.n_tokens, n_tokens);
  assert_int_equal(sw.n_blocks, (n_tokens + block_size - 1) / block_size);
  assert_int_equal(sw.bytes, brisk_seq_swap_bytes(c, n_tokens));
  /* Reference: the next token's logits without the swap. */
  feed(c, 0, tokens + n_tokens, 1, n_tokens);
  int32_t n_vocab = brisk_model_n_vocab(model);
  float *want = malloc((size_t)n_vocab * sizeof *want);
  assert_non_null(want);
  memcpy(want, brisk_get_logits(c, 0), (size_t)n_vocab * sizeof *want);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(n_free(c), all);
  /* Occupy some blocks first so that the copy lands in other blocks. */
  feed(c, 1, tokens, 5, 0);
  assert_int_equal(brisk_seq_swap_in(c, 2, &sw, tokens), BRISK_OK);
  assert_int_equal(brisk_seq_len(c, 2), n_tokens);
  feed(c, 2, tokens + n_tokens, 1, n_tokens);
  assert_memory_equal(brisk_get_logits(c, 0), want, (size_t)n_vocab * sizeof *want);
  /* Into a sequence that is not empty: refused, nothing changes. */
  int32_t before = n_free(c);
  assert_int_equal(brisk_seq_swap_in(c, 1, &sw, tokens), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_swap_in(c, 4, &sw, tokens), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(n_free(c), before);
  assert_int_equal(brisk_seq_len(c, 1), 5);
  brisk_seq_swap_release(&sw);
  assert_null(sw.data);
  assert_int_equal(sw.bytes, 0);
  free(want);
  brisk_context_free(c);
}

static void test_context_roundtrip(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("swap_roundtrip");
  for (int t = 0; t < 2; t++) {
    brisk_kv_type type = t ? BRISK_KV_F32 : BRISK_KV_F16;
    roundtrip(type, 4, 1, &r);
    roundtrip(type, 4, 12, &r);                                    /* whole blocks */
    roundtrip(type, 16, 1 + (int32_t)(test_rng_u64(&r) % 40), &r); /* a partial last block */
  }
}

/* Empty sequences, bad ids and a full pool are errors that change nothing. */
static void test_context_errors(void **state) {
  (void)state;
  brisk_context *c = make_context(BRISK_KV_F16, 4, 16); /* 4 blocks */
  brisk_seq_swap sw = {0};
  assert_int_equal(brisk_seq_swap_out(c, 0, &sw), BRISK_E_INVALID_ARGUMENT); /* empty */
  assert_int_equal(brisk_seq_swap_out(c, -1, &sw), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_swap_out(c, 4, &sw), BRISK_E_INVALID_ARGUMENT);
  assert_null(sw.data);
  assert_int_equal(brisk_seq_swap_bytes(c, 0), 0);
  assert_int_equal(brisk_seq_swap_bytes(c, -3), 0);
  int32_t tokens[12] = {1, 5, 9, 3, 7, 2, 8, 4, 6, 10, 11, 12};
  feed(c, 0, tokens, 10, 0); /* 3 blocks */
  assert_int_equal(brisk_seq_swap_out(c, 0, &sw), BRISK_OK);
  assert_int_equal(n_free(c), 1);
  assert_int_equal(brisk_seq_swap_in(c, 1, &sw, tokens), BRISK_E_KV_FULL);
  assert_int_equal(brisk_seq_len(c, 1), 0);
  assert_int_equal(n_free(c), 1);
  brisk_seq_swap forged = sw;
  forged.bytes--;
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  assert_int_equal(brisk_seq_swap_in(c, 1, &forged, tokens), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(n_free(c), 4);
  assert_int_equal(brisk_seq_swap_in(c, 1, &sw, tokens), BRISK_OK);
  assert_int_equal(n_free(c), 1);
  brisk_seq_swap_release(&sw);
  brisk_seq_swap_release(&sw); /* twice is harmless */
  brisk_context_free(c);
}

typedef struct swap_ctx {
  brisk_context *c;
  brisk_batch *b;        /* 9 tokens of sequence 0 */
  const int32_t *tokens; /* [9] their ids */
} swap_ctx;

/* Out, free, in, as the engine does; on failure the sequence is empty. */
static brisk_status swap_cycle(void *p) {
  swap_ctx *sc = p;
  brisk_context *c = sc->c;
  brisk_status st = brisk_decode(c, sc->b);
  if (st) return st;
  brisk_seq_swap sw = {0};
  st = brisk_seq_swap_out(c, 0, &sw);
  brisk_seq_free(c, 0);
  if (st) return st;
  int32_t before = n_free(c);
  st = brisk_seq_swap_in(c, 1, &sw, sc->tokens);
  brisk_seq_swap_release(&sw);
  if (st) {
    assert_int_equal(brisk_seq_len(c, 1), 0);
    assert_int_equal(n_free(c), before);
    return st;
  }
  assert_int_equal(brisk_seq_len(c, 1), 9);
  brisk_seq_free(c, 1);
  return BRISK_OK;
}

static void test_context_allocation_failures(void **state) {
  (void)state;
  int32_t tokens[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  swap_ctx sc = {make_context(BRISK_KV_F32, 4, 64), NULL, tokens};
  assert_int_equal(brisk_batch_create(16, &sc.b), BRISK_OK);
  for (int32_t i = 0; i < 9; i++) brisk_batch_add(sc.b, tokens[i], i, 0, i == 8);
  /* Grow the context's scratch first, so that only the swap allocates. */
  assert_int_equal(swap_cycle(&sc), BRISK_OK);
  assert_true(test_every_allocation_fails(swap_cycle, &sc) >= 4);
  brisk_batch_free(sc.b);
  brisk_context_free(sc.c);
}

/* ---- the engine --------------------------------------------------------- */

typedef struct job {
  int32_t prompt[32];
  int32_t n_prompt, max_tokens;
  brisk_sampler_params sp;
  uint64_t id;
  int32_t out[48];
  int32_t n_out, finished;
  brisk_finish_reason reason;
} job;

/* N requests whose prompt + output need 4x the 16-block pool. */
enum { N = 8, POOL = 64, BLOCK = 4 };

static void make_jobs(test_rng *r, job *jobs) {
  for (int i = 0; i < N; i++) {
    job *j = &jobs[i];
    memset(j, 0, sizeof *j);
    j->n_prompt = 9 + (int32_t)(test_rng_u64(r) % 16); /* 9..24 */
    for (int32_t k = 0; k < j->n_prompt; k++) j->prompt[k] = (int32_t)(test_rng_u64(r) % 96);
    j->max_tokens = 24;
    brisk_sampler_params_init(&j->sp);
    if (i % 2) {
      j->sp.seed = test_rng_u64(r);
      j->sp.temperature = 0.9f;
      j->sp.top_k = 40;
    } else {
      j->sp.temperature = 0;
    }
  }
}

static brisk_engine *make_engine(int32_t kv_tokens, brisk_kv_type type, brisk_preempt_mode mode,
                                 uint64_t swap_bytes) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = BLOCK;
  p.kv_type = type;
  p.max_batch_tokens = 32;
  p.max_running = N;
  p.preempt_mode = mode;
  p.swap_bytes = swap_bytes;
  brisk_engine *e = NULL;
  if (brisk_engine_create(model, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

static void submit_all(brisk_engine *e, job *jobs, int n) {
  for (int i = 0; i < n; i++) {
    brisk_request_params p;
    brisk_request_params_init(&p);
    p.prompt_tokens = jobs[i].prompt;
    p.n_prompt_tokens = (size_t)jobs[i].n_prompt;
    p.sampler = &jobs[i].sp;
    p.max_tokens = jobs[i].max_tokens;
    p.stop_at_eog = 0; /* every request runs to its full length */
    p.user_data = &jobs[i];
    if (brisk_engine_submit(e, &p, &jobs[i].id)) fail_msg("submit: %s", brisk_last_error());
  }
}

/* Polls; on an allocation failure (injected) the events stay queued. */
static void take_events(brisk_engine *e) {
  brisk_engine_event ev[16];
  size_t n = 16;
  while (n == 16) {
    brisk_status st = brisk_engine_poll(e, ev, 16, &n);
    if (st) {
      assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      return;
    }
    for (size_t i = 0; i < n; i++) {
      job *j = ev[i].user_data;
      assert_int_equal(j->finished, 0);
      if (ev[i].token >= 0) {
        assert_true(j->n_out < 48);
        j->out[j->n_out++] = ev[i].token;
      }
      if (ev[i].finished) j->finished = 1, j->reason = ev[i].reason;
    }
  }
}

/* Fresh copies of jobs that ran already. */
static void reset(job *jobs, const job *from) {
  memcpy(jobs, from, N * sizeof *jobs);
  for (int i = 0; i < N; i++) {
    jobs[i].n_out = jobs[i].finished = 0;
    jobs[i].reason = BRISK_FINISH_NONE;
  }
}

static int all_finished(const job *jobs, int n) {
  for (int i = 0; i < n; i++)
    if (!jobs[i].finished) return 0;
  return 1;
}

/* Runs to completion; checks after every step that the host tier stays
 * within `limit` bytes. */
static void run(brisk_engine *e, job *jobs, int n, uint64_t limit) {
  for (int steps = 0; !all_finished(jobs, n); steps++) {
    assert_true(steps < 100000);
    brisk_engine_step_info si = {.struct_size = sizeof si};
    if (brisk_engine_step(e, &si)) fail_msg("step: %s", brisk_last_error());
    brisk_engine_counters c = {.struct_size = sizeof c};
    assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
    assert_true(c.swap_bytes_used <= limit);
    take_events(e);
  }
}

static brisk_engine_counters counters(brisk_engine *e) {
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  return c;
}

static void expect_same(const job *a, const job *b) {
  for (int i = 0; i < N; i++) {
    assert_int_equal(a[i].reason, BRISK_FINISH_LENGTH);
    assert_int_equal(b[i].reason, BRISK_FINISH_LENGTH);
    assert_int_equal(a[i].n_out, b[i].n_out);
    assert_memory_equal(a[i].out, b[i].out, (size_t)a[i].n_out * sizeof a[i].out[0]);
  }
}

/* 4x oversubscription: swap mode, recompute mode and an uncontended pool
 * give the same tokens; swap mode moves KV both ways and computes each
 * token once. Both KV dtypes. */
static void test_engine_oversubscribed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("swap_engine");
  for (int t = 0; t < 2; t++) {
    brisk_kv_type type = t ? BRISK_KV_F32 : BRISK_KV_F16;
    job base[N], rec[N], swp[N];
    make_jobs(&r, base);
    int32_t demand = 0;
    for (int i = 0; i < N; i++) demand += base[i].n_prompt + base[i].max_tokens;
    assert_true(demand >= 4 * POOL);
    memcpy(rec, base, sizeof base);
    memcpy(swp, base, sizeof base);

    brisk_engine *e = make_engine(1024, type, BRISK_PREEMPT_RECOMPUTE, 0);
    submit_all(e, base, N);
    run(e, base, N, 0);
    assert_int_equal(counters(e).n_preemptions, 0);
    brisk_engine_free(e);

    e = make_engine(POOL, type, BRISK_PREEMPT_RECOMPUTE, 0);
    submit_all(e, rec, N);
    run(e, rec, N, 0);
    brisk_engine_counters cr = counters(e);
    brisk_engine_free(e);

    e = make_engine(POOL, type, BRISK_PREEMPT_SWAP, UINT64_MAX);
    submit_all(e, swp, N);
    run(e, swp, N, UINT64_MAX);
    brisk_engine_counters cs = counters(e);
    brisk_engine_free(e);

    expect_same(base, rec);
    expect_same(base, swp);
    fprintf(stderr,
            "kv %s: recompute %llu preemptions, %llu tokens computed; swap %llu preemptions, "
            "%llu out / %llu in (%llu bytes), %llu tokens computed; demand %d\n",
            t ? "f32" : "f16", (unsigned long long)cr.n_preemptions,
            (unsigned long long)cr.n_computed_tokens, (unsigned long long)cs.n_preemptions,
            (unsigned long long)cs.n_swapped_out, (unsigned long long)cs.n_swapped_in,
            (unsigned long long)cs.swap_out_bytes, (unsigned long long)cs.n_computed_tokens,
            demand);
    assert_true(cr.n_preemptions > 0);
    assert_int_equal(cr.n_swapped_out, 0);
    assert_true(cs.n_swapped_out > 0);
    assert_int_equal(cs.n_swap_fallbacks, 0);
    /* Every copy came back (nothing was cancelled) and nothing is held. */
    assert_int_equal(cs.n_swapped_in, cs.n_swapped_out);
    assert_int_equal(cs.swap_in_bytes, cs.swap_out_bytes);
    assert_int_equal(cs.swap_bytes_used, 0);
    assert_int_equal(cs.n_free_kv_blocks, cs.n_kv_blocks);
    /* No token is fed twice: each request's prompt and all but its last
     * output token, exactly; recompute feeds more. */
    assert_int_equal(cs.n_computed_tokens, (uint64_t)(demand - N));
    assert_true(cr.n_computed_tokens > cs.n_computed_tokens);
  }
}

/* A host tier too small for any copy recomputes every victim; one for a
 * few copies mixes both, never holding more than its size. */
static void test_engine_tier_full(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("swap_tier");
  job base[N], tiny[N], some[N];
  make_jobs(&r, base);
  memcpy(tiny, base, sizeof base);
  brisk_engine *e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_RECOMPUTE, 0);
  submit_all(e, base, N);
  run(e, base, N, 0);
  brisk_engine_free(e);

  e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, 1);
  submit_all(e, tiny, N);
  run(e, tiny, N, 1);
  brisk_engine_counters c = counters(e);
  brisk_engine_free(e);
  expect_same(base, tiny);
  assert_int_equal(c.n_swapped_out, 0);
  assert_true(c.n_swap_fallbacks > 0);

  /* A tier the size of the first copy of an unlimited run (identical up
   * to there): that copy is made, and the tier is never exceeded. */
  uint64_t limit = 0;
  reset(some, base);
  e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, UINT64_MAX);
  submit_all(e, some, N);
  for (int s = 0; s < 100000 && !limit; s++) {
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    limit = counters(e).swap_out_bytes;
    take_events(e);
  }
  brisk_engine_free(e);
  assert_true(limit > 0);
  reset(some, base);
  e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, limit);
  submit_all(e, some, N);
  run(e, some, N, limit);
  c = counters(e);
  brisk_engine_free(e);
  expect_same(base, some);
  fprintf(stderr, "limit %llu bytes: %llu swapped, %llu recomputed\n", (unsigned long long)limit,
          (unsigned long long)c.n_swapped_out, (unsigned long long)c.n_swap_fallbacks);
  assert_true(c.n_swapped_out > 0);
}

/* A request cancelled while swapped out: its host copy is freed at once,
 * and the other request finishes as usual. Two requests of 60 tokens share
 * a pool of 64: the newer is swapped out and stays out while the older
 * one runs. */
static void test_engine_cancel_swapped(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("swap_cancel");
  job jobs[N];
  make_jobs(&r, jobs);
  for (int i = 0; i < 2; i++) {
    jobs[i].n_prompt = 20;
    jobs[i].max_tokens = 40;
  }
  uint64_t live = brisk_alloc_live_count();
  brisk_engine *e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, 0);
  submit_all(e, jobs, 2);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  for (int s = 0; s < 100 && si.n_swapped_out == 0; s++) {
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    take_events(e);
  }
  assert_int_equal(si.n_swapped_out, 1);
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, jobs[1].id, &rs), BRISK_OK);
  assert_int_equal(rs.n_preemptions, 1);
  brisk_engine_counters c = counters(e);
  /* Its prompt and every token it generated but the last, in host memory. */
  assert_true(rs.n_generated_tokens > 0);
  brisk_context *ctx = make_context(BRISK_KV_F16, BLOCK, 16);
  assert_int_equal(c.swap_bytes_used, brisk_seq_swap_bytes(ctx, 20 + rs.n_generated_tokens - 1));
  brisk_context_free(ctx);
  assert_int_equal(c.n_swapped_out, 1);
  assert_int_equal(c.n_swapped_in, 0);
  assert_int_equal(brisk_engine_cancel(e, jobs[1].id), BRISK_OK);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  take_events(e);
  assert_true(jobs[1].finished);
  assert_int_equal(jobs[1].reason, BRISK_FINISH_CANCELLED);
  c = counters(e);
  assert_int_equal(c.swap_bytes_used, 0);
  assert_int_equal(c.n_swapped_in, 0);
  run(e, jobs, 2, 0);
  assert_int_equal(jobs[0].reason, BRISK_FINISH_LENGTH);
  assert_int_equal(jobs[0].n_out, 40);
  c = counters(e);
  assert_int_equal(c.n_cancelled, 1);
  assert_int_equal(c.n_free_kv_blocks, c.n_kv_blocks);
  brisk_engine_free(e);
  assert_int_equal(brisk_alloc_live_count(), live);
}

/* Fails each allocation the oversubscribed swap run makes, one run each:
 * a step may report BRISK_E_OUT_OF_MEMORY (and is retried), a request may
 * finish with BRISK_FINISH_ERROR (its text), but every other request gives
 * the uncontended tokens, failed copies fall back to recompute, and nothing
 * leaks. */
static void test_engine_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("swap_alloc");
  job base[N];
  make_jobs(&r, base);
  brisk_engine *e = make_engine(1024, BRISK_KV_F16, BRISK_PREEMPT_RECOMPUTE, 0);
  submit_all(e, base, N);
  run(e, base, N, 0);
  brisk_engine_free(e);

  /* Count the allocations of one whole run after submission. */
  job jobs[N];
  reset(jobs, base);
  e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, UINT64_MAX);
  submit_all(e, jobs, N);
  brisk_alloc_fail_at(0, 0);
  run(e, jobs, N, UINT64_MAX);
  uint64_t n_alloc = brisk_alloc_fail_at(0, 0);
  uint64_t swapped = counters(e).n_swapped_out;
  /* An unlimited tier: only failed allocations fall back below. */
  assert_int_equal(counters(e).n_swap_fallbacks, 0);
  brisk_engine_free(e);
  expect_same(base, jobs);
  fprintf(stderr, "%llu allocations in a run with %llu swaps\n", (unsigned long long)n_alloc,
          (unsigned long long)swapped);
  assert_true(swapped > 0);

  uint64_t fallbacks = 0, live = brisk_alloc_live_count();
  /* Every allocation if few, else a spread (most allocations of such a
   * run are on the swap path: the copy, then the block list and scratch of
   * the restore), so that the test stays quick under sanitizers. */
  uint64_t stride = n_alloc / 40 + 1;
  for (uint64_t k = 1; k <= n_alloc; k += stride) {
    reset(jobs, base);
    e = make_engine(POOL, BRISK_KV_F16, BRISK_PREEMPT_SWAP, UINT64_MAX);
    submit_all(e, jobs, N);
    brisk_alloc_fail_at(k, 0);
    for (int s = 0; s < 100000 && !all_finished(jobs, N); s++) {
      brisk_status st = brisk_engine_step(e, NULL);
      if (st) assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      take_events(e);
    }
    brisk_alloc_fail_at(0, 0);
    assert_true(all_finished(jobs, N));
    for (int i = 0; i < N; i++) {
      if (jobs[i].reason == BRISK_FINISH_ERROR) continue;
      assert_int_equal(jobs[i].reason, BRISK_FINISH_LENGTH);
      assert_int_equal(jobs[i].n_out, base[i].n_out);
      assert_memory_equal(jobs[i].out, base[i].out, (size_t)base[i].n_out * sizeof base[i].out[0]);
    }
    brisk_engine_counters c = counters(e);
    assert_int_equal(c.swap_bytes_used, 0);
    fallbacks += c.n_swap_fallbacks;
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
  /* Some runs failed a copy and recomputed instead. */
  fprintf(stderr, "%llu swap fallbacks over the runs\n", (unsigned long long)fallbacks);
  assert_true(fallbacks > 0);
}

/* Bad preempt_mode and the default host tier. */
static void test_params(void **state) {
  (void)state;
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  assert_int_equal(p.preempt_mode, BRISK_PREEMPT_RECOMPUTE);
  assert_int_equal(p.swap_bytes, 0);
  p.kv_tokens = 64;
  p.preempt_mode = (brisk_preempt_mode)7;
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "preempt_mode"));
  assert_null(e);
  /* Params of a caller built before the swap fields: what lies beyond its
   * struct_size is not read. */
  p.struct_size = (uint32_t)offsetof(brisk_engine_params, preempt_mode);
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
  /* Its counters are filled up to its size. */
  brisk_engine_counters c;
  memset(&c, 0xab, sizeof c);
  c.struct_size = (uint32_t)offsetof(brisk_engine_counters, n_swapped_out);
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_kv_blocks, 4);
  assert_int_equal(c.n_swapped_out, 0xababababababababull); /* untouched */
  c.struct_size = (uint32_t)offsetof(brisk_engine_counters, n_swapped_out) + 4;
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_E_INVALID_ARGUMENT);
  brisk_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_context_roundtrip),
      cmocka_unit_test(test_context_errors),
      cmocka_unit_test(test_context_allocation_failures),
      cmocka_unit_test(test_engine_oversubscribed),
      cmocka_unit_test(test_engine_tier_full),
      cmocka_unit_test(test_engine_cancel_swapped),
      cmocka_unit_test(test_engine_allocation_failures),
      cmocka_unit_test(test_params),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
