/* Request features of the engine: stop strings (matched across token
 * boundaries, held back, never delivered), log-probabilities (against a
 * log-softmax in double of brisk_get_logits) and n completions of one
 * prompt (against a brisk_decode loop that prefills, forks and samples with
 * seed + i; shared blocks; cancellation; preemption). Models: random weights
 * (tests/support/test_models.h) and ../shared/models/stories260K.gguf. */
#include "test_models.h"

#include "core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXT = 48, MAXN = 4, BS = 4 };

static char dir[64];
static brisk_model *model; /* llama, 96-token SPM vocabulary, random weights */

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_features_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* What one completion delivered. */
typedef struct completion {
  int32_t out[MAXT];
  int32_t n_out;
  char text[4096];
  size_t text_len;
  size_t text_end[MAXT]; /* text_len after each token event */
  int n_finished;
  brisk_finish_reason reason;
  float lp[MAXT];
  brisk_token_logprob top[MAXT][BRISK_MAX_LOGPROBS];
  int32_t n_top[MAXT];
} completion;

typedef struct request {
  uint64_t id;
  int32_t n;
  completion c[MAXN];
} request;

static int32_t reserve_blocks = 1; /* brisk_engine_params' default */

static brisk_engine *make_engine(const brisk_model *m, int32_t kv_tokens, int32_t max_batch,
                                 int32_t max_running, int32_t chunk) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.reserve_blocks = reserve_blocks;
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  p.block_size = BS;
  p.max_batch_tokens = max_batch;
  p.max_running = max_running;
  p.prefill_chunk = chunk;
  brisk_engine *e = NULL;
  if (brisk_engine_create(m, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

/* Polls everything, recording events into their requests (user_data). */
static void take_events(brisk_engine *e) {
  brisk_engine_event ev[8];
  size_t n;
  do {
    assert_int_equal(brisk_engine_poll(e, ev, 8, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      request *q = ev[i].user_data;
      assert_int_equal(ev[i].id, q->id);
      assert_true(ev[i].index >= 0 && ev[i].index < q->n);
      completion *c = &q->c[ev[i].index];
      assert_int_equal(c->n_finished, 0);
      assert_true(c->text_len + ev[i].text_len <= sizeof c->text);
      memcpy(c->text + c->text_len, ev[i].text, ev[i].text_len);
      c->text_len += ev[i].text_len;
      if (ev[i].token >= 0) {
        assert_true(c->n_out < MAXT);
        int32_t k = c->n_out++;
        c->out[k] = ev[i].token;
        c->text_end[k] = c->text_len;
        c->lp[k] = ev[i].logprob;
        c->n_top[k] = ev[i].n_top_logprobs;
        assert_true(ev[i].n_top_logprobs <= BRISK_MAX_LOGPROBS);
        assert_true((ev[i].top_logprobs != NULL) == (ev[i].n_top_logprobs > 0));
        if (ev[i].n_top_logprobs)
          memcpy(c->top[k], ev[i].top_logprobs,
                 (size_t)ev[i].n_top_logprobs * sizeof *ev[i].top_logprobs);
      } else {
        assert_int_equal(ev[i].n_top_logprobs, 0);
      }
      if (ev[i].finished) {
        c->n_finished++;
        c->reason = ev[i].reason;
      } else {
        assert_int_equal(ev[i].reason, BRISK_FINISH_NONE);
      }
    }
  } while (n == 8);
}

static int done(const request *q, int nq) {
  for (int i = 0; i < nq; i++)
    for (int32_t k = 0; k < q[i].n; k++)
      if (!q[i].c[k].n_finished) return 0;
  return 1;
}

static void run(brisk_engine *e, request *q, int nq) {
  for (int steps = 0; !done(q, nq); steps++) {
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
    take_events(e);
    assert_true(steps < 100000);
  }
}

static int32_t free_blocks(brisk_engine *e, int32_t *n_blocks) {
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  if (n_blocks) *n_blocks = s.n_kv_blocks;
  return s.n_free_kv_blocks;
}

/* The reference of a request with n completions: prefill the prompt in
 * sequence 0, fork it into 1..n-1, sample each from the prompt's logits
 * with seed + i, then decode the completions one token at a time. Records
 * tokens and, for logprob checks, the log-softmax (double) of each row. */
typedef struct ref_completion {
  int32_t out[MAXT];
  int32_t n_out;
  double lp[MAXT];                                   /* of the sampled token */
  brisk_token_logprob top[MAXT][BRISK_MAX_LOGPROBS]; /* by logit, ties by id */
} ref_completion;

static void log_softmax_top(const float *l, int32_t nv, int32_t tok, int32_t n_top, double *lp,
                            brisk_token_logprob *top) {
  double mx = -INFINITY, sum = 0;
  for (int32_t v = 0; v < nv; v++) mx = l[v] > mx ? l[v] : mx;
  for (int32_t v = 0; v < nv; v++) sum += exp((double)l[v] - mx);
  double lse = mx + log(sum);
  *lp = (double)l[tok] - lse;
  /* Selection by repeated scans: simple and obviously right. */
  for (int32_t k = 0; k < n_top; k++) {
    int32_t best = -1;
    for (int32_t v = 0; v < nv; v++) {
      int taken = 0;
      for (int32_t j = 0; j < k; j++) taken |= top[j].token == v;
      if (!taken && (best < 0 || l[v] > l[best])) best = v;
    }
    top[k].token = best;
    top[k].logprob = (float)((double)l[best] - lse);
  }
}

static void reference(const brisk_model *m, const int32_t *prompt, int32_t n_prompt,
                      const brisk_sampler_params *sp, int32_t n, int32_t max_tokens,
                      int stop_at_eog, int32_t n_top, ref_completion *rc) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = 1;
  cp.kv_tokens = 512;
  cp.block_size = BS; /* as the engines here: block size moves logits in the last bits */
  cp.max_batch_tokens = 128;
  cp.n_seq_max = n;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  brisk_sampler *s[MAXN];
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  assert_int_equal(brisk_batch_create(128, &b), BRISK_OK);
  for (int32_t i = 0; i < n; i++) {
    brisk_sampler_params p = *sp;
    p.seed += (uint64_t)i;
    assert_int_equal(brisk_sampler_create(m, &p, &s[i]), BRISK_OK);
    rc[i].n_out = 0;
  }
  for (int32_t k = 0; k < n_prompt; k++) brisk_batch_add(b, prompt[k], k, 0, k == n_prompt - 1);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  for (int32_t i = 1; i < n; i++) assert_int_equal(brisk_seq_fork(c, 0, i), BRISK_OK);
  int32_t entry[MAXN], nv = brisk_model_n_vocab(m);
  for (int32_t i = 0; i < n; i++) entry[i] = n_prompt - 1;
  int live[MAXN];
  for (;;) {
    for (int32_t i = 0; i < n; i++) {
      if (rc[i].n_out && (rc[i].n_out == max_tokens ||
                          (stop_at_eog && brisk_token_is_eog(m, rc[i].out[rc[i].n_out - 1])))) {
        live[i] = 0;
        continue;
      }
      live[i] = 1;
      int32_t tok;
      assert_int_equal(brisk_sampler_sample(s[i], c, entry[i], &tok), BRISK_OK);
      assert_int_equal(brisk_sampler_accept(s[i], tok), BRISK_OK);
      log_softmax_top(brisk_get_logits(c, entry[i]), nv, tok, n_top, &rc[i].lp[rc[i].n_out],
                      rc[i].top[rc[i].n_out]);
      rc[i].out[rc[i].n_out++] = tok;
    }
    brisk_batch_clear(b);
    for (int32_t i = 0; i < n; i++) {
      if (!live[i] || rc[i].n_out == max_tokens ||
          (stop_at_eog && brisk_token_is_eog(m, rc[i].out[rc[i].n_out - 1])))
        continue;
      entry[i] = brisk_batch_size(b);
      brisk_batch_add(b, rc[i].out[rc[i].n_out - 1], n_prompt + rc[i].n_out - 1, i, 1);
    }
    if (brisk_batch_size(b) == 0) break;
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
  }
  for (int32_t i = 0; i < n; i++) brisk_sampler_free(s[i]);
  brisk_batch_free(b);
  brisk_context_free(c);
}

/* A completion's tokens (and logprobs, when asked) are the reference's. */
static void expect_completion(const completion *c, const ref_completion *r, int32_t n_top) {
  assert_int_equal(c->n_finished, 1);
  if (c->n_out != r->n_out || memcmp(c->out, r->out, (size_t)r->n_out * sizeof *r->out)) {
    for (int32_t i = 0; i < c->n_out || i < r->n_out; i++)
      fprintf(stderr, "  %d: %d vs %d\n", i, i < c->n_out ? c->out[i] : -1,
              i < r->n_out ? r->out[i] : -1);
    fail_msg("tokens differ from the reference");
  }
  for (int32_t k = 0; k < c->n_out; k++) {
    assert_int_equal(c->n_top[k], n_top);
    if (!n_top) {
      assert_true(c->lp[k] == 0);
      continue;
    }
    assert_true(fabs(c->lp[k] - r->lp[k]) <= 1e-5 * (1 + fabs(r->lp[k])));
    assert_true(c->lp[k] <= 0);
    for (int32_t j = 0; j < n_top; j++) {
      assert_int_equal(c->top[k][j].token, r->top[k][j].token);
      assert_true(fabsf(c->top[k][j].logprob - r->top[k][j].logprob) <=
                  1e-5f * (1 + fabsf(r->top[k][j].logprob)));
      if (j) assert_true(c->top[k][j].logprob <= c->top[k][j - 1].logprob);
    }
  }
}

static void random_prompt(test_rng *r, int32_t *p, int32_t n) {
  for (int32_t i = 0; i < n; i++) p[i] = (int32_t)(test_rng_u64(r) % 96);
}

static void submit(brisk_engine *e, request *q, const int32_t *prompt, int32_t n_prompt,
                   const brisk_sampler_params *sp, int32_t n, int32_t max_tokens,
                   int32_t logprobs) {
  memset(q, 0, sizeof *q);
  brisk_request_params p;
  brisk_request_params_init(&p);
  assert_int_equal(p.n, 1);
  p.prompt_tokens = prompt;
  p.n_prompt_tokens = (size_t)n_prompt;
  p.sampler = sp;
  p.max_tokens = max_tokens;
  p.stop_at_eog = 0;
  p.n = n;
  p.logprobs = logprobs;
  p.user_data = q;
  q->n = n;
  if (brisk_engine_submit(e, &p, &q->id)) fail_msg("submit: %s", brisk_last_error());
}

static brisk_sampler_params sampled(test_rng *r) {
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = test_rng_u64(r);
  sp.temperature = 0.9f;
  sp.top_k = 40;
  sp.repeat_penalty = 1.1f;
  return sp;
}

/* ---- stop strings ---- */

/* Runs one text request on `m` and returns it in *q (stop strings given). */
/* n greedy completions (all the same), each with its own stop matching. */
static void run_text(const brisk_model *m, const char *prompt, const char *const *stop,
                     size_t n_stop, int32_t max_tokens, int32_t n, request *q) {
  brisk_engine *e = make_engine(m, 256, 16, 2, 5); /* chunked prefill on the way */
  memset(q, 0, sizeof *q);
  q->n = n;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_text = prompt;
  p.sampler = &sp;
  p.max_tokens = max_tokens;
  p.stop_at_eog = 0;
  p.stop = stop;
  p.n_stop = n_stop;
  p.n = n;
  p.user_data = q;
  if (brisk_engine_submit(e, &p, &q->id)) fail_msg("submit: %s", brisk_last_error());
  run(e, q, 1);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  brisk_engine_free(e);
}

static void same_completions(const request *q) {
  const completion *a = &q->c[0], *b = &q->c[1];
  assert_int_equal(b->reason, a->reason);
  assert_int_equal(b->n_out, a->n_out);
  assert_memory_equal(b->out, a->out, (size_t)a->n_out * sizeof *a->out);
  assert_int_equal(b->text_len, a->text_len);
  assert_memory_equal(b->text, a->text, a->text_len);
  assert_memory_equal(b->text_end, a->text_end, (size_t)a->n_out * sizeof *a->text_end);
}

/* 0 if the text offers no place for a stop string. */
static int check_stop_strings(const brisk_model *m, const char *prompt) {
  enum { N = 40 };
  request *full = calloc(1, sizeof *full), *q = calloc(1, sizeof *q);
  assert_non_null(full);
  assert_non_null(q);
  run_text(m, prompt, NULL, 0, N, 1, full);
  const completion *f = &full->c[0];
  assert_int_equal(f->n_out, N);
  assert_int_equal(f->reason, BRISK_FINISH_LENGTH);
  /* A stop string from the middle of token k's text to one byte into token
   * k + 1's, or else token k's and k + 1's texts whole (printable ASCII, so
   * the bytes are whole characters). */
  char stop[64] = "";
  for (int32_t i = 0; i + 2 < N && !stop[0]; i++) {
    int32_t k = 1 + (N / 2 + i) % (N - 2); /* from the middle on, to have text before it */
    size_t a = f->text_end[k - 1] + 1, b = f->text_end[k] + 1;
    /* Tokens of one character (a small vocabulary): across three tokens. */
    if (a >= f->text_end[k]) a = f->text_end[k - 1], b = f->text_end[k + 1];
    if (a >= f->text_end[k] || b > f->text_end[k + 1] || b <= f->text_end[k] ||
        b - a >= sizeof stop)
      continue;
    int ascii = 1;
    for (size_t t = a; t < b; t++) ascii &= f->text[t] >= ' ' && f->text[t] < 0x7f;
    if (!ascii) continue;
    memcpy(stop, f->text + a, b - a);
    stop[b - a] = 0;
  }
  if (!stop[0]) {
    fprintf(stderr, "no place for a stop string in \"%.*s\"\n", (int)f->text_len, f->text);
    free(full);
    free(q);
    return 0;
  }
  /* Where it first occurs, and the token that completes it there. */
  size_t at = 0, L = strlen(stop);
  while (memcmp(f->text + at, stop, L)) at++;
  int32_t last = 0;
  while (f->text_end[last] < at + L) last++;
  /* Never matched, but a prefix of it ends the text: held back, then
   * delivered at the end. */
  size_t mid = f->text_end[N / 2];
  assert_true(mid > 0);
  char tail[4] = {f->text[f->text_len - 1], '\x01', '~', 0};
  char inner[4] = {f->text[mid - 1], '\x02', '~', 0};
  const char *stops[3] = {tail, inner, stop};
  run_text(m, prompt, stops, 3, N, 2, q);
  same_completions(q);
  const completion *c = &q->c[0];
  assert_int_equal(c->reason, BRISK_FINISH_STOP);
  assert_int_equal(c->n_out, last + 1);
  assert_memory_equal(c->out, f->out, (size_t)c->n_out * sizeof *c->out);
  assert_int_equal(c->text_len, at);
  assert_memory_equal(c->text, f->text, at);
  /* Text could not run ahead of what was known not to be a stop string. */
  for (int32_t k = 0; k < c->n_out; k++) assert_true(c->text_end[k] <= f->text_end[k]);
  run_text(m, prompt, stops, 2, N, 2, q);
  same_completions(q);
  assert_int_equal(c->reason, BRISK_FINISH_LENGTH);
  assert_int_equal(c->n_out, N);
  assert_int_equal(c->text_len, f->text_len);
  assert_memory_equal(c->text, f->text, f->text_len);
  /* Each event held back exactly a trailing tail[0] or inner[0] (prefixes
   * of stop strings); the last one delivered everything. */
  int held = 0;
  for (int32_t k = 0; k < N; k++) {
    size_t end = f->text_end[k];
    size_t hold =
        k < N - 1 && end > 0 && (f->text[end - 1] == tail[0] || f->text[end - 1] == inner[0]);
    held += (int)hold;
    assert_int_equal(c->text_end[k], end - hold);
  }
  assert_true(held > 0); /* at token N / 2 at least */
  fprintf(stderr, "stop \"%s\" at byte %zu, token %d of \"%.*s\"\n", stop, at, last,
          (int)f->text_len, f->text);
  free(full);
  free(q);
  return 1;
}

static void test_stop_strings(void **state) {
  (void)state;
  /* Random weights: some prompt gives printable text. */
  int checked = 0;
  const char *prompts[4] = {"abc", "hello", "xyz", "q"};
  for (int i = 0; i < 4 && !checked; i++) checked = check_stop_strings(model, prompts[i]);
  assert_true(checked);
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  assert_true(check_stop_strings(m, "Once upon a time"));
  brisk_model_free(m);
}

/* ---- logprobs and n completions ---- */

/* Requests with logprobs of every size and n of 1..4 give the reference's
 * tokens and log-probabilities; completion 0 is what n = 1 gives. */
static void test_logprobs_and_n(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_features_n");
  enum { NQ = 5 };
  static request q[NQ];
  int32_t prompt[NQ][40], n_prompt[NQ], n[NQ] = {1, 2, 4, 3, 1}, lp[NQ] = {1, 0, 5, 20, 3},
                                        max_tokens[NQ];
  brisk_sampler_params sp[NQ];
  brisk_engine *e = make_engine(model, 512, 24, 8, 6);
  for (int i = 0; i < NQ; i++) {
    n_prompt[i] = 1 + (int32_t)(test_rng_u64(&r) % 30);
    random_prompt(&r, prompt[i], n_prompt[i]);
    max_tokens[i] = 4 + (int32_t)(test_rng_u64(&r) % 16);
    sp[i] = sampled(&r);
    if (i == 3) sp[i].temperature = 0; /* greedy: every completion the same */
  }
  /* Request 4 is request 2 with n = 1. */
  memcpy(prompt[4], prompt[2], sizeof prompt[2]);
  n_prompt[4] = n_prompt[2];
  max_tokens[4] = max_tokens[2];
  sp[4] = sp[2];
  for (int i = 0; i < NQ; i++)
    submit(e, &q[i], prompt[i], n_prompt[i], &sp[i], n[i], max_tokens[i], lp[i]);
  run(e, q, NQ);
  for (int i = 0; i < NQ; i++) {
    ref_completion rc[MAXN];
    reference(model, prompt[i], n_prompt[i], &sp[i], n[i], max_tokens[i], 0, lp[i], rc);
    for (int32_t k = 0; k < n[i]; k++) expect_completion(&q[i].c[k], &rc[k], lp[i]);
  }
  assert_memory_equal(q[4].c[0].out, q[2].c[0].out, sizeof q[2].c[0].out);
  /* Sampled completions differ from each other (different seeds). */
  assert_true(memcmp(q[2].c[0].out, q[2].c[1].out, sizeof q[2].c[0].out) != 0);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  brisk_engine_counters s = {.struct_size = sizeof s};
  assert_int_equal(brisk_engine_stats(e, &s), BRISK_OK);
  assert_int_equal(s.n_finished, NQ); /* requests, not completions */
  brisk_engine_free(e);
}

/* n completions share the prompt's blocks: after the prefill step the pool
 * holds the prompt once; after one more token each, the full blocks are
 * still shared. The request's statistics cover every completion. */
static void test_n_shares_blocks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_features_share");
  static request q;
  int32_t prompt[30];
  random_prompt(&r, prompt, 30);
  brisk_sampler_params sp = sampled(&r);
  brisk_engine *e = make_engine(model, 512, 64, 4, 0);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  submit(e, &q, prompt, 30, &sp, 4, 6, 0);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, 30);
  assert_int_equal(si.n_decode_tokens, 1);
  assert_int_equal(si.n_running, 4);
  assert_int_equal(nb - free_blocks(e, NULL), 8); /* 30 tokens in blocks of 4, once */
  take_events(e);
  for (int32_t k = 0; k < 4; k++) assert_int_equal(q.c[k].n_out, 1);
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_tokens, 4);
  /* 7 shared full blocks + each completion's own copy of the 8th (one may
   * keep the original), versus 4 x 8 for separate prefills. */
  assert_int_equal(nb - free_blocks(e, NULL), 7 + 4);
  run(e, &q, 1);
  brisk_request_stats rs = {.struct_size = sizeof rs};
  assert_int_equal(brisk_engine_request_stats(e, q.id, &rs), BRISK_OK);
  assert_true(rs.finished);
  assert_int_equal(rs.n_prompt_tokens, 30);
  assert_int_equal(rs.n_generated_tokens, 4 * 6);
  assert_int_equal(rs.reason, BRISK_FINISH_LENGTH);
  assert_true(rs.ttft_ns > 0 && rs.ttft_ns <= rs.e2e_ns);
  ref_completion rc[MAXN];
  reference(model, prompt, 30, &sp, 4, 6, 0, 0, rc);
  for (int32_t k = 0; k < 4; k++) expect_completion(&q.c[k], &rc[k], 0);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_prompt_tokens, 30);
  assert_int_equal(c.n_generated_tokens, 24);
  /* The prompt once, then each completion's tokens but its last. */
  assert_int_equal(c.n_computed_tokens, 30 + 4 * 5);
  assert_int_equal(free_blocks(e, NULL), nb);
  brisk_engine_free(e);
}

/* With no sequence free when the prompt is done, completion 1 prefills the
 * prompt itself later: the same tokens, without sharing. */
static void test_n_without_free_sequence(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_features_noseq");
  static request q[2];
  int32_t prompt[2][12];
  brisk_sampler_params sp[2];
  for (int i = 0; i < 2; i++) {
    random_prompt(&r, prompt[i], 12);
    sp[i] = sampled(&r);
  }
  brisk_engine *e = make_engine(model, 256, 32, 2, 0);
  submit(e, &q[0], prompt[0], 12, &sp[0], 1, 10, 0);
  submit(e, &q[1], prompt[1], 12, &sp[1], 2, 6, 2);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_running, 2);
  assert_int_equal(si.n_waiting, 1); /* completion 1 of q[1] */
  run(e, q, 2);
  for (int i = 0; i < 2; i++) {
    ref_completion rc[MAXN];
    reference(model, prompt[i], 12, &sp[i], q[i].n, i ? 6 : 10, 0, i ? 2 : 0, rc);
    for (int32_t k = 0; k < q[i].n; k++) expect_completion(&q[i].c[k], &rc[k], i ? 2 : 0);
  }
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  /* The prompt twice, the second time partly from the prefix cache. */
  assert_int_equal(c.n_computed_tokens + c.n_prefix_hit_tokens, 12 + 9 + 12 + 5 + 12 + 5);
  brisk_engine_free(e);
}

/* Cancelling during the prefill and during decoding: one cancelled event
 * per completion, and every block back in the pool. */
static void test_n_cancel(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_features_cancel");
  static request q[2];
  int32_t prompt[2][40];
  random_prompt(&r, prompt[0], 40);
  random_prompt(&r, prompt[1], 9);
  brisk_sampler_params sp = sampled(&r);
  brisk_engine *e = make_engine(model, 512, 8, 8, 0);
  int32_t nb;
  int32_t n_free = free_blocks(e, &nb);
  assert_int_equal(n_free, nb);
  submit(e, &q[1], prompt[1], 9, &sp, 3, 40, 2);
  for (int s = 0; s < 4; s++) assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  submit(e, &q[0], prompt[0], 40, &sp, 3, 40, 2); /* 8 tokens a step: still prefilling */
  for (int s = 0; s < 2; s++) assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
  take_events(e);
  for (int32_t k = 0; k < 3; k++) {
    assert_true(q[1].c[k].n_out >= 2);
    assert_int_equal(q[0].c[k].n_out, 0);
  }
  assert_true(free_blocks(e, NULL) < nb);
  assert_int_equal(brisk_engine_cancel(e, q[0].id), BRISK_OK);
  assert_int_equal(brisk_engine_cancel(e, q[1].id), BRISK_OK);
  brisk_engine_step_info si = {.struct_size = sizeof si};
  assert_int_equal(brisk_engine_step(e, &si), BRISK_OK);
  assert_int_equal(si.n_finished, 2);
  assert_int_equal(si.n_running, 0);
  take_events(e);
  for (int i = 0; i < 2; i++)
    for (int32_t k = 0; k < 3; k++) {
      assert_int_equal(q[i].c[k].n_finished, 1);
      assert_int_equal(q[i].c[k].reason, BRISK_FINISH_CANCELLED);
    }
  assert_int_equal(free_blocks(e, NULL), nb);
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_cancelled, 2);
  assert_int_equal(c.n_finished, 2);
  brisk_engine_free(e);
}

/* Completions under a 4x oversubscribed pool are preempted and recomputed
 * on their own, and still give the reference's tokens; with admission
 * reserving every completion's growth (forks included), none is
 * preempted. */
static void test_n_preemption(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("engine_features_preempt");
  enum { NQ = 8, MAX = 24 };
  static request q[NQ];
  int32_t prompt[NQ][16], n_prompt[NQ], n[NQ] = {3, 2, 1, 2, 3, 2, 1, 2};
  brisk_sampler_params sp[NQ];
  int32_t demand = 0;
  for (int i = 0; i < NQ; i++) {
    n_prompt[i] = 8 + (int32_t)(test_rng_u64(&r) % 8);
    random_prompt(&r, prompt[i], n_prompt[i]);
    sp[i] = sampled(&r);
    demand += n[i] * (n_prompt[i] + MAX);
  }
  /* 28 blocks of 4: the most one request needs is 4 prompt blocks + 3 x (a
   * copied last block + 6 blocks of output + 1 for alignment) = 28. */
  int32_t pool = 112;
  assert_true(demand >= 4 * pool);
  for (reserve_blocks = 0; reserve_blocks <= 6; reserve_blocks += 6) { /* 6 x 4 = MAX */
    brisk_engine *e = make_engine(model, pool, 32, 8, 0);
    for (int i = 0; i < NQ; i++) submit(e, &q[i], prompt[i], n_prompt[i], &sp[i], n[i], MAX, 1);
    run(e, q, NQ);
    for (int i = 0; i < NQ; i++) {
      ref_completion rc[MAXN];
      reference(model, prompt[i], n_prompt[i], &sp[i], n[i], MAX, 0, 1, rc);
      for (int32_t k = 0; k < n[i]; k++) expect_completion(&q[i].c[k], &rc[k], 1);
    }
    brisk_engine_counters c = {.struct_size = sizeof c};
    assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
    fprintf(stderr, "n completions, 4x oversubscribed, reserve_blocks %d: %llu preemptions\n",
            reserve_blocks, (unsigned long long)c.n_preemptions);
    if (reserve_blocks == 0) assert_true(c.n_preemptions > 0);
    if (reserve_blocks == 6) assert_int_equal(c.n_preemptions, 0);
    assert_int_equal(c.n_free_kv_blocks, c.n_kv_blocks);
    brisk_engine_free(e);
  }
  reserve_blocks = 1;
}

/* Bad values of the new request fields are rejected, named. */
static void test_feature_arguments(void **state) {
  (void)state;
  brisk_engine *e = make_engine(model, 64, 16, 2, 0);
  int32_t toks[3] = {1, 2, 3};
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = toks;
  p.n_prompt_tokens = 3;
  p.max_tokens = 4;
  uint64_t id = 0;
  p.n = 3; /* > max_running */
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "max_running"));
  p.n = 0;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.n = 2;
  p.logprobs = BRISK_MAX_LOGPROBS + 1;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "logprobs"));
  p.logprobs = -1;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  p.logprobs = 0;
  p.n_stop = 1;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT); /* NULL array */
  const char *empty[1] = {""};
  p.stop = empty;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(id, 0);
  /* An older caller's struct (up to user_data) gets n = 1 and no stops. */
  const char *ok[1] = {"zz"};
  p.stop = ok;
  p.struct_size = offsetof(brisk_request_params, user_data) + sizeof(void *);
  p.n = 99;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_OK);
  brisk_engine_free(e);
}

/* Submit (n = 2, logprobs, stop strings) under every allocation failure,
 * then steps under failing allocations: out of memory comes back as a
 * status or an error event, each completion ends exactly once, nothing
 * leaks. */
static brisk_status submit_features(void *arg) {
  (void)arg;
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = 1;
  ep.kv_tokens = 64;
  ep.block_size = BS;
  ep.max_batch_tokens = 16;
  ep.max_running = 4;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(model, &ep, &e);
  if (st) return st;
  int32_t toks[5] = {3, 1, 4, 1, 5};
  const char *stops[2] = {"ab", "x"};
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = toks;
  p.n_prompt_tokens = 5;
  p.max_tokens = 4;
  p.n = 2;
  p.logprobs = 3;
  p.stop = stops;
  p.n_stop = 2;
  uint64_t id;
  if (!(st = brisk_engine_submit(e, &p, &id))) st = brisk_engine_cancel(e, id);
  brisk_engine_free(e);
  return st;
}

static void test_feature_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(submit_features, NULL);
  brisk_engine *e;
  test_rng r = test_rng_seeded("engine_features_alloc");
  for (uint64_t k = 1; k <= 40; k++) {
    uint64_t live = brisk_alloc_live_count();
    static request q[2];
    int32_t prompt[2][10];
    brisk_sampler_params sp = sampled(&r);
    e = make_engine(model, 128, 16, 4, 4);
    for (int i = 0; i < 2; i++) {
      random_prompt(&r, prompt[i], 10);
      submit(e, &q[i], prompt[i], 10, &sp, 2, 6, 2);
    }
    brisk_alloc_fail_at(k, 0);
    for (int s = 0; s < 200 && !done(q, 2); s++) {
      brisk_status st = brisk_engine_step(e, NULL);
      if (st) assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
      brisk_engine_event ev[8];
      size_t n;
      st = brisk_engine_poll(e, ev, 8, &n);
      if (st) {
        assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
        continue;
      }
      for (size_t i = 0; i < n; i++) {
        completion *c = &((request *)ev[i].user_data)->c[ev[i].index];
        assert_int_equal(c->n_finished, 0);
        if (ev[i].token >= 0) c->out[c->n_out++] = ev[i].token;
        if (ev[i].finished) c->n_finished++, c->reason = ev[i].reason;
      }
    }
    brisk_alloc_fail_at(0, 0);
    assert_true(done(q, 2));
    for (int i = 0; i < 2; i++) {
      ref_completion rc[MAXN];
      reference(model, prompt[i], 10, &sp, 2, 6, 0, 0, rc);
      for (int32_t c = 0; c < 2; c++) {
        if (q[i].c[c].reason == BRISK_FINISH_ERROR) continue;
        assert_int_equal(q[i].c[c].n_out, rc[c].n_out);
        assert_memory_equal(q[i].c[c].out, rc[c].out, (size_t)rc[c].n_out * sizeof(int32_t));
      }
    }
    brisk_engine_free(e);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_strings),
      cmocka_unit_test(test_logprobs_and_n),
      cmocka_unit_test(test_n_shares_blocks),
      cmocka_unit_test(test_n_cancel),
      cmocka_unit_test(test_n_without_free_sequence),
      cmocka_unit_test(test_n_preemption),
      cmocka_unit_test(test_feature_arguments),
      cmocka_unit_test(test_feature_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
