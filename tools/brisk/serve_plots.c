#include "serve_plots.h"

#include "svg.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static bool one_rate(const sb_record *runs, int n_runs) {
  for (int i = 1; i < n_runs; i++)
    if (runs[i].rate != runs[0].rate) return false;
  return true;
}

/* A CDF of one latency (0: TTFT, 1: e2e) in ms, one curve per record. */
static bool cdf_plot(const char *path, const char *title, int which, const sb_record *runs,
                     int n_runs, int32_t n) {
  /* [n_runs][n] x (sorted ms) and y (fraction of requests) */
  double *x = brisk_calloc((size_t)n_runs * (size_t)n, sizeof *x);
  double *y = brisk_calloc((size_t)n_runs * (size_t)n, sizeof *y);
  svg_series *se = brisk_calloc((size_t)n_runs, sizeof *se);
  char(*names)[80] = brisk_calloc((size_t)n_runs, sizeof *names);
  bool ok = x && y && se && names;
  const bool single = one_rate(runs, n_runs);
  for (int r = 0; ok && r < n_runs; r++) {
    double *xr = x + (size_t)r * (size_t)n, *yr = y + (size_t)r * (size_t)n;
    for (int32_t i = 0; i < n; i++) {
      const sb_request *q = &runs[r].res.req[i];
      xr[i] = 1e3 * (which == 0 ? q->ttft_s : q->e2e_s);
    }
    qsort(xr, (size_t)n, sizeof *xr, cmp_double);
    for (int32_t i = 0; i < n; i++) yr[i] = (double)(i + 1) / n;
    if (single)
      snprintf(names[r], sizeof names[r], "%s", runs[r].c->name);
    else
      snprintf(names[r], sizeof names[r], "%s @ %g/s", runs[r].c->name, runs[r].rate);
    se[r] = (svg_series){.name = names[r], .x = xr, .y = yr, .n = n};
  }
  if (!ok) fprintf(stderr, "brisk serve-bench: out of memory for plots\n");
  const svg_plot p = {.title = title,
                      .x_label = "latency (ms)",
                      .y_label = "fraction of requests",
                      .step = true,
                      .series = se,
                      .n_series = n_runs};
  ok = ok && svg_write(path, &p);
  brisk_free(x);
  brisk_free(y);
  brisk_free(se);
  brisk_free(names);
  return ok;
}

/* One line per configuration over the rates: output tok/s (0) or p99 TPOT
 * in ms (1). Records come grouped by rate, configurations in one order. */
static bool rate_plot(const char *path, const char *title, int which, const sb_record *runs,
                      int n_runs) {
  int n_cfg = 0;
  while (n_cfg < n_runs && runs[n_cfg].rate == runs[0].rate) n_cfg++;
  const int n_rates = n_cfg ? n_runs / n_cfg : 0;
  /* [n_cfg][n_rates] */
  double *x = brisk_calloc((size_t)n_runs + 1, sizeof *x);
  double *y = brisk_calloc((size_t)n_runs + 1, sizeof *y);
  svg_series *se = brisk_calloc((size_t)n_cfg + 1, sizeof *se);
  bool ok = x && y && se;
  for (int c = 0; ok && c < n_cfg; c++) {
    for (int k = 0; k < n_rates; k++) {
      const sb_record *r = &runs[k * n_cfg + c];
      x[c * n_rates + k] = r->rate;
      y[c * n_rates + k] = which == 0 ? r->sum.output_tps : 1e3 * r->sum.tpot.p99;
    }
    se[c] = (svg_series){
        .name = runs[c].c->name, .x = x + c * n_rates, .y = y + c * n_rates, .n = n_rates};
  }
  if (!ok) fprintf(stderr, "brisk serve-bench: out of memory for plots\n");
  const svg_plot p = {.title = title,
                      .x_label = "arrival rate (requests/s)",
                      .y_label = which == 0 ? "output tokens/s" : "p99 TPOT (ms)",
                      .markers = true,
                      .series = se,
                      .n_series = n_cfg};
  ok = ok && svg_write(path, &p);
  brisk_free(x);
  brisk_free(y);
  brisk_free(se);
  return ok;
}

bool sb_write_plots(const char *dir, const sb_record *runs, int n_runs, int32_t n_requests) {
  static const char *const files[4] = {"ttft-cdf.svg", "e2e-cdf.svg", "throughput-vs-rate.svg",
                                       "tpot-p99-vs-rate.svg"};
  bool ok = true;
  for (int f = 0; ok && f < 4; f++) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, files[f]) >= sizeof path) {
      fprintf(stderr, "brisk serve-bench: --out-dir path too long\n");
      return false;
    }
    switch (f) {
    case 0: ok = cdf_plot(path, "Time to first token (CDF)", 0, runs, n_runs, n_requests); break;
    case 1: ok = cdf_plot(path, "End-to-end latency (CDF)", 1, runs, n_runs, n_requests); break;
    case 2: ok = rate_plot(path, "Output throughput vs arrival rate", 0, runs, n_runs); break;
    default: ok = rate_plot(path, "p99 time per output token vs arrival rate", 1, runs, n_runs);
    }
  }
  return ok;
}
