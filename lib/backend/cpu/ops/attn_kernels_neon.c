/* aarch64 NEON kernels for paged attention (see attn_kernels.h): 4-lane
 * forms of the AVX2 ones, with fused multiply-adds. They agree with the
 * scalar kernels to rounding (tests/backend: attention against float64). */
#include "backend/cpu/ops/attn_kernels.h"

#include "backend/cpu/ops/vec.h"
#include "core/half.h"

#include <stddef.h>

#ifdef BRISK_HAVE_NEON_KERNELS

/* One key at a time with four accumulators over the head dimension (the
 * dimension is the long axis: 64-256), summed in a fixed order. */
static void scores_neon(const float *q, const float *k, int32_t n, int32_t hd, float *sc) {
  for (int32_t c = 0; c < n; c++) {
    const float *kc = k + (int64_t)c * hd;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int32_t i = 0;
    for (; i + 16 <= hd; i += 16) {
      a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(kc + i));
      a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), vld1q_f32(kc + i + 4));
      a2 = vfmaq_f32(a2, vld1q_f32(q + i + 8), vld1q_f32(kc + i + 8));
      a3 = vfmaq_f32(a3, vld1q_f32(q + i + 12), vld1q_f32(kc + i + 12));
    }
    for (; i + 4 <= hd; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(kc + i));
    float s = brisk_neon_hsum(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < hd; i++) s += q[i] * kc[i];
    sc[c] = s;
  }
}

static void exp_shift_neon(float *sc, int32_t n, float m) {
  const float32x4_t vm = vdupq_n_f32(m);
  for (int32_t c = 0; c < n; c += 4)
    vst1q_f32(sc + c, brisk_neon_exp(vsubq_f32(vld1q_f32(sc + c), vm)));
}

static void accumulate_neon(float *acc, const float *p, const float *v, int32_t n, int32_t hd) {
  int32_t i = 0;
  for (; i + 16 <= hd; i += 16) {
    float32x4_t a0 = vld1q_f32(acc + i), a1 = vld1q_f32(acc + i + 4);
    float32x4_t a2 = vld1q_f32(acc + i + 8), a3 = vld1q_f32(acc + i + 12);
    for (int32_t c = 0; c < n; c++) {
      const float *vc = v + (int64_t)c * hd + i;
      a0 = vfmaq_n_f32(a0, vld1q_f32(vc), p[c]);
      a1 = vfmaq_n_f32(a1, vld1q_f32(vc + 4), p[c]);
      a2 = vfmaq_n_f32(a2, vld1q_f32(vc + 8), p[c]);
      a3 = vfmaq_n_f32(a3, vld1q_f32(vc + 12), p[c]);
    }
    vst1q_f32(acc + i, a0);
    vst1q_f32(acc + i + 4, a1);
    vst1q_f32(acc + i + 8, a2);
    vst1q_f32(acc + i + 12, a3);
  }
  for (; i + 4 <= hd; i += 4) {
    float32x4_t a = vld1q_f32(acc + i);
    for (int32_t c = 0; c < n; c++) a = vfmaq_n_f32(a, vld1q_f32(v + (int64_t)c * hd + i), p[c]);
    vst1q_f32(acc + i, a);
  }
  for (; i < hd; i++) {
    float a = acc[i];
    for (int32_t c = 0; c < n; c++) a += p[c] * v[(int64_t)c * hd + i];
    acc[i] = a;
  }
}

static void scale_neon(float *x, float s, int32_t n) {
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
  for (; i < n; i++) x[i] *= s;
}

static void f16_to_f32_neon(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  for (; i < n; i++) dst[i] = brisk_f16_to_f32(src[i]);
}

/* F16 rows are widened a chunk at a time; INT8 rows take the scalar
 * integer kernels (no sdot version yet). */
static const brisk_attn_kernels neon_kernels = {
    scores_neon,
    exp_shift_neon,
    accumulate_neon,
    scale_neon,
    f16_to_f32_neon,
    brisk_attn_dequant_rows_scalar,
    NULL,
    NULL,
    brisk_attn_scores_q8_scalar,
    brisk_attn_accumulate_q8_scalar,
};

const brisk_attn_kernels *brisk_attn_kernels_neon(void) { return &neon_kernels; }

#else

const brisk_attn_kernels *brisk_attn_kernels_neon(void) { return NULL; }

#endif
