/* Synthetic serving workloads for `brisk serve-bench`: Poisson arrivals,
 * prompt and output lengths from simple distributions, prompts of random
 * token ids of which a fraction is a prefix shared by every request (or by
 * the requests of one of several groups). The
 * same spec and seed give the same workload on every machine. */
#ifndef BRISK_TOOLS_WORKLOAD_H
#define BRISK_TOOLS_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

/* A length distribution: uniform on [lo, hi] (fixed when lo == hi). */
typedef struct wl_dist {
  int32_t lo, hi;
} wl_dist;

/* Parses "N" (fixed) or "A..B" (uniform, 1 <= A <= B); false otherwise. */
bool wl_dist_parse(const char *s, wl_dist *out);

typedef struct wl_spec {
  int32_t n_requests; /* >= 1 */
  double rate;        /* mean arrivals per second; 0 = all arrive at t = 0 */
  wl_dist prompt_len; /* tokens */
  wl_dist output_len; /* tokens generated (the request's max_tokens) */
  double prefix_frac; /* [0, 1]: leading share of each prompt that is common */
  /* Distinct shared prefixes (0 or 1: one); each request takes one of them
   * uniformly at random, so the prefixes together are this many times one. */
  int32_t prefix_groups;
  uint64_t seed;
  int32_t n_vocab; /* token ids are drawn from [0, n_vocab) */
} wl_spec;

typedef struct wl_request {
  uint64_t arrival_ns; /* since the start of the run */
  int32_t n_prompt;
  int32_t n_output;
  const int32_t *prompt; /* [n_prompt], into the workload's token storage */
} wl_request;

typedef struct wl_workload {
  int32_t n;
  wl_request *req;                /* [n], by arrival time */
  int32_t *tokens;                /* the prompts, back to back: [sum of n_prompt] */
  int32_t max_prompt, max_output; /* largest in this workload */
} wl_workload;

/* Builds the workload; false (and a message on stderr) for a bad spec or no
 * memory. The prefix shared by all prompts (of a group) is the first
 * prefix_frac x (prompt length) tokens of one common sequence (the
 * group's), so with a fixed prompt length every prompt shares exactly that
 * many leading tokens with the others of its group. */
bool wl_generate(const wl_spec *spec, wl_workload *out);
void wl_free(wl_workload *w);

#endif
