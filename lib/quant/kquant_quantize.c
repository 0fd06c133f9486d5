/* K-type quantizers (brisk's own method, ggml's layouts). Each sub-block's
 * scale (and min) is chosen by trying a small grid of candidate step sizes,
 * rounding, and refitting the scale by least squares on the rounded levels;
 * the best fit wins. Then the sub-block scales are themselves quantized
 * against the super-block's fp16 scale, and the elements are rounded once
 * more against the scales actually stored, so stored scale error does not
 * compound. */
#include "quant/quant.h"

#include "core/half.h"
#include "quant/blocks.h"

#include <math.h>

/* Candidate step sizes: the plain range / levels step, and steps that map
 * the range to levels + t/10 for t in [-GRID, GRID]. */
#define GRID 10

static inline int clamp_round(float v, int lo, int hi) {
  if (!(v > (float)lo)) return lo; /* NaN lands here too */
  if (v >= (float)hi) return hi;
  return (int)nearbyintf(v);
}

/* Fits x[0..n) ~ a * q + c with q in [0, qmax], a >= 0, c <= 0 (the format
 * stores c as a non-negative min subtracted), minimizing the squared error
 * weighted by w[0..n) (NULL: all 1, which gives exactly the unweighted
 * sums). Returns a and -c. */
static void fit_scale_min(const float *x, const float *w, int n, int qmax, float *scale,
                          float *neg_min) {
  float lo = 0, hi = 0; /* the range always includes 0: c <= 0 */
  for (int i = 0; i < n; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  *scale = 0;
  *neg_min = -lo;
  if (!(hi > lo)) return; /* constant (or NaN) sub-block */
  double best_err = INFINITY;
  for (int t = -GRID - 1; t <= GRID; t++) {
    /* t = -GRID - 1 is the plain step with its own offset. */
    float a, c;
    int q[BRISK_QK];
    if (t < -GRID) {
      a = (hi - lo) / (float)qmax;
      c = lo;
      for (int i = 0; i < n; i++) q[i] = clamp_round((x[i] - lo) / a, 0, qmax);
    } else {
      float iscale = ((float)qmax + 0.1f * (float)t) / (hi - lo);
      for (int i = 0; i < n; i++) q[i] = clamp_round((x[i] - lo) * iscale, 0, qmax);
      /* Weighted least squares for (a, c) given q, in double. */
      double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
      for (int i = 0; i < n; i++) {
        const double wi = w ? w[i] : 1.0;
        sw += wi;
        sq += wi * q[i];
        sqq += wi * q[i] * q[i];
        sx += wi * x[i];
        sqx += wi * q[i] * x[i];
      }
      double det = sw * sqq - sq * sq;
      if (det <= 0) continue;
      double fa = (sw * sqx - sq * sx) / det, fc = (sqq * sx - sq * sqx) / det;
      if (fc > 0) { /* constrained: c = 0 */
        fc = 0;
        fa = sqx / sqq;
      }
      if (!(fa > 0)) continue;
      a = (float)fa;
      c = (float)fc;
    }
    double err = 0;
    for (int i = 0; i < n; i++) {
      double r = (double)a * q[i] + c - x[i];
      err += (w ? w[i] : 1.0) * r * r;
    }
    if (err < best_err) {
      best_err = err;
      *scale = a;
      *neg_min = -c;
    }
  }
}

/* Fits x[0..n) ~ s * q with q in [-32, 31] (asymmetric range: the largest
 * magnitude gets the -32 side). */
static float fit_scale_sym(const float *x, const float *w, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; i++) {
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      max = x[i];
    }
  }
  if (!(amax > 0)) return 0;
  float best = max / -32;
  double best_err = INFINITY;
  for (int t = -GRID; t <= GRID; t++) {
    float iscale = -(32 + 0.1f * (float)t) / max;
    double sqq = 0, sqx = 0;
    int q[16];
    for (int i = 0; i < n; i++) {
      const double wi = w ? w[i] : 1.0;
      q[i] = clamp_round(x[i] * iscale, -32, 31);
      sqq += wi * q[i] * q[i];
      sqx += wi * q[i] * x[i];
    }
    if (sqq <= 0) continue;
    double s = sqx / sqq, err = 0;
    for (int i = 0; i < n; i++) {
      double r = s * q[i] - x[i];
      err += (w ? w[i] : 1.0) * r * r;
    }
    if (err < best_err) {
      best_err = err;
      best = (float)s;
    }
  }
  return best;
}

/* Quantizes non-negative v[0..8) to 6 bits against a shared fp16 step;
 * returns the stored step (as float) and the levels. */
static float quantize_6bit(const float *v, uint8_t *lv, uint16_t *step_f16) {
  float vmax = 0;
  for (int j = 0; j < 8; j++)
    if (v[j] > vmax) vmax = v[j];
  *step_f16 = brisk_f32_to_f16(vmax / 63);
  const float step = brisk_f16_to_f32(*step_f16);
  for (int j = 0; j < 8; j++) lv[j] = step > 0 ? (uint8_t)clamp_round(v[j] / step, 0, 63) : 0;
  return step;
}

/* Inverse of brisk_k4_scale_min. */
static void pack_k4_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[12]) {
  for (int j = 0; j < 4; j++) {
    out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
    out[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
  }
}

/* Shared by q4_k (qmax 15) and q5_k (qmax 31): levels q[256] and the block
 * header (d, dmin, scales). */
static void quantize_k_scale_min(const float *x, const float *w, int qmax, uint16_t *d,
                                 uint16_t *dmin, uint8_t scales[12], uint8_t q[BRISK_QK_K]) {
  float a[8], b[8];
  for (int j = 0; j < 8; j++)
    fit_scale_min(x + 32 * j, w ? w + 32 * j : NULL, 32, qmax, &a[j], &b[j]);
  uint8_t sc[8], mn[8];
  const float fd = quantize_6bit(a, sc, d), fdmin = quantize_6bit(b, mn, dmin);
  pack_k4_scales(sc, mn, scales);
  for (int j = 0; j < 8; j++) {
    const float step = fd * (float)sc[j], off = fdmin * (float)mn[j];
    for (int l = 0; l < 32; l++)
      q[32 * j + l] = step > 0 ? (uint8_t)clamp_round((x[32 * j + l] + off) / step, 0, qmax) : 0;
  }
}

/* Element weights of one super-block from the column importance imp
 * (llama.cpp's choice: imp * sqrt(sigma2 + x^2), sigma2 = 2 * mean x^2), or
 * NULL without importance. */
static const float *element_weights(const float *x, const float *imp, float w[BRISK_QK_K]) {
  if (!imp) return NULL;
  double s = 0;
  for (int l = 0; l < BRISK_QK_K; l++) s += (double)x[l] * x[l];
  const float sigma2 = (float)(2 * s / BRISK_QK_K);
  for (int l = 0; l < BRISK_QK_K; l++) w[l] = imp[l] * sqrtf(sigma2 + x[l] * x[l]);
  return w;
}

void brisk_quantize_row_q4_k(const float *x, void *y, int64_t n) {
  brisk_quantize_row_q4_k_w(x, y, n, NULL);
}
void brisk_quantize_row_q5_k(const float *x, void *y, int64_t n) {
  brisk_quantize_row_q5_k_w(x, y, n, NULL);
}
void brisk_quantize_row_q6_k(const float *x, void *y, int64_t n) {
  brisk_quantize_row_q6_k_w(x, y, n, NULL);
}

void brisk_quantize_row_q4_k_w(const float *x, void *y, int64_t n, const float *imp) {
  brisk_block_q4_k *b = y;
  for (int64_t i = 0; i < n / BRISK_QK_K;
       i++, x += BRISK_QK_K, imp = imp ? imp + BRISK_QK_K : NULL) {
    uint8_t q[BRISK_QK_K];
    uint16_t d, dmin;
    float wbuf[BRISK_QK_K];
    quantize_k_scale_min(x, element_weights(x, imp, wbuf), 15, &d, &dmin, b[i].scales, q);
    b[i].d = d;
    b[i].dmin = dmin;
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++)
        b[i].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
  }
}

void brisk_quantize_row_q5_k_w(const float *x, void *y, int64_t n, const float *imp) {
  brisk_block_q5_k *b = y;
  for (int64_t i = 0; i < n / BRISK_QK_K;
       i++, x += BRISK_QK_K, imp = imp ? imp + BRISK_QK_K : NULL) {
    uint8_t q[BRISK_QK_K];
    uint16_t d, dmin;
    float wbuf[BRISK_QK_K];
    quantize_k_scale_min(x, element_weights(x, imp, wbuf), 31, &d, &dmin, b[i].scales, q);
    b[i].d = d;
    b[i].dmin = dmin;
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++)
        b[i].qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 0xf) | (q[64 * c + 32 + l] & 0xf) << 4);
    for (int l = 0; l < 32; l++) {
      uint8_t h = 0;
      for (int j = 0; j < 8; j++) h |= (uint8_t)((q[32 * j + l] >> 4) << j);
      b[i].qh[l] = h;
    }
  }
}

void brisk_quantize_row_q6_k_w(const float *x, void *y, int64_t n, const float *imp) {
  brisk_block_q6_k *b = y;
  for (int64_t i = 0; i < n / BRISK_QK_K;
       i++, x += BRISK_QK_K, imp = imp ? imp + BRISK_QK_K : NULL) {
    float s[16], smax = 0, wbuf[BRISK_QK_K];
    const float *w = element_weights(x, imp, wbuf);
    for (int j = 0; j < 16; j++) {
      s[j] = fit_scale_sym(x + 16 * j, w ? w + 16 * j : NULL, 16);
      if (fabsf(s[j]) > smax) smax = fabsf(s[j]);
    }
    b[i].d = brisk_f32_to_f16(smax / 127);
    const float d = brisk_f16_to_f32(b[i].d);
    uint8_t q[BRISK_QK_K];
    for (int j = 0; j < 16; j++) {
      int sc = d > 0 ? clamp_round(s[j] / d, -127, 127) : 0;
      b[i].scales[j] = (int8_t)sc;
      const float step = d * (float)sc;
      for (int l = 0; l < 16; l++)
        q[16 * j + l] =
            (uint8_t)(32 + (step != 0 ? clamp_round(x[16 * j + l] / step, -32, 31) : 0));
    }
    for (int half = 0; half < 2; half++) {
      const uint8_t *qq = q + 128 * half;
      for (int l = 0; l < 32; l++) {
        b[i].ql[64 * half + l] = (uint8_t)((qq[l] & 0xf) | (qq[64 + l] & 0xf) << 4);
        b[i].ql[64 * half + 32 + l] = (uint8_t)((qq[32 + l] & 0xf) | (qq[96 + l] & 0xf) << 4);
        b[i].qh[32 * half + l] = (uint8_t)((qq[l] >> 4) | (qq[32 + l] >> 4) << 2 |
                                           (qq[64 + l] >> 4) << 4 | (qq[96 + l] >> 4) << 6);
      }
    }
  }
}

void brisk_quantize_row_q8_k(const float *x, void *y, int64_t n) {
  brisk_block_q8_k *b = y;
  for (int64_t i = 0; i < n / BRISK_QK_K; i++, x += BRISK_QK_K) {
    float amax = 0;
    for (int e = 0; e < BRISK_QK_K; e++)
      if (fabsf(x[e]) > amax) amax = fabsf(x[e]);
    const float id = amax > 0 ? 127 / amax : 0;
    b[i].d = amax / 127;
    for (int g = 0; g < BRISK_QK_K / 16; g++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) {
        int q = clamp_round(x[16 * g + l] * id, -127, 127);
        b[i].qs[16 * g + l] = (int8_t)q;
        sum += q;
      }
      b[i].bsums[g] = (int16_t)sum;
    }
  }
}
