/* brisk bench --kernels: the CPU matmul kernels against the machine's own
 * limits, all measured in this run on the same thread pools.
 *
 * GEMV (m = 1, decode): weights of 8192 x 4096, rotated through copies
 * totalling well over the last-level cache so that every call streams its
 * weights from DRAM, as in a real decode. Each call is paired with a plain
 * read of the same number of bytes from another large buffer, back to back on
 * the same threads; "of read" is the median of the per-pair ratios (both
 * halves of a pair see the same load from other processes). GB/s counts
 * weight bytes only.
 *
 * GEMM (m = 512, prefill): GFLOP/s (2 m n k per call) of the fastest of a few
 * calls, against the peak of a register-resident FMA loop.
 *
 * Dispatch: microseconds per brisk_parallel_for call of empty tasks, one per
 * thread. */
#include "bench_cmd.h"
#include "load_progress.h"
#include "bench_util.h"
#include "brisk.h"
#include "cli.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/pack.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "quant/quant.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define MAX_SAMPLES 2048
#define MAX_POOLS 2

static const uint32_t gemv_types[] = {
    BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0,
    BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K,
    BRISK_DTYPE_Q6_K,
    /* the layouts the model loader packs these into */
    BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8, BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8, BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8, BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8,
    BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8, BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8};
#define N_TYPES (sizeof gemv_types / sizeof gemv_types[0])

typedef struct sizes {
  int64_t gemv_n, gemv_k; /* weight rows x columns */
  size_t cold_bytes;      /* weight copies rotated through, in total */
  size_t read_bytes;      /* the paired-read buffer */
  int64_t gemm_m, gemm_n, gemm_k;
  double gemv_time, gemm_time; /* seconds per measurement, at least */
  int min_samples;
} sizes;

static const sizes full_sizes = {
    8192, 4096, (size_t)192 << 20, (size_t)256 << 20, 512, 2048, 2048, 0.4, 0.5, 15};
/* For tests: everything small, the numbers only show that it runs. */
static const sizes quick_sizes = {256, 512, (size_t)1 << 20, (size_t)2 << 20, 16,
                                  64,  256, 0.005,           0.005,           3};

typedef struct limits {
  int threads;
  bench_bandwidth bw;
  double fma_gflops;
  const char *fma_isa;
  double fma_thread_gflops; /* the best single loop's rate */
  double dispatch_us;       /* empty tasks */
  double join_us;           /* tasks that wait until all threads joined */
} limits;

typedef struct gemv_result {
  double gbs, paired_read_gbs, of_read;
} gemv_result;

typedef struct gemm_result {
  int64_t m, n, k;
  double gflops;
} gemm_result;

static void empty_task(void *p, size_t i) {
  (void)p;
  (void)i;
}

/* A task that returns only once every task of the call has started, so that
 * every thread must join the call (empty tasks may all be run by the caller
 * before a worker notices). Bounded: a descheduled worker cannot hang it. */
typedef struct rendezvous {
  atomic_int started;
  int n;
} rendezvous;

static void rendezvous_task(void *p, size_t i) {
  (void)i;
  rendezvous *r = p;
  atomic_fetch_add(&r->started, 1);
  const double t_end = bench_now_s() + 0.1;
  while (atomic_load(&r->started) < r->n && bench_now_s() < t_end) {
  }
}

/* Median microseconds per parallel_for call of `threads` tasks over
 * batches of calls; `join` selects the rendezvous tasks. */
static double dispatch_us(brisk_threadpool *pool, int threads, bool quick, bool join) {
  enum { BATCHES = 15 };
  const int calls = quick ? 100 : join ? 2000 : 5000;
  double us[BATCHES];
  rendezvous r = {.n = threads};
  brisk_task_fn fn = join ? rendezvous_task : empty_task;
  brisk_parallel_for(pool, (size_t)threads, fn, &r);
  for (int b = 0; b < BATCHES; b++) {
    double t0 = bench_now_s();
    for (int c = 0; c < calls; c++) {
      atomic_store(&r.started, 0);
      brisk_parallel_for(pool, (size_t)threads, fn, &r);
    }
    us[b] = (bench_now_s() - t0) / calls * 1e6;
  }
  return bench_summarize(us, BATCHES).median;
}

/* The weight copies of one type: 16 distinct quantized rows repeated (speed
 * does not depend on which values the rows hold, only on their layout). */
typedef struct weights {
  uint8_t **copy; /* [n_copies] -> [n][row_bytes] */
  int n_copies;
  size_t bytes; /* of one copy */
} weights;

static void weights_free(weights *w) {
  for (int i = 0; w->copy && i < w->n_copies; i++) brisk_aligned_free(w->copy[i]);
  brisk_free(w->copy);
  memset(w, 0, sizeof *w);
}

static bool weights_make(uint32_t type, int64_t n, int64_t k, size_t cold_bytes, weights *w) {
  memset(w, 0, sizeof *w);
  uint64_t row_bytes;
  if (!brisk_dtype_row_bytes(type, (uint64_t)k, &row_bytes)) return false;
  w->bytes = (size_t)row_bytes * (size_t)n;
  w->n_copies = (int)(cold_bytes / w->bytes) + 1;
  if (w->n_copies < 2) w->n_copies = 2;
  w->copy = brisk_calloc((size_t)w->n_copies, sizeof *w->copy);
  float *row = brisk_malloc((size_t)k * sizeof *row); /* [k] */
  if (!w->copy || !row) goto oom;
  uint64_t rng = 0x1234567ull + type;
  for (int c = 0; c < w->n_copies; c++) {
    if (!(w->copy[c] = brisk_aligned_alloc(64, w->bytes))) goto oom;
    if (c > 0) {
      memcpy(w->copy[c], w->copy[0], w->bytes);
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      uint8_t *dst = w->copy[0] + (size_t)j * row_bytes;
      if (j >= 16) {
        memcpy(dst, w->copy[0] + (size_t)(j % 16) * row_bytes, row_bytes);
        continue;
      }
      for (int64_t l = 0; l < k; l++)
        row[l] = (float)(bench_rand(&rng) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
      if (brisk_quantize_row(brisk_dtype_base(type), row, dst, k) != BRISK_OK) goto oom;
    }
    if (brisk_dtype_is_packed(type) && brisk_cpu_pack(type, w->copy[0], n, k) != BRISK_OK) goto oom;
  }
  brisk_free(row);
  return true;
oom:
  brisk_free(row);
  weights_free(w);
  return false;
}

typedef struct run_ctx {
  brisk_threadpool *pool;
  int threads;
  uint32_t type;
  int64_t n, k, m;
  const float *x; /* [m][k] */
  float *y;       /* [m][n] */
  void *ws;
  size_t ws_size;
} run_ctx;

static int matmul_once(const run_ctx *r, const void *w, double *secs) {
  double t0 = bench_now_s();
  brisk_status st =
      brisk_cpu_matmul(r->pool, r->type, w, r->n, r->k, r->x, r->m, r->y, r->ws, r->ws_size);
  *secs = bench_now_s() - t0;
  return st == BRISK_OK ? 0 : cli_fail("bench", "%s", brisk_last_error());
}

static int run_gemv(const run_ctx *r, const weights *w, const uint8_t *rbuf, const sizes *sz,
                    gemv_result *out) {
  static double g[MAX_SAMPLES], rd[MAX_SAMPLES], q[MAX_SAMPLES];
  double secs;
  if (matmul_once(r, w->copy[0], &secs)) return 1; /* warm-up */
  /* Read offsets step by the weight size, rounded to whole pages. */
  const size_t step = (w->bytes + 4095) / 4096 * 4096;
  size_t pos = 0;
  int n = 0;
  const double t_start = bench_now_s();
  do {
    if (matmul_once(r, w->copy[n % w->n_copies], &secs)) return 1;
    g[n] = (double)w->bytes / secs / 1e9;
    if (pos + step > sz->read_bytes) pos = 0;
    rd[n] = (double)w->bytes / bench_read_seconds(r->pool, r->threads, rbuf + pos, w->bytes) / 1e9;
    pos += step;
    q[n] = g[n] / rd[n];
    n++;
  } while (n < MAX_SAMPLES && (bench_now_s() - t_start < sz->gemv_time || n < sz->min_samples));
  out->gbs = bench_summarize(g, n).median;
  out->paired_read_gbs = bench_summarize(rd, n).median;
  out->of_read = bench_summarize(q, n).median;
  return 0;
}

static int run_gemm(const run_ctx *r, const void *w, const sizes *sz, double *gflops) {
  double best = 1e30, secs;
  int n = 0;
  const double t_start = bench_now_s();
  do {
    if (matmul_once(r, w, &secs)) return 1;
    if (secs < best) best = secs;
    n++;
  } while (bench_now_s() - t_start < sz->gemm_time || n < 3);
  *gflops = 2.0 * (double)r->m * (double)r->n * (double)r->k / best / 1e9;
  return 0;
}

/* Everything for one weight type at each thread count. */
static int bench_type(uint32_t type, brisk_threadpool **pools, const int *threads, int n_pools,
                      const uint8_t *rbuf, const float *x, float *y, const sizes *sz,
                      gemv_result *gv, double *gemm_gflops) {
  weights w;
  if (!weights_make(type, sz->gemv_n, sz->gemv_k, sz->cold_bytes, &w))
    return cli_fail("bench", "cannot build %s weights of %lld x %lld", brisk_dtype_name(type),
                    (long long)sz->gemv_n, (long long)sz->gemv_k);
  int rc = 0;
  const size_t ws_size =
      brisk_cpu_matmul_workspace_size(type, sz->gemv_k, sz->gemm_m, threads[n_pools - 1]);
  void *ws = ws_size ? brisk_aligned_alloc(64, ws_size) : NULL;
  if (ws_size && !ws) rc = cli_fail("bench", "no memory for the matmul workspace");
  for (int p = 0; p < n_pools && rc == 0; p++) {
    run_ctx r = {pools[p], threads[p], type, sz->gemv_n, sz->gemv_k, 1, x, y, ws, ws_size};
    rc = run_gemv(&r, &w, rbuf, sz, &gv[p]);
    /* GEMM on the first rows of the same weights: gemm_n <= gemv_n, same k. */
    r.m = sz->gemm_m;
    r.n = sz->gemm_n;
    if (rc == 0) rc = run_gemm(&r, w.copy[0], sz, &gemm_gflops[p]);
  }
  brisk_aligned_free(ws);
  weights_free(&w);
  return rc;
}

int bench_kernels_run(int max_threads, bool quick, bool json) {
  const sizes *sz = quick ? &quick_sizes : &full_sizes;
  if (max_threads < 0) return cli_fail("bench", "-t must be >= 0");
  if (max_threads == 0) max_threads = brisk_cpu_count();
  int threads[MAX_POOLS] = {1, max_threads}, n_pools = max_threads > 1 ? 2 : 1;
  brisk_threadpool *pools[MAX_POOLS] = {0};
  limits lim[MAX_POOLS] = {{0}};
  static gemv_result gv[N_TYPES][MAX_POOLS];
  static double gemm[N_TYPES][MAX_POOLS];
  char load_before[64], load_after[64];
  bench_load_avg(load_before, sizeof load_before);
  int rc = 0;
  uint8_t *rbuf = NULL;
  float *x = brisk_malloc((size_t)(sz->gemm_m * sz->gemv_k) * sizeof *x); /* [m][k] */
  float *y = brisk_malloc((size_t)(sz->gemm_m * sz->gemv_n) * sizeof *y); /* [m][n] */
  if (!x || !y || !(rbuf = bench_buffer(sz->read_bytes))) {
    rc = cli_fail("bench", "out of memory");
    goto done;
  }
  uint64_t rng = 42;
  for (int64_t i = 0; i < sz->gemm_m * sz->gemv_k; i++)
    x[i] = (float)(bench_rand(&rng) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
  for (int p = 0; p < n_pools; p++) {
    if (brisk_threadpool_create(threads[p], &pools[p]) != BRISK_OK) {
      rc = cli_fail("bench", "%s", brisk_last_error());
      goto done;
    }
    lim[p].threads = threads[p];
    if (!bench_measure_bandwidth(pools[p], threads[p], sz->read_bytes, quick ? 2 : 10,
                                 &lim[p].bw)) {
      rc = cli_fail("bench", "out of memory");
      goto done;
    }
    lim[p].fma_gflops =
        bench_fma_peak(pools[p], threads[p], &lim[p].fma_isa, &lim[p].fma_thread_gflops);
    lim[p].dispatch_us = dispatch_us(pools[p], threads[p], quick, false);
    lim[p].join_us = dispatch_us(pools[p], threads[p], quick, true);
  }
  if (!json) {
    const brisk_cpu_features *f = brisk_cpu();
    printf("cpu: avx2 %d fma %d f16c %d avxvnni %d avx512f %d bw %d vl %d vnni %d bf16 %d; "
           "matmul kernels %s (BRISK_CPU_ISA caps them); load average before %s\n",
           f->avx2, f->fma, f->f16c, f->avxvnni, f->avx512f, f->avx512bw, f->avx512vl,
           f->avx512vnni, f->avx512bf16, brisk_isa_name(brisk_cpu_matmul_isa()), load_before);
    printf("\n%-7s %9s %7s %9s %11s %11s %11s %9s\n", "threads", "read GB/s", "(best)", "copy GB/s",
           "FMA GFLOP/s", "(1 thread)", "dispatch us", "join us");
    for (int p = 0; p < n_pools; p++)
      printf("%-7d %9.1f %7.1f %9.1f %11.1f %11.1f %11.3f %9.3f\n", threads[p],
             lim[p].bw.read_gbs.median, lim[p].bw.read_gbs.max, lim[p].bw.copy_gbs.median,
             lim[p].fma_gflops, lim[p].fma_thread_gflops, lim[p].dispatch_us, lim[p].join_us);
    printf("(read/copy: medians over %zu MiB buffers; FMA: %s, all threads, best of 5; "
           "dispatch: per brisk_parallel_for of one empty task per thread; join: of tasks that "
           "wait for all threads)\n",
           sz->read_bytes >> 20, lim[0].fma_isa);
    printf("\nGEMV %lldx%lld (GB/s of weights; of read = vs a paired plain read) | GEMM "
           "m=%lld %lldx%lld (GFLOP/s; of peak = vs FMA peak)\n",
           (long long)sz->gemv_n, (long long)sz->gemv_k, (long long)sz->gemm_m,
           (long long)sz->gemm_n, (long long)sz->gemv_k);
    printf("%-7s %3s %8s %8s %8s | %8s %8s\n", "type", "t", "GB/s", "read", "of read", "GFLOP/s",
           "of peak");
    fflush(stdout);
  }
  /* With --json nothing is printed until the end: a bar on stderr says how
   * far the run is (on a terminal). */
  cli_bar bar = {.label = "kernels"};
  const bool show_bar = json && isatty(STDERR_FILENO);
  for (size_t t = 0; t < N_TYPES; t++) {
    if (show_bar) cli_bar_draw(&bar, (double)t / N_TYPES, brisk_dtype_name(gemv_types[t]));
    rc = bench_type(gemv_types[t], pools, threads, n_pools, rbuf, x, y, sz, gv[t], gemm[t]);
    if (rc) goto done;
    for (int p = 0; p < n_pools && !json; p++)
      printf("%-7s %3d %8.1f %8.1f %7.0f%% | %8.1f %7.0f%%\n", brisk_dtype_name(gemv_types[t]),
             threads[p], gv[t][p].gbs, gv[t][p].paired_read_gbs, 100 * gv[t][p].of_read, gemm[t][p],
             100 * gemm[t][p] / lim[p].fma_gflops);
    fflush(stdout);
  }
  if (show_bar) cli_bar_clear(&bar);
  bench_load_avg(load_after, sizeof load_after);
  if (!json) {
    printf("load average after %s\n", load_after);
    goto done;
  }
  printf("{\"quick\": %s, \"load_avg_before\": \"%s\", \"load_avg_after\": \"%s\", "
         "\"matmul_kernels\": \"%s\", \"limits\": [",
         quick ? "true" : "false", load_before, load_after, brisk_isa_name(brisk_cpu_matmul_isa()));
  for (int p = 0; p < n_pools; p++)
    printf("%s{\"threads\": %d, \"read_gbs\": %.3f, \"read_gbs_max\": %.3f, \"copy_gbs\": %.3f, "
           "\"fma_peak_gflops\": %.2f, \"fma_thread_gflops\": %.2f, \"dispatch_us\": %.4f, "
           "\"join_us\": %.4f}",
           p ? ", " : "", threads[p], lim[p].bw.read_gbs.median, lim[p].bw.read_gbs.max,
           lim[p].bw.copy_gbs.median, lim[p].fma_gflops, lim[p].fma_thread_gflops,
           lim[p].dispatch_us, lim[p].join_us);
  printf("], \"gemv\": [");
  for (size_t t = 0; t < N_TYPES; t++)
    for (int p = 0; p < n_pools; p++)
      printf("%s{\"type\": \"%s\", \"n\": %lld, \"k\": %lld, \"threads\": %d, \"gbs\": %.3f, "
             "\"paired_read_gbs\": %.3f, \"of_read\": %.4f, \"of_stream_read\": %.4f}",
             t || p ? ", " : "", brisk_dtype_name(gemv_types[t]), (long long)sz->gemv_n,
             (long long)sz->gemv_k, threads[p], gv[t][p].gbs, gv[t][p].paired_read_gbs,
             gv[t][p].of_read, gv[t][p].gbs / lim[p].bw.read_gbs.median);
  printf("], \"gemm\": [");
  for (size_t t = 0; t < N_TYPES; t++)
    for (int p = 0; p < n_pools; p++)
      printf("%s{\"type\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"threads\": %d, "
             "\"gflops\": %.3f, \"of_fma_peak\": %.4f}",
             t || p ? ", " : "", brisk_dtype_name(gemv_types[t]), (long long)sz->gemm_m,
             (long long)sz->gemm_n, (long long)sz->gemv_k, threads[p], gemm[t][p],
             gemm[t][p] / lim[p].fma_gflops);
  printf("]}\n");
done:
  for (int p = 0; p < n_pools; p++) brisk_threadpool_free(pools[p]);
  bench_buffer_free(rbuf);
  brisk_free(x);
  brisk_free(y);
  return rc;
}
