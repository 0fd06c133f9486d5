/* Elementwise operations: gated activations (SwiGLU, GeGLU), add, scale,
 * soft-capping, per-row sigmoid gates. */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

/* gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))) = x * sigmoid(2 k (...)),
 * k = sqrt(2 / pi); the sigmoid form needs only exp. */
#define GELU_2K 1.5957691216057308f /* 2 * sqrt(2 / pi) */
#define GELU_C 0.044715f

/* Chunks start on multiples of this, so that which elements reach the
 * vector tail never depends on the thread split. */
#define GRAIN 64

typedef struct glu_job {
  const float *gate; // [n]
  const float *up;   // [n]
  float *out;        // [n]
  int64_t n;
  brisk_glu_kind kind;
} glu_job;

static void glu_scalar(void *p, int64_t i0, int64_t i1) {
  const glu_job *j = p;
  for (int64_t i = i0; i < i1; i++) {
    float g = j->gate[i];
    float z = j->kind == BRISK_GLU_SWIGLU ? g : GELU_2K * (g + GELU_C * g * g * g);
    j->out[i] = g / (1.0f + expf(-z)) * j->up[i];
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS
BRISK_AVX2 static inline __m256 glu8(__m256 g, __m256 u, bool gelu) {
  __m256 z = g;
  if (gelu) {
    __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    z = _mm256_mul_ps(_mm256_set1_ps(GELU_2K), _mm256_fmadd_ps(_mm256_set1_ps(GELU_C), g3, g));
  }
  __m256 e = brisk_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), z));
  __m256 act = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_mul_ps(act, u);
}

BRISK_AVX2 static void glu_avx2(void *p, int64_t i0, int64_t i1) {
  const glu_job *j = p;
  const bool gelu = j->kind == BRISK_GLU_GEGLU;
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8)
    _mm256_storeu_ps(j->out + i,
                     glu8(_mm256_loadu_ps(j->gate + i), _mm256_loadu_ps(j->up + i), gelu));
  if (i < i1) {
    float g[8] = {0}, u[8] = {0}, o[8];
    memcpy(g, j->gate + i, (size_t)(i1 - i) * sizeof(float));
    memcpy(u, j->up + i, (size_t)(i1 - i) * sizeof(float));
    _mm256_storeu_ps(o, glu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u), gelu));
    memcpy(j->out + i, o, (size_t)(i1 - i) * sizeof(float));
  }
}
#endif

brisk_status brisk_cpu_ops_glu(brisk_backend *be, brisk_glu_kind kind, const float *gate,
                               const float *up, int64_t n, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_glu(kind, gate, up, n, out);
  if (st != BRISK_OK || n == 0) return st;
  glu_job job = {gate, up, out, n, kind};
  brisk_cpu_range_fn fn = glu_scalar;
#ifdef BRISK_HAVE_AVX2_KERNELS
  if (c->avx2) fn = glu_avx2;
#endif
  brisk_cpu_ops_parallel(c->pool, n, GRAIN, 20.0 * (double)n, fn, &job);
  return BRISK_OK;
}

typedef struct add_job {
  const float *a; // [n_rows][n_cols]
  const float *b; // [n_rows][n_cols], or [n_cols] when broadcast
  float *out;     // [n_rows][n_cols]
  int64_t n_cols;
  bool broadcast;
} add_job;

/* Items are rows; the compiler vectorizes these plain loops, and the
 * operation is bound by memory bandwidth, not arithmetic. */
static void add_rows(void *p, int64_t r0, int64_t r1) {
  const add_job *j = p;
  for (int64_t r = r0; r < r1; r++) {
    const float *a = j->a + r * j->n_cols;
    const float *b = j->broadcast ? j->b : j->b + r * j->n_cols;
    float *o = j->out + r * j->n_cols;
    for (int64_t i = 0; i < j->n_cols; i++) o[i] = a[i] + b[i];
  }
}

brisk_status brisk_cpu_ops_add(brisk_backend *be, const float *a, const float *b, int64_t n_rows,
                               int64_t n_cols, bool broadcast_b, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_add(a, b, n_rows, n_cols, out);
  if (st != BRISK_OK) return st;
  add_job job = {a, b, out, n_cols, broadcast_b};
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, (double)n_rows * (double)n_cols, add_rows, &job);
  return BRISK_OK;
}

typedef struct scale_job {
  const float *x; // [n]
  float *out;     // [n]
  float s;
} scale_job;

static void scale_range(void *p, int64_t i0, int64_t i1) {
  const scale_job *j = p;
  for (int64_t i = i0; i < i1; i++) j->out[i] = j->x[i] * j->s;
}

brisk_status brisk_cpu_ops_scale(brisk_backend *be, const float *x, int64_t n, float s,
                                 float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_scale(x, n, out);
  if (st != BRISK_OK || n == 0) return st;
  scale_job job = {x, out, s};
  brisk_cpu_ops_parallel(c->pool, n, GRAIN, (double)n, scale_range, &job);
  return BRISK_OK;
}

typedef struct softcap_job {
  const float *x; // [n]
  float *out;     // [n]
  float cap;
} softcap_job;

/* cap * tanh(x / cap): the division and product rounded one by one, tanhf
 * from libm (the device's is as accurate). */
static void softcap_range(void *p, int64_t i0, int64_t i1) {
  const softcap_job *j = p;
  for (int64_t i = i0; i < i1; i++) j->out[i] = j->cap * tanhf(j->x[i] / j->cap);
}

brisk_status brisk_cpu_ops_softcap(brisk_backend *be, const float *x, int64_t n, float cap,
                                   float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_softcap(x, n, cap, out);
  if (st != BRISK_OK || n == 0) return st;
  softcap_job job = {x, out, cap};
  brisk_cpu_ops_parallel(c->pool, n, GRAIN, 20.0 * (double)n, softcap_range, &job);
  return BRISK_OK;
}

typedef struct gate_job {
  const float *x; // [n_rows][n_cols]
  const float *g; // [n_rows]
  float *out;     // [n_rows][n_cols]
  int64_t n_cols;
} gate_job;

static void gate_rows(void *p, int64_t r0, int64_t r1) {
  const gate_job *j = p;
  for (int64_t r = r0; r < r1; r++) {
    const float s = 1.0f / (1.0f + expf(-j->g[r]));
    const float *x = j->x + r * j->n_cols;
    float *o = j->out + r * j->n_cols;
    for (int64_t i = 0; i < j->n_cols; i++) o[i] = x[i] * s;
  }
}

brisk_status brisk_cpu_ops_sigmoid_gate(brisk_backend *be, const float *x, const float *g,
                                        int64_t n_rows, int64_t n_cols, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_sigmoid_gate(x, g, n_rows, n_cols, out);
  if (st != BRISK_OK || n_rows == 0) return st;
  gate_job job = {x, g, out, n_cols};
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, (double)n_rows * (double)n_cols, gate_rows, &job);
  return BRISK_OK;
}
