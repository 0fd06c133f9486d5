/* The two ways `brisk serve-bench` serves a workload in real time: through
 * the engine (continuous batching over the paged KV cache) or through the
 * static-batching baseline built here on the context API. */
#ifndef BRISK_TOOLS_SERVE_RUN_H
#define BRISK_TOOLS_SERVE_RUN_H

#include "brisk.h"
#include "serve_stats.h"
#include "workload.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum sb_kind { SB_CONTINUOUS = 0, SB_STATIC = 1 } sb_kind;

/* What every configuration of one invocation shares. */
typedef struct sb_common {
  const brisk_model *model;
  int32_t n_threads;          /* 0: one per processor */
  int32_t kv_tokens;          /* the KV memory budget, in tokens */
  int32_t max_batch_tokens;   /* tokens in one forward pass */
  int32_t block_size;         /* KV tokens per block */
  brisk_preempt_mode preempt; /* the engine's preemption mode */
  int32_t reserve_blocks;     /* engine growth reserve; -1: its default */
  brisk_kv_type kv_type;      /* KV cache type of every configuration */
  int32_t n_sinks, window;    /* every engine request's window (0: none) */
} sb_common;

typedef struct sb_config {
  char name[48];
  sb_kind kind;
  /* SB_CONTINUOUS: engine params (max_running, prefill_chunk); prefix_cache
   * -1 leaves the engine's default, else 0 / 1 (when the engine has it). */
  int32_t max_running, prefill_chunk, prefix_cache;
  uint64_t prefix_host_bytes; /* the prefix cache's host tier; 0: off */
  /* SB_STATIC: slots, each reserving slot_tokens of KV for its request;
   * pad: finished slots keep decoding until the batch's longest ends. */
  int32_t n_slots, slot_tokens;
  bool pad;
} sb_config;

typedef struct sb_result {
  sb_request *req;   /* [n], in the workload's order */
  double duration_s; /* start to the last token */
  uint64_t n_steps;  /* forward passes */
  uint64_t n_preemptions;
  uint64_t n_computed_tokens; /* tokens run through the model */
  double cpu_s;               /* CPU time of the process (all threads) in the run */
  uint64_t n_prefix_lookup_tokens, n_prefix_hit_tokens; /* engine prefix cache */
  /* Its host tier: blocks copied back, missed lookups, evictions in the run,
   * and the bytes it held at the end. */
  uint64_t n_host_hits, n_host_misses, n_host_evictions, host_bytes;
  double *itl; /* [n_itl] inter-token latencies: every gap between two
                  consecutive tokens of one request, in seconds */
  size_t n_itl;
} sb_result;

/* Collects inter-token gaps while a run polls tokens. */
typedef struct sb_itl {
  double *gap;    /* [cap]: sum over requests of (n_output - 1) */
  double *t_last; /* [n requests]: time of the request's last token, < 0 before it */
  size_t n, cap;
  int32_t n_req;
} sb_itl;

bool sb_itl_init(sb_itl *itl, const wl_workload *w); /* false: out of memory */
/* Request i got a token at time t (seconds, any origin). */
void sb_itl_token(sb_itl *itl, int32_t i, double t);
/* Moves the gaps into out (itl, n_itl) and frees the rest. */
void sb_itl_finish(sb_itl *itl, sb_result *out);
void sb_itl_free(sb_itl *itl);

/* Serves w (arrival times from now) with config c; false with a message on
 * stderr on failure. out->req is allocated here: sb_result_free. */
bool sb_run(const sb_common *common, const sb_config *c, const wl_workload *w, sb_result *out);
void sb_result_free(sb_result *r);

/* The two runners behind sb_run (serve_engine.c, serve_static.c). */
bool sb_run_engine(const sb_common *common, const sb_config *c, const wl_workload *w,
                   sb_result *out);
bool sb_run_static(const sb_common *common, const sb_config *c, const wl_workload *w,
                   sb_result *out);

/* Seconds since an arbitrary origin (the tool's own clock). */
double sb_now_s(void);
/* CPU seconds the process has used, all threads (user + system). On a
 * shared machine, tokens per CPU second move less with the load than
 * tokens per second. */
double sb_cpu_s(void);
/* Sleeps until sb_now_s() reaches t (returns at once if it has). */
void sb_sleep_until(double t);

#endif
