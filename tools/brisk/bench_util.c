#include "bench_util.h"

#include "core/alloc.h"
#include "core/clock.h"

#include <stdlib.h>
#include <string.h>

double bench_now_s(void) { return (double)brisk_now_ns() * 1e-9; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

bench_stats bench_summarize(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  bench_stats s = {.min = v[0], .max = v[n - 1]};
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

void bench_load_avg(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return;
  double a, b, c;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, cap, "%.2f %.2f %.2f", a, b, c);
  fclose(f);
}

void bench_json_array(FILE *out, const char *key, const double *v, int n) {
  fprintf(out, "\"%s\": [", key);
  for (int i = 0; i < n; i++) fprintf(out, "%s%.6g", i ? ", " : "", v[i]);
  fputc(']', out);
}

uint64_t bench_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

void *bench_buffer(size_t bytes) {
  void *p = brisk_aligned_alloc(4096, bytes);
  /* Non-zero bytes: a zero page could be served from one shared frame. */
  if (p) memset(p, 0x5a, bytes);
  return p;
}

void bench_buffer_free(void *p) { brisk_aligned_free(p); }

size_t bench_llc_bytes(void) {
  /* sysfs, not sysconf: under a hypervisor glibc's cpuid reading can be far
   * off (256 MiB reported for a 16 MiB L3 on the machine this was written on). */
  size_t best = 0;
  for (int idx = 0; idx < 8; idx++) {
    char path[96], buf[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long v = 0;
    char unit = 0;
    if (fgets(buf, sizeof buf, f) && sscanf(buf, "%lu%c", &v, &unit) >= 1) {
      size_t bytes = unit == 'K' ? (size_t)v << 10 : unit == 'M' ? (size_t)v << 20 : (size_t)v;
      if (bytes > best) best = bytes;
    }
    fclose(f);
  }
  return best;
}
