/* brisk bench --speculative (bench_spec.c). */
#ifndef BRISK_TOOLS_BENCH_SPEC_H
#define BRISK_TOOLS_BENCH_SPEC_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_spec_opts {
  const char *model; /* the target; NULL: the default SmolLM2-135M-Instruct */
  const char *draft; /* a draft model; NULL: prompt lookup only */
  const char *ks;    /* draft lengths to try, "2,4,8" */
  const char *batch; /* batch sizes for the engine comparison, "1,4,16"; NULL: none */
  int n, threads, reps;
  int ngram_min, ngram_max; /* prompt lookup's n-gram sizes; 0: the library's defaults */
  bool adaptive;            /* adaptive draft length (k is then the largest) */
  bool json;
} bench_spec_opts;

/* Batch-1 greedy decode tokens/s with and without speculation, acceptance
 * rate and mean accepted length per draft length, on a copy-heavy chat
 * prompt and on a free-writing one. */
int bench_spec_run(const bench_spec_opts *o);

/* With --batch: B identical copy requests through the engine at once, with
 * and without prompt-lookup speculation for each k; decode-phase tokens/s
 * (bench_spec_batch.c). Prints a table, or a ", \"batch\": [...]" JSON
 * member. */
int bench_spec_batch_run(const bench_spec_opts *o, const brisk_model *m, int threads,
                         const int32_t *prompt, size_t n_prompt, const int *ks, int n_ks,
                         const int *batches, int n_batches);

#endif
