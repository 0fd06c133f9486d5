#include "serve_stats.h"

#include "core/alloc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

uint64_t sb_hash_token(uint64_t h, int32_t token) {
  const uint32_t t = (uint32_t)token;
  for (int i = 0; i < 4; i++) h = (h ^ ((t >> (8 * i)) & 0xffu)) * 0x100000001b3ull;
  return h;
}

bool sb_request_tpot(const sb_request *r, double *tpot_s) {
  if (r->n_output < 2) return false;
  *tpot_s = (r->e2e_s - r->ttft_s) / (double)(r->n_output - 1);
  return true;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double sb_percentile_sorted(const double *v, int32_t n, double p) {
  if (n <= 0) return 0;
  int64_t rank = (int64_t)ceil(p / 100.0 * (double)n); /* 1-based */
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return v[rank - 1];
}

sb_dist sb_summarize(double *v, int32_t n) {
  sb_dist d = {.n = n};
  if (n <= 0) return d;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double sum = 0;
  for (int32_t i = 0; i < n; i++) sum += v[i];
  d.mean = sum / n;
  d.p50 = sb_percentile_sorted(v, n, 50);
  d.p90 = sb_percentile_sorted(v, n, 90);
  d.p99 = sb_percentile_sorted(v, n, 99);
  d.max = v[n - 1];
  return d;
}

bool sb_meets_slo(const sb_request *r, const sb_slo *slo) {
  if (slo->ttft_s > 0 && r->ttft_s > slo->ttft_s) return false;
  double tpot;
  if (slo->tpot_s > 0 && sb_request_tpot(r, &tpot) && tpot > slo->tpot_s) return false;
  return true;
}

bool sb_summarize_run(const sb_request *r, int32_t n, double duration_s, const sb_slo *slo,
                      sb_summary *out) {
  sb_summary s = {.duration_s = duration_s};
  /* [3][n]: ttft, tpot, e2e samples */
  double *v = brisk_calloc(3 * (size_t)(n > 0 ? n : 1), sizeof *v);
  if (!v) return false;
  double *ttft = v, *tpot = v + n, *e2e = v + 2 * (size_t)n;
  int32_t n_tpot = 0;
  for (int32_t i = 0; i < n; i++) {
    s.prompt_tokens += (uint64_t)r[i].n_prompt;
    s.output_tokens += (uint64_t)r[i].n_output;
    ttft[i] = r[i].ttft_s;
    e2e[i] = r[i].e2e_s;
    if (sb_request_tpot(&r[i], &tpot[n_tpot])) n_tpot++;
    if (sb_meets_slo(&r[i], slo)) s.n_slo_ok++;
  }
  s.ttft = sb_summarize(ttft, n);
  s.tpot = sb_summarize(tpot, n_tpot);
  s.e2e = sb_summarize(e2e, n);
  brisk_free(v);
  s.output_tps = (double)s.output_tokens / duration_s;
  s.total_tps = (double)(s.output_tokens + s.prompt_tokens) / duration_s;
  s.req_per_s = n / duration_s;
  s.goodput_req_per_s = s.n_slo_ok / duration_s;
  *out = s;
  return true;
}

void sb_summarize_itl(double *itl, size_t n_itl, sb_summary *s) {
  s->itl = sb_summarize(itl, n_itl > INT32_MAX ? INT32_MAX : (int32_t)n_itl);
}
