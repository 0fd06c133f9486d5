/* One bad request never stalls the engine: a request whose tokens the
 * forward pass refuses (made here by corrupting a queued request, as no
 * public call lets such a request in any more) finishes alone with
 * BRISK_FINISH_ERROR and a message naming why, while the requests around it
 * get exactly the tokens of a run without it. Also: prompt_text ids are
 * checked at submit like prompt_tokens, and the params structs' struct_size
 * must be one of their layouts. */
#include "engine_harness.h"
#include "test_models.h"

#include "core/alloc.h"
#include "engine/engine_internal.h"
#include "model/model.h"

#include <string.h>

static char dir[64];
static brisk_model *model; /* llama, 96-token SPM vocabulary, random weights */

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("engine_isolation_model");
  return test_model_load(dir, "llama", &s, &r, &model) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  test_tmpdir_remove(dir);
  return 0;
}

/* The first WARN line mentioning a request, captured from the log. */
static char warned[1024];
static void on_log(brisk_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == BRISK_LOG_WARN && strstr(msg, "engine: request") && !warned[0])
    snprintf(warned, sizeof warned, "%s", msg);
}

enum { N_GOOD = 6 };

static brisk_engine *engine(void) {
  /* Chunks of 16 tokens: a bad id late in a prompt fails after the first
   * chunks of that prompt were computed. */
  return eh_engine(model, 1024, 4, 64, 8, 16);
}

/* Submits `bad` with its prompt token `at` replaced by an id past the
 * vocabulary, after it passed the submit checks. */
static void submit_corrupted(brisk_engine *e, eh_job *bad, int32_t at) {
  assert_int_equal(eh_submit(e, bad), BRISK_OK);
  brisk_engine_request *r = e->in_tail->leader;
  assert_int_equal(r->id, bad->id);
  r->tokens[at] = brisk_model_n_vocab(model) + 7;
}

static void expect_failed(const eh_job *bad, int32_t n) {
  for (int32_t c = 0; c < n; c++) {
    assert_int_equal(bad->reason[c], BRISK_FINISH_ERROR);
    assert_int_equal(bad->n_out[c], 0);
  }
  if (!strstr(bad->stats.error, "token 103 is outside [0, 96)"))
    fprintf(stderr, "error: '%s'\n", bad->stats.error);
  assert_non_null(strstr(bad->stats.error, "token 103 is outside [0, 96)"));
  assert_int_equal(bad->stats.reason, BRISK_FINISH_ERROR);
}

static void expect_pool_free(brisk_engine *e) {
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_int_equal(c.n_running, 0);
  assert_int_equal(c.n_waiting, 0);
  assert_int_equal(c.n_free_kv_blocks, c.n_kv_blocks);
}

static void test_bad_request_fails_alone(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("bad_request_fails_alone");
  eh_job good[N_GOOD], base[N_GOOD];
  for (int i = 0; i < N_GOOD; i++) eh_random_job(&r, model, &good[i], 40, 24, i % 2);
  brisk_engine *e = engine();
  for (int i = 0; i < N_GOOD; i++) assert_int_equal(eh_submit(e, &good[i]), BRISK_OK);
  eh_run(e, good, N_GOOD, 10000);
  memcpy(base, good, sizeof good);
  brisk_engine_free(e);

  /* The bad request in the middle of the queue, its bad id at several
   * places: first token, late in the prompt (after two chunks), last. */
  const int32_t places[] = {0, 37, 39};
  for (size_t p = 0; p < sizeof places / sizeof places[0]; p++) {
    for (int32_t n = 1; n <= 2; n++) {
      warned[0] = 0;
      assert_int_equal(brisk_set_log_callback(on_log, NULL, BRISK_LOG_WARN), BRISK_OK);
      e = engine();
      for (int i = 0; i < N_GOOD; i++) eh_reset(&good[i]);
      eh_job bad;
      eh_random_job(&r, model, &bad, 1, 8, 1);
      bad.n_prompt = 40;
      for (int32_t k = 0; k < 40; k++) bad.prompt[k] = (int32_t)(test_rng_u64(&r) % 96);
      bad.extra.n = n;
      for (int i = 0; i < 3; i++) assert_int_equal(eh_submit(e, &good[i]), BRISK_OK);
      submit_corrupted(e, &bad, places[p]);
      for (int i = 3; i < N_GOOD; i++) assert_int_equal(eh_submit(e, &good[i]), BRISK_OK);
      for (int steps = 0; !eh_all_finished(good, N_GOOD) || !eh_all_finished(&bad, 1); steps++) {
        assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
        eh_take_events(e);
        assert_true(steps < 10000);
      }
      for (int i = 0; i < N_GOOD; i++) eh_expect_same(&good[i], &base[i]);
      expect_failed(&bad, n);
      assert_non_null(strstr(warned, "failed: batch entry"));
      char want[64];
      snprintf(want, sizeof want, "request %llu completion 0", (unsigned long long)bad.id);
      assert_non_null(strstr(warned, want));
      expect_pool_free(e);
      /* The engine goes on: a request after it runs as before. */
      eh_reset(&good[0]);
      assert_int_equal(eh_submit(e, &good[0]), BRISK_OK);
      eh_run(e, good, 1, 1000);
      eh_expect_same(&good[0], &base[0]);
      expect_pool_free(e);
      brisk_engine_free(e);
      assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN), BRISK_OK);
    }
  }
}

/* Two bad requests in one step, and every request bad: the step still
 * returns OK and every request finishes. */
static void test_every_request_bad(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("every_request_bad");
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE), BRISK_OK);
  brisk_engine *e = engine();
  eh_job bad[4];
  for (int i = 0; i < 4; i++) {
    eh_random_job(&r, model, &bad[i], 1, 8, 0);
    bad[i].n_prompt = 12;
    submit_corrupted(e, &bad[i], 11 - i);
  }
  eh_run(e, bad, 4, 100);
  for (int i = 0; i < 4; i++) expect_failed(&bad[i], 1);
  expect_pool_free(e);
  brisk_engine_free(e);
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN), BRISK_OK);
}

/* prompt_text is checked against n_vocab like prompt_tokens. No model that
 * loads has tokenizer ids past n_vocab any more (the loader refuses it), so
 * the model's n_vocab is lowered behind the engine's back. */
static void test_text_prompt_checked(void **state) {
  (void)state;
  brisk_engine *e = engine();
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_text = "hello world";
  uint64_t id = 0;
  uint32_t n_vocab = model->hp.n_vocab;
  model->hp.n_vocab = 10;
  brisk_status st = brisk_engine_submit(e, &p, &id);
  model->hp.n_vocab = n_vocab;
  assert_int_equal(st, BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "outside [0, 10) (from the tokenizer)"));
  assert_int_equal(id, 0);
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_OK);
  brisk_engine_free(e);
}

/* A struct_size that cuts a field (sizeof - 1) or is garbage is refused;
 * the current and older layouts are read. */
static void test_struct_sizes(void **state) {
  (void)state;
  brisk_engine_params ep;
  brisk_engine *e = NULL;
  const uint32_t bad_engine[] = {(uint32_t)sizeof ep - 1, 0xFFFFFFFFu, 4097,
                                 (uint32_t)offsetof(brisk_engine_params, kv_bytes) + 3, 0};
  for (size_t i = 0; i < sizeof bad_engine / sizeof bad_engine[0]; i++) {
    brisk_engine_params_init(&ep);
    ep.struct_size = bad_engine[i];
    assert_int_equal(brisk_engine_create(model, &ep, &e), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), "struct_size"));
    assert_null(e);
  }
  const uint32_t good_engine[] = {
      (uint32_t)sizeof ep, (uint32_t)offsetof(brisk_engine_params, draft_model),
      (uint32_t)(offsetof(brisk_engine_params, prefill_chunk) + sizeof ep.prefill_chunk)};
  for (size_t i = 0; i < sizeof good_engine / sizeof good_engine[0]; i++) {
    brisk_engine_params_init(&ep);
    ep.struct_size = good_engine[i];
    ep.kv_tokens = 256;
    assert_int_equal(brisk_engine_create(model, &ep, &e), BRISK_OK);
    brisk_engine_free(e);
    e = NULL;
  }

  e = engine();
  int32_t prompt[3] = {5, 6, 7};
  brisk_request_params rp;
  uint64_t id = 0;
  const uint32_t bad_request[] = {(uint32_t)sizeof rp - 1, 0xFFFFFFFFu, 4097,
                                  (uint32_t)(offsetof(brisk_request_params, spec_draft_model) + 3),
                                  (uint32_t)offsetof(brisk_request_params, max_tokens) + 2};
  for (size_t i = 0; i < sizeof bad_request / sizeof bad_request[0]; i++) {
    brisk_request_params_init(&rp);
    rp.struct_size = bad_request[i];
    rp.prompt_tokens = prompt;
    rp.n_prompt_tokens = 3;
    assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), "struct_size"));
  }
  assert_int_equal(id, 0);
  brisk_request_params_init(&rp);
  rp.prompt_tokens = prompt;
  rp.n_prompt_tokens = 3;
  rp.struct_size = (uint32_t)offsetof(brisk_request_params, spec_n_draft); /* before speculation */
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
  brisk_engine_free(e);

  /* Model params: sizeof - 1 cut `repack` in two and was read as 3 bytes. */
  char path[256];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  brisk_model_params mp;
  brisk_model *m = NULL;
  const uint32_t bad_model[] = {(uint32_t)sizeof mp - 1, 0xFFFFFFFFu, 4104,
                                (uint32_t)offsetof(brisk_model_params, repack) + 2,
                                (uint32_t)offsetof(brisk_model_params, vocab_only) + 1};
  for (size_t i = 0; i < sizeof bad_model / sizeof bad_model[0]; i++) {
    brisk_model_params_init(&mp);
    mp.struct_size = bad_model[i];
    assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_INVALID_ARGUMENT);
    assert_null(m);
  }
  /* A newer caller's struct is larger: its tail (zero) must exist, so it
   * lives in a bigger buffer. */
  union {
    brisk_model_params p;
    unsigned char bytes[sizeof(brisk_model_params) + 8];
  } newer;
  const uint32_t good_model[] = {(uint32_t)offsetof(brisk_model_params, repack), /* before it */
                                 (uint32_t)sizeof mp, (uint32_t)sizeof mp + 8};
  for (size_t i = 0; i < sizeof good_model / sizeof good_model[0]; i++) {
    memset(&newer, 0, sizeof newer);
    brisk_model_params_init(&newer.p);
    newer.p.struct_size = good_model[i];
    assert_int_equal(brisk_model_load(path, &newer.p, &m), BRISK_OK);
    brisk_model_free(m);
    m = NULL;
  }
}

/* Stop strings are bounded (their matching runs on every token): at most
 * BRISK_MAX_STOP_STRINGS of at most BRISK_MAX_STOP_BYTES each. */
static void test_stop_string_limits(void **state) {
  (void)state;
  brisk_engine *e = engine();
  static char longest[BRISK_MAX_STOP_BYTES + 2];
  memset(longest, 'x', BRISK_MAX_STOP_BYTES + 1);
  const char *stops[BRISK_MAX_STOP_STRINGS + 1];
  for (int i = 0; i <= BRISK_MAX_STOP_STRINGS; i++) stops[i] = longest + 1; /* 1024 bytes */
  int32_t prompt[2] = {5, 6};
  brisk_request_params p;
  brisk_request_params_init(&p);
  p.prompt_tokens = prompt;
  p.n_prompt_tokens = 2;
  p.max_tokens = 2;
  p.stop = stops;
  uint64_t id = 0;
  p.n_stop = BRISK_MAX_STOP_STRINGS + 1;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "more than 16 stop strings"));
  p.n_stop = BRISK_MAX_STOP_STRINGS;
  stops[3] = longest; /* 1025 bytes */
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "stop string 3 is longer than 1024 bytes"));
  assert_int_equal(id, 0);
  stops[3] = longest + 1;
  assert_int_equal(brisk_engine_submit(e, &p, &id), BRISK_OK);
  brisk_engine_free(e);
}

/* A penalty window far longer than the request (2^31 - 1 tokens) costs
 * only the request's own length, and gives the tokens of a window of
 * max_tokens (the sampler counts the window's tokens, whatever its size). */
static void test_penalty_window_bounded(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("penalty_window_bounded");
  eh_job a, b;
  eh_random_job(&r, model, &a, 20, 24, 1);
  a.sp.repeat_penalty = 1.5f;
  a.sp.penalty_last_n = INT32_MAX;
  b = a;
  b.sp.penalty_last_n = a.max_tokens;
  brisk_engine *e = engine();
  uint64_t live = brisk_alloc_live_bytes();
  assert_int_equal(eh_submit(e, &a), BRISK_OK);
  assert_true(brisk_alloc_live_bytes() - live < (1u << 20));
  assert_int_equal(eh_submit(e, &b), BRISK_OK);
  eh_run(e, &a, 1, 1000);
  eh_run(e, &b, 1, 1000);
  eh_expect_same(&a, &b);
  brisk_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_request_fails_alone), cmocka_unit_test(test_every_request_bad),
      cmocka_unit_test(test_text_prompt_checked),     cmocka_unit_test(test_struct_sizes),
      cmocka_unit_test(test_stop_string_limits),      cmocka_unit_test(test_penalty_window_bounded),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
