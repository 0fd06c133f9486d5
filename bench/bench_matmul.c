/* Matmul benchmark: GEMV (m = 1, decode) and GEMM (m = 512, prefill) for
 * every weight type on 2048x2048 and 8192x2048 weights, AVX2 vs the scalar
 * path in the same run, against the machine's measured memory bandwidth.
 *
 *   bench_matmul [threads] [type-name-filter]
 *
 * GEMV "hot" repeats one weight matrix (it may sit in the last-level cache);
 * GEMV "cold" rotates through copies totalling >= 4x the L3-sized working set
 * so weights stream from DRAM, which is the decode situation of a real model.
 * GB/s counts weight bytes only. The scalar GEMM rate is measured at m = 16 to
 * keep the run short (a rate, so comparable). */
#include "backend/cpu/matmul/matmul.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLD_BYTES ((size_t)256 << 20) /* well above a 16-32 MiB L3 */

static double now_s(void) { return (double)brisk_now_ns() * 1e-9; }

/* ---- memory bandwidth: every thread reads its slice of a large buffer. */
typedef struct bw_ctx {
  const uint64_t *buf;
  size_t words;
  size_t n_tasks;
  uint64_t sink[64];
} bw_ctx;

#if defined(__x86_64__) && defined(__GNUC__)
#  include <immintrin.h>
/* Reads [lo, hi) words with 256-bit loads (the matmul's own access width). */
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t lo, size_t hi) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t j = lo; j + 16 <= hi; j += 16) {
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + j)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + j + 4)));
    c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + j + 8)));
    d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + j + 12)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static void bw_task(void *p, size_t i) {
  bw_ctx *c = p;
  size_t lo = c->words / c->n_tasks * i, hi = c->words / c->n_tasks * (i + 1);
#if defined(__x86_64__) && defined(__GNUC__)
  if (brisk_cpu()->avx2) {
    c->sink[i % 64] = read_avx2(c->buf, lo, hi);
    return;
  }
#endif
  uint64_t a = 0, b = 0, d = 0, e = 0;
  for (size_t j = lo; j + 4 <= hi; j += 4) {
    a ^= c->buf[j];
    b ^= c->buf[j + 1];
    d ^= c->buf[j + 2];
    e ^= c->buf[j + 3];
  }
  c->sink[i % 64] = a ^ b ^ d ^ e;
}

/* Best throughput over many reads of 8 MiB slices taken in turn from a
 * buffer far larger than any cache (so every slice comes from DRAM): slices
 * as short as a GEMV call, measured the same way (fastest call). */
static double read_slices(brisk_threadpool *pool, const uint64_t *buf, size_t bytes,
                          size_t n_tasks) {
  const size_t slice = (size_t)8 << 20;
  double best = 0;
  for (int rep = 0; rep < 200; rep++) {
    bw_ctx c = {.buf = buf + (size_t)rep % (bytes / slice) * (slice / 8),
                .words = slice / 8,
                .n_tasks = n_tasks};
    double t0 = now_s();
    brisk_parallel_for(pool, c.n_tasks, bw_task, &c);
    double gbs = (double)slice / (now_s() - t0) / 1e9;
    if (gbs > best) best = gbs;
  }
  return best;
}

static double measure_bandwidth(brisk_threadpool *pool, int threads) {
  const size_t bytes = (size_t)512 << 20;
  uint64_t *buf = malloc(bytes);
  if (!buf) return 0;
  memset(buf, 1, bytes);
  const double one = read_slices(NULL, buf, bytes, 1);
  const double best = read_slices(pool, buf, bytes, (size_t)threads);
  /* memcpy as a second opinion (read + write counted as 2x bytes) */
  uint64_t *dst = malloc(bytes / 2);
  double best_cpy = 0;
  if (dst) {
    for (int rep = 0; rep < 3; rep++) {
      double t0 = now_s();
      memcpy(dst, buf, bytes / 2);
      double gbs = (double)bytes / (now_s() - t0) / 1e9;
      if (gbs > best_cpy) best_cpy = gbs;
    }
    free(dst);
  }
  printf("memory bandwidth: read %.1f GB/s with %d threads (%.1f GB/s with 1); memcpy %.1f GB/s "
         "(1 thread, read + write)\n",
         best, threads, one, best_cpy);
  free(buf);
  return best;
}

/* ---- timing helpers */
typedef struct mm_case {
  brisk_threadpool *pool;
  uint32_t type;
  uint8_t **w; /* copies of the weight matrix */
  int n_copies;
  int64_t n, k, m;
  float *x, *y;
  void *ws;
  size_t ws_size;
} mm_case;

/* Seconds of the fastest call among those made in at least `min_time`
 * seconds (and at least 3): the fastest is the least disturbed by other
 * processes on a shared machine. */
static double time_calls(mm_case *c, double min_time) {
  if (brisk_cpu_matmul(c->pool, c->type, c->w[0], c->n, c->k, c->x, c->m, c->y, c->ws,
                       c->ws_size) != BRISK_OK) {
    fprintf(stderr, "matmul failed: %s\n", brisk_last_error());
    exit(1);
  }
  int calls = 0;
  double t_start = now_s(), best = 1e30;
  do {
    double t0 = now_s();
    brisk_cpu_matmul(c->pool, c->type, c->w[calls % c->n_copies], c->n, c->k, c->x, c->m, c->y,
                     c->ws, c->ws_size);
    double dt = now_s() - t0;
    if (dt < best) best = dt;
    calls++;
  } while (now_s() - t_start < min_time || calls < 3);
  return best;
}

static void print_load(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  char buf[128] = "";
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
  }
  printf("load average (other processes share the cores): %s", buf[0] ? buf : "unknown\n");
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 0;
  if (threads <= 0) threads = brisk_cpu_count();
  const char *filter = argc > 2 ? argv[2] : NULL;
  brisk_threadpool *pool = NULL;
  if (brisk_threadpool_create(threads, &pool) != BRISK_OK) return 1;
  const brisk_cpu_features *f = brisk_cpu();
  printf("cpu: avx2 %d fma %d f16c %d; threads %d\n", f->avx2, f->fma, f->f16c, threads);
  print_load();
  const double bw = measure_bandwidth(pool, threads);

  static const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16,
                                   BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1,
                                   BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K,
                                   BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  static const int64_t shapes[][2] = {{2048, 2048}, {8192, 2048}}; /* n x k */
  printf("\n%-5s %-10s %8s %8s %8s %6s %6s | %8s %8s %6s\n", "type", "n x k", "hot GB/s",
         "coldGB/s", "of mem", "scalar", "x", "GEMM GF/s", "scalar", "x");
  for (size_t s = 0; s < 2; s++) {
    const int64_t n = shapes[s][0], k = shapes[s][1];
    float *row = malloc((size_t)k * sizeof(float));
    float *x = malloc((size_t)(512 * k) * sizeof(float));
    float *y = malloc((size_t)(512 * n) * sizeof(float));
    for (int64_t i = 0; i < 512 * k; i++) x[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      const uint32_t type = types[t];
      if (filter && !strstr(brisk_dtype_name(type), filter)) continue;
      uint64_t row_bytes;
      brisk_dtype_row_bytes(type, (uint64_t)k, &row_bytes);
      const size_t wbytes = (size_t)row_bytes * (size_t)n;
      int copies = (int)(COLD_BYTES / wbytes) + 1;
      uint8_t **w = malloc((size_t)copies * sizeof *w);
      for (int cpy = 0; cpy < copies; cpy++) {
        w[cpy] = malloc(wbytes);
        for (int64_t j = 0; j < n; j++) {
          for (int64_t l = 0; l < k; l++)
            row[l] = (float)(((j + 3) * (l + 1) * 2654435761u) % 1999) * 1e-3f - 1;
          if (cpy == 0) brisk_quantize_row(type, row, w[0] + (size_t)j * row_bytes, k);
        }
        if (cpy > 0) memcpy(w[cpy], w[0], wbytes);
      }
      const size_t ws_size = brisk_cpu_matmul_workspace_size(type, k, 512, threads);
      void *ws = ws_size ? brisk_aligned_alloc(64, ws_size) : NULL;
      mm_case c = {.pool = pool,
                   .type = type,
                   .w = w,
                   .n_copies = 1,
                   .n = n,
                   .k = k,
                   .m = 1,
                   .x = x,
                   .y = y,
                   .ws = ws,
                   .ws_size = ws_size};

      brisk_cpu_matmul_force_scalar(false);
      const double hot = (double)wbytes / time_calls(&c, 0.3) / 1e9;
      c.n_copies = copies;
      const double cold = (double)wbytes / time_calls(&c, 0.5) / 1e9;
      brisk_cpu_matmul_force_scalar(true);
      const double cold_s = (double)wbytes / time_calls(&c, 0.3) / 1e9;
      c.n_copies = 1;

      c.m = 512;
      brisk_cpu_matmul_force_scalar(false);
      const double gf = 2.0 * 512 * (double)n * (double)k / time_calls(&c, 1.0) / 1e9;
      c.m = 16;
      brisk_cpu_matmul_force_scalar(true);
      const double gf_s = 2.0 * 16 * (double)n * (double)k / time_calls(&c, 0.5) / 1e9;
      brisk_cpu_matmul_force_scalar(false);

      char shape[32];
      snprintf(shape, sizeof shape, "%lldx%lld", (long long)n, (long long)k);
      printf("%-5s %-10s %8.1f %8.1f %7.0f%% %6.1f %6.1f | %8.1f %8.2f %6.1f\n",
             brisk_dtype_name(type), shape, hot, cold, 100 * cold / bw, cold_s, cold / cold_s, gf,
             gf_s, gf / gf_s);
      fflush(stdout);
      for (int cpy = 0; cpy < copies; cpy++) free(w[cpy]);
      free(w);
      brisk_aligned_free(ws);
    }
    free(row);
    free(x);
    free(y);
  }
  print_load();
  brisk_threadpool_free(pool);
  return 0;
}
