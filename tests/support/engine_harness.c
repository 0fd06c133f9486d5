#include "engine_harness.h"

#include <string.h>

void eh_random_job(test_rng *r, const brisk_model *m, eh_job *j, int32_t max_prompt,
                   int32_t max_out, int sampled) {
  memset(j, 0, sizeof *j);
  int32_t nv = brisk_model_n_vocab(m);
  j->n_prompt = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_prompt);
  for (int32_t i = 0; i < j->n_prompt; i++)
    j->prompt[i] = (int32_t)(test_rng_u64(r) % (uint64_t)nv);
  j->max_tokens = 1 + (int32_t)(test_rng_u64(r) % (uint64_t)max_out);
  j->stop_at_eog = 1;
  brisk_request_params_init(&j->extra);
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

void eh_reset(eh_job *j) {
  j->id = 0;
  memset(j->n_out, 0, sizeof j->n_out);
  memset(j->text_len, 0, sizeof j->text_len);
  memset(j->reason, 0, sizeof j->reason);
  j->n_finished = 0;
  memset(&j->stats, 0, sizeof j->stats);
}

brisk_engine *eh_engine(const brisk_model *m, int32_t kv_tokens, int32_t block_size,
                        int32_t max_batch, int32_t max_running, int32_t chunk) {
  brisk_engine_params p;
  brisk_engine_params_init(&p);
  p.n_threads = 2;
  p.kv_tokens = kv_tokens;
  if (block_size) p.block_size = block_size;
  if (max_batch) p.max_batch_tokens = max_batch;
  if (max_running) p.max_running = max_running;
  p.prefill_chunk = chunk;
  brisk_engine *e = NULL;
  if (brisk_engine_create(m, &p, &e)) fail_msg("engine: %s", brisk_last_error());
  return e;
}

brisk_status eh_submit(brisk_engine *e, eh_job *j) {
  brisk_request_params p = j->extra;
  if (!p.struct_size) brisk_request_params_init(&p);
  p.prompt_tokens = j->prompt_text ? NULL : j->prompt;
  p.n_prompt_tokens = j->prompt_text ? 0 : (size_t)j->n_prompt;
  p.prompt_text = j->prompt_text;
  p.sampler = &j->sp;
  p.max_tokens = j->max_tokens;
  p.stop_at_eog = j->stop_at_eog;
  p.priority = j->priority;
  p.user_data = j;
  uint64_t id = 0;
  brisk_status st = brisk_engine_submit(e, &p, &id);
  /* Published atomically: threaded tests read ids from another thread. */
  if (!st) __atomic_store_n(&j->id, id, __ATOMIC_RELEASE);
  return st;
}

void eh_take_events(brisk_engine *e) {
  brisk_engine_event ev[16];
  size_t n;
  do {
    assert_int_equal(brisk_engine_poll(e, ev, 16, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      eh_job *j = ev[i].user_data;
      int32_t c = ev[i].index;
      assert_int_equal(ev[i].id, j->id);
      assert_true(c >= 0 && c < EH_MAX_N);
      assert_int_equal(j->reason[c], BRISK_FINISH_NONE); /* nothing after the last */
      if (ev[i].token >= 0) {
        assert_true(j->n_out[c] < EH_MAX_OUT);
        j->out[c][j->n_out[c]++] = ev[i].token;
      }
      assert_true(j->text_len[c] + ev[i].text_len <= EH_MAX_TEXT);
      memcpy(j->text[c] + j->text_len[c], ev[i].text, ev[i].text_len);
      j->text_len[c] += ev[i].text_len;
      if (!ev[i].finished) {
        assert_int_equal(ev[i].reason, BRISK_FINISH_NONE);
        continue;
      }
      assert_int_not_equal(ev[i].reason, BRISK_FINISH_NONE);
      j->reason[c] = ev[i].reason;
      if (j->n_finished++ == 0) {
        j->stats.struct_size = sizeof j->stats;
        assert_int_equal(brisk_engine_request_stats(e, j->id, &j->stats), BRISK_OK);
      }
    }
  } while (n == 16);
}

static int32_t completions(const eh_job *j) {
  return j->extra.struct_size && j->extra.n > 1 ? j->extra.n : 1;
}

int eh_all_finished(const eh_job *jobs, int n) {
  for (int i = 0; i < n; i++)
    if (jobs[i].n_finished < completions(&jobs[i])) return 0;
  return 1;
}

int eh_run(brisk_engine *e, eh_job *jobs, int n, int max_steps) {
  int steps = 0;
  eh_take_events(e);
  while (!eh_all_finished(jobs, n)) {
    if (brisk_engine_step(e, NULL)) fail_msg("step: %s", brisk_last_error());
    eh_take_events(e);
    if (++steps > max_steps) fail_msg("not finished after %d steps", max_steps);
  }
  return steps;
}

void eh_expect_same(const eh_job *a, const eh_job *b) {
  for (int32_t c = 0; c < completions(a); c++) {
    if (a->n_out[c] != b->n_out[c] ||
        memcmp(a->out[c], b->out[c], (size_t)a->n_out[c] * sizeof a->out[c][0]))
      fprintf(stderr, "completion %d: %d tokens vs %d\n", c, a->n_out[c], b->n_out[c]);
    assert_int_equal(a->n_out[c], b->n_out[c]);
    assert_memory_equal(a->out[c], b->out[c], (size_t)a->n_out[c] * sizeof a->out[c][0]);
    assert_int_equal(a->reason[c], b->reason[c]);
  }
}
