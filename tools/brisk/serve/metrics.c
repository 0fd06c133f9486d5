/* GET /metrics: the engine's counters and gauges, and the server's latency
 * histograms, in Prometheus text format (version 0.0.4). The engine's stats
 * may only be read by the thread that steps it, so this asks the router for
 * a snapshot and waits (at most a second) for it. */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct text {
  char *buf;
  size_t len, cap;
  bool ok;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line ||
      !sv_buf_append(&t->buf, &t->len, &t->cap, line, (size_t)n))
    t->ok = false;
}

static void metric(text *t, const char *name, const char *type, const char *help, double v) {
  put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void histogram(text *t, const char *name, const char *help, const sv_hist *h) {
  put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t b = 0; b < SV_N_BUCKETS; b++) {
    cum += h->counts[b];
    put(t, "%s_bucket{le=\"%g\"} %llu\n", name, sv_hist_bounds_s[b], (unsigned long long)cum);
  }
  cum += h->counts[SV_N_BUCKETS];
  put(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name,
      (unsigned long long)cum, name, h->sum_s, name, (unsigned long long)h->count);
}

char *sv_metrics_text(sv_server *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t seq = s->snap_seq;
  s->snap_wanted = true;
  pthread_cond_broadcast(&s->router_cond);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 1;
  while (s->snap_seq == seq && pthread_cond_timedwait(&s->snap_cond, &s->mu, &ts) == 0) {
  }
  const brisk_engine_counters c = s->counters;
  const brisk_engine_metrics m = s->metrics;
  const sv_hist ttft = s->h_ttft, tpot = s->h_tpot, queue = s->h_queue, e2e = s->h_e2e;
  uint64_t http[6];
  for (int i = 0; i < 6; i++) http[i] = s->n_http[i];
  const int32_t open = s->n_engine_open;
  const uint64_t step_errors = s->n_step_errors;
  pthread_mutex_unlock(&s->mu);

  text t = {.ok = true};
  metric(&t, "brisk_requests_running", "gauge", "Requests generating (holding KV) now.",
         c.n_running);
  metric(&t, "brisk_requests_waiting", "gauge", "Requests waiting for admission now.", c.n_waiting);
  metric(&t, "brisk_requests_open", "gauge",
         "Engine requests submitted by the server and not finished (running, waiting, or in "
         "flight).",
         open);
  double kv_used = c.n_kv_blocks ? (double)(c.n_kv_blocks - c.n_free_kv_blocks) / c.n_kv_blocks : 0;
  metric(&t, "brisk_kv_cache_usage_ratio", "gauge",
         "Fraction of KV blocks held by requests (blocks only the prefix cache keeps count as "
         "free).",
         kv_used);
  metric(&t, "brisk_kv_cache_blocks", "gauge", "KV blocks in the pool.", c.n_kv_blocks);
  metric(&t, "brisk_prefix_cache_lookup_tokens_total", "counter",
         "Tokens of admitted requests looked up in the prefix cache.",
         (double)c.n_prefix_lookup_tokens);
  metric(&t, "brisk_prefix_cache_hit_tokens_total", "counter",
         "Of those, tokens reused instead of computed.", (double)c.n_prefix_hit_tokens);
  metric(&t, "brisk_prefix_cache_hit_ratio", "gauge",
         "Prefix-cache hit tokens over lookup tokens since start.",
         c.n_prefix_lookup_tokens ? (double)c.n_prefix_hit_tokens / (double)c.n_prefix_lookup_tokens
                                  : 0);
  metric(&t, "brisk_prefix_host_tier_bytes", "gauge",
         "Host memory of the prefix cache's host tier (block copies and index).",
         (double)m.host_tier_bytes);
  metric(&t, "brisk_prefix_host_tier_blocks", "gauge", "KV blocks the host tier holds.",
         (double)m.n_host_tier_blocks);
  metric(&t, "brisk_prefix_host_tier_hits_total", "counter",
         "Blocks copied back from the host tier instead of recomputed.",
         (double)m.n_host_tier_hits);
  metric(&t, "brisk_prefix_host_tier_misses_total", "counter",
         "Lookups of a block neither the KV pool nor the host tier held.",
         (double)m.n_host_tier_misses);
  metric(&t, "brisk_prefix_host_tier_evictions_total", "counter",
         "Blocks the host tier dropped to stay within its budget.",
         (double)m.n_host_tier_evictions);
  metric(&t, "brisk_requests_submitted_total", "counter", "Requests accepted by the engine.",
         (double)c.n_submitted);
  metric(&t, "brisk_requests_finished_total", "counter", "Requests finished (any reason).",
         (double)c.n_finished);
  metric(&t, "brisk_requests_cancelled_total", "counter",
         "Requests cancelled (client disconnects, shutdown).", (double)c.n_cancelled);
  metric(&t, "brisk_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.",
         (double)c.n_prompt_tokens);
  metric(&t, "brisk_generation_tokens_total", "counter", "Tokens generated.",
         (double)c.n_generated_tokens);
  metric(&t, "brisk_computed_tokens_total", "counter",
         "Tokens run through the model, recomputation included.", (double)c.n_computed_tokens);
  metric(&t, "brisk_preemptions_total", "counter", "Requests preempted for lack of KV.",
         (double)c.n_preemptions);
  metric(&t, "brisk_spec_drafted_tokens_total", "counter", "Speculative tokens drafted.",
         (double)c.n_spec_drafted);
  metric(&t, "brisk_spec_accepted_tokens_total", "counter", "Speculative tokens accepted.",
         (double)c.n_spec_accepted);
  metric(&t, "brisk_embeddings_total", "counter", "Embedding inputs that got their vector.",
         (double)m.n_embeddings);
  metric(&t, "brisk_embedding_tokens_total", "counter", "Tokens of those embedding inputs.",
         (double)m.n_embed_tokens);
  metric(&t, "brisk_engine_steps_total", "counter", "Engine steps that ran a batch.",
         (double)c.n_steps);
  metric(&t, "brisk_engine_step_errors_total", "counter", "Engine steps that failed (retried).",
         (double)step_errors);
  metric(&t, "brisk_output_tokens_per_second", "gauge",
         "Generated tokens per second of completed requests over the engine's metrics window.",
         m.output_tokens_per_s);
  put(&t, "# HELP brisk_http_responses_total HTTP answers by status.\n"
          "# TYPE brisk_http_responses_total counter\n");
  static const char *const cls[6] = {"2xx", "400", "401", "404", "429", "other"};
  for (int i = 0; i < 6; i++)
    put(&t, "brisk_http_responses_total{status=\"%s\"} %llu\n", cls[i],
        (unsigned long long)http[i]);
  histogram(&t, "brisk_time_to_first_token_seconds",
            "Submission to first token, per completed request.", &ttft);
  histogram(&t, "brisk_time_per_output_token_seconds",
            "Mean time per output token after the first, per completed request.", &tpot);
  histogram(&t, "brisk_queue_time_seconds", "Submission to first admission, per completed request.",
            &queue);
  histogram(&t, "brisk_e2e_request_latency_seconds", "Submission to finish, per completed request.",
            &e2e);
  if (!t.ok) {
    free(t.buf);
    return NULL;
  }
  return t.buf;
}
