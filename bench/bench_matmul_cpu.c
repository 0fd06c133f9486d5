/* One matmul shape, timed with the calling thread's CPU clock: for A/B runs
 * of two builds on a shared machine (bench/ab_matmul.sh alternates them).
 *
 *   bench_matmul_cpu TYPE N K M [REPS]
 *
 * Runs brisk_cpu_matmul on this thread (no pool) REPS times after one
 * warm-up and prints the median and fastest time, GFLOP/s of the median,
 * and a checksum of y (the same inputs every run: a fixed-seed generator). */
#include "backend/cpu/matmul/matmul.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rng_uniform(void) { /* [-0.5, 0.5) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)(rng_state >> 40) / (float)(1 << 24) - 0.5f;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s TYPE N K M [REPS]\n", argv[0]);
    return 2;
  }
  uint32_t type = BRISK_DTYPE_COUNT;
  for (uint32_t t = 0; t < BRISK_DTYPE_COUNT; t++)
    if (brisk_dtype_get(t) && strcmp(brisk_dtype_name(t), argv[1]) == 0) type = t;
  const int64_t n = atoll(argv[2]), k = atoll(argv[3]), m = atoll(argv[4]);
  const int reps = argc > 5 ? atoi(argv[5]) : 11;
  uint64_t row_bytes;
  if (type == BRISK_DTYPE_COUNT || n < 1 || k < 1 || m < 1 || reps < 1 ||
      !brisk_dtype_row_bytes(type, (uint64_t)k, &row_bytes)) {
    fprintf(stderr, "bad type or sizes\n");
    return 2;
  }
  uint8_t *w = malloc((size_t)row_bytes * (size_t)n);
  float *row = malloc((size_t)k * sizeof(float));
  float *x = malloc((size_t)(m * k) * sizeof(float));
  float *y = malloc((size_t)(m * n) * sizeof(float));
  double *t = malloc((size_t)reps * sizeof(double));
  const size_t ws_size = brisk_cpu_matmul_workspace_size(type, k, m, 1);
  void *ws = brisk_aligned_alloc(64, ws_size ? ws_size : 64);
  if (!w || !row || !x || !y || !t || !ws) return 1;
  for (int64_t j = 0; j < n; j++) {
    for (int64_t l = 0; l < k; l++) row[l] = rng_uniform();
    brisk_quantize_row(type, row, w + (size_t)j * row_bytes, k);
  }
  for (int64_t i = 0; i < m * k; i++) x[i] = rng_uniform();
  for (int r = -1; r < reps; r++) {
    const double t0 = cpu_s();
    if (brisk_cpu_matmul(NULL, type, w, n, k, x, m, y, ws, ws_size) != BRISK_OK) return 1;
    if (r >= 0) t[r] = cpu_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  double sum = 0;
  for (int64_t i = 0; i < m * n; i++) sum += y[i];
  printf("%s n=%lld k=%lld m=%lld: median %.4f ms min %.4f ms %.1f GFLOP/s checksum %.6g\n",
         argv[1], (long long)n, (long long)k, (long long)m, t[reps / 2] * 1e3, t[0] * 1e3,
         2.0 * (double)n * (double)k * (double)m / t[reps / 2] / 1e9, sum);
  brisk_aligned_free(ws);
  free(w);
  free(row);
  free(x);
  free(y);
  free(t);
  return 0;
}
