/* The SVG plots of `brisk serve-bench`. */
#ifndef BRISK_TOOLS_SERVE_PLOTS_H
#define BRISK_TOOLS_SERVE_PLOTS_H

#include "serve_run.h"
#include "serve_stats.h"

#include <stdbool.h>
#include <stdint.h>

/* One configuration served at one arrival rate. */
typedef struct sb_record {
  const sb_config *c;
  double rate;
  sb_result res;
  sb_summary sum;
} sb_record;

/* Writes into dir: ttft-cdf.svg and e2e-cdf.svg (one curve per record),
 * throughput-vs-rate.svg and tpot-p99-vs-rate.svg (one line per
 * configuration over the rates). n_requests: requests in every record.
 * false (with a message on stderr) on failure. */
bool sb_write_plots(const char *dir, const sb_record *runs, int n_runs, int32_t n_requests);

#endif
