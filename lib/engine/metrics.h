/* Engine-wide serving metrics over a window: latency histograms of the
 * completed requests, throughput, goodput against an SLO, KV utilization,
 * and the bytes and FLOPs of the steps for MBU and MFU.
 *
 * The brisk_metrics_* functions are a plain accumulator (no engine, no
 * clock), so that tests can drive them with synthetic timings; the
 * brisk_engine_metrics_* hooks feed it from the engine. Everything is
 * owned by the stepping thread except t_first_submit, which submitters
 * write under the engine's mutex. */
#ifndef BRISK_ENGINE_METRICS_H
#define BRISK_ENGINE_METRICS_H

#include "brisk.h"
#include "engine/histogram.h"

#include <stdint.h>

typedef struct brisk_metrics {
  /* Configuration: 0 = no bound / unknown. */
  uint64_t slo_ttft_ns, slo_tpot_ns;
  double mem_bandwidth_gbs, peak_gflops;
  uint32_t kv_elem_bytes; /* set by the engine hook, for the attention cost */

  /* The window starts at the earliest of: the first submission since the
   * reset (t_first_submit, under the engine's mutex), and, for requests
   * submitted before the reset that finish after it, the reset time. */
  uint64_t t_first_submit; /* 0 = none */
  uint64_t t_reset;
  uint64_t t_start_finished; /* min over finished of max(t_submit, t_reset); 0 = none */
  uint64_t t_last_finish;    /* 0 = none */

  brisk_hist queue, ttft, tpot, e2e; /* completed requests, nanoseconds */
  uint64_t n_completed, n_aborted, n_good;
  uint64_t n_prompt_tokens, n_output_tokens; /* of the completed requests */

  uint64_t n_busy_steps, busy_ns;
  uint64_t preemptions_base;                    /* the engine's preemption count at the reset */
  uint64_t prefix_lookup_base, prefix_hit_base; /* its prefix counters then */
  uint64_t host_base[3]; /* the host tier's hits, misses and evictions then */
  double kv_util_sum;    /* over busy steps */
  double bytes, flops;
  /* Embedding requests (brisk_engine_submit_embed) that got their vector:
   * their count, tokens, and submission-to-vector latency. */
  uint64_t n_embeddings, n_embed_tokens;
  brisk_hist embed_e2e;
} brisk_metrics;

/* One finished request's timeline (brisk_now_ns stamps; t_admit and t_first
 * may be 0 for a request that never got that far). */
typedef struct brisk_metrics_request {
  uint64_t t_submit, t_admit, t_first, t_finish;
  int32_t n_prompt, n_generated;
  brisk_finish_reason reason;
} brisk_metrics_request;

/* Empties m and sets its configuration. */
void brisk_metrics_init(brisk_metrics *m, uint64_t slo_ttft_ns, uint64_t slo_tpot_ns,
                        double mem_bandwidth_gbs, double peak_gflops);
/* Empties the window (keeps the configuration); `now` starts the next one. */
void brisk_metrics_reset(brisk_metrics *m, uint64_t now);
/* A submission at time t (under the engine's mutex). */
void brisk_metrics_on_submit(brisk_metrics *m, uint64_t t);
/* A request finished. Only EOG and LENGTH count as completed (latencies,
 * throughput, goodput); other reasons count as aborted. */
void brisk_metrics_on_finish(brisk_metrics *m, const brisk_metrics_request *r);
/* An embedding request finished: LENGTH (its vector is ready) counts in
 * the embedding figures, other reasons as aborted. */
void brisk_metrics_on_embed(brisk_metrics *m, const brisk_metrics_request *r);
/* A step: its duration and cost, and the fraction of KV blocks in use
 * after it. A step that ran no batch (n_tokens 0) is not counted. */
void brisk_metrics_on_step(brisk_metrics *m, int32_t n_tokens, uint64_t duration_ns, double bytes,
                           double flops, double kv_util);
/* TPOT of a request: (finish - first token) / (generated - 1); 0 with
 * fewer than 2 tokens. */
uint64_t brisk_metrics_tpot_ns(const brisk_metrics_request *r);
/* The report at time `now`. `live`: some request is submitted and not yet
 * finished (the window then ends now, else at the last finish).
 * first_submit: m->t_first_submit read under the mutex. n_preemptions:
 * preemptions in the window. */
void brisk_metrics_report(const brisk_metrics *m, uint64_t first_submit, uint64_t now, int live,
                          double kv_util_now, uint64_t n_preemptions, brisk_engine_metrics *out);

/* Engine hooks (see metrics.c). */
struct brisk_engine;
struct brisk_engine_request;
brisk_status brisk_engine_metrics_setup(struct brisk_engine *e, const brisk_engine_params *p);
void brisk_engine_metrics_on_finish(struct brisk_engine *e,
                                    const struct brisk_engine_request *leader);
/* n_embed_tokens of si's tokens were embedding passes (no KV, no cost
 * model): only the others count in bytes, FLOPs and KV utilization. */
void brisk_engine_metrics_on_step(struct brisk_engine *e, const brisk_engine_step_info *si,
                                  int32_t n_sched, int32_t n_embed_tokens);

#endif
