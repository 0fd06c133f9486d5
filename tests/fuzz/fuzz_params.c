/* Fuzz target for the parameter structs: a selector byte, then the bytes of
 * a brisk_engine_params, brisk_context_params, brisk_sampler_params or
 * brisk_model_params (struct_size included, taken as given). Pointer fields
 * are cleared (the target cannot make valid pointers) and the sizes that
 * allocate memory are capped to keep each run small; everything else is the
 * fuzzer's. Each create must succeed or fail with a message, and an object
 * it creates must work: an engine runs a request, a context decodes, a
 * sampler samples. */
#include "fuzz_target.h"

#include "model/load.h"
#include "test_models.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_params: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,    \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static brisk_model *g_model;
static char g_path[64];

static void cleanup(void) { unlink(g_path); }

static void init(void) {
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  atexit(cleanup);
  snprintf(g_path, sizeof g_path, "/tmp/brisk-fuzz-params-%d.gguf", (int)getpid());
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 40, s.n_embd = 16, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 1, s.head_dim = 8;
  s.n_ff = 16;
  test_rng r = test_rng_seeded("fuzz_params");
  CHECK(test_model_write(g_path, &s, &r, NULL) == BRISK_OK);
  CHECK(brisk_model_load(g_path, NULL, &g_model) == BRISK_OK);
}

static int32_t cap32(int32_t v, int32_t hi) { return v > hi ? hi : v; }

/* The input's bytes as a params struct, in room for any struct_size they
 * claim: a larger (newer) struct's tail is read, and must exist (zero
 * here). One buffer, reused by each call. */
static void *struct_from(const uint8_t *d, size_t n, size_t size) {
  static union {
    max_align_t align;
    unsigned char bytes[4096];
  } room;
  memset(&room, 0, sizeof room);
  memcpy(room.bytes, d, n < size ? n : size);
  return room.bytes;
}

static void fuzz_engine(const uint8_t *d, size_t n) {
  brisk_engine_params *const q = struct_from(d, n, sizeof *q);
  q->draft_model = NULL;
  q->n_threads = cap32(q->n_threads, 2);
  q->kv_tokens = cap32(q->kv_tokens, 512);
  if (q->kv_tokens <= 0 && q->kv_bytes > (1u << 20)) q->kv_bytes = 1u << 20;
  q->max_batch_tokens = cap32(q->max_batch_tokens, 64);
  q->max_running = cap32(q->max_running, 16);
  q->block_size = cap32(q->block_size, 64);
  if (q->kv_tokens == 0 && q->kv_bytes == 0) q->kv_tokens = 64;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(g_model, q, &e);
  if (st) {
    CHECK(!e && brisk_last_error()[0]);
    return;
  }
  int32_t prompt[3] = {1, 2, 3};
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_tokens = prompt;
  rp.n_prompt_tokens = 3;
  rp.max_tokens = 2;
  uint64_t id;
  if (brisk_engine_submit(e, &rp, &id) == BRISK_OK) {
    brisk_engine_counters c = {.struct_size = sizeof c};
    int out_of_memory = 0;
    for (int i = 0; i < 50; i++) {
      st = brisk_engine_step(e, NULL);
      /* A small memory_limit may leave a step no room: a clean refusal. */
      CHECK(st == BRISK_OK || (st == BRISK_E_OUT_OF_MEMORY && q->memory_limit));
      if (st) out_of_memory = 1;
      CHECK(brisk_engine_stats(e, &c) == BRISK_OK);
      if (c.n_finished == 1 || st) break;
    }
    CHECK(c.n_finished == 1 || out_of_memory);
  }
  brisk_engine_free(e);
}

static void fuzz_context(const uint8_t *d, size_t n) {
  brisk_context_params *const q = struct_from(d, n, sizeof *q);
  q->abort_callback = NULL;
  q->abort_user_data = NULL;
  q->n_threads = cap32(q->n_threads, 2);
  q->kv_tokens = cap32(q->kv_tokens, 512);
  if (q->kv_tokens <= 0 && q->kv_bytes > (1u << 20)) q->kv_bytes = 1u << 20;
  if (q->kv_tokens == 0 && q->kv_bytes == 0) q->kv_tokens = 64;
  q->max_batch_tokens = cap32(q->max_batch_tokens, 64);
  q->n_seq_max = cap32(q->n_seq_max, 16);
  q->block_size = cap32(q->block_size, 64);
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(g_model, q, &c);
  if (st) {
    CHECK(!c && brisk_last_error()[0]);
    return;
  }
  brisk_batch *b = NULL;
  CHECK(brisk_batch_create(2, &b) == BRISK_OK);
  CHECK(brisk_batch_add(b, 5, 0, 0, 1) == BRISK_OK);
  st = brisk_decode(c, b);
  CHECK(st == BRISK_OK || st == BRISK_E_KV_FULL || st == BRISK_E_INVALID_ARGUMENT ||
        (st == BRISK_E_OUT_OF_MEMORY && q->memory_limit));
  brisk_batch_free(b);
  brisk_context_free(c);
}

static void fuzz_sampler(const uint8_t *d, size_t n) {
  brisk_sampler_params *const q = struct_from(d, n, sizeof *q);
  q->logit_bias = NULL;
  /* brisk_sampler_create allocates penalty_last_n window entries up front
   * (2^31 of them is 17 GB; docs/security.md, known limits): capped here. */
  if (q->penalty_last_n > 4096) q->penalty_last_n = 4096;
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sampler_create(g_model, q, &s);
  if (st) {
    CHECK(!s && brisk_last_error()[0]);
    return;
  }
  float logits[40];
  for (int i = 0; i < 40; i++) logits[i] = (float)((i * 37) % 11) - 5.0f;
  int32_t tok = -1;
  st = brisk_sampler_sample_logits(s, logits, 40, &tok);
  CHECK(st || (tok >= 0 && tok < 40));
  if (!st) CHECK(brisk_sampler_accept(s, tok) == BRISK_OK);
  brisk_sampler_free(s);
}

static void fuzz_model_params(const uint8_t *d, size_t n) {
  brisk_model_params *const q = struct_from(d, n, sizeof *q);
  q->progress = NULL;
  q->progress_user_data = NULL;
  /* Pointers come from a fixed set (a fuzzed pointer is no valid input):
   * device names well formed or not, usable here or not. */
  static const char *const devices[] = {NULL,     "",      "cpu", "cuda",
                                        "cuda:0", "cpu:1", "gpu", "cuda:x"};
  q->device = devices[(n ? d[n - 1] : 0) % (sizeof devices / sizeof *devices)];
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(g_path, q, &m);
  CHECK(st == BRISK_OK || ((st == BRISK_E_INVALID_ARGUMENT || st == BRISK_E_NO_DEVICE ||
                            (st == BRISK_E_OUT_OF_MEMORY && q->memory_limit) ||
                            /* a model that cannot be cut into tp_size ranks or
                             * pp_size stages */
                            (st == BRISK_E_UNSUPPORTED && (q->tp_size > 1 || q->pp_size > 1))) &&
                           !m && brisk_last_error()[0]));
  if (!st) CHECK(brisk_model_n_vocab(m) == 40);
  brisk_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_model) init();
  if (size < 1) return 0;
  switch (data[0] % 4) {
  case 0: fuzz_engine(data + 1, size - 1); break;
  case 1: fuzz_context(data + 1, size - 1); break;
  case 2: fuzz_sampler(data + 1, size - 1); break;
  default: fuzz_model_params(data + 1, size - 1); break;
  }
  return 0;
}
