/* Many handles from many threads, as a game or an app embeds brisk: two
 * models, four contexts and two engines used from six threads at once
 * (each handle from one thread at a time, the models shared by all), once
 * on brisk's own thread pools and once on a host parallel_for hook that all
 * six threads share. Every output must equal the same work done alone on
 * one thread first, every handle's memory is charged to its own account
 * (with a limit), and nothing is left allocated. Run under ThreadSanitizer
 * by tools/tsan.sh. Threads report mismatches back; only the main thread
 * asserts (cmocka is not thread-safe). */
#include "test_models.h"

#include "core/dtype.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_PROMPT = 12, N_GEN = 12, N_REQ = 3, REQ_TOKENS = 10, ROUNDS = 2 };

static char dir[64];
static brisk_model *models[2];

/* ---- a host job system: two workers and the caller --------------------- */

typedef struct host_job {
  size_t n;
  brisk_task_fn task;
  void *ctx;
  atomic_size_t next, done;
  int active; /* workers inside it; under host.mu */
  struct host_job *link;
} host_job;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  host_job *queue;
  int stop;
  pthread_t workers[2];
  atomic_size_t calls;
} host = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void drain(host_job *j) {
  for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
    j->task(j->ctx, i);
    atomic_fetch_add(&j->done, 1);
  }
}

static host_job *open_job(void) {
  for (host_job *j = host.queue; j; j = j->link)
    if (atomic_load(&j->next) < j->n) return j;
  return NULL;
}

static void *host_worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&host.mu);
  for (;;) {
    host_job *j;
    while (!host.stop && !(j = open_job())) pthread_cond_wait(&host.cv, &host.mu);
    if (host.stop) break;
    j->active++;
    pthread_mutex_unlock(&host.mu);
    drain(j);
    pthread_mutex_lock(&host.mu);
    j->active--;
    pthread_cond_broadcast(&host.cv);
  }
  pthread_mutex_unlock(&host.mu);
  return NULL;
}

/* brisk_parallel_for_fn: called from any of the six threads at once. */
static void host_parallel_for(void *user, size_t n, brisk_task_fn task, void *ctx) {
  (void)user;
  atomic_fetch_add(&host.calls, 1);
  host_job j = {.n = n, .task = task, .ctx = ctx};
  pthread_mutex_lock(&host.mu);
  j.link = host.queue;
  host.queue = &j;
  pthread_cond_broadcast(&host.cv);
  pthread_mutex_unlock(&host.mu);
  drain(&j);
  pthread_mutex_lock(&host.mu);
  while (atomic_load(&j.done) < n || j.active > 0) pthread_cond_wait(&host.cv, &host.mu);
  host_job **p = &host.queue;
  while (*p != &j) p = &(*p)->link;
  *p = j.link;
  pthread_mutex_unlock(&host.mu);
}

static void host_start(void) {
  host.stop = 0;
  for (int i = 0; i < 2; i++) pthread_create(&host.workers[i], NULL, host_worker, NULL);
}

static void host_stop(void) {
  pthread_mutex_lock(&host.mu);
  host.stop = 1;
  pthread_cond_broadcast(&host.cv);
  pthread_mutex_unlock(&host.mu);
  for (int i = 0; i < 2; i++) pthread_join(host.workers[i], NULL);
}

/* ---- the work ------------------------------------------------------------ */

/* A context's job: prefill a prompt, then greedy decoding; the tokens. */
typedef struct ctx_work {
  const brisk_model *model;
  int32_t prompt[N_PROMPT];
  int32_t want[N_GEN]; /* the reference, from the single-threaded run */
  int32_t got[N_GEN];
  int32_t want_tok[64]; /* tokens of a text, tokenized on the shared model */
  size_t n_want_tok;
  uint64_t used; /* the context's memory account after the run */
  brisk_status st;
  int mismatches;
} ctx_work;

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

static brisk_status run_context(ctx_work *w, int32_t *out) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 64;
  cp.max_batch_tokens = 16;
  cp.n_seq_max = 2;
  cp.n_threads = 2;
  cp.memory_limit = 64u << 20;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  brisk_status st;
  const int32_t nv = brisk_model_n_vocab(w->model);
  if ((st = brisk_context_create(w->model, &cp, &c)) || (st = brisk_batch_create(N_PROMPT, &b)))
    goto done;
  for (int round = 0; round < ROUNDS && !st; round++) {
    brisk_batch_clear(b);
    for (int i = 0; i < N_PROMPT && !st; i++)
      st = brisk_batch_add(b, w->prompt[i], i, 0, i == N_PROMPT - 1);
    if (!st) st = brisk_decode(c, b);
    for (int g = 0; g < N_GEN && !st; g++) {
      const float *lg = brisk_get_logits(c, brisk_batch_size(b) - 1);
      out[g] = argmax(lg, nv);
      brisk_batch_clear(b);
      if (!(st = brisk_batch_add(b, out[g], N_PROMPT + g, 0, 1))) st = brisk_decode(c, b);
    }
    if (!st) st = brisk_seq_free(c, 0);
  }
  w->used = brisk_context_memory_used(c);
done:
  brisk_batch_free(b);
  brisk_context_free(c);
  return st;
}

static void *context_thread(void *arg) {
  ctx_work *w = arg;
  w->st = run_context(w, w->got);
  if (!w->st && memcmp(w->got, w->want, sizeof w->got)) w->mismatches++;
  /* The shared model's read-only calls, concurrently with the others. */
  int32_t toks[64];
  size_t n = 0;
  if (!w->st) w->st = brisk_tokenize(w->model, "many threads share one model", 28, toks, 64, 0, &n);
  if (!w->st && (n != w->n_want_tok || memcmp(toks, w->want_tok, (size_t)n * sizeof *toks)))
    w->mismatches++;
  return NULL;
}

/* An engine's job: N_REQ greedy requests, stepped to the end. */
typedef struct engine_work {
  const brisk_model *model;
  int32_t prompts[N_REQ][N_PROMPT];
  int32_t want[N_REQ][REQ_TOKENS];
  int32_t got[N_REQ][REQ_TOKENS];
  int32_t n_got[N_REQ];
  brisk_status st;
  int mismatches;
} engine_work;

static brisk_status run_engine(engine_work *w, int32_t out[N_REQ][REQ_TOKENS], int32_t *n_out) {
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.kv_tokens = 128;
  ep.max_batch_tokens = 16;
  ep.max_running = N_REQ;
  ep.n_threads = 2;
  ep.memory_limit = 64u << 20;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(w->model, &ep, &e);
  if (st) return st;
  uint64_t ids[N_REQ];
  for (int r = 0; r < N_REQ; r++) n_out[r] = 0;
  for (int r = 0; r < N_REQ && !st; r++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_tokens = w->prompts[r];
    rp.n_prompt_tokens = N_PROMPT;
    rp.max_tokens = REQ_TOKENS;
    rp.stop_at_eog = 0;
    st = brisk_engine_submit(e, &rp, &ids[r]);
  }
  int finished = 0;
  for (int s = 0; s < 400 && finished < N_REQ && !st; s++) {
    brisk_engine_event ev[16];
    size_t n = 0;
    if ((st = brisk_engine_step(e, NULL)) || (st = brisk_engine_poll(e, ev, 16, &n))) break;
    for (size_t i = 0; i < n; i++) {
      int r = 0;
      while (r < N_REQ && ids[r] != ev[i].id) r++;
      if (r == N_REQ) continue;
      if (ev[i].token >= 0 && n_out[r] < REQ_TOKENS) out[r][n_out[r]++] = ev[i].token;
      if (ev[i].finished) finished++;
    }
  }
  if (!st && finished < N_REQ) st = BRISK_E_INTERNAL;
  brisk_engine_free(e);
  return st;
}

static void *engine_thread(void *arg) {
  engine_work *w = arg;
  w->st = run_engine(w, w->got, w->n_got);
  for (int r = 0; r < N_REQ && !w->st; r++)
    if (w->n_got[r] != REQ_TOKENS || memcmp(w->got[r], w->want[r], sizeof w->got[r]))
      w->mismatches++;
  return NULL;
}

/* ---- the test ------------------------------------------------------------ */

static ctx_work cw[4];
static engine_work ew[2];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  const char *arch[2] = {"llama", "qwen2"};
  const uint32_t type[2] = {BRISK_DTYPE_Q8_0, BRISK_DTYPE_F16};
  test_rng r = test_rng_seeded("embed_stress");
  for (int i = 0; i < 2; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/m%d.gguf", dir, i);
    test_model_spec s = test_model_default(arch[i]);
    s.weight_type = type[i];
    if (test_model_write(path, &s, &r, NULL) || brisk_model_load(path, NULL, &models[i])) return -1;
  }
  /* The work, and its reference done alone on this thread. */
  for (int i = 0; i < 4; i++) {
    ctx_work *w = &cw[i];
    w->model = models[i / 2];
    const uint64_t nv = (uint64_t)brisk_model_n_vocab(w->model);
    for (int t = 0; t < N_PROMPT; t++) w->prompt[t] = (int32_t)(test_rng_u64(&r) % nv);
    if (run_context(w, w->want)) return -1;
    if (brisk_tokenize(w->model, "many threads share one model", 28, w->want_tok, 64, 0,
                       &w->n_want_tok))
      return -1;
  }
  for (int i = 0; i < 2; i++) {
    engine_work *w = &ew[i];
    w->model = models[i];
    const uint64_t nv = (uint64_t)brisk_model_n_vocab(w->model);
    for (int q = 0; q < N_REQ; q++)
      for (int t = 0; t < N_PROMPT; t++) w->prompts[q][t] = (int32_t)(test_rng_u64(&r) % nv);
    if (run_engine(w, w->want, w->n_got)) return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < 2; i++) brisk_model_free(models[i]);
  test_tmpdir_remove(dir);
  return 0;
}

static void run_six_threads(void) {
  const uint64_t before = brisk_memory_allocated();
  pthread_t th[6];
  for (int i = 0; i < 4; i++) {
    cw[i].mismatches = 0;
    assert_int_equal(pthread_create(&th[i], NULL, context_thread, &cw[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    ew[i].mismatches = 0;
    assert_int_equal(pthread_create(&th[4 + i], NULL, engine_thread, &ew[i]), 0);
  }
  for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    if (cw[i].st) fprintf(stderr, "context %d: %s\n", i, brisk_status_string(cw[i].st));
    assert_int_equal(cw[i].st, BRISK_OK);
    assert_int_equal(cw[i].mismatches, 0);
    /* Its own account held its KV pool, whatever thread ran its tasks. */
    assert_true(cw[i].used >= 64ull * brisk_model_n_layer(cw[i].model) * 2 * 2);
  }
  for (int i = 0; i < 2; i++) {
    if (ew[i].st) fprintf(stderr, "engine %d: %s\n", i, brisk_status_string(ew[i].st));
    assert_int_equal(ew[i].st, BRISK_OK);
    assert_int_equal(ew[i].mismatches, 0);
  }
  assert_int_equal(brisk_memory_allocated(), before);
}

static void test_own_pools(void **state) {
  (void)state;
  run_six_threads();
}

static void test_shared_host_hook(void **state) {
  (void)state;
  host_start();
  assert_int_equal(brisk_set_parallel_for(host_parallel_for, NULL, 3), BRISK_OK);
  atomic_store(&host.calls, 0);
  run_six_threads();
  assert_int_equal(brisk_set_parallel_for(NULL, NULL, 1), BRISK_OK);
  host_stop();
  assert_true(atomic_load(&host.calls) > 0); /* the work did go through the host */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_own_pools),
      cmocka_unit_test(test_shared_host_hook),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
