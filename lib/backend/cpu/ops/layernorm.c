/* The two operations encoder models (BERT family) add: LayerNorm with a
 * bias, and the exact (erf) GELU of their FFN. Scalar loops: in an encoder
 * pass both are a few percent of the matrix products' work. */
#include "backend/cpu/ops/ops.h"

#include "core/error.h"

#include <math.h>

typedef struct layernorm_job {
  const float *x;      // [n_rows][n_cols]
  const float *weight; // [n_cols] or NULL
  const float *bias;   // [n_cols] or NULL
  float *out;          // [n_rows][n_cols]
  int64_t n_cols;
  float eps;
} layernorm_job;

/* Mean and variance in float64 over two passes (no cancellation between
 * sum(x^2) and mean^2), the scale rounded once; then each element is
 * normalized in float64 and rounded, and weight and bias applied in float. */
static void layernorm_rows(void *p, int64_t r0, int64_t r1) {
  const layernorm_job *j = p;
  const int64_t n = j->n_cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    const double mu = sum / (double)n;
    for (int64_t i = 0; i < n; i++) ss += ((double)x[i] - mu) * ((double)x[i] - mu);
    const double s = 1.0 / sqrt(ss / (double)n + (double)j->eps);
    for (int64_t i = 0; i < n; i++) {
      float v = (float)(((double)x[i] - mu) * s);
      if (j->weight) v *= j->weight[i];
      if (j->bias) v += j->bias[i];
      y[i] = v;
    }
  }
}

brisk_status brisk_cpu_ops_layernorm(brisk_backend *be, const float *x, const float *weight,
                                     const float *bias, int64_t n_rows, int64_t n_cols, float eps,
                                     float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_layernorm(x, n_rows, n_cols, eps, out);
  if (st != BRISK_OK) return st;
  layernorm_job job = {x, weight, bias, out, n_cols, eps};
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, 6.0 * (double)n_rows * (double)n_cols, layernorm_rows,
                         &job);
  return BRISK_OK;
}

typedef struct gelu_job {
  const float *x; // [n]
  float *out;     // [n]
} gelu_job;

/* x / 2 * erfc(-x / sqrt 2): the same function as x / 2 (1 + erf(x /
 * sqrt 2)), but without its cancellation for negative x, where 1 + erf
 * would lose every digit of the small result. */
static void gelu_range(void *p, int64_t i0, int64_t i1) {
  const gelu_job *j = p;
  for (int64_t i = i0; i < i1; i++) {
    const float x = j->x[i];
    j->out[i] = 0.5f * x * erfcf(-x * (float)M_SQRT1_2);
  }
}

brisk_status brisk_cpu_ops_gelu(brisk_backend *be, const float *x, int64_t n, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_gelu(x, n, out);
  if (st != BRISK_OK || n == 0) return st;
  gelu_job job = {x, out};
  brisk_cpu_ops_parallel(c->pool, n, 64, 30.0 * (double)n, gelu_range, &job);
  return BRISK_OK;
}
