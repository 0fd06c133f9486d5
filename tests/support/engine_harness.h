/* A shared harness for engine tests: jobs (a prompt, sampling, what came
 * out), an engine with the test's shape, submission, polling every event
 * into its job, and stepping until every job finished. Jobs are found
 * through the events' user_data. */
#ifndef BRISK_TEST_ENGINE_HARNESS_H
#define BRISK_TEST_ENGINE_HARNESS_H

#include "test_support.h"

enum { EH_MAX_PROMPT = 256, EH_MAX_OUT = 256, EH_MAX_TEXT = 2048, EH_MAX_N = 4 };

typedef struct eh_job {
  /* In: the prompt (tokens, or text when prompt_text is set), sampling and
   * limits; request params for everything else (n_stop, logprobs, n, spec
   * fields) may be set in `extra` (its prompt, sampler, max_tokens,
   * stop_at_eog, priority and user_data are overwritten). */
  int32_t prompt[EH_MAX_PROMPT];
  int32_t n_prompt;
  const char *prompt_text;
  int32_t max_tokens, priority;
  int stop_at_eog;
  brisk_sampler_params sp;
  brisk_request_params extra;
  /* Out, per completion (index 0 .. n - 1). */
  uint64_t id;
  int32_t out[EH_MAX_N][EH_MAX_OUT];
  int32_t n_out[EH_MAX_N];
  char text[EH_MAX_N][EH_MAX_TEXT];
  size_t text_len[EH_MAX_N];
  int32_t n_finished; /* finished events seen, over completions */
  brisk_finish_reason reason[EH_MAX_N];
  brisk_request_stats stats; /* read at its first finished event */
} eh_job;

/* A job with a random prompt of 1..max_prompt ids below the model's n_vocab
 * and 1..max_out tokens; greedy, or seeded sampling (temperature 0.9,
 * top-k 40, repeat penalty 1.1) when `sampled`. */
void eh_random_job(test_rng *r, const brisk_model *m, eh_job *j, int32_t max_prompt,
                   int32_t max_out, int sampled);

/* Clears a job's outputs (to run it again). */
void eh_reset(eh_job *j);

/* An engine: n_threads 2 and the given pool, block size, step budget,
 * running limit and prefill chunk (0 for the defaults); fails the test on
 * error. */
brisk_engine *eh_engine(const brisk_model *m, int32_t kv_tokens, int32_t block_size,
                        int32_t max_batch, int32_t max_running, int32_t chunk);

/* Submits the job; returns the status (the job's id is set on success). */
brisk_status eh_submit(brisk_engine *e, eh_job *j);

/* Polls every queued event into its job, checking the event protocol
 * (nothing after a completion's finished event, a reason only there). */
void eh_take_events(brisk_engine *e);

/* Whether every completion of every job finished. */
int eh_all_finished(const eh_job *jobs, int n);

/* Steps and polls until every job finished; fails past max_steps. Returns
 * the steps taken. */
int eh_run(brisk_engine *e, eh_job *jobs, int n, int max_steps);

/* The same tokens and reasons, completion by completion. */
void eh_expect_same(const eh_job *a, const eh_job *b);

#endif
