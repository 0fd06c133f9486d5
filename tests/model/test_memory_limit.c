/* The memory cap on real handles: a load, a context, a decode and an engine
 * that would pass their limit (the handle's or the process-wide one) fail
 * with BRISK_E_OUT_OF_MEMORY naming the limit, leave nothing allocated, and
 * leave the handle usable: the same logits once the limit allows it.
 * Weights read into memory count; a mapped file's weights count only for
 * the pages repacking rewrites. */
#include "test_models.h"

#include "core/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[64], path[128];
static uint64_t file_size;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  snprintf(path, sizeof path, "%s/m.gguf", dir);
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q8_0; /* a type the CPU regroups */
  /* Weights large next to the model's tables, as in a real model. */
  s.n_embd = 256;
  s.head_dim = 64;
  s.n_ff = 768;
  s.n_vocab = 256;
  test_rng r = test_rng_seeded("memory_limit");
  if (test_model_write(path, &s, &r, NULL)) return -1;
  struct stat sb;
  if (stat(path, &sb)) return -1;
  file_size = (uint64_t)sb.st_size;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

static int reset_limit(void **state) {
  (void)state;
  brisk_set_memory_limit(0);
  return 0;
}

static void fill_batch(brisk_batch *b, int n) {
  brisk_batch_clear(b);
  for (int i = 0; i < n; i++) assert_int_equal(brisk_batch_add(b, 3 + 5 * i, i, 0, 1), BRISK_OK);
}

static float *decode_logits(brisk_context *c, brisk_batch *b, int n, int32_t nv) {
  fill_batch(b, n);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  float *out = malloc((size_t)n * (size_t)nv * sizeof(float));
  for (int i = 0; i < n; i++)
    memcpy(out + (size_t)i * nv, brisk_get_logits(c, i), (size_t)nv * sizeof(float));
  return out;
}

static void test_load_limit(void **state) {
  (void)state;
  const uint64_t base = brisk_memory_allocated();
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.use_mmap = 0; /* the whole file is read into memory: it counts */
  mp.memory_limit = file_size / 2;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_OUT_OF_MEMORY);
  assert_null(m);
  assert_non_null(strstr(brisk_last_error(), "model's memory limit"));
  assert_int_equal(brisk_memory_allocated(), base);
  /* The process-wide limit stops it the same way. */
  mp.memory_limit = 0;
  assert_int_equal(brisk_set_memory_limit(brisk_memory_used() + file_size / 2), BRISK_OK);
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "process-wide memory limit"));
  assert_int_equal(brisk_memory_allocated(), base);
  brisk_set_memory_limit(0);
  /* Enough room: it loads, and what it holds is the file and a little. */
  mp.memory_limit = 2 * file_size + (1 << 20);
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  assert_true(brisk_model_memory_used(m) >= file_size);
  assert_true(brisk_model_memory_used(m) <= brisk_memory_used());
  brisk_model_free(m);
  assert_int_equal(brisk_memory_allocated(), base);
}

/* Every allocation of a load failing by the limit, one at a time: a limit
 * between what the load needs at each point. */
static void test_load_limit_everywhere(void **state) {
  (void)state;
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.use_mmap = 0;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  const uint64_t need = brisk_model_memory_used(m);
  brisk_model_free(m);
  const uint64_t base = brisk_memory_allocated();
  for (uint64_t limit = 1; limit < need; limit += need / 61 + 1) {
    mp.memory_limit = limit;
    m = NULL;
    brisk_status st = brisk_model_load(path, &mp, &m);
    if (st == BRISK_OK) {
      /* Only possible when the rest fits: the limit was close to need. */
      assert_true(brisk_model_memory_used(m) <= limit);
      brisk_model_free(m);
      continue;
    }
    assert_int_equal(st, BRISK_E_OUT_OF_MEMORY);
    assert_int_equal(brisk_memory_allocated(), base);
  }
}

static void test_repack_counts_mapped_pages(void **state) {
  (void)state;
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.repack = 0;
  brisk_model *plain = NULL, *packed = NULL, *capped = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &plain), BRISK_OK);
  const uint64_t plain_used = brisk_model_memory_used(plain);
  fprintf(stderr, "file %llu, mapped model holds %llu\n", (unsigned long long)file_size,
          (unsigned long long)plain_used);
  /* Mapped weights used in place are page cache: far less than the file. */
  assert_true(plain_used < file_size / 2);
  mp.repack = 1;
  assert_int_equal(brisk_model_load(path, &mp, &packed), BRISK_OK);
  const uint64_t packed_used = brisk_model_memory_used(packed);
  if (packed_used == plain_used) {
    fprintf(stderr, "note: this CPU regroups no weights; the capped repack is not checked\n");
  } else {
    /* The regrouped pages became the process's own: they count. */
    assert_true(packed_used > plain_used + file_size / 2);
    /* Under a limit without room for them, the weights are used as stored
     * and the load still succeeds, with the same logits. */
    mp.memory_limit = plain_used + (packed_used - plain_used) / 2;
    assert_int_equal(brisk_model_load(path, &mp, &capped), BRISK_OK);
    assert_int_equal(brisk_model_memory_used(capped), plain_used);
    brisk_context *c1 = NULL, *c2 = NULL;
    assert_int_equal(brisk_context_create(plain, NULL, &c1), BRISK_OK);
    assert_int_equal(brisk_context_create(capped, NULL, &c2), BRISK_OK);
    brisk_batch *b = NULL;
    assert_int_equal(brisk_batch_create(4, &b), BRISK_OK);
    const int32_t nv = brisk_model_n_vocab(plain);
    float *want = decode_logits(c1, b, 4, nv), *got = decode_logits(c2, b, 4, nv);
    assert_memory_equal(want, got, (size_t)4 * nv * sizeof(float));
    free(want);
    free(got);
    brisk_batch_free(b);
    brisk_context_free(c1);
    brisk_context_free(c2);
    brisk_model_free(capped);
  }
  brisk_model_free(plain);
  brisk_model_free(packed);
}

static void test_context_and_decode_limit(void **state) {
  (void)state;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  const int32_t nv = brisk_model_n_vocab(m);
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 256;
  cp.max_batch_tokens = 32;
  brisk_context *ref = NULL, *c = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &ref), BRISK_OK);
  const uint64_t need = brisk_context_memory_used(ref);
  const uint64_t base = brisk_memory_allocated();
  /* Too small for the KV pool: refused, nothing left. */
  cp.memory_limit = need / 2;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_E_OUT_OF_MEMORY);
  assert_null(c);
  assert_non_null(strstr(brisk_last_error(), "context's memory limit"));
  assert_int_equal(brisk_memory_allocated(), base);
  /* Exactly enough for creation, nothing for the first decode's tables. */
  cp.memory_limit = need;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  assert_int_equal(brisk_context_memory_used(c), need);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(8, &b), BRISK_OK);
  fill_batch(b, 8);
  assert_int_equal(brisk_decode(c, b), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "context's memory limit"));
  assert_int_equal(brisk_seq_len(c, 0), 0); /* rolled back */
  assert_int_equal(brisk_context_memory_used(c), need);
  /* The process-wide limit, the same. */
  assert_int_equal(brisk_context_set_memory_limit(c, 0), BRISK_OK);
  assert_int_equal(brisk_set_memory_limit(brisk_memory_used()), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "process-wide memory limit"));
  assert_int_equal(brisk_seq_len(c, 0), 0);
  brisk_set_memory_limit(0);
  /* Still usable: the same logits as a context that never failed. */
  float *want = decode_logits(ref, b, 8, nv), *got = decode_logits(c, b, 8, nv);
  assert_memory_equal(want, got, (size_t)8 * nv * sizeof(float));
  free(want);
  free(got);
  assert_true(brisk_context_memory_used(c) > need);
  assert_int_equal(brisk_context_set_memory_limit(NULL, 1), BRISK_E_INVALID_ARGUMENT);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_context_free(ref);
  brisk_model_free(m);
}

/* Runs an engine until request `id` finishes; returns its finish reason. */
static int run_until_done(brisk_engine *e, int max_steps, int *n_tokens) {
  brisk_engine_event ev[16];
  for (int s = 0; s < max_steps; s++) {
    if (brisk_engine_step(e, NULL) != BRISK_OK) return -1;
    size_t n = 0;
    if (brisk_engine_poll(e, ev, 16, &n) != BRISK_OK) return -1;
    for (size_t i = 0; i < n; i++) {
      if (ev[i].token >= 0) (*n_tokens)++;
      if (ev[i].finished) return (int)ev[i].reason;
    }
  }
  return -2;
}

static void test_engine_limit(void **state) {
  (void)state;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.kv_tokens = 256;
  ep.max_batch_tokens = 32;
  ep.max_running = 4;
  ep.n_threads = 1;
  brisk_engine *e = NULL;
  const uint64_t base = brisk_memory_allocated();
  ep.memory_limit = 4096; /* not even the engine's own struct and its context */
  assert_int_equal(brisk_engine_create(m, &ep, &e), BRISK_E_OUT_OF_MEMORY);
  assert_int_equal(brisk_memory_allocated(), base);
  ep.memory_limit = 0;
  assert_int_equal(brisk_engine_create(m, &ep, &e), BRISK_OK);
  /* The engine's context counts against the engine. */
  const uint64_t created = brisk_engine_memory_used(e);
  assert_true(created > 256ull * brisk_model_n_layer(m) * 2 * 2);
  int32_t prompt[6] = {3, 8, 13, 18, 23, 28};
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_tokens = prompt;
  rp.n_prompt_tokens = 6;
  rp.max_tokens = 5;
  /* A submit that passes the limit fails, the engine as it was. */
  assert_int_equal(brisk_engine_set_memory_limit(e, created + 64), BRISK_OK);
  uint64_t id = 0;
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "engine's memory limit"));
  assert_int_equal(brisk_engine_memory_used(e), created);
  /* Room for the request and its steps: it runs to its length. */
  assert_int_equal(brisk_engine_set_memory_limit(e, created + (1 << 20)), BRISK_OK);
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
  int n_tokens = 0;
  assert_int_equal(run_until_done(e, 100, &n_tokens), BRISK_FINISH_LENGTH);
  assert_int_equal(n_tokens, 5);
  /* A step that cannot get memory fails what it could not run and the
   * engine goes on: with the room back, the next request finishes. */
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
  assert_int_equal(brisk_engine_set_memory_limit(e, brisk_engine_memory_used(e)), BRISK_OK);
  n_tokens = 0;
  int finish = run_until_done(e, 100, &n_tokens);
  /* Either the request's own state could not grow (it fails, the limit
   * named), or the step's batch could not (the step fails, nothing
   * changed). */
  assert_true(finish == BRISK_FINISH_ERROR || finish == -1);
  assert_non_null(strstr(brisk_last_error(), "engine's memory limit"));
  assert_int_equal(brisk_engine_set_memory_limit(e, 0), BRISK_OK);
  if (finish == -1) { /* the step itself reported it; the request is still there */
    n_tokens = 0;
    assert_int_equal(run_until_done(e, 100, &n_tokens), BRISK_FINISH_LENGTH);
  }
  assert_int_equal(brisk_engine_submit(e, &rp, &id), BRISK_OK);
  n_tokens = 0;
  assert_int_equal(run_until_done(e, 100, &n_tokens), BRISK_FINISH_LENGTH);
  assert_int_equal(n_tokens, 5);
  brisk_engine_free(e);
  assert_int_equal(brisk_memory_allocated(), base);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_load_limit, reset_limit),
      cmocka_unit_test_teardown(test_load_limit_everywhere, reset_limit),
      cmocka_unit_test_teardown(test_repack_counts_mapped_pages, reset_limit),
      cmocka_unit_test_teardown(test_context_and_decode_limit, reset_limit),
      cmocka_unit_test_teardown(test_engine_limit, reset_limit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
