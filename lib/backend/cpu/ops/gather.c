/* Activation column gather (backend.h gather_cols): the act-order
 * permutation of a GPTQ linear's input, rows in parallel. */
#include "backend/cpu/ops/ops.h"

typedef struct gather_job {
  const float *x;      // [n_rows][n_cols]
  const int32_t *cols; // [n_out]
  float *out;          // [n_rows][n_out]
  int64_t n_cols, n_out;
} gather_job;

static void gather_range(void *p, int64_t r0, int64_t r1) {
  const gather_job *j = p;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + (size_t)r * (size_t)j->n_cols;
    float *o = j->out + (size_t)r * (size_t)j->n_out;
    for (int64_t c = 0; c < j->n_out; c++) o[c] = x[j->cols[c]];
  }
}

brisk_status brisk_cpu_ops_gather_cols(brisk_backend *be, const float *x, int64_t n_rows,
                                       int64_t n_cols, const int32_t *cols, int64_t n_out,
                                       float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_gather_cols(x, n_rows, n_cols, cols, n_out, out);
  if (st != BRISK_OK || n_rows == 0) return st;
  gather_job job = {x, cols, out, n_cols, n_out};
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, 2.0 * (double)n_rows * (double)n_out, gather_range,
                         &job);
  return BRISK_OK;
}
