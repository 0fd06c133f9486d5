/* Fuzz target for the engine's state machine: a sequence of submit, cancel,
 * step and poll calls (and request parameters, including bad ones) against
 * a small engine over a tiny random model. Invariants: a call either
 * succeeds or fails with a message; every event names a live request and
 * completion; each completion gets exactly one finished event and nothing
 * after it; once every request finished, all KV blocks are free again.
 *
 * Input: a byte choosing the engine's shape, then ops of up to 6 bytes:
 * 0 submit (prompt length, max_tokens, n, flags: sampled, logprobs, stop
 * string, speculation, priority), 1 cancel (which earlier request, or an
 * unknown id), 2 step, 3 poll (capacity). */
#include "fuzz_target.h"

#include "test_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_engine: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,    \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

enum { MAX_REQ = 32, MAX_N = 3 };

static brisk_model *g_model;

static void init(void) {
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  char path[] = "/tmp/brisk-fuzz-engine-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 40, s.n_embd = 16, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 1, s.head_dim = 8;
  s.n_ff = 16;
  test_rng r = test_rng_seeded("fuzz_engine");
  CHECK(test_model_write(path, &s, &r, NULL) == BRISK_OK);
  CHECK(brisk_model_load(path, NULL, &g_model) == BRISK_OK);
  unlink(path);
}

typedef struct req {
  uint64_t id;
  int32_t n;
  int finished[MAX_N];
} req;

typedef struct state {
  req reqs[MAX_REQ];
  int n_reqs;
} state;

static req *find(state *s, uint64_t id) {
  for (int i = 0; i < s->n_reqs; i++)
    if (s->reqs[i].id == id) return &s->reqs[i];
  return NULL;
}

static void poll_events(brisk_engine *e, state *s, size_t cap) {
  brisk_engine_event ev[8];
  size_t n = 0;
  brisk_status st = brisk_engine_poll(e, cap ? ev : NULL, cap, &n);
  CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
  if (st) return;
  CHECK(n <= cap);
  for (size_t i = 0; i < n; i++) {
    req *r = find(s, ev[i].id);
    CHECK(r && ev[i].user_data == r);
    CHECK(ev[i].index >= 0 && ev[i].index < r->n);
    CHECK(!r->finished[ev[i].index]);
    CHECK(ev[i].token >= -1 && ev[i].token < brisk_model_n_vocab(g_model));
    CHECK(ev[i].text_len == 0 || ev[i].text);
    CHECK(ev[i].n_top_logprobs >= 0 && ev[i].n_top_logprobs <= BRISK_MAX_LOGPROBS);
    if (ev[i].finished) {
      CHECK(ev[i].reason != BRISK_FINISH_NONE);
      r->finished[ev[i].index] = 1;
    } else {
      CHECK(ev[i].reason == BRISK_FINISH_NONE && ev[i].token >= 0);
    }
  }
}

static void submit(brisk_engine *e, state *s, const uint8_t *op) {
  if (s->n_reqs == MAX_REQ) return;
  int32_t prompt[64];
  int32_t n_prompt = op[1] % 48; /* 0: an empty prompt (refused) */
  for (int32_t i = 0; i < n_prompt; i++) prompt[i] = (op[2] * 7 + i * op[3]) % 41; /* 40: bad id */
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = op[3];
  if (op[4] & 1) sp.temperature = 0.8f, sp.top_k = 5;
  brisk_request_params p;
  brisk_request_params_init(&p);
  req *r = &s->reqs[s->n_reqs];
  memset(r, 0, sizeof *r);
  const char *stop[1] = {"ab"};
  if (op[4] & 16) {
    p.prompt_text = "hello world"; /* tokenized */
  } else {
    p.prompt_tokens = prompt;
    p.n_prompt_tokens = (size_t)n_prompt;
  }
  p.sampler = &sp;
  p.max_tokens = (op[2] % 12) - 1; /* -1 and 0 are refused */
  p.n = 1 + op[5] % MAX_N;
  p.logprobs = op[4] & 2 ? 3 : 0;
  if (op[4] & 4) p.stop = stop, p.n_stop = 1;
  if (op[4] & 8) p.spec_n_draft = 1 + op[5] % 4;
  p.priority = (op[4] >> 5) - 3;
  p.stop_at_eog = op[5] & 8;
  p.user_data = r;
  uint64_t id = 0;
  brisk_status st = brisk_engine_submit(e, &p, &id);
  if (st) {
    CHECK(id == 0 && brisk_last_error()[0]);
    return;
  }
  CHECK(id != 0 && !find(s, id));
  r->id = id;
  r->n = p.n;
  s->n_reqs++;
}

static int all_finished(const state *s) {
  for (int i = 0; i < s->n_reqs; i++)
    for (int32_t c = 0; c < s->reqs[i].n; c++)
      if (!s->reqs[i].finished[c]) return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_model) init();
  if (size < 1) return 0;
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = 1;
  ep.kv_tokens = 64 + 32 * (data[0] & 3); /* small pools preempt */
  ep.block_size = 4;
  ep.max_batch_tokens = 8 + 8 * ((data[0] >> 2) & 3);
  ep.max_running = 1 + ((data[0] >> 4) & 3);
  ep.prefill_chunk = (data[0] & 64) ? 4 : 0;
  ep.preempt_mode = (data[0] & 128) ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE;
  brisk_engine *e = NULL;
  CHECK(brisk_engine_create(g_model, &ep, &e) == BRISK_OK);
  state *s = calloc(1, sizeof *s);
  for (size_t i = 1; i + 6 <= size; i += 6) {
    const uint8_t *op = data + i;
    switch (op[0] % 4) {
    case 0: submit(e, s, op); break;
    case 1: {
      int k = op[1] % (s->n_reqs + 2); /* an earlier request, or an id never given */
      uint64_t id = k < s->n_reqs ? s->reqs[k].id : 1000u + op[1];
      brisk_status st = brisk_engine_cancel(e, id);
      CHECK(st == BRISK_OK || st == BRISK_E_NOT_FOUND);
      break;
    }
    case 2: {
      brisk_engine_step_info si = {.struct_size = sizeof si};
      brisk_status st = brisk_engine_step(e, &si);
      CHECK(st == BRISK_OK);
      CHECK(si.n_tokens <= ep.max_batch_tokens);
      break;
    }
    default: poll_events(e, s, op[1] % 9); break;
    }
  }
  /* Drain: every request finishes within a bounded number of steps. */
  for (int steps = 0; !all_finished(s); steps++) {
    CHECK(steps < 20000);
    CHECK(brisk_engine_step(e, NULL) == BRISK_OK);
    poll_events(e, s, 8);
  }
  brisk_engine_counters c = {.struct_size = sizeof c};
  CHECK(brisk_engine_stats(e, &c) == BRISK_OK);
  CHECK(c.n_running == 0 && c.n_waiting == 0 && c.n_free_kv_blocks == c.n_kv_blocks);
  brisk_engine_free(e);
  free(s);
  return 0;
}
