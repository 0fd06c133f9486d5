/* Latency and throughput summaries of one `brisk serve-bench` run, computed
 * exactly from every request's samples (the tool holds them all). */
#ifndef BRISK_TOOLS_SERVE_STATS_H
#define BRISK_TOOLS_SERVE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One request as the client saw it; times in seconds from its arrival. */
typedef struct sb_request {
  int32_t n_prompt, n_output; /* tokens in, tokens out */
  int32_t n_preemptions;      /* from brisk_engine_request_stats (0 for static) */
  double arrival_s;           /* since the start of the run */
  double ttft_s;              /* arrival to first token */
  double e2e_s;               /* arrival to last token */
  uint64_t out_hash;          /* sb_hash_token over the generated tokens, in order */
} sb_request;

/* FNV-1a over the token's 4 bytes (little-endian), from h (start: SB_HASH_INIT):
 * outputs of two configurations compare by one number. */
#define SB_HASH_INIT 0xcbf29ce484222325ull
uint64_t sb_hash_token(uint64_t h, int32_t token);

/* TPOT: time per output token after the first; undefined (false) for a
 * request with a single output token. */
bool sb_request_tpot(const sb_request *r, double *tpot_s);

/* Mean and nearest-rank percentiles (the smallest sample with at least p%
 * of the samples at or below it) of n samples; all zero when n is 0. */
typedef struct sb_dist {
  int32_t n;
  double mean, p50, p90, p99, max;
} sb_dist;

/* Sorts v (n values) in place and summarizes it. */
sb_dist sb_summarize(double *v, int32_t n);
double sb_percentile_sorted(const double *v, int32_t n, double p);

typedef struct sb_slo {
  double ttft_s, tpot_s; /* 0: no limit */
} sb_slo;

/* A request meets the SLO when its TTFT and (if defined) TPOT are within
 * the limits. */
bool sb_meets_slo(const sb_request *r, const sb_slo *slo);

typedef struct sb_summary {
  double duration_s; /* run start (first arrival at 0) to the last token */
  uint64_t prompt_tokens, output_tokens;
  double output_tps, total_tps, req_per_s, goodput_req_per_s;
  int32_t n_slo_ok;
  sb_dist ttft, tpot, e2e; /* seconds */
  sb_dist itl;             /* inter-token latency, over every gap of every request */
} sb_summary;

/* Summarizes n requests of a run that lasted duration_s (> 0). false when
 * out of memory. */
bool sb_summarize_run(const sb_request *r, int32_t n, double duration_s, const sb_slo *slo,
                      sb_summary *out);
/* Adds the ITL distribution of n_itl gaps (itl is sorted in place). */
void sb_summarize_itl(double *itl, size_t n_itl, sb_summary *s);

#endif
