/* brisk bench --speculative (bench_spec.c). */
#ifndef BRISK_TOOLS_BENCH_SPEC_H
#define BRISK_TOOLS_BENCH_SPEC_H

#include <stdbool.h>

typedef struct bench_spec_opts {
  const char *model; /* the target; NULL: the default SmolLM2-135M-Instruct */
  const char *draft; /* a draft model; NULL: prompt lookup only */
  const char *ks;    /* draft lengths to try, "2,4,8" */
  int n, threads, reps;
  int ngram_min, ngram_max; /* prompt lookup's n-gram sizes; 0: the library's defaults */
  bool adaptive;            /* adaptive draft length (k is then the largest) */
  bool json;
} bench_spec_opts;

/* Batch-1 greedy decode tokens/s with and without speculation, acceptance
 * rate and mean accepted length per draft length, on a copy-heavy chat
 * prompt and on a free-writing one. */
int bench_spec_run(const bench_spec_opts *o);

#endif
