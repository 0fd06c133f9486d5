/* Matmul benchmark: GEMV (m = 1, decode) and GEMM (m = 512, prefill) for
 * every weight type on 2048x2048 and 8192x2048 weights (n x k), AVX2 vs the
 * scalar path in the same run, against the machine's memory bandwidth.
 *
 *   bench_matmul [threads] [type-name-filter]
 *
 * Two tables. "One core" runs on the calling thread only and times with the
 * thread's CPU clock, so other processes on a shared machine barely move it:
 * it is the kernels' own speed. "All threads" times wall-clock on the pool,
 * what a caller gets on this machine right now.
 *
 * GEMV "hot" repeats one weight matrix (it may sit in the last-level cache).
 * GEMV "cold" rotates through copies totalling 256 MiB, so weights stream
 * from DRAM as in the decode of a real model; each cold call is paired with a
 * plain read of as many bytes from another large buffer, back to back on the
 * same threads (4 tasks per thread, 4 streams each, like the GEMV), and
 * "of read" is the median of the per-pair ratios. GEMV numbers are medians
 * over calls; GB/s counts weight bytes only. GEMM numbers are the fastest of
 * a few calls; the scalar GEMM is measured at m = 16 to keep the run short
 * (a rate, so comparable). */
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
#include <time.h>

#define COLD_BYTES ((size_t)256 << 20) /* well above a 16-32 MiB L3 */
#define READ_BYTES ((size_t)512 << 20)
#define MAX_SAMPLES 4096

static double now_s(void) { return (double)brisk_now_ns() * 1e-9; }

/* The calling thread's CPU time: excludes time other processes ran. */
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One core (NULL pool, CPU clock) or all threads (wall clock). */
static int one_core;
static double clock_s(void) { return one_core ? cpu_s() : now_s(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- plain reads: each task reads its share from 4 places at once (as the
 * GEMV reads 4 weight rows), with 256-bit loads where available. */
typedef struct read_ctx {
  const uint64_t *buf;
  size_t words;
  size_t n_tasks;
  uint64_t sink[64];
} read_ctx;

#if defined(__x86_64__) && defined(__GNUC__)
#  include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const size_t q = n / 4 / 4 * 4;
  const uint64_t *p0 = p, *p1 = p0 + q, *p2 = p1 + q, *p3 = p2 + q;
  for (size_t j = 0; j + 4 <= q; j += 4) {
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p0 + j)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p1 + j)));
    c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p2 + j)));
    d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p3 + j)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static void read_task(void *p, size_t i) {
  read_ctx *c = p;
  const size_t per = c->words / c->n_tasks;
  const uint64_t *s = c->buf + per * i;
#if defined(__x86_64__) && defined(__GNUC__)
  if (brisk_cpu()->avx2) {
    c->sink[i % 64] = read_avx2(s, per);
    return;
  }
#endif
  const size_t q = per / 4;
  uint64_t a = 0, b = 0, d = 0, e = 0;
  for (size_t j = 0; j < q; j++) {
    a ^= s[j];
    b ^= s[q + j];
    d ^= s[2 * q + j];
    e ^= s[3 * q + j];
  }
  c->sink[i % 64] = a ^ b ^ d ^ e;
}

static const uint64_t *read_buf;
static size_t read_pos;

/* Seconds to read `bytes` not read recently (rotating through read_buf). */
static double time_read(brisk_threadpool *pool, int threads, size_t bytes) {
  if (read_pos + bytes > READ_BYTES) read_pos = 0;
  /* Split like the GEMV: about 4 tasks per thread, taken dynamically. */
  read_ctx c = {.buf = read_buf + read_pos / 8, .words = bytes / 8, .n_tasks = 4 * (size_t)threads};
  read_pos += bytes;
  double t0 = clock_s();
  brisk_parallel_for(pool, c.n_tasks, read_task, &c);
  return clock_s() - t0;
}

/* ---- matmul calls */
typedef struct mm_case {
  brisk_threadpool *pool;
  int threads;
  uint32_t type;
  uint8_t **w; /* copies of the weight matrix */
  int n_copies;
  int64_t n, k, m;
  size_t wbytes;
  float *x, *y;
  void *ws;
  size_t ws_size;
  int call;
} mm_case;

static double time_call(mm_case *c) {
  const uint8_t *w = c->w[c->call++ % c->n_copies];
  double t0 = clock_s();
  brisk_status st =
      brisk_cpu_matmul(c->pool, c->type, w, c->n, c->k, c->x, c->m, c->y, c->ws, c->ws_size);
  double dt = clock_s() - t0;
  if (st != BRISK_OK) {
    fprintf(stderr, "matmul failed: %s\n", brisk_last_error());
    exit(1);
  }
  return dt;
}

/* Median GB/s of weight bytes over calls made in >= min_time seconds. With
 * `paired`, also the median read GB/s and the median GEMV/read ratio. */
static double gemv_gbs(mm_case *c, double min_time, int paired, double *read_gbs, double *ratio) {
  static double g[MAX_SAMPLES], r[MAX_SAMPLES], q[MAX_SAMPLES];
  int n = 0;
  time_call(c); /* warm up */
  double t_start = now_s();
  do {
    g[n] = (double)c->wbytes / time_call(c) / 1e9;
    if (paired) {
      r[n] = (double)c->wbytes / time_read(c->pool, c->threads, c->wbytes) / 1e9;
      q[n] = g[n] / r[n];
    }
    n++;
  } while (n < MAX_SAMPLES && (now_s() - t_start < min_time || n < 15));
  if (paired) {
    *read_gbs = median(r, n);
    *ratio = median(q, n);
  }
  return median(g, n);
}

/* GFLOP/s of the fastest of a few calls. */
static double gemm_gflops(mm_case *c, double min_time) {
  double best = 1e30, t_start = now_s();
  int n = 0;
  do {
    double dt = time_call(c);
    if (dt < best) best = dt;
    n++;
  } while (now_s() - t_start < min_time || n < 3);
  return 2.0 * (double)c->m * (double)c->n * (double)c->k / best / 1e9;
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
  printf("cpu: avx2 %d fma %d f16c %d; threads %d; matmul kernels: %s\n", f->avx2, f->fma, f->f16c,
         threads, brisk_cpu_matmul_uses_avx2() ? "avx2" : "scalar");
  print_load();

  uint64_t *rb = malloc(READ_BYTES);
  if (!rb) return 1;
  memset(rb, 1, READ_BYTES);
  read_buf = rb;
  for (one_core = 1; one_core >= 0; one_core--) {
    static double s[400];
    const size_t slice = (size_t)8 << 20;
    for (int i = 0; i < 400; i++)
      s[i] = (double)slice / time_read(one_core ? NULL : pool, one_core ? 1 : threads, slice) / 1e9;
    double med = median(s, 400);
    printf("memory read bandwidth, 8 MiB from DRAM, %s: median %.1f GB/s, best %.1f\n",
           one_core ? "one core (CPU clock)" : "all threads (wall clock)", med, s[399]);
  }

  static const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16,
                                   BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1,
                                   BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K,
                                   BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  static const int64_t shapes[][2] = {{2048, 2048}, {8192, 2048}}; /* n x k */
  static char lines[2][2 * 11][160];                               /* [mode][row] */
  int n_lines = 0;
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
      const int copies = (int)(COLD_BYTES / wbytes) + 1;
      uint8_t **w = malloc((size_t)copies * sizeof *w);
      for (int cpy = 0; cpy < copies; cpy++) {
        w[cpy] = malloc(wbytes);
        if (cpy > 0) {
          memcpy(w[cpy], w[0], wbytes);
          continue;
        }
        for (int64_t j = 0; j < n; j++) {
          for (int64_t l = 0; l < k; l++)
            row[l] = (float)((uint32_t)((j + 3) * (l + 1) * 2654435761u) % 1999) * 1e-3f - 1;
          brisk_quantize_row(type, row, w[0] + (size_t)j * row_bytes, k);
        }
      }
      const size_t ws_size = brisk_cpu_matmul_workspace_size(type, k, 512, threads);
      void *ws = ws_size ? brisk_aligned_alloc(64, ws_size) : NULL;
      for (one_core = 1; one_core >= 0; one_core--) {
        mm_case c = {.pool = one_core ? NULL : pool,
                     .threads = one_core ? 1 : threads,
                     .type = type,
                     .w = w,
                     .n_copies = 1,
                     .n = n,
                     .k = k,
                     .m = 1,
                     .wbytes = wbytes,
                     .x = x,
                     .y = y,
                     .ws = ws,
                     .ws_size = ws_size};
        double read_gbs = 0, ratio = 0;
        brisk_cpu_matmul_force_scalar(false);
        const double hot = gemv_gbs(&c, 0.3, 0, NULL, NULL);
        c.n_copies = copies;
        const double cold = gemv_gbs(&c, 0.6, 1, &read_gbs, &ratio);
        brisk_cpu_matmul_force_scalar(true);
        const double cold_s = gemv_gbs(&c, 0.3, 0, NULL, NULL);
        c.n_copies = 1;
        c.m = 512;
        brisk_cpu_matmul_force_scalar(false);
        const double gf = gemm_gflops(&c, 1.0);
        c.m = 16;
        brisk_cpu_matmul_force_scalar(true);
        const double gf_s = gemm_gflops(&c, 0.3);
        brisk_cpu_matmul_force_scalar(false);
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)n, (long long)k);
        snprintf(lines[one_core][n_lines], sizeof lines[0][0],
                 "%-5s %-10s %6.1f %6.1f %6.1f %6.0f%% %7.1f %6.1f | %7.1f %7.2f %6.1f",
                 brisk_dtype_name(type), shape, hot, cold, read_gbs, 100 * ratio, cold_s,
                 cold / cold_s, gf, gf_s, gf / gf_s);
        fprintf(stderr, "%s %s\n", one_core ? "[one core]" : "[all threads]",
                lines[one_core][n_lines]);
      }
      n_lines++;
      for (int cpy = 0; cpy < copies; cpy++) free(w[cpy]);
      free(w);
      brisk_aligned_free(ws);
    }
    free(row);
    free(x);
    free(y);
  }
  for (int mode = 1; mode >= 0; mode--) {
    printf("\n%s\n", mode ? "One core, CPU clock (the kernels' own speed):"
                          : "All threads, wall clock (on this machine now):");
    printf("GEMV m=1 (GB/s of weights)                                    | GEMM m=512 "
           "(GFLOP/s)\n");
    printf("%-5s %-10s %6s %6s %6s %7s %7s %6s | %7s %7s %6s\n", "type", "n x k", "hot", "cold",
           "read", "of read", "scalar", "x", "avx2", "scalar", "x");
    for (int i = 0; i < n_lines; i++) printf("%s\n", lines[mode][i]);
  }
  print_load();
  free(rb);
  brisk_threadpool_free(pool);
  return 0;
}
