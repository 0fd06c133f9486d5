/* brisk serve: options, model and engine set-up, and the process's life:
 * the main thread waits for SIGTERM or SIGINT, then stops accepting
 * connections, lets running requests finish within --shutdown-timeout,
 * cancels the rest and exits 0. */
#include "../cli.h"
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

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: brisk serve [-m MODEL] [--host ADDR] [--port N] [--api-key KEY | --api-key-file F]\n"
      "                   [--alias NAME] [--chat-template NAME] [-t THREADS] [--ctx-size N]\n"
      "                   [--kv-tokens N] [--kv-type f16|f32] [--max-running N]\n"
      "                   [--max-batch-tokens N] [--prefill-chunk N] [--no-prefix-cache]\n"
      "                   [--preempt recompute|swap] [--draft-model PATH] [--max-queue N]\n"
      "                   [--max-body BYTES] [--max-connections N] [--idle-timeout S]\n"
      "                   [--shutdown-timeout S] [--no-repack] [--log-requests]\n"
      "\n"
      "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
      "GET /v1/models, GET /health, GET /metrics (docs/server.md). --port 0 takes a free port;\n"
      "the address is printed as 'listening on http://HOST:PORT'.\n"
      "  --host ADDR          address or name to listen on (default 127.0.0.1)\n"
      "  --port N             port (default 8080)\n"
      "  --api-key KEY        require 'Authorization: Bearer KEY' (all but /health)\n"
      "  --api-key-file F     the same, the key read from the first line of F\n"
      "  --alias NAME         model id in /v1/models and answers (default: file name)\n"
      "  --chat-template NAME chat format for /v1/chat/completions (default: the model's)\n"
      "  -t THREADS           engine threads (default: one per processor)\n"
      "  --ctx-size N         most prompt + output tokens of one completion\n"
      "                       (default: min(the model's training context, --kv-tokens))\n"
      "  --kv-tokens N        KV pool, tokens shared by all requests (default: the engine's)\n"
      "  --max-running N      requests generating at once (default 64)\n"
      "  --max-batch-tokens N token budget of one engine step (default 512)\n"
      "  --prefill-chunk N    most prompt tokens one request prefills per step (0: no cap)\n"
      "  --no-prefix-cache    do not reuse the KV of earlier prompts\n"
      "  --draft-model PATH   draft model for speculative decoding (per request\n"
      "                       'spec_n_draft'; greedy output is unchanged)\n"
      "  --max-queue N        requests waiting beyond --max-running before 429 (default 256)\n"
      "  --max-body BYTES     largest request body (default 8388608)\n"
      "  --max-connections N  open connections, one thread each (default 512)\n"
      "  --idle-timeout S     close idle keep-alive connections after S seconds (default 60)\n"
      "  --shutdown-timeout S on SIGTERM, let running requests finish for S seconds (default 10)\n"
      "  --log-requests       one line per request on stderr\n");
}

static char *read_key_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char line[4096];
  char *key = fgets(line, sizeof line, f) ? (line[strcspn(line, "\r\n")] = 0, strdup(line)) : NULL;
  fclose(f);
  return key;
}

static bool parse_long(const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || !*v || *end || x < lo || x > hi) return false;
  *out = x;
  return true;
}

static bool parse_double(const char *v, double lo, double hi, double *out) {
  char *end;
  double x = strtod(v, &end);
  if (!*v || *end || !(x >= lo && x <= hi)) return false;
  *out = x;
  return true;
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
  bool repack = true;
  int rc = 1;
  char default_path[4096], name_buf[256];
  brisk_model *draft = NULL;
  struct MHD_Daemon *daemon = NULL;
  pthread_t router;
  bool router_started = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long l;
    double d;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      free(s);
      return 0;
    } else if (!strcmp(a, "--no-prefix-cache")) {
      ep.prefix_cache = 0;
      continue;
    } else if (!strcmp(a, "--no-repack")) {
      repack = false;
      continue;
    } else if (!strcmp(a, "--log-requests")) {
      cfg->log_requests = true;
      continue;
    }
    if (!v) {
      usage(stderr);
      cli_fail("serve", "unknown option or missing value: '%s'", a);
      goto done;
    }
    i++;
    bool ok = true;
    if (!strcmp(a, "-m"))
      model_path = v;
    else if (!strcmp(a, "--host"))
      cfg->host = v;
    else if (!strcmp(a, "--port"))
      ok = parse_long(v, 0, 65535, &l) && (cfg->port = (int)l, 1);
    else if (!strcmp(a, "--api-key"))
      free(cfg->api_key), cfg->api_key = strdup(v);
    else if (!strcmp(a, "--api-key-file"))
      key_file = v;
    else if (!strcmp(a, "--alias"))
      cfg->model_name = v;
    else if (!strcmp(a, "--chat-template"))
      cfg->chat_template = v;
    else if (!strcmp(a, "-t"))
      ok = parse_long(v, 0, 4096, &l) && (ep.n_threads = (int32_t)l, 1);
    else if (!strcmp(a, "--ctx-size"))
      ok = parse_long(v, 1, INT32_MAX, &l) && (cfg->ctx_size = (int32_t)l, 1);
    else if (!strcmp(a, "--kv-tokens"))
      ok = parse_long(v, 1, INT32_MAX, &l) && (ep.kv_tokens = (int32_t)l, 1);
    else if (!strcmp(a, "--kv-type"))
      ok = !strcmp(v, "f16")   ? (ep.kv_type = BRISK_KV_F16, 1)
           : !strcmp(v, "f32") ? (ep.kv_type = BRISK_KV_F32, 1)
                               : 0;
    else if (!strcmp(a, "--max-running"))
      ok = parse_long(v, 1, 65536, &l) && (ep.max_running = (int32_t)l, 1);
    else if (!strcmp(a, "--max-batch-tokens"))
      ok = parse_long(v, 1, INT32_MAX, &l) && (ep.max_batch_tokens = (int32_t)l, 1);
    else if (!strcmp(a, "--prefill-chunk"))
      ok = parse_long(v, 0, INT32_MAX, &l) && (ep.prefill_chunk = (int32_t)l, 1);
    else if (!strcmp(a, "--preempt"))
      ok = !strcmp(v, "recompute") ? (ep.preempt_mode = BRISK_PREEMPT_RECOMPUTE, 1)
           : !strcmp(v, "swap")    ? (ep.preempt_mode = BRISK_PREEMPT_SWAP, 1)
                                   : 0;
    else if (!strcmp(a, "--draft-model"))
      draft_path = v;
    else if (!strcmp(a, "--max-queue"))
      ok = parse_long(v, 0, 1 << 20, &l) && (cfg->max_queue = (int32_t)l, 1);
    else if (!strcmp(a, "--max-body"))
      ok = parse_long(v, 1, 1L << 30, &l) && (cfg->max_body_bytes = (size_t)l, 1);
    else if (!strcmp(a, "--max-connections"))
      ok = parse_long(v, 1, 65536, &l) && (cfg->max_connections = (unsigned)l, 1);
    else if (!strcmp(a, "--idle-timeout"))
      ok = parse_long(v, 0, 86400, &l) && (cfg->idle_timeout_s = (unsigned)l, 1);
    else if (!strcmp(a, "--shutdown-timeout"))
      ok = parse_double(v, 0, 86400, &d) && (cfg->shutdown_timeout_s = d, 1);
    else {
      usage(stderr);
      cli_fail("serve", "unknown option '%s'", a);
      goto done;
    }
    if (!ok) {
      cli_fail("serve", "bad value '%s' for %s", v, a);
      goto done;
    }
  }
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
  brisk_model_params_init(&mp);
  mp.repack = repack;
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
