/* Shared pieces of `brisk bench`: statistics over repeated timings, the
 * machine's load, and the in-process machine limits every result is compared
 * against (memory bandwidth, FMA peak). */
#ifndef BRISK_TOOLS_BENCH_UTIL_H
#define BRISK_TOOLS_BENCH_UTIL_H

#include "core/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

double bench_now_s(void);

/* Median / min / max of n >= 1 samples (v is sorted in place). */
typedef struct bench_stats {
  double median, min, max;
} bench_stats;
bench_stats bench_summarize(double *v, int n);

/* The 1-minute load average as text ("4.40 6.13 7.85"), or "unknown". The
 * machine may be shared: every result carries it. */
void bench_load_avg(char *buf, size_t cap);

/* Prints `"key": [v0, v1, ...]` (no leading comma). */
void bench_json_array(FILE *out, const char *key, const double *v, int n);

/* Size of the largest CPU cache in bytes (from sysfs), 0 if unknown. */
size_t bench_llc_bytes(void);

/* xorshift64*: deterministic random numbers for tokens and weights. */
uint64_t bench_rand(uint64_t *state);

/* A large buffer for bandwidth runs: `bytes` (a multiple of 4096), touched so
 * that every page is mapped. NULL when out of memory. */
void *bench_buffer(size_t bytes);
void bench_buffer_free(void *p);

/* Seconds to read `bytes` of buf (64-byte aligned) on `threads` threads of
 * pool: split into 4 chunks per thread, taken dynamically, each read as 8
 * interleaved streams with 256-bit loads where available (a GEMV likewise
 * streams several weight rows at once). A tail under 512 bytes per chunk is
 * not read. */
double bench_read_seconds(brisk_threadpool *pool, int threads, const void *buf, size_t bytes);
/* Seconds to copy `bytes` from src to dst with ordinary (cached) stores. */
double bench_copy_seconds(brisk_threadpool *pool, int threads, void *dst, const void *src,
                          size_t bytes);

/* STREAM-like bandwidth over a buffer much larger than the last-level cache:
 * read and copy (copy counts the bytes read plus the bytes written, as
 * STREAM does), `passes` passes each, GB/s (1e9 bytes). */
typedef struct bench_bandwidth {
  int threads;
  size_t bytes;
  bench_stats read_gbs, copy_gbs;
} bench_bandwidth;
bool bench_measure_bandwidth(brisk_threadpool *pool, int threads, size_t bytes, int passes,
                             bench_bandwidth *out);

/* Peak single-precision GFLOP/s of `threads` threads each running a
 * register-resident FMA loop (independent chains, enough to fill both FMA
 * pipes): wall-clock rate of all loops together, the best of a few runs.
 * *per_thread is the best rate one loop reached on its own clock; *isa names
 * the instructions used. */
double bench_fma_peak(brisk_threadpool *pool, int threads, const char **isa, double *per_thread);

#endif
