/* brisk serve: options, model and engine set-up, and the process's life:
 * the main thread waits for SIGTERM or SIGINT, then stops accepting
 * connections, lets running requests finish within --shutdown-timeout,
 * cancels the rest and exits 0. */
#include "../cli.h"
#include "../cli_opt.h"
#include "../default_model.h"
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_serve(int argc, char **argv);

static char *read_key_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char line[4096];
  char *key = fgets(line, sizeof line, f) ? (line[strcspn(line, "\r\n")] = 0, strdup(line)) : NULL;
  fclose(f);
  return key;
}

int cmd_serve(int argc, char **argv) {
  const char *model_path = NULL, *draft_path = NULL, *key_file = NULL;
  sv_server *s = calloc(1, sizeof *s);
  if (!s) return cli_fail("serve", "out of memory");
  sv_config *cfg = &s->cfg;
  *cfg = (sv_config){.host = "127.0.0.1",
                     .port = 8080,
                     .max_queue = 256,
                     .max_body_bytes = 8u << 20,
                     .max_connections = 512,
                     .idle_timeout_s = 60,
                     .shutdown_timeout_s = 10};
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  int rc = 1;
  char default_path[4096], name_buf[256];
  brisk_model *draft = NULL;
  struct MHD_Daemon *daemon = NULL;
  pthread_t router;
  bool router_started = false;
  cli_model_args model = {0};
  const char *api_key = NULL;
  int opt_port = 8080, ctx_size = 0, kv_tokens = 0, max_running = 0, max_batch = 0;
  int prefill_chunk = -1, max_queue = 256, max_body = 8 << 20, max_conn = 512, opt_idle = 60;
  int kv_type = 0, preempt = 0;
  bool no_prefix_cache = false;
  uint64_t prefix_host_bytes = 0;
  static const char *const kv_types[] = {"f16", "f32", "q8_0", "fp8", NULL}; /* brisk_kv_type */
  static const char *const preempts[] = {"recompute", "swap", NULL};
  const cli_opt http[] = {
      {CLI_STR_OPT(0, "host", &cfg->host, "ADDR",
                   "address or name to listen on (default 127.0.0.1)")},
      {CLI_INT_OPT(0, "port", &opt_port, "N", "port (default 8080; 0 takes a free one)", 0, 65535)},
      {CLI_STR_OPT(0, "api-key", &api_key, "KEY",
                   "require 'Authorization: Bearer KEY' (all but /health)")},
      {CLI_STR_OPT(0, "api-key-file", &key_file, "F",
                   "the same, the key read from the first line of F")},
      {CLI_STR_OPT(0, "alias", &cfg->model_name, "NAME",
                   "model id in /v1/models and answers (default: file name)")},
      {CLI_STR_OPT(0, "chat-template", &cfg->chat_template, "NAME",
                   "chat format for /v1/chat/completions (default: the model's)")},
      {CLI_INT_OPT(0, "max-queue", &max_queue, "N",
                   "requests waiting beyond --max-running before 429 (default 256)", 0, 1 << 20)},
      {CLI_INT_OPT(0, "max-body", &max_body, "BYTES", "largest request body (default 8388608)", 1,
                   1 << 30)},
      {CLI_INT_OPT(0, "max-connections", &max_conn, "N",
                   "open connections, one thread each (default 512)", 1, 65536)},
      {CLI_INT_OPT(0, "idle-timeout", &opt_idle, "S",
                   "close idle keep-alive connections after S seconds (default 60)", 0, 86400)},
      {CLI_DOUBLE_OPT(0, "shutdown-timeout", &cfg->shutdown_timeout_s, "S",
                      "on SIGTERM, let running requests finish for S seconds (default 10)", 0,
                      86400)},
      {CLI_FLAG_OPT(0, "log-requests", &cfg->log_requests, "one line per request on stderr")},
  };
  const cli_opt engine[] = {
      {CLI_INT_OPT(0, "ctx-size", &ctx_size, "N",
                   "most prompt + output tokens of one completion\n(default: min(the model's "
                   "training context, --kv-tokens))",
                   1, INT32_MAX)},
      {CLI_INT_OPT(0, "kv-tokens", &kv_tokens, "N",
                   "KV pool, tokens shared by all requests (default: the engine's)", 1, INT32_MAX)},
      {CLI_OPT_(0, "kv-type", CLI_CHOICE, &kv_type, "TYPE",
                "KV cache type: f16 (default), f32, q8_0 or fp8"),
       .choices = kv_types},
      {CLI_INT_OPT(0, "max-running", &max_running, "N", "requests generating at once (default 64)",
                   1, 65536)},
      {CLI_INT_OPT(0, "max-batch-tokens", &max_batch, "N",
                   "token budget of one engine step (default 512)", 1, INT32_MAX)},
      {CLI_INT_OPT(0, "prefill-chunk", &prefill_chunk, "N",
                   "most prompt tokens one request prefills per step (0: no cap)", 0, INT32_MAX)},
      {CLI_FLAG_OPT(0, "no-prefix-cache", &no_prefix_cache,
                    "do not reuse the KV of earlier prompts")},
      {CLI_CUSTOM_OPT(0, "prefix-host-bytes", &prefix_host_bytes, "BYTES",
                      "host memory for prefix-cache blocks evicted from the\nKV pool, copied "
                      "back on a hit (K, M, G; default 0: off)",
                      cli_parse_bytes)},
      {CLI_OPT_(0, "preempt", CLI_CHOICE, &preempt, "MODE",
                "when the KV pool runs out: recompute (default) or swap"),
       .choices = preempts},
      {CLI_STR_OPT(0, "draft-model", &draft_path, "PATH",
                   "draft model for speculative decoding (per request\n'spec_n_draft'; greedy "
                   "output is unchanged)")},
  };
  const cli_group groups[] = {
      cli_model_group(&model, "GGUF file or Hugging Face folder (default:\nSmolLM2-135M-Instruct, "
                              "fetched once)"),
      {"http", http, sizeof http / sizeof *http},
      {"engine", engine, sizeof engine / sizeof *engine},
  };
  const cli_spec spec = {
      .cmd = "serve",
      .usage = "[-m MODEL] [--host ADDR] [--port N] [--api-key KEY | --api-key-file F] [options]",
      .summary =
          "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
          "POST /v1/embeddings, GET /v1/models, GET /health, GET /metrics (docs/server.md).\n"
          "An encoder (embedding) model serves /v1/embeddings only. The address is printed\n"
          "as 'listening on http://HOST:PORT'.",
      .groups = groups,
      .n_groups = sizeof groups / sizeof *groups,
      .epilog = "examples:\n"
                "  brisk serve -m model.gguf --port 8080\n"
                "  brisk serve -m model.gguf --api-key-file key.txt --max-running 16",
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) {
    free(s);
    return prc;
  }
  model_path = model.path;
  cfg->port = opt_port;
  if (api_key && !(cfg->api_key = strdup(api_key))) {
    cli_fail("serve", "out of memory");
    goto done;
  }
  cfg->ctx_size = ctx_size;
  cfg->max_queue = max_queue;
  cfg->max_body_bytes = (size_t)max_body;
  cfg->max_connections = (unsigned)max_conn;
  cfg->idle_timeout_s = (unsigned)opt_idle;
  ep.n_threads = model.threads;
  if (kv_tokens) ep.kv_tokens = kv_tokens;
  ep.kv_type = (brisk_kv_type)kv_type;
  if (max_running) ep.max_running = max_running;
  if (max_batch) ep.max_batch_tokens = max_batch;
  if (prefill_chunk >= 0) ep.prefill_chunk = prefill_chunk;
  if (no_prefix_cache) ep.prefix_cache = 0;
  ep.prefix_host_bytes = prefix_host_bytes;
  ep.preempt_mode = preempt ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE;
  if (key_file && !(cfg->api_key = read_key_file(key_file))) {
    cli_fail("serve", "cannot read the API key from %s", key_file);
    goto done;
  }
  if (cfg->api_key && !cfg->api_key[0]) {
    cli_fail("serve", "the API key is empty");
    goto done;
  }
  if (!model_path) {
    if (default_model_path(default_path, sizeof default_path) != 0) {
      cli_fail("serve", "no model given (-m) and the default model could not be fetched");
      goto done;
    }
    model_path = default_path;
  }
  if (!cfg->model_name) {
    const char *base = strrchr(model_path, '/');
    base = base && base[1] ? base + 1 : model_path;
    snprintf(name_buf, sizeof name_buf, "%.200s", base);
    char *dot = strrchr(name_buf, '.');
    if (dot && !strcmp(dot, ".gguf")) *dot = 0;
    cfg->model_name = name_buf;
  }
  /* Signals go to the main thread only: block them before any thread starts. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  brisk_model_params mp;
  cli_model_params(&model, &mp);
  if (brisk_model_load(model_path, &mp, &s->model) != BRISK_OK ||
      (draft_path && brisk_model_load(draft_path, &mp, &draft) != BRISK_OK)) {
    cli_fail("serve", "%s", brisk_last_error());
    goto done;
  }
  if (cfg->chat_template) {
    size_t len;
    brisk_chat_message probe = {"user", "x"};
    if (brisk_chat_apply(NULL, cfg->chat_template, &probe, 1, 1, NULL, 0, &len) ==
        BRISK_E_UNSUPPORTED) {
      cli_fail("serve", "%s", brisk_last_error());
      goto done;
    }
  }
  ep.draft_model = draft;
  if (brisk_engine_create(s->model, &ep, &s->engine) != BRISK_OK) {
    cli_fail("serve", "%s", brisk_last_error());
    goto done;
  }
  /* What the engine made of the defaults: its pool, and the request limit. */
  brisk_engine_counters c = {.struct_size = sizeof c};
  brisk_engine_stats(s->engine, &c);
  s->max_running = ep.max_running;
  s->embed_only = c.n_kv_blocks == 0; /* an encoder's engine has no KV pool */
  int32_t block = ep.block_size > 0 ? ep.block_size : 16;
  int64_t pool = (int64_t)c.n_kv_blocks * block;
  if (!cfg->ctx_size) {
    int64_t train = brisk_model_n_ctx_train(s->model);
    cfg->ctx_size = (int32_t)(train > 0 && train < pool ? train : pool);
  }
  if (cfg->ctx_size > pool) {
    cli_fail("serve", "--ctx-size %d is larger than the KV pool (%lld tokens; raise --kv-tokens)",
             (int)cfg->ctx_size, (long long)pool);
    goto done;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->router_cond, NULL);
  pthread_cond_init(&s->snap_cond, NULL);
  s->started_s = sv_now_s();
  if (!(router_started = sv_router_start(s, &router))) {
    cli_fail("serve", "cannot start the engine thread");
    goto done;
  }
  int port = 0;
  if (!(daemon = sv_http_start(s, &port))) goto done; /* it said why */
  const char *tmpl = cfg->chat_template ? cfg->chat_template : brisk_chat_template_name(s->model);
  printf("brisk serve: model %s (context %d tokens, KV pool %lld tokens, chat template %s)\n",
         cfg->model_name, (int)cfg->ctx_size, (long long)pool, tmpl ? tmpl : "none");
  printf("listening on http://%s:%d\n", cfg->host, port);
  fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  fprintf(stderr, "brisk serve: %s: draining (up to %g s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
          cfg->shutdown_timeout_s);
  pthread_mutex_lock(&s->mu);
  s->draining = true;
  pthread_mutex_unlock(&s->mu);
  MHD_quiesce_daemon(daemon); /* no new connections; open ones finish */
  double deadline = sv_now_s() + cfg->shutdown_timeout_s;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    bool idle = s->jobs == NULL;
    pthread_mutex_unlock(&s->mu);
    if (idle || sv_now_s() >= deadline) break;
    usleep(20000);
  }
  sv_cancel_all(s);
  /* Cancelled jobs end their answers; wait briefly for the threads to let go. */
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(&s->mu);
    bool idle = s->jobs == NULL;
    pthread_mutex_unlock(&s->mu);
    if (idle) break;
    usleep(10000);
  }
  rc = 0;
done:
  if (daemon) MHD_stop_daemon(daemon);
  if (router_started) sv_router_stop(s, router);
  /* Jobs the router never finished (none unless the engine stopped). */
  while (s->jobs) {
    sv_job *j = s->jobs;
    s->jobs = j->next;
    sv_job_clear(j);
    free(j);
  }
  brisk_engine_free(s->engine);
  brisk_model_free(s->model);
  brisk_model_free(draft);
  free(cfg->api_key);
  free(s);
  return rc;
}
