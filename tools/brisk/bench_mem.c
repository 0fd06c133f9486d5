/* Machine limits measured in-process: STREAM-like read and copy bandwidth
 * and the FMA peak. They are the denominators of `brisk bench`'s fractions,
 * so they run on the same thread pool as the kernels they judge. */
#include "bench_util.h"

#include "core/cpu.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#  include <immintrin.h>
#  define BENCH_X86 1
#endif

/* ---- read: XOR every 64-bit word into independent accumulators, so the
 * loop is bound by loads, not by a dependency chain. Each chunk is read as 8
 * interleaved streams (its 8 parts side by side) with a software prefetch
 * 512 bytes ahead: on the machine this was written on (a 2-core VM), one
 * sequential stream per thread reached about half, and 4 streams about 90%,
 * of what this did; more streams or a longer prefetch distance did worse. */

#define READ_STREAMS 8
#define READ_PREFETCH 512

#ifdef BENCH_X86
/* Stream s of a chunk: prefetch ahead, then one cache line into acc. The 8
 * accumulators are named so that they stay in registers. */
#  define READ_LINE(acc, s)                                                                        \
    do {                                                                                           \
      const uint8_t *b_ = p + (size_t)(s)*q + i;                                                   \
      _mm_prefetch((const char *)b_ + READ_PREFETCH, _MM_HINT_T0);                                 \
      acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i *)b_));                         \
      acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i *)(b_ + 32)));                  \
    } while (0)

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
          a7 = a0;
  const size_t q = n / READ_STREAMS / 64 * 64;
  for (size_t i = 0; i < q; i += 64) {
    READ_LINE(a0, 0);
    READ_LINE(a1, 1);
    READ_LINE(a2, 2);
    READ_LINE(a3, 3);
    READ_LINE(a4, 4);
    READ_LINE(a5, 5);
    READ_LINE(a6, 6);
    READ_LINE(a7, 7);
  }
  a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  a4 = _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7));
  a0 = _mm256_xor_si256(a0, a4);
  return (uint64_t)_mm256_extract_epi64(a0, 0) ^ (uint64_t)_mm256_extract_epi64(a0, 3);
}

__attribute__((target("avx2"))) static void copy_avx2(uint8_t *dst, const uint8_t *src, size_t n) {
  for (size_t i = 0; i + 128 <= n; i += 128) {
    __m256i a = _mm256_load_si256((const __m256i *)(src + i));
    __m256i b = _mm256_load_si256((const __m256i *)(src + i + 32));
    __m256i c = _mm256_load_si256((const __m256i *)(src + i + 64));
    __m256i d = _mm256_load_si256((const __m256i *)(src + i + 96));
    _mm256_store_si256((__m256i *)(dst + i), a);
    _mm256_store_si256((__m256i *)(dst + i + 32), b);
    _mm256_store_si256((__m256i *)(dst + i + 64), c);
    _mm256_store_si256((__m256i *)(dst + i + 96), d);
  }
}
#endif

static uint64_t read_portable(const uint8_t *p, size_t n) {
  const size_t q = n / READ_STREAMS / 64 * 8; /* words per stream */
  const uint64_t *w = (const uint64_t *)p;
  uint64_t acc[READ_STREAMS] = {0};
  for (size_t i = 0; i < q; i++)
    for (int s = 0; s < READ_STREAMS; s++) acc[s] ^= w[(size_t)s * q + i];
  uint64_t r = 0;
  for (int s = 0; s < READ_STREAMS; s++) r ^= acc[s];
  return r;
}

typedef struct mem_job {
  const uint8_t *src;
  uint8_t *dst; /* NULL: read only */
  size_t chunk; /* bytes per task, a multiple of 512 */
  volatile uint64_t sink;
} mem_job;

static void mem_task(void *p, size_t i) {
  mem_job *j = p;
  const uint8_t *s = j->src + i * j->chunk;
#ifdef BENCH_X86
  if (brisk_cpu()->avx2) {
    if (j->dst)
      copy_avx2(j->dst + i * j->chunk, s, j->chunk);
    else
      j->sink ^= read_avx2(s, j->chunk);
    return;
  }
#endif
  if (j->dst)
    memcpy(j->dst + i * j->chunk, s, j->chunk);
  else
    j->sink ^= read_portable(s, j->chunk);
}

static double run_mem(brisk_threadpool *pool, int threads, uint8_t *dst, const void *src,
                      size_t bytes) {
  /* 4 chunks per thread: a thread slowed by another process does not hold
   * the others back for long. Chunks and their streams stay 64-byte aligned. */
  size_t n_tasks = 4 * (size_t)(threads > 0 ? threads : 1);
  mem_job j = {.src = src, .dst = dst, .chunk = bytes / n_tasks / 512 * 512};
  double t0 = bench_now_s();
  brisk_parallel_for(pool, n_tasks, mem_task, &j);
  return bench_now_s() - t0;
}

double bench_read_seconds(brisk_threadpool *pool, int threads, const void *buf, size_t bytes) {
  return run_mem(pool, threads, NULL, buf, bytes);
}

double bench_copy_seconds(brisk_threadpool *pool, int threads, void *dst, const void *src,
                          size_t bytes) {
  return run_mem(pool, threads, dst, src, bytes);
}

bool bench_measure_bandwidth(brisk_threadpool *pool, int threads, size_t bytes, int passes,
                             bench_bandwidth *out) {
  enum { MAX_PASSES = 64 };
  if (passes > MAX_PASSES) passes = MAX_PASSES;
  uint8_t *a = bench_buffer(bytes), *b = bench_buffer(bytes / 2);
  if (!a || !b) {
    bench_buffer_free(a);
    bench_buffer_free(b);
    return false;
  }
  /* The bytes actually touched: run_mem rounds each task's chunk down. */
  const size_t n_tasks = 4 * (size_t)threads, half = bytes / 2;
  const size_t read_bytes = bytes / n_tasks / 512 * 512 * n_tasks;
  const size_t copy_bytes = half / n_tasks / 512 * 512 * n_tasks;
  double r[MAX_PASSES], c[MAX_PASSES];
  run_mem(pool, threads, NULL, a, bytes); /* warm-up: wake the workers */
  for (int i = 0; i < passes; i++) {
    r[i] = (double)read_bytes / bench_read_seconds(pool, threads, a, bytes) / 1e9;
    /* Copy the half of `a` not read last into b: neither side is cached. */
    c[i] = 2.0 * (double)copy_bytes / bench_copy_seconds(pool, threads, b, a + half, half) / 1e9;
  }
  out->threads = threads;
  out->bytes = bytes;
  out->read_gbs = bench_summarize(r, passes);
  out->copy_gbs = bench_summarize(c, passes);
  bench_buffer_free(a);
  bench_buffer_free(b);
  return true;
}

/* ---- FMA peak: 12 independent accumulator chains per thread (an FMA's
 * latency of 4-5 cycles times 2 pipes needs at least 10 in flight). The
 * multiplier below 1 keeps the values bounded and normal. */

enum { FMA_CHAINS = 12 };
#define FMA_ITERS 4000000L

#ifdef BENCH_X86
__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
  /* Spelled out: twelve named registers, whatever the compiler unrolls. */
  __m256 a0 = _mm256_set1_ps(1.00f), a1 = _mm256_set1_ps(1.01f), a2 = _mm256_set1_ps(1.02f);
  __m256 a3 = _mm256_set1_ps(1.03f), a4 = _mm256_set1_ps(1.04f), a5 = _mm256_set1_ps(1.05f);
  __m256 a6 = _mm256_set1_ps(1.06f), a7 = _mm256_set1_ps(1.07f), a8 = _mm256_set1_ps(1.08f);
  __m256 a9 = _mm256_set1_ps(1.09f), a10 = _mm256_set1_ps(1.10f), a11 = _mm256_set1_ps(1.11f);
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, mul, add);
    a1 = _mm256_fmadd_ps(a1, mul, add);
    a2 = _mm256_fmadd_ps(a2, mul, add);
    a3 = _mm256_fmadd_ps(a3, mul, add);
    a4 = _mm256_fmadd_ps(a4, mul, add);
    a5 = _mm256_fmadd_ps(a5, mul, add);
    a6 = _mm256_fmadd_ps(a6, mul, add);
    a7 = _mm256_fmadd_ps(a7, mul, add);
    a8 = _mm256_fmadd_ps(a8, mul, add);
    a9 = _mm256_fmadd_ps(a9, mul, add);
    a10 = _mm256_fmadd_ps(a10, mul, add);
    a11 = _mm256_fmadd_ps(a11, mul, add);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[7];
}
#endif

#ifdef BENCH_X86
/* The same on 16 lanes: AVX-512 machines have twice the FMA width, which
 * the AVX-512 kernels can use (core/cpu.h levels). */
__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
  __m512 a[12];
  for (int c = 0; c < 12; c++) a[c] = _mm512_set1_ps(1.0f + 0.01f * (float)c);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);
  for (long i = 0; i < iters; i++) {
#  pragma GCC unroll 12
    for (int c = 0; c < 12; c++) a[c] = _mm512_fmadd_ps(a[c], mul, add);
  }
  __m512 s = a[0];
  for (int c = 1; c < 12; c++) s = _mm512_add_ps(s, a[c]);
  return _mm512_reduce_add_ps(s);
}
#endif

static float fma_portable(long iters) {
  float acc[FMA_CHAINS];
  for (int c = 0; c < FMA_CHAINS; c++) acc[c] = 1.0f + 0.01f * (float)c;
  for (long i = 0; i < iters; i++)
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = acc[c] * 0.999999f + 1e-6f;
  float s = 0;
  for (int c = 0; c < FMA_CHAINS; c++) s += acc[c];
  return s;
}

typedef struct fma_job {
  bool avx2, avx512;
  double secs[64]; /* per task, its own start to end */
  volatile float sink[64];
} fma_job;

static void fma_task(void *p, size_t i) {
  fma_job *j = p;
  const double t0 = bench_now_s();
  float r;
#ifdef BENCH_X86
  if (j->avx512)
    r = fma_avx512(FMA_ITERS);
  else if (j->avx2)
    r = fma_avx2(FMA_ITERS);
  else
#endif
    r = fma_portable(FMA_ITERS / 8);
  j->sink[i % 64] = r;
  j->secs[i % 64] = bench_now_s() - t0;
}

double bench_fma_peak(brisk_threadpool *pool, int threads, const char **isa, double *per_thread) {
  const brisk_cpu_features *f = brisk_cpu();
  /* The widest the kernels run (BRISK_CPU_ISA caps both). */
  fma_job j = {.avx2 = f->avx2 && f->fma, .avx512 = brisk_cpu_isa_level() >= BRISK_ISA_AVX512};
#ifndef BENCH_X86
  j.avx2 = j.avx512 = false;
#endif
  *isa = j.avx512 ? "avx512 vfmadd231ps (16 floats)"
         : j.avx2 ? "avx2 vfmadd231ps (8 floats)"
                  : "scalar multiply-add";
  /* Flops per task: chains x lanes x 2 (multiply and add) per iteration. */
  const double flops = j.avx512 ? (double)FMA_ITERS * 12 * 16 * 2
                       : j.avx2 ? (double)FMA_ITERS * FMA_CHAINS * 8 * 2
                                : (double)(FMA_ITERS / 8) * FMA_CHAINS * 2;
  double best = 0;
  *per_thread = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = bench_now_s();
    /* One task per thread: the caller and each worker run one loop. */
    brisk_parallel_for(pool, (size_t)threads, fma_task, &j);
    double g = flops * threads / (bench_now_s() - t0) / 1e9;
    if (g > best) best = g;
    for (int i = 0; i < threads && i < 64; i++)
      if (flops / j.secs[i] / 1e9 > *per_thread) *per_thread = flops / j.secs[i] / 1e9;
  }
  return best;
}
