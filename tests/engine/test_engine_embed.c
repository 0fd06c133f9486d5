/* Embedding requests on the engine (brisk_engine_submit_embed): vectors
 * bitwise equal to brisk_embed's for the same text and params, several
 * packed into one step's pass within the token budget (first come, first
 * served past it), generation requests' tokens unchanged by embedding
 * requests mixed in at random steps, cancellation, the vector's lifetime,
 * metrics and counters, argument checks and allocation failures. Model:
 * random-weight llama with a small SPM vocabulary (test_models.h). */
#include "test_models.h"

#include "core/alloc.h"
#include "model/embed_tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model;
static int32_t n_embd;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_embed_model");
  if (test_model_load(dir, "llama", &s, &r, &model)) return -1;
  n_embd = brisk_model_n_embd(model);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_engine *make_engine(int32_t max_batch, int32_t kv_tokens) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = 8; /* the engine's own block size: embeddings do not use it */
  p.max_batch_tokens = max_batch;
  p.max_running = 4;
  brisk_engine *e = NULL;
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
  return e;
}

/* A random text of printable ASCII words. */
static void random_text(test_rng *r, char *out, size_t cap) {
  size_t n = 4 + (size_t)(test_rng_u64(r) % (cap - 5));
  for (size_t i = 0; i < n; i++)
    out[i] = test_rng_u64(r) % 5 == 0 ? ' ' : (char)('a' + test_rng_u64(r) % 26);
  out[n] = 0;
}

typedef struct emb_job {
  char text[32];
  int32_t pooling, normalize;
  uint64_t id;
  float *want; /* [n_embd] brisk_embed's */
  float *got;  /* [n_embd] from brisk_engine_embedding at its event */
  int finished;
  brisk_finish_reason reason;
  int32_t n_tokens;
} emb_job;

static void emb_job_init(test_rng *r, emb_job *j) {
  memset(j, 0, sizeof *j);
  random_text(r, j->text, sizeof j->text);
  j->pooling = 1 + (int32_t)(test_rng_u64(r) % 3); /* MEAN, CLS, LAST */
  j->normalize = (int32_t)(test_rng_u64(r) % 2);
  j->want = malloc((size_t)n_embd * sizeof(float));
  j->got = malloc((size_t)n_embd * sizeof(float));
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = j->pooling;
  p.normalize = j->normalize;
  p.n_threads = 1;
  const char *t = j->text;
  assert_int_equal(brisk_embed(model, &p, &t, 1, j->want, (size_t)n_embd), BRISK_OK);
  int32_t *ids = NULL;
  size_t n = 0;
  assert_int_equal(brisk_model_embed_tokens(model, t, strlen(t), 1u << 20, &ids, &n), BRISK_OK);
  brisk_free(ids);
  j->n_tokens = (int32_t)n;
}

static void emb_job_free(emb_job *j) {
  free(j->want);
  free(j->got);
}

static brisk_status emb_submit(brisk_engine *e, emb_job *j) {
  brisk_embed_request_params p;
  brisk_embed_request_params_init(&p);
  p.text = j->text;
  p.pooling = j->pooling;
  p.normalize = j->normalize;
  p.user_data = j;
  return brisk_engine_submit_embed(e, &p, &j->id);
}

/* A generation job: its prompt and the tokens its events carried. */
typedef struct gen_job {
  int32_t prompt[24];
  int32_t n_prompt, max_tokens;
  brisk_sampler_params sp;
  uint64_t id;
  int32_t out[32];
  int32_t n_out;
  int finished;
} gen_job;

static void gen_job_init(test_rng *r, gen_job *j, int sampled) {
  memset(j, 0, sizeof *j);
  j->n_prompt = 1 + (int32_t)(test_rng_u64(r) % 24);
  for (int32_t i = 0; i < j->n_prompt; i++)
    j->prompt[i] = (int32_t)(test_rng_u64(r) % (uint64_t)brisk_model_n_vocab(model));
  j->max_tokens = 1 + (int32_t)(test_rng_u64(r) % 32);
  brisk_sampler_params_init(&j->sp);
  if (sampled) {
    j->sp.seed = test_rng_u64(r);
    j->sp.temperature = 0.9f;
    j->sp.top_k = 40;
  } else {
    j->sp.temperature = 0;
  }
}

static void gen_submit(brisk_engine *e, gen_job *j) {
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = j->prompt;
  p.n_prompt_tokens = (size_t)j->n_prompt;
  p.max_tokens = j->max_tokens;
  p.stop_at_eog = 0;
  p.sampler = &j->sp;
  p.user_data = j;
  assert_int_equal(brisk_engine_submit(e, &p, &j->id), BRISK_OK);
}

/* Polls every event; an embedding job's vector is read at its finished
 * event (before the next poll ends its lifetime). */
static void take_events(brisk_engine *e, emb_job *embs, int n_embs) {
  brisk_engine_event ev[16];
  size_t n = 0;
  do {
    assert_int_equal(brisk_engine_poll(e, ev, 16, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      emb_job *ej = NULL;
      for (int k = 0; k < n_embs && !ej; k++)
        if (embs[k].id == ev[i].id) ej = &embs[k];
      if (ej) {
        assert_ptr_equal(ev[i].user_data, ej);
        assert_true(ev[i].finished);
        assert_int_equal(ev[i].token, -1);
        assert_int_equal(ev[i].text_len, 0);
        assert_false(ej->finished);
        ej->finished = 1;
        ej->reason = ev[i].reason;
        size_t got = 0;
        brisk_status st = brisk_engine_embedding(e, ev[i].id, ej->got, (size_t)n_embd, &got);
        if (ev[i].reason == BRISK_FINISH_LENGTH) {
          assert_int_equal(st, BRISK_OK);
          assert_int_equal(got, (size_t)n_embd);
        } else {
          assert_int_equal(st, BRISK_E_INVALID_STATE);
        }
        continue;
      }
      gen_job *g = ev[i].user_data;
      assert_false(g->finished);
      if (ev[i].token >= 0) g->out[g->n_out++] = ev[i].token;
      if (ev[i].finished) g->finished = 1;
    }
  } while (n == 16);
}

static int all_done(const emb_job *embs, int n_embs, const gen_job *gens, int n_gens) {
  for (int k = 0; k < n_embs; k++)
    if (!embs[k].finished) return 0;
  for (int k = 0; k < n_gens; k++)
    if (!gens[k].finished) return 0;
  return 1;
}

static void expect_vector(const emb_job *j) {
  assert_int_equal(j->reason, BRISK_FINISH_LENGTH);
  if (memcmp(j->got, j->want, (size_t)n_embd * sizeof(float)) == 0) return;
  for (int32_t i = 0; i < n_embd; i++)
    if (memcmp(&j->got[i], &j->want[i], sizeof(float)))
      fail_msg("'%s' pooling %d normalize %d: element %d is %.9g, brisk_embed's %.9g", j->text,
               j->pooling, j->normalize, i, (double)j->got[i], (double)j->want[i]);
}

/* Several embedding requests in one step: one packed pass, every vector
 * bitwise brisk_embed's, the step's tokens their sum. */
static void test_packed_equals_embed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_embed_packed");
  enum { N = 9 };
  emb_job jobs[N];
  int32_t total = 0;
  for (int k = 0; k < N; k++) {
    emb_job_init(&r, &jobs[k]);
    total += jobs[k].n_tokens;
  }
  jobs[0].pooling = BRISK_EMBED_POOLING_DEFAULT; /* a decoder's default: LAST */
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.normalize = jobs[0].normalize;
  const char *t = jobs[0].text;
  assert_int_equal(brisk_embed(model, &p, &t, 1, jobs[0].want, (size_t)n_embd), BRISK_OK);
  brisk_engine *e = make_engine(512, 256);
  for (int k = 0; k < N; k++) assert_int_equal(emb_submit(e, &jobs[k]), BRISK_OK);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, total);
  assert_int_equal(si.n_prefill_tokens, total);
  assert_int_equal(si.n_decode_tokens, 0);
  assert_int_equal(si.n_finished, N);
  assert_int_equal(si.n_waiting, 0);
  take_events(e, jobs, N);
  for (int k = 0; k < N; k++) expect_vector(&jobs[k]);
  /* Stats until the poll after the one that delivered the event. */
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, jobs[1].id, &rs), BRISK_OK);
  assert_int_equal(rs.n_prompt_tokens, jobs[1].n_tokens);
  assert_int_equal(rs.n_generated_tokens, 0);
  assert_true(rs.finished);
  assert_int_equal(rs.reason, BRISK_FINISH_LENGTH);
  size_t n = 0;
  assert_int_equal(brisk_engine_embedding(e, jobs[1].id, NULL, 0, &n), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(n, (size_t)n_embd);
  brisk_engine_metrics m = {.struct_size = sizeof m};
  assert_int_equal(brisk_engine_get_metrics(e, &m), BRISK_OK);
  assert_int_equal(m.n_embeddings, N);
  assert_int_equal(m.n_embed_tokens, (uint64_t)total);
  assert_int_equal(m.embed_e2e.count, N);
  assert_int_equal(m.n_completed, 0); /* generation figures untouched */
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_submitted, N);
  assert_int_equal(c.n_finished, N);
  assert_int_equal(c.n_computed_tokens, (uint64_t)total);
  assert_int_equal(c.n_free_kv_blocks, c.n_kv_blocks); /* no KV kept */
  brisk_engine_event ev[1];
  assert_int_equal(brisk_engine_poll(e, ev, 1, &n), BRISK_OK);
  assert_int_equal(n, 0);
  assert_int_equal(brisk_engine_embedding(e, jobs[1].id, jobs[1].got, (size_t)n_embd, &n),
                   BRISK_E_NOT_FOUND);
  brisk_engine_free(e);
  for (int k = 0; k < N; k++) emb_job_free(&jobs[k]);
}

/* A token budget smaller than the requests: each step packs those that
 * fit whole, in submission order (the first that does not fit waits). */
static void test_token_budget(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_embed_budget");
  enum { N = 12 };
  emb_job jobs[N];
  int32_t longest = 0;
  for (int k = 0; k < N; k++) {
    emb_job_init(&r, &jobs[k]);
    if (jobs[k].n_tokens > longest) longest = jobs[k].n_tokens;
  }
  int32_t budget = longest + 4;
  brisk_engine *e = make_engine(budget, 256);
  for (int k = 0; k < N; k++) assert_int_equal(emb_submit(e, &jobs[k]), BRISK_OK);
  int next = 0, steps = 0;
  while (next < N) {
    int32_t want = 0, until = next;
    while (until < N && want + jobs[until].n_tokens <= budget) want += jobs[until++].n_tokens;
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_int_equal(si.n_tokens, want);
    assert_int_equal(si.n_finished, until - next);
    take_events(e, jobs, N);
    for (int k = 0; k < N; k++) assert_int_equal(jobs[k].finished, k < until);
    next = until;
    steps++;
  }
  assert_true(steps > 1);
  for (int k = 0; k < N; k++) expect_vector(&jobs[k]);
  brisk_engine_free(e);
  for (int k = 0; k < N; k++) emb_job_free(&jobs[k]);
}

/* Generation requests alone, then with embedding requests submitted at
 * random steps (some cancelled): the same tokens, every vector
 * brisk_embed's. */
static void test_mixed_workload(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_embed_mixed");
  enum { NG = 8, NE = 14 };
  gen_job alone[NG], mixed[NG];
  for (int k = 0; k < NG; k++) {
    gen_job_init(&r, &alone[k], k % 2);
    mixed[k] = alone[k];
  }
  emb_job embs[NE];
  for (int k = 0; k < NE; k++) emb_job_init(&r, &embs[k]);
  /* An oversubscribed pool and a small budget: preemption, chunked
   * prefill and embeddings all share steps. */
  brisk_engine *e = make_engine(40, 96);
  for (int k = 0; k < NG; k++) gen_submit(e, &alone[k]);
  for (int s = 0; !all_done(NULL, 0, alone, NG); s++) {
    assert_true(s < 2000);
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e, NULL, 0);
  }
  brisk_engine_free(e);

  e = make_engine(40, 96);
  for (int k = 0; k < NG; k++) gen_submit(e, &mixed[k]);
  int submitted = 0, cancelled = 0;
  for (int s = 0; !all_done(embs, NE, mixed, NG); s++) {
    assert_true(s < 2000);
    while (submitted < NE && test_rng_u64(&r) % 3 == 0) {
      emb_job *j = &embs[submitted++];
      assert_int_equal(emb_submit(e, j), BRISK_OK);
      if (test_rng_u64(&r) % 5 == 0) { /* cancelled before any step runs it */
        assert_int_equal(brisk_engine_cancel(e, j->id), BRISK_OK);
        cancelled++;
      }
    }
    if (s > 8 && submitted < NE) { /* all in eventually */
      assert_int_equal(emb_submit(e, &embs[submitted++]), BRISK_OK);
    }
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_true(si.n_tokens <= 40);
    take_events(e, embs, NE);
  }
  for (int k = 0; k < NG; k++) {
    assert_int_equal(mixed[k].n_out, alone[k].n_out);
    assert_memory_equal(mixed[k].out, alone[k].out, (size_t)alone[k].n_out * sizeof(int32_t));
  }
  int n_vectors = 0;
  for (int k = 0; k < NE; k++) {
    if (embs[k].reason == BRISK_FINISH_CANCELLED) continue;
    expect_vector(&embs[k]);
    n_vectors++;
  }
  assert_int_equal(n_vectors + cancelled, NE);
  brisk_engine_metrics m = {.struct_size = sizeof m};
  assert_int_equal(brisk_engine_get_metrics(e, &m), BRISK_OK);
  assert_int_equal(m.n_embeddings, (uint64_t)n_vectors);
  assert_int_equal(m.n_completed, NG);
  assert_int_equal(m.n_aborted, (uint64_t)cancelled);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_submitted, NG + NE);
  assert_int_equal(c.n_cancelled, (uint64_t)cancelled);
  brisk_engine_free(e);
  for (int k = 0; k < NE; k++) emb_job_free(&embs[k]);
}

/* Priorities order embedding requests among themselves and against
 * waiting generation prompts; tokens as input; a cancel after the vector
 * is a no-op. */
static void test_priority_tokens_cancel(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_embed_priority");
  emb_job both[2];
  emb_job_init(&r, &both[0]);
  emb_job_init(&r, &both[1]);
  emb_job *a = &both[0], *b = &both[1];
  brisk_engine *e = make_engine(a->n_tokens + b->n_tokens - 1, 256); /* one per step */
  assert_int_equal(emb_submit(e, a), BRISK_OK);
  int32_t ids[48];
  size_t n = 0;
  assert_int_equal(
      brisk_tokenize(model, b->text, strlen(b->text), ids, 48, BRISK_TOKENIZE_ADD_SPECIAL, &n),
      BRISK_OK);
  brisk_embed_request_params p;
  brisk_embed_request_params_init(&p);
  p.tokens = ids;
  p.n_tokens = n;
  p.pooling = b->pooling;
  p.normalize = b->normalize;
  p.priority = 5;
  p.user_data = b;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &b->id), BRISK_OK);
  assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  take_events(e, both, 2);
  assert_false(both[0].finished); /* b, ranked higher, went first */
  assert_true(both[1].finished);
  assert_int_equal(brisk_engine_cancel(e, both[1].id), BRISK_OK); /* finished: a no-op */
  assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  take_events(e, both, 2);
  assert_true(both[0].finished);
  expect_vector(&both[0]);
  expect_vector(&both[1]);
  brisk_engine_free(e);
  emb_job_free(a);
  emb_job_free(b);
}

/* A step time budget: embedding requests join steps only as far as the
 * cost model lets them (a step alone always makes progress), and still
 * give brisk_embed's vectors next to unchanged generation. */
static void test_time_budget(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_embed_time");
  enum { NG = 4, NE = 10 };
  gen_job alone[NG], mixed[NG];
  for (int k = 0; k < NG; k++) {
    gen_job_init(&r, &alone[k], 0);
    mixed[k] = alone[k];
  }
  emb_job embs[NE];
  for (int k = 0; k < NE; k++) emb_job_init(&r, &embs[k]);
  brisk_engine *e = make_engine(64, 256);
  for (int k = 0; k < NG; k++) gen_submit(e, &alone[k]);
  for (int s = 0; !all_done(NULL, 0, alone, NG); s++) {
    assert_true(s < 2000);
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    take_events(e, NULL, 0);
  }
  brisk_engine_free(e);
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = 256;
  p.block_size = 8;
  p.max_batch_tokens = 64;
  p.max_running = 4;
  p.step_time_budget_us = 50; /* tight: most steps take few tokens */
  assert_int_equal(brisk_engine_create(model, &p, &e), BRISK_OK);
  for (int k = 0; k < NG; k++) gen_submit(e, &mixed[k]);
  for (int k = 0; k < NE; k++) assert_int_equal(emb_submit(e, &embs[k]), BRISK_OK);
  for (int s = 0; !all_done(embs, NE, mixed, NG); s++) {
    assert_true(s < 4000);
    brisk_engine_step_info si = {.struct_size = sizeof si};
    assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
    assert_true(si.n_tokens >= 1); /* always progress */
    take_events(e, embs, NE);
  }
  for (int k = 0; k < NG; k++) {
    assert_int_equal(mixed[k].n_out, alone[k].n_out);
    assert_memory_equal(mixed[k].out, alone[k].out, (size_t)alone[k].n_out * sizeof(int32_t));
  }
  for (int k = 0; k < NE; k++) expect_vector(&embs[k]);
  brisk_engine_free(e);
  for (int k = 0; k < NE; k++) emb_job_free(&embs[k]);
}

static void test_arguments(void **state) {
  (void)state;
  brisk_engine *e = make_engine(16, 64);
  brisk_embed_request_params p;
  brisk_embed_request_params_init(&p);
  assert_int_equal(p.struct_size, sizeof p);
  assert_int_equal(p.normalize, -1);
  brisk_embed_request_params_init(NULL);
  uint64_t id = 0;
  assert_int_equal(brisk_engine_submit_embed(NULL, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_submit_embed(e, NULL, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_submit_embed(e, &p, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT); /* no input */
  int32_t toks[20] = {1, 2, 3};
  p.tokens = toks;
  p.n_tokens = 0;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.n_tokens = 20; /* more than max_batch_tokens 16 */
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "max_batch_tokens"));
  p.n_tokens = 3;
  toks[1] = brisk_model_n_vocab(model);
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  toks[1] = 2;
  p.pooling = 4;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.pooling = 0;
  p.normalize = 2;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.normalize = -1;
  p.max_tokens = 1;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.max_tokens = 2; /* tokens are never cut: 3 is too many */
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.max_tokens = 0;
  p.struct_size = 3;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.struct_size = sizeof p;
  /* A long text is cut by max_tokens, so it fits the budget. */
  p.tokens = NULL;
  p.text = "a long text that has many more tokens than the engine's sixteen-token step budget";
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.max_tokens = 16;
  assert_int_equal(brisk_engine_submit_embed(e, &p, &id), BRISK_OK);
  size_t n = 0;
  float v[1];
  assert_int_equal(brisk_engine_embedding(e, id, v, 1, &n), BRISK_E_INVALID_STATE); /* queued */
  assert_int_equal(brisk_engine_embedding(e, id, NULL, 1, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_embedding(e, id, v, 1, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_embedding(NULL, id, v, 1, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_engine_embedding(e, id + 99, v, 1, &n), BRISK_E_NOT_FOUND);
  /* A generation request has no vector. */
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_tokens = toks;
  rp.n_prompt_tokens = 3;
  rp.max_tokens = 2;
  uint64_t gid = 0;
  assert_int_equal(brisk_engine_submit(e, &rp, &gid), BRISK_OK);
  assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  assert_int_equal(brisk_engine_embedding(e, gid, v, 1, &n), BRISK_E_INVALID_STATE);
  assert_int_equal(brisk_engine_embedding(e, id, v, 1, &n), BRISK_E_BUFFER_TOO_SMALL);
  brisk_engine_free(e);
}

static const char *oom_text = "an allocation may fail here";

static brisk_status create_and_submit_embed(void *arg) {
  (void)arg;
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 1;
  p.kv_tokens = 64;
  p.max_batch_tokens = 64;
  p.max_running = 2;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(model, &p, &e);
  if (st) return st;
  brisk_embed_request_params rp;
  brisk_embed_request_params_init(&rp);
  rp.text = oom_text;
  uint64_t id = 0;
  st = brisk_engine_submit_embed(e, &rp, &id);
  brisk_engine_free(e);
  return st;
}

/* Allocation failures at submit (an error status, nothing leaked) and in
 * the step: a step returns out of memory with the request kept (a retry
 * goes on), or the request ends with an error event; it gets exactly one
 * finished event, with brisk_embed's vector unless it failed. */
static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_and_submit_embed, NULL);
  test_rng r = test_rng_seeded("engine_embed_oom");
  emb_job j;
  emb_job_init(&r, &j);
  int n_failed = 0;
  for (uint64_t k = 1; k <= 40; k++) {
    uint64_t live = brisk_alloc_live_count();
    brisk_engine *e = make_engine(64, 64);
    j.finished = 0;
    assert_int_equal(emb_submit(e, &j), BRISK_OK);
    brisk_alloc_fail_at(k, 0);
    for (int s = 0; s < 20 && !j.finished; s++) {
      brisk_status st = brisk_engine_step(e, NULL);
      if (st) assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      brisk_engine_event ev[4];
      size_t n = 0;
      st = brisk_engine_poll(e, ev, 4, &n);
      if (st) {
        assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
        continue;
      }
      for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev[i].id, j.id);
        assert_false(j.finished);
        j.finished = 1;
        j.reason = ev[i].reason;
        size_t got = 0;
        if (j.reason == BRISK_FINISH_LENGTH)
          assert_int_equal(brisk_engine_embedding(e, j.id, j.got, (size_t)n_embd, &got), BRISK_OK);
      }
    }
    brisk_alloc_fail_at(0, 0);
    assert_true(j.finished);
    if (j.reason == BRISK_FINISH_LENGTH)
      expect_vector(&j);
    else
      assert_int_equal(j.reason, BRISK_FINISH_ERROR), n_failed++;
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
  assert_true(n_failed > 0); /* some failure hit the embedding pass itself */
  emb_job_free(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_packed_equals_embed), cmocka_unit_test(test_token_budget),
      cmocka_unit_test(test_mixed_workload),      cmocka_unit_test(test_priority_tokens_cancel),
      cmocka_unit_test(test_time_budget),         cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
