/* Kernel levels side by side: the matmul at BRISK_ISA_AVX2 against
 * BRISK_ISA_AVX512 (core/cpu.h) on the same weights, in one run, call after
 * call, so both see the same load from other processes.
 *
 *   bench_isa [threads] [type-name-filter] [avx512|avxvnni]
 *
 * The last argument picks the level set against AVX2 (default avx512).
 *
 * threads = 1 runs on the calling thread and times with its CPU clock (the
 * kernels' own speed, little moved by other processes); more threads run on
 * a pool, timed by the wall clock (what a caller gets now).
 *
 * GEMV (m = 1, decode): n x k = 8192 x 4096 weights rotated through copies
 * totalling 256 MiB, so each call streams its weights from DRAM. Each sample
 * is a triple, back to back on the same pool: the AVX2 call, the AVX-512
 * call, and a plain read of as many bytes from another buffer. "x" is the
 * median of the per-triple speed ratios AVX-512 / AVX2; "of read" the
 * median of GEMV speed / read speed. GB/s counts weight bytes.
 *
 * GEMM (m = 512, prefill, 2048 x 2048 weights): GFLOP/s (2 m n k) of the
 * fastest of the alternating calls of each level, and the median ratio of
 * the pairs.
 *
 * Types without AVX-512 kernels run their AVX2 ones at both levels (the
 * ratios then show the noise). Without AVX-512 the run says so and stops. */
#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/pack.h"
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

#define COLD_BYTES ((size_t)256 << 20)
#define READ_BYTES ((size_t)512 << 20)
#define MAX_SAMPLES 2048

static double now_s(void) { return (double)brisk_now_ns() * 1e-9; }

/* threads == 1: the calling thread alone, timed by its CPU clock, which other
 * processes on a shared machine barely move (the kernels' own speed). */
static int one_core;
static double clock_s(void) {
  if (!one_core) return now_s();
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_load(const char *when) {
  FILE *f = fopen("/proc/loadavg", "r");
  char buf[128] = "";
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
  }
  printf("load average %s: %s", when, buf[0] ? buf : "unknown\n");
}

/* ---- plain reads, split like the GEMV (4 tasks per thread, 4 streams) */
typedef struct read_ctx {
  const uint64_t *buf;
  size_t words, n_tasks;
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
  uint64_t v = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  v = read_avx2(s, per);
#else
  for (size_t j = 0; j < per; j++) v ^= s[j];
#endif
  c->sink[i % 64] = v;
}

static const uint64_t *read_buf;
static size_t read_pos;

static double time_read(brisk_threadpool *pool, int threads, size_t bytes) {
  if (read_pos + bytes > READ_BYTES) read_pos = 0;
  read_ctx c = {.buf = read_buf + read_pos / 8, .words = bytes / 8, .n_tasks = 4 * (size_t)threads};
  read_pos += bytes;
  const double t0 = clock_s();
  brisk_parallel_for(pool, c.n_tasks, read_task, &c);
  return clock_s() - t0;
}

typedef struct mm_case {
  brisk_threadpool *pool;
  uint32_t type;
  uint8_t **w;
  int n_copies, call;
  int64_t n, k, m;
  float *x, *y;
  void *ws;
  size_t ws_size;
} mm_case;

static double time_call(mm_case *c, brisk_isa_level level) {
  brisk_cpu_matmul_set_isa(level);
  const uint8_t *w = c->w[c->call++ % c->n_copies];
  const double t0 = clock_s();
  const brisk_status st =
      brisk_cpu_matmul(c->pool, c->type, w, c->n, c->k, c->x, c->m, c->y, c->ws, c->ws_size);
  const double dt = clock_s() - t0;
  if (st != BRISK_OK) {
    fprintf(stderr, "matmul failed: %s\n", brisk_last_error());
    exit(1);
  }
  return dt;
}

/* One weight matrix of `type` (packed ids packed), in `copies` copies. */
static uint8_t **make_weights(uint32_t type, int64_t n, int64_t k, int copies, size_t *bytes) {
  const uint32_t base = brisk_dtype_base(type);
  uint64_t rb;
  brisk_dtype_row_bytes(type, (uint64_t)k, &rb);
  *bytes = (size_t)rb * (size_t)n;
  uint8_t **w = malloc((size_t)copies * sizeof *w);
  float *row = malloc((size_t)k * sizeof(float));
  if (!w || !row) exit(1);
  for (int c = 0; c < copies; c++) {
    w[c] = brisk_aligned_alloc(64, *bytes);
    if (!w[c]) exit(1);
    if (c > 0) {
      memcpy(w[c], w[0], *bytes);
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      for (int64_t l = 0; l < k; l++)
        row[l] = (float)((uint32_t)((j + 3) * (l + 1) * 2654435761u) % 1999) * 1e-3f - 1;
      brisk_quantize_row(base, row, w[0] + (size_t)j * rb, k);
    }
    if (base != type && brisk_cpu_pack(type, w[0], n, k) != BRISK_OK) exit(1);
  }
  free(row);
  return w;
}

static void free_weights(uint8_t **w, int copies) {
  for (int c = 0; c < copies; c++) brisk_aligned_free(w[c]);
  free(w);
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 0;
  if (threads <= 0) threads = brisk_cpu_count();
  const char *filter = argc > 2 ? argv[2] : NULL;
  const brisk_cpu_features *f = brisk_cpu();
  printf("cpu: avx2 %d fma %d f16c %d avxvnni %d avx512f %d bw %d vl %d vnni %d bf16 %d; "
         "level %s; threads %d\n",
         f->avx2, f->fma, f->f16c, f->avxvnni, f->avx512f, f->avx512bw, f->avx512vl, f->avx512vnni,
         f->avx512bf16, brisk_isa_name(brisk_cpu_isa_level()), threads);
  const char *hi_name = argc > 3 ? argv[3] : "avx512";
  const brisk_isa_level hi = brisk_isa_capped(BRISK_ISA_AVX512, hi_name);
  if (hi <= BRISK_ISA_AVX2 || strcmp(brisk_isa_name(hi), hi_name) != 0) {
    fprintf(stderr, "bench_isa: the level to compare is avx512 or avxvnni, not %s\n", hi_name);
    return 2;
  }
  if (brisk_cpu_isa_level() < hi || (hi == BRISK_ISA_AVXVNNI && !f->avxvnni)) {
    printf("no %s kernels here (or BRISK_CPU_ISA caps them): nothing to compare\n", hi_name);
    return 0;
  }
  print_load("before");
  brisk_threadpool *pool = NULL;
  one_core = threads == 1;
  if (!one_core && brisk_threadpool_create(threads, &pool) != BRISK_OK) return 1;
  uint64_t *rb = brisk_aligned_alloc(64, READ_BYTES);
  if (!rb) return 1;
  memset(rb, 1, READ_BYTES);
  read_buf = rb;

  static const uint32_t types[] = {BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8,
                                   BRISK_DTYPE_F16,
                                   BRISK_DTYPE_BF16,
                                   BRISK_DTYPE_F32};
  const int64_t gn = 8192, gk = 4096, mn = 2048, mk = 2048, mm = 512;
  float *x = malloc((size_t)(mm * gk) * sizeof(float));
  float *y = malloc((size_t)(mm * gn) * sizeof(float));
  if (!x || !y) return 1;
  for (int64_t i = 0; i < mm * gk; i++) x[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
  printf("\n%-8s | GEMV %lldx%lld cold: GB/s avx2 %7s     x  of read | "
         "GEMM m=%lld %lldx%lld: GFLOP/s avx2 %7s     x\n",
         "type", (long long)gn, (long long)gk, hi_name, (long long)mm, (long long)mn, (long long)mk,
         hi_name);
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    const uint32_t type = types[t];
    if (filter && !strstr(brisk_dtype_name(type), filter)) continue;
    size_t bytes;
    uint8_t **w = make_weights(type, gn, gk, 1, &bytes);
    free_weights(w, 1);
    const int copies = (int)(COLD_BYTES / bytes) + 1;
    w = make_weights(type, gn, gk, copies, &bytes);
    const size_t ws_size = brisk_cpu_matmul_workspace_size(type, gk, mm, threads);
    void *ws = ws_size ? brisk_aligned_alloc(64, ws_size) : NULL;
    mm_case c = {.pool = pool,
                 .type = type,
                 .w = w,
                 .n_copies = copies,
                 .n = gn,
                 .k = gk,
                 .m = 1,
                 .x = x,
                 .y = y,
                 .ws = ws,
                 .ws_size = ws_size};
    static double g2[MAX_SAMPLES], g5[MAX_SAMPLES], rr[MAX_SAMPLES], of[MAX_SAMPLES];
    int n = 0;
    time_call(&c, BRISK_ISA_AVX2);
    time_call(&c, hi);
    const double t0 = now_s();
    do {
      const double a = time_call(&c, BRISK_ISA_AVX2), b = time_call(&c, hi);
      const double r = time_read(pool, threads, bytes);
      g2[n] = (double)bytes / a / 1e9;
      g5[n] = (double)bytes / b / 1e9;
      rr[n] = a / b;
      of[n] = r / b;
      n++;
    } while (n < MAX_SAMPLES && (now_s() - t0 < 1.5 || n < 15));
    const double gv2 = median(g2, n), gv5 = median(g5, n), gx = median(rr, n), gof = median(of, n);
    free_weights(w, copies);
    brisk_aligned_free(ws);

    w = make_weights(type, mn, mk, 1, &bytes);
    const size_t ws2 = brisk_cpu_matmul_workspace_size(type, mk, mm, threads);
    ws = ws2 ? brisk_aligned_alloc(64, ws2) : NULL;
    c = (mm_case){.pool = pool,
                  .type = type,
                  .w = w,
                  .n_copies = 1,
                  .n = mn,
                  .k = mk,
                  .m = mm,
                  .x = x,
                  .y = y,
                  .ws = ws,
                  .ws_size = ws2};
    double best2 = 1e30, best5 = 1e30;
    n = 0;
    const double t1 = now_s();
    do {
      const double a = time_call(&c, BRISK_ISA_AVX2), b = time_call(&c, hi);
      best2 = a < best2 ? a : best2;
      best5 = b < best5 ? b : best5;
      rr[n++] = a / b;
    } while (n < MAX_SAMPLES && (now_s() - t1 < 3.0 || n < 5));
    const double flop = 2.0 * (double)mm * (double)mn * (double)mk;
    printf("%-8s | %30.1f %7.1f %5.2fx %7.0f%% | %30.1f %7.1f %5.2fx\n", brisk_dtype_name(type),
           gv2, gv5, gx, 100 * gof, flop / best2 / 1e9, flop / best5 / 1e9, median(rr, n));
    fflush(stdout);
    free_weights(w, 1);
    brisk_aligned_free(ws);
  }
  brisk_cpu_matmul_force_scalar(false);
  print_load("after");
  free(x);
  free(y);
  brisk_aligned_free(rb);
  brisk_threadpool_free(pool);
  return 0;
}
