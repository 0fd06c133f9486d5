/* Rotary position embedding, in place, normal (adjacent pairs) and NeoX
 * (halves) layouts. Angles come from brisk_rope_frequencies in float64; each
 * token's cos/sin table is built once and applied to all its heads. */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/checked.h"
#include "core/error.h"

#include <math.h>

typedef struct rope_job {
  float *x;                 // [n_tokens][token_stride]
  const int32_t *positions; // [n_tokens]
  const double *inv_freq;   // [n_rot / 2]
  double mscale;
  int64_t token_stride;
  int32_t n_heads, head_dim, n_rot;
  bool neox, avx2;
} rope_job;

/* cos/sin of each pair's angle, times mscale. */
static void token_table(const rope_job *j, int32_t pos, float *cs /* [n_rot/2] */,
                        float *sn /* [n_rot/2] */) {
  for (int32_t i = 0; i < j->n_rot / 2; i++) {
    double theta = (double)pos * j->inv_freq[i];
    cs[i] = (float)(cos(theta) * j->mscale);
    sn[i] = (float)(sin(theta) * j->mscale);
  }
}

static void rotate_scalar(const rope_job *j, float *h /* [head_dim] */, const float *cs,
                          const float *sn) {
  const int32_t half = j->n_rot / 2;
  for (int32_t i = 0; i < half; i++) {
    int32_t a = j->neox ? i : 2 * i, b = j->neox ? i + half : 2 * i + 1;
    float x0 = h[a], x1 = h[b];
    h[a] = x0 * cs[i] - x1 * sn[i];
    h[b] = x1 * cs[i] + x0 * sn[i];
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS
/* Normal layout: out = x * [c0 c0 c1 c1 ..] + swap_pairs(x) * [-s0 s0 -s1 s1 ..];
 * NeoX: out_lo = lo * c - hi * s, out_hi = hi * c + lo * s. Tails scalar. */
BRISK_AVX2 static void rotate_avx2(const rope_job *j, float *h /* [head_dim] */, const float *cs,
                                   const float *sn, const float *c2 /* [n_rot] */,
                                   const float *s2 /* [n_rot] */) {
  const int32_t n_rot = j->n_rot, half = n_rot / 2;
  int32_t i = 0;
  if (!j->neox) {
    for (; i + 8 <= n_rot; i += 8) {
      __m256 v = _mm256_loadu_ps(h + i);
      __m256 sw = _mm256_permute_ps(v, 0xB1);
      __m256 r =
          _mm256_fmadd_ps(v, _mm256_loadu_ps(c2 + i), _mm256_mul_ps(sw, _mm256_loadu_ps(s2 + i)));
      _mm256_storeu_ps(h + i, r);
    }
    for (; i < n_rot; i += 2) {
      float x0 = h[i], x1 = h[i + 1];
      h[i] = x0 * cs[i / 2] - x1 * sn[i / 2];
      h[i + 1] = x1 * cs[i / 2] + x0 * sn[i / 2];
    }
    return;
  }
  for (; i + 8 <= half; i += 8) {
    __m256 lo = _mm256_loadu_ps(h + i), hi = _mm256_loadu_ps(h + half + i);
    __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
    _mm256_storeu_ps(h + i, _mm256_fmsub_ps(lo, c, _mm256_mul_ps(hi, s)));
    _mm256_storeu_ps(h + half + i, _mm256_fmadd_ps(hi, c, _mm256_mul_ps(lo, s)));
  }
  for (; i < half; i++) {
    float x0 = h[i], x1 = h[i + half];
    h[i] = x0 * cs[i] - x1 * sn[i];
    h[i + half] = x1 * cs[i] + x0 * sn[i];
  }
}
#endif

static void rope_range(void *p, int64_t t0, int64_t t1) {
  const rope_job *j = p;
  float cs[BRISK_MAX_HEAD_DIM / 2], sn[BRISK_MAX_HEAD_DIM / 2];
#ifdef BRISK_HAVE_AVX2_KERNELS
  float c2[BRISK_MAX_HEAD_DIM], s2[BRISK_MAX_HEAD_DIM];
#endif
  for (int64_t t = t0; t < t1; t++) {
    token_table(j, j->positions[t], cs, sn);
    float *row = j->x + t * j->token_stride;
#ifdef BRISK_HAVE_AVX2_KERNELS
    if (j->avx2) {
      for (int32_t i = 0; i < j->n_rot / 2; i++) {
        c2[2 * i] = c2[2 * i + 1] = cs[i];
        s2[2 * i] = -sn[i];
        s2[2 * i + 1] = sn[i];
      }
      for (int32_t h = 0; h < j->n_heads; h++)
        rotate_avx2(j, row + (int64_t)h * j->head_dim, cs, sn, c2, s2);
      continue;
    }
#endif
    for (int32_t h = 0; h < j->n_heads; h++)
      rotate_scalar(j, row + (int64_t)h * j->head_dim, cs, sn);
  }
}

brisk_status brisk_cpu_ops_rope(brisk_backend *be, float *x, int32_t n_tokens, int64_t token_stride,
                                int32_t n_heads, int32_t head_dim, const int32_t *positions,
                                const brisk_rope_params *p) {
  const brisk_cpu_ctx *c = be->ctx;
  double inv_freq[BRISK_MAX_HEAD_DIM / 2], mscale;
  brisk_status st = brisk_check_rope(x, n_tokens, token_stride, n_heads, head_dim, positions, p,
                                     inv_freq, &mscale);
  if (st != BRISK_OK || n_tokens == 0) return st;
  rope_job job = {x,        positions,    inv_freq,
                  mscale,   token_stride, n_heads,
                  head_dim, p->n_rot,     p->layout == BRISK_ROPE_NEOX,
                  c->avx2};
  /* A sin/cos pair costs about as much as rotating a few dozen floats. */
  double work = (double)n_tokens * ((double)n_heads * p->n_rot + 20.0 * p->n_rot);
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, work, rope_range, &job);
  return BRISK_OK;
}
