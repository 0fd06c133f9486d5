/* Idle costs nothing: the CPU time a context uses while it sits idle.
 *
 *   bench_idle MODEL [threads] [seconds]
 *
 * Loads MODEL, makes a context with `threads` threads (default 2), decodes a
 * 32-token prompt and 8 single tokens (so every worker has run), then sleeps
 * `seconds` (default 10) and prints the process's user + system CPU time
 * over the sleep (getrusage), and the same over the decodes for scale. A
 * pool that spun between calls would show about `threads - 1` CPU seconds
 * per second here. */
#include "brisk.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec * 1e-6;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(const char *what, brisk_status st) {
  fprintf(stderr, "bench_idle: %s: %s (%s)\n", what, brisk_status_string(st), brisk_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_idle MODEL [threads] [seconds]\n");
    return 2;
  }
  const int threads = argc > 2 ? atoi(argv[2]) : 2;
  const double secs = argc > 3 ? atof(argv[3]) : 10;
  brisk_model *model = NULL;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  brisk_status st = brisk_model_load(argv[1], NULL, &model);
  if (st != BRISK_OK) return fail("load", st);
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = threads;
  cp.kv_tokens = 256;
  if ((st = brisk_context_create(model, &cp, &ctx)) != BRISK_OK) return fail("context", st);
  if ((st = brisk_batch_create(32, &batch)) != BRISK_OK) return fail("batch", st);
  const double c0 = cpu_s(), w0 = wall_s();
  for (int32_t i = 0; i < 32 && st == BRISK_OK; i++)
    st = brisk_batch_add(batch, 1 + i, i, 0, i == 31);
  if (st == BRISK_OK) st = brisk_decode(ctx, batch);
  for (int32_t i = 0; i < 8 && st == BRISK_OK; i++) {
    brisk_batch_clear(batch);
    if ((st = brisk_batch_add(batch, 100 + i, 32 + i, 0, 1)) == BRISK_OK)
      st = brisk_decode(ctx, batch);
  }
  if (st != BRISK_OK) return fail("decode", st);
  const double c1 = cpu_s(), w1 = wall_s();
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  const double c2 = cpu_s(), w2 = wall_s();
  printf("%s; context of %d threads\n", brisk_system_info(), threads);
  printf("decode (32-token prompt + 8 tokens): %.3f s wall, %.3f s CPU (%.0f%% of one core)\n",
         w1 - w0, c1 - c0, 100 * (c1 - c0) / (w1 - w0));
  printf("idle after it: %.1f s wall, %.4f s CPU (%.3f%% of one core)\n", w2 - w1, c2 - c1,
         100 * (c2 - c1) / (w2 - w1));
  brisk_batch_free(batch);
  brisk_context_free(ctx);
  brisk_model_free(model);
  return 0;
}
