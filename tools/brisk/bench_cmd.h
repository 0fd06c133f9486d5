/* The three modes of `brisk bench` (cmd_bench.c parses the arguments). Each
 * returns the exit code and prints one JSON object with json set. */
#ifndef BRISK_TOOLS_BENCH_CMD_H
#define BRISK_TOOLS_BENCH_CMD_H

#include <stdbool.h>

typedef struct bench_model_opts {
  const char *model;
  int p, n, threads, reps; /* threads 0: one per processor */
  bool json;
  bool no_repack; /* weights exactly as stored (brisk_model_params.repack = 0) */
  bool no_mmap;   /* read the file instead of mapping it (use_mmap = 0) */
  int kv_type;    /* a brisk_kv_type */
  int depth;      /* tg: tokens already in the cache before the timed decodes */
  int tp, pp;     /* tensor-parallel ranks and pipeline stages (0: none) */
} bench_model_opts;

/* brisk bench -m MODEL: pp / tg tokens/s and decode MBU. */
int bench_model_run(const bench_model_opts *o);

/* brisk bench --kernels: GEMV GB/s per weight type against the measured
 * bandwidth, GEMM GFLOP/s against the FMA peak, thread-pool dispatch cost;
 * at 1 thread and at `threads` (0: one per processor). `quick` shrinks the
 * shapes and times (for tests: the numbers then mean little). */
int bench_kernels_run(int threads, bool quick, bool json);

/* brisk bench --tokenize VOCAB FILE: MB/s of brisk_tokenize over the file,
 * in one call or (paragraphs) one call per paragraph. */
int bench_tokenize_run(const char *vocab, const char *file, int reps, bool paragraphs, bool json);

#endif
