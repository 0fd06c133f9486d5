/* Row softmax with a logit scale: out[r] = softmax(x[r] * scale). */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

typedef struct softmax_job {
  const float *x; // [n_rows][n_cols]
  float *out;     // [n_rows][n_cols]
  int64_t n_cols;
  float scale;
} softmax_job;

static void softmax_scalar(void *p, int64_t r0, int64_t r1) {
  const softmax_job *j = p;
  const int64_t n = j->n_cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, x[i] * j->scale);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
      y[i] = expf(x[i] * j->scale - m);
      sum += y[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS
BRISK_AVX2 static void softmax_avx2(void *p, int64_t r0, int64_t r1) {
  const softmax_job *j = p;
  const int64_t n = j->n_cols;
  const __m256 vs = _mm256_set1_ps(j->scale);
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    float m = brisk_avx2_hmax(vm);
    for (; i < n; i++) m = fmaxf(m, x[i] * j->scale);
    vm = _mm256_set1_ps(m);
    /* The sum in float64 lanes: a float sum of a long row (vocabulary-sized)
     * would carry ~sqrt(n/8) ulp of error into every output. */
    __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0;
    for (i = 0; i + 8 <= n; i += 8) {
      __m256 e = brisk_avx2_exp(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
      _mm256_storeu_ps(y + i, e);
      acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
      acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    if (i < n) {
      float t[8], e[8];
      for (int k = 0; k < 8; k++) t[k] = i + k < n ? x[i + k] : 0.0f;
      _mm256_storeu_ps(e, brisk_avx2_exp(_mm256_fmsub_ps(_mm256_loadu_ps(t), vs, vm)));
      for (int64_t k = 0; i + k < n; k++) {
        y[i + k] = e[k];
        sum += e[k];
      }
    }
    __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; i++) y[i] *= (float)(1.0 / sum);
  }
}
#endif

#ifdef BRISK_HAVE_AVX2_KERNELS
/* Lanes 8-15 (AVX-512 F alone has no 32x8 extract). */
BRISK_AVX512 static inline __m256 hi8(__m512 v) {
  return _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1));
}

/* The AVX2 kernel on 16 lanes, the tail of n % 16 in one masked step. */
BRISK_AVX512 static void softmax_avx512(void *p, int64_t r0, int64_t r1) {
  const softmax_job *j = p;
  const int64_t n = j->n_cols;
  const __m512 vs = _mm512_set1_ps(j->scale);
  const __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    __m512 vm = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(vm, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    if (tail)
      vm = _mm512_mask_max_ps(vm, tail, vm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs));
    vm = _mm512_set1_ps(_mm512_reduce_max_ps(vm));
    /* The sum in float64 lanes, as the AVX2 kernel. */
    __m512d acc0 = _mm512_setzero_pd(), acc1 = acc0;
    for (i = 0; i + 16 <= n; i += 16) {
      const __m512 e = brisk_avx512_exp(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vm));
      _mm512_storeu_ps(y + i, e);
      acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
      acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(hi8(e)));
    }
    if (tail) {
      const __m512 e = _mm512_maskz_mov_ps(
          tail, brisk_avx512_exp(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(tail, x + i), vs, vm)));
      _mm512_mask_storeu_ps(y + i, tail, e);
      acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
      acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(hi8(e)));
    }
    const double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 16)
      _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
    if (tail)
      _mm512_mask_storeu_ps(y + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + i), inv));
  }
}
#endif

#ifdef BRISK_HAVE_NEON_KERNELS
/* The AVX2 kernel's scheme on 4 lanes: the max, e^(x s - m) with the
 * vector exp, the sum in float64 lanes, one reciprocal. */
static void softmax_neon(void *p, int64_t r0, int64_t r1) {
  const softmax_job *j = p;
  const int64_t n = j->n_cols;
  const float32x4_t vs = vdupq_n_f32(j->scale);
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->out + r * n;
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vm = vmaxq_f32(vm, vmulq_f32(vld1q_f32(x + i), vs));
    float m = vmaxvq_f32(vm);
    for (; i < n; i++) m = fmaxf(m, x[i] * j->scale);
    vm = vdupq_n_f32(m);
    float64x2_t acc0 = vdupq_n_f64(0), acc1 = acc0;
    for (i = 0; i + 4 <= n; i += 4) {
      /* x s - m, fused as the AVX2 fmsub */
      const float32x4_t e = brisk_neon_exp(vfmaq_f32(vnegq_f32(vm), vld1q_f32(x + i), vs));
      vst1q_f32(y + i, e);
      acc0 = vaddq_f64(acc0, vcvt_f64_f32(vget_low_f32(e)));
      acc1 = vaddq_f64(acc1, vcvt_high_f64_f32(e));
    }
    const float64x2_t a = vaddq_f64(acc0, acc1);
    double sum = vgetq_lane_f64(a, 0) + vgetq_lane_f64(a, 1);
    if (i < n) {
      float t[4], e[4];
      for (int k = 0; k < 4; k++) t[k] = i + k < n ? x[i + k] : 0.0f;
      vst1q_f32(e, brisk_neon_exp(vfmaq_f32(vnegq_f32(vm), vld1q_f32(t), vs)));
      for (int64_t k = 0; i + k < n; k++) {
        y[i + k] = e[k];
        sum += e[k];
      }
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), inv));
    for (; i < n; i++) y[i] *= inv;
  }
}
#endif

brisk_status brisk_cpu_ops_softmax(brisk_backend *be, const float *x, int64_t n_rows,
                                   int64_t n_cols, float scale, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_softmax(x, n_rows, n_cols, scale, out);
  if (st != BRISK_OK) return st;
  softmax_job job = {x, out, n_cols, scale};
  brisk_cpu_range_fn fn = softmax_scalar;
#ifdef BRISK_HAVE_AVX2_KERNELS
  if (c->avx2) fn = c->avx512 ? softmax_avx512 : softmax_avx2;
#endif
#ifdef BRISK_HAVE_NEON_KERNELS
  if (c->neon) fn = softmax_neon;
#endif
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, 20.0 * (double)n_rows * (double)n_cols, fn, &job);
  return BRISK_OK;
}
