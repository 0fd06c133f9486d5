/* Fuzz target for brisk serve's OpenAI request mapping: any body on either
 * endpoint is either refused with an error (status >= 400, a message, valid
 * JSON) or parsed into engine requests that respect the limits (prompts of
 * 1 .. ctx-1 tokens, prompt + max_tokens within the context, choices = prompts
 * x n); for a parsed request, simulated output (the input's own bytes as
 * text, so invalid UTF-8 too, and token logprobs) must give a valid JSON
 * answer and valid JSON stream chunks ending in [DONE].
 *
 * Input: one byte (bit 0: chat, else completions), then the body. Needs
 * stories260K from ../shared (BRISK_SHARED_DIR, else the checkout's
 * neighbour); without it every input is accepted unchecked, with a message. */
#include "fuzz_target.h"

#include "../../tools/brisk/serve/serve.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static sv_server g_server;
static int g_ready = -1;

static void init(void) {
  const char *dir = getenv("BRISK_SHARED_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/models/stories260K.gguf", dir ? dir : BRISK_FUZZ_SHARED_DIR);
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  if (brisk_model_load(path, NULL, &g_server.model) != BRISK_OK) {
    fprintf(stderr, "fuzz_openai: %s; inputs are not checked without the model\n",
            brisk_last_error());
    g_ready = 0;
    return;
  }
  g_server.cfg.model_name = "stories260K";
  g_server.cfg.chat_template = "chatml";
  g_server.cfg.ctx_size = 512;
  g_server.max_running = 8;
  g_ready = 1;
}

static void expect_json(const char *text, size_t len) {
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *o = json_tokener_parse_ex(tok, text, (int)len);
  if (!o || json_tokener_get_error(tok) != json_tokener_success) {
    fprintf(stderr, "fuzz_openai: invalid JSON written: %.*s\n", (int)len, text);
    abort();
  }
  json_object_put(o);
  json_tokener_free(tok);
}

/* Every "data: ..." event of a stream is JSON, and the last is [DONE]. */
static void expect_stream(const char *s, size_t len) {
  const char *end = s + len, *last = NULL;
  while (s < end) {
    const char *nl = strstr(s, "\n\n");
    if (strncmp(s, "data: ", 6) || !nl) abort();
    last = s + 6;
    if (strncmp(last, "[DONE]", 6)) expect_json(last, (size_t)(nl - last));
    s = nl + 2;
  }
  if (!last || strncmp(last, "[DONE]\n\n", 8)) abort();
}

static void simulate_output(sv_job *job, const uint8_t *data, size_t size) {
  size_t n_text = size < 64 ? size : 64;
  for (size_t k = 0; k < job->n_subs; k++) job->subs[k].n_prompt = job->n_prompts[k];
  for (size_t i = 0; i < job->n_choices; i++) {
    sv_choice *c = &job->choices[i];
    if (!sv_buf_append_utf8(&c->text, &c->len, &c->cap, (const char *)data, n_text)) abort();
    if (job->logprobs) {
      c->tokens = calloc(3, sizeof *c->tokens);
      if (!c->tokens) abort();
      c->n_tokens = c->cap_tokens = 3;
      for (int t = 0; t < 3; t++) {
        sv_token *tk = &c->tokens[t];
        tk->token = job->prompts[0][t % job->n_prompts[0]];
        tk->logprob = -(float)t;
        tk->n_top = job->want_top;
        for (int a = 0; a < tk->n_top; a++) tk->top[a] = (brisk_token_logprob){a, -(float)a};
        tk->text_end = c->len * (size_t)(t + 1) / 3;
      }
    }
    c->n_generated = 3;
    c->finished = true;
    c->reason = i % 2 ? BRISK_FINISH_LENGTH : BRISK_FINISH_STOP;
  }
}

/* /v1/embeddings: every input is a non-empty text or token ids of the
 * vocabulary; the answer, with finite vectors made from the input bytes
 * (the router refuses a non-finite one), is valid JSON. */
static int embedding_answer(sv_job *job, const uint8_t *data, size_t size) {
  const int32_t n_vocab = brisk_model_n_vocab(g_server.model);
  if (job->n_subs == 0 || !job->vectors || job->n_embd < 1) abort();
  for (size_t k = 0; k < job->n_subs; k++) {
    if (job->prompt_texts[k]) {
      if (!job->prompt_texts[k][0]) abort();
      continue;
    }
    if (job->n_prompts[k] < 1) abort();
    for (int32_t t = 0; t < job->n_prompts[k]; t++)
      if (job->prompts[k][t] < 0 || job->prompts[k][t] >= n_vocab) abort();
  }
  size_t nv = job->n_subs * (size_t)job->n_embd;
  for (size_t i = 0; i < nv; i++) {
    uint32_t u = 0;
    for (int j = 0; j < 4; j++) u = u << 8 | data[(i * 4 + (size_t)j) % size];
    memcpy(&job->vectors[i], &u, sizeof u);
    if (!isfinite(job->vectors[i])) job->vectors[i] = (float)(i % 7) - 3.0f;
  }
  char *answer = sv_response_json(&g_server, job);
  if (!answer) abort();
  expect_json(answer, strlen(answer));
  free(answer);
  sv_job_clear(job);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g_ready < 0) init();
  if (!g_ready || size < 1) return 0;
  const sv_kind kind = data[0] & 4 ? SV_EMBEDDING : data[0] & 1 ? SV_CHAT : SV_COMPLETION;
  sv_job job;
  sv_error e;
  if (!sv_parse_request(&g_server, kind, (const char *)data + 1, size - 1, &job, &e)) {
    if (e.http_status < 400 || !e.message[0]) abort();
    char *j = sv_error_json(&e);
    if (j) expect_json(j, strlen(j));
    free(j);
    sv_job_clear(&job);
    return 0;
  }
  if (kind == SV_EMBEDDING) return embedding_answer(&job, data, size);
  const int32_t ctx = g_server.cfg.ctx_size;
  if (job.n_subs == 0 || job.n < 1 || job.n_choices != job.n_subs * (size_t)job.n) abort();
  if (job.n_choices > (size_t)g_server.max_running) abort();
  for (size_t k = 0; k < job.n_subs; k++) {
    if (job.n_prompts[k] < 1 || job.n_prompts[k] >= ctx) abort();
    if (job.max_tokens > 0 && job.n_prompts[k] + job.max_tokens > ctx) abort();
  }
  if (job.want_top < 0 || job.want_top > BRISK_MAX_LOGPROBS) abort();
  simulate_output(&job, data, size);
  char *answer = sv_response_json(&g_server, &job);
  if (!answer) abort();
  expect_json(answer, strlen(answer));
  free(answer);
  char *out = NULL;
  size_t len = 0, cap = 0;
  bool done = false;
  job.include_usage = data[0] & 2;
  if (!sv_stream_chunks(&g_server, &job, &out, &len, &cap, &done) || !done) abort();
  expect_stream(out, len);
  free(out);
  sv_job_clear(&job);
  return 0;
}
