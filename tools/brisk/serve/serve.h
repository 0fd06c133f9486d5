/* brisk serve: an OpenAI-compatible HTTP server on one brisk_engine.
 *
 * Threads: libmicrohttpd runs one thread per connection (http.c); each
 * parses its request (openai_req.c), submits it to the engine and waits on
 * its job's condition variable. One router thread (router.c) ticks
 * brisk_engine_step, polls the events and appends them to the jobs they
 * belong to. brisk.h allows submit and cancel from any thread while one
 * thread steps; every other engine call (step, poll, stats, metrics) is made
 * by the router thread only. One mutex (sv_server.mu) guards all job state. */
#ifndef BRISK_TOOLS_SERVE_H
#define BRISK_TOOLS_SERVE_H

#include "brisk.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- an OpenAI-style error answer ---- */
typedef struct sv_error {
  unsigned http_status; /* 400, 401, 404, 413, 429, 500, 503 */
  const char *type;     /* "invalid_request_error", "authentication_error", ... */
  const char *code;     /* NULL or e.g. "invalid_api_key", "context_length_exceeded" */
  char param[64];       /* the request field at fault, "" when none */
  char message[512];
} sv_error;

/* Fills *e and returns false (so parsers can `return sv_fail(...)`). */
bool sv_fail(sv_error *e, unsigned http_status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* {"error": {...}} as a new JSON string (malloc'ed), NULL when out of memory. */
char *sv_error_json(const sv_error *e);

/* ---- server configuration (cmd_serve.c fills it) ---- */
typedef struct sv_config {
  const char *host;
  int port; /* 0: any free port (the bound one is printed) */
  char *api_key;
  const char *model_name;    /* the id in /v1/models and responses */
  const char *chat_template; /* NULL: the model's own */
  int32_t ctx_size;          /* most prompt + generated tokens of one completion */
  int32_t max_queue;         /* engine requests beyond max_running before 429 */
  size_t max_body_bytes;
  unsigned max_connections;
  unsigned idle_timeout_s;
  double shutdown_timeout_s;
  bool log_requests;
} sv_config;

/* ---- one generation's accumulated output ---- */
typedef struct sv_token {
  int32_t token;
  float logprob;
  int32_t n_top;
  brisk_token_logprob top[BRISK_MAX_LOGPROBS];
  size_t text_end; /* the choice's text length after this token's event */
} sv_token;

typedef struct sv_choice {
  char *text; /* everything released so far (not NUL-terminated) */
  size_t len, cap;
  sv_token *tokens; /* only with logprobs */
  size_t n_tokens, cap_tokens;
  int32_t n_generated;
  bool finished;
  brisk_finish_reason reason;
  /* streaming: how much of text and tokens went out already */
  size_t sent_len, sent_tokens;
  bool sent_role, sent_finish;
} sv_choice;

struct sv_job;

/* One engine request of a job (a job with several prompts has several). */
typedef struct sv_sub {
  struct sv_job *job;
  uint64_t id;      /* engine id; 0 until submitted */
  int32_t base;     /* index of its completion 0 among the job's choices */
  int32_t n_open;   /* completions not finished yet */
  int32_t n_prompt; /* prompt tokens */
  int32_t n_cached; /* of those, reused from the prefix cache */
  bool submitted;
} sv_sub;

typedef enum sv_kind { SV_COMPLETION = 0, SV_CHAT = 1, SV_EMBEDDING = 2 } sv_kind;

/* A parsed request: what to submit and how to answer. */
typedef struct sv_job {
  sv_kind kind;
  bool stream, include_usage, echo;
  int32_t n; /* completions per prompt */
  /* logprobs: 0 off; chat: top_logprobs + 1 (>= 1 when on); completions: the
   * legacy `logprobs` + 1. want_top is how many alternatives to report. */
  bool logprobs;
  int32_t want_top;
  brisk_sampler_params sampler;
  brisk_logit_bias *bias;
  int32_t max_tokens;
  bool ignore_eos;
  char **stop;
  size_t n_stop;
  int32_t spec_n_draft;
  /* structured output: response_format or a required tool call */
  brisk_constraint_params constraint; /* kind NONE: none */
  char *constraint_text;              /* owned text of constraint.text */
  char *tools_json;                   /* "tools" as JSON text when the model may call them */
  /* prompts (token ids, owned), one per sub */
  int32_t **prompts;
  int32_t *n_prompts;
  char **prompt_texts; /* for echo (completions) */
  size_t n_subs;
  sv_sub *subs;
  sv_choice *choices; /* n_subs * n */
  size_t n_choices;
  char id[48];
  int64_t created;
  /* state shared with the router, under sv_server.mu */
  pthread_cond_t cond;
  int32_t n_subs_open;     /* subs whose completions are not all finished */
  bool http_done;          /* the HTTP side let go: the router frees it at the end */
  bool error;              /* a completion finished with BRISK_FINISH_ERROR */
  bool wake;               /* got events since the router last woke its thread */
  char error_message[256]; /* the engine's reason for the first failed completion */
  struct sv_job *prev, *next;
  /* /v1/embeddings (openai_embed.c): one sub per input (prompt_texts[k],
   * or prompts[k] as token ids), each vector copied into vectors[k * n_embd]
   * by the router at its finished event; base64 = encoding_format. */
  float *vectors;
  int32_t n_embd;
  bool base64;
  int32_t embed_pooling, embed_normalize;
} sv_job;

/* ---- latency histograms for /metrics ---- */
#define SV_N_BUCKETS 14
typedef struct sv_hist {
  uint64_t counts[SV_N_BUCKETS + 1]; /* per bucket, the last is +Inf */
  double sum_s;
  uint64_t count;
} sv_hist;
extern const double sv_hist_bounds_s[SV_N_BUCKETS];
void sv_hist_add(sv_hist *h, double seconds);

/* ---- the server ---- */
typedef struct sv_server {
  sv_config cfg;
  brisk_model *model;
  brisk_engine *engine;
  int32_t max_running;
  bool embed_only; /* an encoder model: no KV pool, /v1/embeddings only */
  pthread_mutex_t mu;
  pthread_cond_t router_cond; /* work for the router (submission, metrics wanted, stop) */
  pthread_cond_t snap_cond;   /* a metrics snapshot was taken */
  int32_t n_engine_open;      /* engine requests not finished */
  bool stop_router, draining;
  sv_job *jobs; /* every job not freed yet */
  /* metrics, filled by the router */
  bool snap_wanted;
  uint64_t snap_seq;
  brisk_engine_counters counters;
  brisk_engine_metrics metrics;
  sv_hist h_ttft, h_tpot, h_queue, h_e2e;
  uint64_t n_http[6]; /* answers by class: 2xx, 400, 401, 404, 429, other */
  uint64_t n_step_errors;
  double started_s;
} sv_server;

/* openai_req.c: parses a request body into *job (which it zeroes first).
 * Returns false with *err filled for anything the client got wrong. */
bool sv_parse_request(sv_server *s, sv_kind kind, const char *body, size_t len, sv_job *job,
                      sv_error *err);
/* The body as a JSON object whose "model" (if any) is this server's; NULL
 * with *err filled otherwise. The caller puts the object. */
json_object *sv_parse_body(sv_server *s, const char *body, size_t len, sv_error *err);
/* openai_embed.c: a /v1/embeddings body (sv_parse_request's for that
 * kind), the answer, and the router's handling of an embedding event
 * (under mu; copies the vector out of the engine). */
bool sv_parse_embedding(sv_server *s, const char *body, size_t len, sv_job *job, sv_error *err);
char *sv_embedding_json(sv_server *s, sv_job *job);
void sv_route_embedding(sv_server *s, sv_sub *sub, const brisk_engine_event *ev);
/* Frees what sv_parse_request allocated (not the job itself). */
void sv_job_clear(sv_job *job);

/* openai_resp.c: the non-streaming answer, and streaming chunks: appends
 * every SSE event that can be sent now to *out (returns false when out of
 * memory). Both are called under sv_server.mu. */
char *sv_response_json(sv_server *s, sv_job *job);
bool sv_stream_chunks(sv_server *s, sv_job *job, char **out, size_t *len, size_t *cap, bool *done);

/* router.c */
bool sv_router_start(sv_server *s, pthread_t *thread);
void sv_router_stop(sv_server *s, pthread_t thread);
/* Submits every sub of the job; on failure cancels what was submitted,
 * fills *err and frees the job (now or once the router is done with it).
 * Takes sv_server.mu itself. */
bool sv_submit(sv_server *s, sv_job *job, sv_error *err);
/* The HTTP side lets go of the job: cancels what is unfinished and frees it
 * now or when the router sees its last event. Takes sv_server.mu itself. */
void sv_release(sv_server *s, sv_job *job);
/* Finished: every completion of the job has its finished event. Under mu. */
static inline bool sv_job_finished(const sv_job *job) { return job->n_subs_open == 0; }
/* Cancels every unfinished job (shutdown). Takes mu. */
void sv_cancel_all(sv_server *s);

/* metrics.c: the Prometheus text (malloc'ed). Waits for a fresh snapshot. */
char *sv_metrics_text(sv_server *s);

/* http.c */
struct MHD_Daemon;
struct MHD_Daemon *sv_http_start(sv_server *s, int *bound_port);

/* Small shared helpers */
double sv_now_s(void);
bool sv_buf_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n);
/* Appends n bytes with each invalid UTF-8 byte replaced by U+FFFD (JSON
 * strings must be valid UTF-8; a sampled byte token need not be). */
bool sv_buf_append_utf8(char **buf, size_t *len, size_t *cap, const char *data, size_t n);
/* Appends "data: <json>\n\n" and frees nothing. */
bool sv_buf_sse(char **buf, size_t *len, size_t *cap, json_object *obj);

#endif
