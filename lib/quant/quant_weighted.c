/* Importance-weighted quantizers of the 32-element types (brisk's own
 * search, the blocks ggml's): each block's scale (and offset) minimizes the
 * squared error weighted by w_i = imp_i * sqrt(sigma2 + x_i^2), sigma2 the
 * row's mean square (llama.cpp's weighting for these types), over a grid of
 * candidate steps each refitted by weighted least squares; the levels are
 * then rounded against the fp16 values actually stored. Without importance
 * the reference quantizers (quant_legacy.c, byte-identical to ggml's) run.
 * Q8_0 ignores importance, as llama.cpp's does: its error is already far
 * below the others'. The K types' weighted search is in kquant_quantize.c. */
#include "quant/quant.h"

#include "core/half.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

#define GRID 10

static inline int clamp_round(float v, int lo, int hi) {
  if (!(v > (float)lo)) return lo; /* NaN lands here too */
  if (v >= (float)hi) return hi;
  return (int)nearbyintf(v);
}

static float row_sigma2(const float *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return n ? (float)(s / (double)n) : 0.f;
}

/* Symmetric: x ~ d * q, q in [lo, hi] (lo = -hi - 1). Returns the best d. */
static float fit_sym(const float *x, const float *w, int lo, int hi) {
  float amax = 0, max = 0;
  for (int i = 0; i < BRISK_QK; i++)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      max = x[i];
    }
  if (!(amax > 0)) return 0;
  /* The reference step (the extreme value at lo) is the first candidate. */
  float best = max / (float)lo;
  double best_err = INFINITY;
  for (int t = -GRID - 1; t <= GRID; t++) {
    float d;
    int q[BRISK_QK];
    if (t < -GRID)
      d = best;
    else
      d = max / ((float)lo + 0.1f * (float)t);
    if (!(fabsf(d) > 0)) continue;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < BRISK_QK; i++) {
      q[i] = clamp_round(x[i] / d, lo, hi);
      sqq += (double)w[i] * q[i] * q[i];
      sqx += (double)w[i] * q[i] * x[i];
    }
    if (t >= -GRID) {
      if (sqq <= 0) continue;
      d = (float)(sqx / sqq);
    }
    double err = 0;
    for (int i = 0; i < BRISK_QK; i++) {
      double r = (double)d * q[i] - x[i];
      err += w[i] * r * r;
    }
    if (err < best_err) {
      best_err = err;
      best = d;
    }
  }
  return best;
}

/* Asymmetric: x ~ d * q + m, q in [0, qmax], any m. */
static void fit_min(const float *x, const float *w, int qmax, float *d_out, float *m_out) {
  float lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < BRISK_QK; i++) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
  *d_out = 0;
  *m_out = lo;
  if (!(hi > lo)) return;
  double best_err = INFINITY;
  for (int t = -GRID - 1; t <= GRID; t++) {
    float d, m;
    int q[BRISK_QK];
    if (t < -GRID) {
      d = (hi - lo) / (float)qmax;
      m = lo;
      for (int i = 0; i < BRISK_QK; i++) q[i] = clamp_round((x[i] - lo) / d, 0, qmax);
    } else {
      const float iscale = ((float)qmax + 0.1f * (float)t) / (hi - lo);
      double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
      for (int i = 0; i < BRISK_QK; i++) {
        q[i] = clamp_round((x[i] - lo) * iscale, 0, qmax);
        sw += w[i];
        sq += (double)w[i] * q[i];
        sqq += (double)w[i] * q[i] * q[i];
        sx += (double)w[i] * x[i];
        sqx += (double)w[i] * q[i] * x[i];
      }
      const double det = sw * sqq - sq * sq;
      if (det <= 0) continue;
      const double fd = (sw * sqx - sq * sx) / det;
      if (!(fd > 0)) continue;
      d = (float)fd;
      m = (float)((sqq * sx - sq * sqx) / det);
    }
    double err = 0;
    for (int i = 0; i < BRISK_QK; i++) {
      double r = (double)d * q[i] + m - x[i];
      err += w[i] * r * r;
    }
    if (err < best_err) {
      best_err = err;
      *d_out = d;
      *m_out = m;
    }
  }
}

static void weights(const float *x, const float *imp, float sigma2, float *w) {
  for (int i = 0; i < BRISK_QK; i++) w[i] = imp[i] * sqrtf(sigma2 + x[i] * x[i]);
}

static void pack_q4(const uint8_t *q, uint8_t qs[16]) {
  for (int j = 0; j < BRISK_QK / 2; j++) qs[j] = (uint8_t)(q[j] | (q[j + BRISK_QK / 2] << 4));
}

static void pack_q5(const uint8_t *q, uint8_t qh[4], uint8_t qs[16]) {
  uint32_t h = 0;
  for (int j = 0; j < BRISK_QK / 2; j++) {
    qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + BRISK_QK / 2] & 0xf) << 4));
    h |= (uint32_t)(q[j] >> 4) << j;
    h |= (uint32_t)(q[j + BRISK_QK / 2] >> 4) << (j + BRISK_QK / 2);
  }
  for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

/* Levels against the stored fp16 step (and offset). */
static void levels_sym(const float *x, uint16_t d16, int lo, int hi, uint8_t *q) {
  const float d = brisk_f16_to_f32(d16);
  for (int i = 0; i < BRISK_QK; i++)
    q[i] = (uint8_t)((d != 0 ? clamp_round(x[i] / d, lo, hi) : 0) - lo);
}

static void levels_min(const float *x, uint16_t d16, uint16_t m16, int qmax, uint8_t *q) {
  const float d = brisk_f16_to_f32(d16), m = brisk_f16_to_f32(m16);
  for (int i = 0; i < BRISK_QK; i++)
    q[i] = (uint8_t)(d > 0 ? clamp_round((x[i] - m) / d, 0, qmax) : 0);
}

void brisk_quantize_row_q4_0_w(const float *x, void *y, int64_t n, const float *imp) {
  if (!imp) {
    brisk_quantize_row_q4_0(x, y, n);
    return;
  }
  brisk_block_q4_0 *b = y;
  const float sigma2 = row_sigma2(x, n);
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK, imp += BRISK_QK) {
    float w[BRISK_QK];
    uint8_t q[BRISK_QK];
    weights(x, imp, sigma2, w);
    b[i].d = brisk_f32_to_f16(fit_sym(x, w, -8, 7));
    levels_sym(x, b[i].d, -8, 7, q);
    pack_q4(q, b[i].qs);
  }
}

void brisk_quantize_row_q5_0_w(const float *x, void *y, int64_t n, const float *imp) {
  if (!imp) {
    brisk_quantize_row_q5_0(x, y, n);
    return;
  }
  brisk_block_q5_0 *b = y;
  const float sigma2 = row_sigma2(x, n);
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK, imp += BRISK_QK) {
    float w[BRISK_QK];
    uint8_t q[BRISK_QK];
    weights(x, imp, sigma2, w);
    b[i].d = brisk_f32_to_f16(fit_sym(x, w, -16, 15));
    levels_sym(x, b[i].d, -16, 15, q);
    pack_q5(q, b[i].qh, b[i].qs);
  }
}

void brisk_quantize_row_q4_1_w(const float *x, void *y, int64_t n, const float *imp) {
  if (!imp) {
    brisk_quantize_row_q4_1(x, y, n);
    return;
  }
  brisk_block_q4_1 *b = y;
  const float sigma2 = row_sigma2(x, n);
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK, imp += BRISK_QK) {
    float w[BRISK_QK], d, m;
    uint8_t q[BRISK_QK];
    weights(x, imp, sigma2, w);
    fit_min(x, w, 15, &d, &m);
    b[i].d = brisk_f32_to_f16(d);
    b[i].m = brisk_f32_to_f16(m);
    levels_min(x, b[i].d, b[i].m, 15, q);
    pack_q4(q, b[i].qs);
  }
}

void brisk_quantize_row_q5_1_w(const float *x, void *y, int64_t n, const float *imp) {
  if (!imp) {
    brisk_quantize_row_q5_1(x, y, n);
    return;
  }
  brisk_block_q5_1 *b = y;
  const float sigma2 = row_sigma2(x, n);
  for (int64_t i = 0; i < n / BRISK_QK; i++, x += BRISK_QK, imp += BRISK_QK) {
    float w[BRISK_QK], d, m;
    uint8_t q[BRISK_QK];
    weights(x, imp, sigma2, w);
    fit_min(x, w, 31, &d, &m);
    b[i].d = brisk_f32_to_f16(d);
    b[i].m = brisk_f32_to_f16(m);
    levels_min(x, b[i].d, b[i].m, 31, q);
    pack_q5(q, b[i].qh, b[i].qs);
  }
}
