/* RMSNorm over rows: out = x / sqrt(mean(x^2) + eps) * weight. */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/error.h"

#include <math.h>

typedef struct rmsnorm_job {
  const float *x;      // [n_rows][n_cols]
  const float *weight; // [n_cols] or NULL
  float *out;          // [n_rows][n_cols]
  int64_t n_cols;
  float eps;
} rmsnorm_job;

/* The reciprocal root in float64: one rounding, whichever path summed. */
static float inv_rms(double sum_sq, int64_t n, float eps) {
  return (float)(1.0 / sqrt(sum_sq / (double)n + eps));
}

static void rmsnorm_scalar(void *p, int64_t r0, int64_t r1) {
  const rmsnorm_job *j = p;
  const int64_t n = j->n_cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float s = inv_rms(ss, n, j->eps);
    if (j->weight)
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * j->weight[i];
    else
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS
BRISK_AVX2 static void rmsnorm_avx2(void *p, int64_t r0, int64_t r1) {
  const rmsnorm_job *j = p;
  const int64_t n = j->n_cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    /* Four independent accumulators hide the FMA latency and, with 32
     * partial sums, keep float rounding small on long rows. */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
      __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
      a0 = _mm256_fmadd_ps(v0, v0, a0);
      a1 = _mm256_fmadd_ps(v1, v1, a1);
      a2 = _mm256_fmadd_ps(v2, v2, a2);
      a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_loadu_ps(x + i);
      a0 = _mm256_fmadd_ps(v, v, a0);
    }
    double ss = brisk_avx2_hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float s = inv_rms(ss, n, j->eps);
    __m256 vs = _mm256_set1_ps(s);
    i = 0;
    if (j->weight) {
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                              _mm256_loadu_ps(j->weight + i)));
      for (; i < n; i++) y[i] = x[i] * s * j->weight[i];
    } else {
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
      for (; i < n; i++) y[i] = x[i] * s;
    }
  }
}
#endif

#ifdef BRISK_HAVE_AVX2_KERNELS
/* The AVX2 kernel on 16 lanes (64 partial sums); the tail of n % 16 in one
 * masked step. */
BRISK_AVX512 static void rmsnorm_avx512(void *p, int64_t r0, int64_t r1) {
  const rmsnorm_job *j = p;
  const int64_t n = j->n_cols;
  const __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
      const __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
      a0 = _mm512_fmadd_ps(v0, v0, a0);
      a1 = _mm512_fmadd_ps(v1, v1, a1);
      a2 = _mm512_fmadd_ps(v2, v2, a2);
      a3 = _mm512_fmadd_ps(v3, v3, a3);
    }
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(v, v, a0);
    }
    if (tail) {
      const __m512 v = _mm512_maskz_loadu_ps(tail, x + i);
      a1 = _mm512_fmadd_ps(v, v, a1);
    }
    const double ss =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    const __m512 vs = _mm512_set1_ps(inv_rms(ss, n, j->eps));
    for (i = 0; i + 16 <= n; i += 16) {
      __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
      if (j->weight) v = _mm512_mul_ps(v, _mm512_loadu_ps(j->weight + i));
      _mm512_storeu_ps(y + i, v);
    }
    if (tail) {
      __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs);
      if (j->weight) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(tail, j->weight + i));
      _mm512_mask_storeu_ps(y + i, tail, v);
    }
  }
}
#endif

#ifdef BRISK_HAVE_NEON_KERNELS
/* The AVX2 kernel's scheme on 4 lanes: four fused-multiply-add chains of
 * squares (16 partial sums), the reciprocal root in float64. */
static void rmsnorm_neon(void *p, int64_t r0, int64_t r1) {
  const rmsnorm_job *j = p;
  const int64_t n = j->n_cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
      const float32x4_t v2 = vld1q_f32(x + i + 8), v3 = vld1q_f32(x + i + 12);
      a0 = vfmaq_f32(a0, v0, v0);
      a1 = vfmaq_f32(a1, v1, v1);
      a2 = vfmaq_f32(a2, v2, v2);
      a3 = vfmaq_f32(a3, v3, v3);
    }
    for (; i + 4 <= n; i += 4) {
      const float32x4_t v = vld1q_f32(x + i);
      a0 = vfmaq_f32(a0, v, v);
    }
    double ss = brisk_neon_hsum(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float s = inv_rms(ss, n, j->eps);
    i = 0;
    if (j->weight) {
      for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), s), vld1q_f32(j->weight + i)));
      for (; i < n; i++) y[i] = x[i] * s * j->weight[i];
    } else {
      for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), s));
      for (; i < n; i++) y[i] = x[i] * s;
    }
  }
}
#endif

brisk_status brisk_cpu_ops_rmsnorm(brisk_backend *be, const float *x, const float *weight,
                                   int64_t n_rows, int64_t n_cols, float eps, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_rmsnorm(x, n_rows, n_cols, eps, out);
  if (st != BRISK_OK) return st;
  rmsnorm_job job = {x, weight, out, n_cols, eps};
  brisk_cpu_range_fn fn = rmsnorm_scalar;
#ifdef BRISK_HAVE_AVX2_KERNELS
  if (c->avx2) fn = c->avx512 ? rmsnorm_avx512 : rmsnorm_avx2;
#endif
#ifdef BRISK_HAVE_NEON_KERNELS
  if (c->neon) fn = rmsnorm_neon;
#endif
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, 3.0 * (double)n_rows * (double)n_cols, fn, &job);
  return BRISK_OK;
}
