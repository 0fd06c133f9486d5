/* The NEON kernels, compiled three times (mm_neon.h): by mm_neon.c with
 * NEON_DOT 0 (plain Advanced SIMD), by mm_neon_dot.c with NEON_DOT 1 (sdot)
 * and by mm_neon_i8mm.c with NEON_DOT 1 and NEON_I8MM 1 (sdot, and smmla
 * for the q8_0 / q4_0 tiles of several activation rows: mm_neon_mmla.h).
 * Only the int8 dot products differ; every other step, and so every result,
 * is the same in all three, and the same as the scalar kernels'
 * (mm_scalar.c). No include guard: meant to be included once per file. */
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "core/half.h"
#include "quant/blocks.h"

#include <arm_neon.h>
#include <string.h>

#ifndef NEON_I8MM
#  define NEON_I8MM 0
#endif

#if NEON_I8MM
#  ifdef __clang__
#    define NK_TARGET __attribute__((target("dotprod,i8mm")))
#  else
#    define NK_TARGET __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#  endif
#  define NK_NAME(x) x##_i8mm
#elif NEON_DOT
#  ifdef __clang__
#    define NK_TARGET __attribute__((target("dotprod")))
#  else
#    define NK_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#  endif
#  define NK_NAME(x) x##_dot
#else
#  define NK_TARGET
#  define NK_NAME(x) x##_base
#endif
#define NK static inline __attribute__((always_inline)) NK_TARGET
#define NKF static NK_TARGET

/* GEMV prefetch distance in each weight stream (bytes), as the x86 kernels. */
#define NK_PF_DIST 1024

/* GEMV: the three lines NK_PF_DIST ahead of a packed group-block at g (a
 * GEMM's tiles reuse their weights, so t->prefetch is off there). */
NK void prefetch_group(const brisk_mm_tile *t, const uint8_t *g) {
  if (!t->prefetch) return;
  __builtin_prefetch(g + NK_PF_DIST);
  __builtin_prefetch(g + NK_PF_DIST + 64);
  __builtin_prefetch(g + NK_PF_DIST + 128);
}

/* acc[l] += a[4l] * b[4l] + ... + a[4l+3] * b[4l+3] for the 4 int32 lanes.
 * Without sdot: int8 x int8 products in int16 (at most 128 * 127 = 16256,
 * so a pair of them fits), pairwise added to int32. */
NK int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if NEON_DOT
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vpadalq_s16(acc, vpaddq_s16(lo, hi));
#endif
}

/* ---- float weights: per output the scalar dot's 8 interleaved partial
 * sums (lanes 0-3 and 4-7 of two vectors), acc = acc + w * x, then the tree
 * ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)) and the k % 8 rest. */

enum { NK_F32, NK_F16, NK_BF16 };

/* Weights i .. i+7 as two float vectors. */
NK void load8(const uint8_t *w, int64_t i, int type, float32x4_t *lo, float32x4_t *hi) {
  if (type == NK_F32) {
    const float *p = (const float *)(const void *)w + i;
    *lo = vld1q_f32(p);
    *hi = vld1q_f32(p + 4);
    return;
  }
  const uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)w + i);
  if (type == NK_F16) {
    *lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
    *hi = vcvt_high_f32_f16(vreinterpretq_f16_u16(h));
  } else {
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
  }
}

NK float load1(const uint8_t *w, int64_t i, int type) {
  const uint16_t *h = (const uint16_t *)(const void *)w;
  return type == NK_F32   ? ((const float *)(const void *)w)[i]
         : type == NK_F16 ? brisk_f16_to_f32(h[i])
                          : brisk_bf16_to_f32(h[i]);
}

NK float tree8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t t = vaddq_f32(lo, hi); /* a_l + a_(l+4) */
  return (vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 1)) +
         (vgetq_lane_f32(t, 2) + vgetq_lane_f32(t, 3));
}

/* One weight row against R activation rows: the weights are loaded (and
 * widened) once for all R. */
NK void float_row(const brisk_mm_tile *t, int type, int c, int r0, const int R) {
  const uint8_t *w = t->w + (size_t)c * t->w_stride;
  const float *x[BRISK_MM_MAX_X];
  float32x4_t lo[BRISK_MM_MAX_X], hi[BRISK_MM_MAX_X];
  for (int r = 0; r < R; r++) {
    x[r] = (const float *)(const void *)(t->x + (size_t)(r0 + r) * t->x_stride);
    lo[r] = hi[r] = vdupq_n_f32(0);
  }
  int64_t i = 0;
  for (; i + 8 <= t->k; i += 8) {
    float32x4_t wl, wh;
    load8(w, i, type, &wl, &wh);
    for (int r = 0; r < R; r++) {
      lo[r] = vaddq_f32(lo[r], vmulq_f32(wl, vld1q_f32(x[r] + i)));
      hi[r] = vaddq_f32(hi[r], vmulq_f32(wh, vld1q_f32(x[r] + i + 4)));
    }
  }
  for (int r = 0; r < R; r++) {
    float s = tree8(lo[r], hi[r]);
    for (int64_t j = i; j < t->k; j++) s += load1(w, j, type) * x[r][j];
    t->y[(size_t)(r0 + r) * t->y_stride + (size_t)c] = s;
  }
}

NK void float_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  for (int c = 0; c < n_w; c++) switch (n_x) {
    case 1: float_row(t, type, c, 0, 1); break;
    case 2: float_row(t, type, c, 0, 2); break;
    case 3: float_row(t, type, c, 0, 3); break;
    default: float_row(t, type, c, 0, 4); break;
    }
}

NKF void NK_NAME(tile_f32)(const brisk_mm_tile *t, int n_w, int n_x) {
  float_tile(t, n_w, n_x, NK_F32);
}
NKF void NK_NAME(tile_f16)(const brisk_mm_tile *t, int n_w, int n_x) {
  float_tile(t, n_w, n_x, NK_F16);
}
NKF void NK_NAME(tile_bf16)(const brisk_mm_tile *t, int n_w, int n_x) {
  float_tile(t, n_w, n_x, NK_BF16);
}

/* ---- the 32-element types. Levels as int8 (q8_0: as stored; the nibble
 * types: unsigned 0..15 / 0..31), elements 0-15 in one vector and 16-31 in
 * the other; the integer block sum P is exact, then the scalar float steps:
 * s = s + (float)P * (d_w * d_x), and for q4_1 / q5_1 sm = sm + m_w * s_x,
 * returned as s + sm. The offsets of q4_0 (-8) and q5_0 (-16) come off P as
 * 8 or 16 x sum(x), from the activation's lane sums (each 8 x a sum of 4). */

enum { NK_Q8_0, NK_Q4_0, NK_Q4_1, NK_Q5_0, NK_Q5_1 };

NK int ls_total(const brisk_mm_q8 *x) {
  return vaddvq_s32(vaddq_s32(vld1q_s32(x->ls), vld1q_s32(x->ls + 4)));
}

/* Bit e of the 16 bits in qh[0..1] as 0x10 in byte e. */
NK uint8x16_t spread16(const uint8_t *qh) {
  static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t b = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  return vandq_u8(vtstq_u8(b, vld1q_u8(bit)), vdupq_n_u8(0x10));
}

/* Block i of a base-layout row: its levels (lo = elements 0-15, hi = 16-31),
 * scale and min (fp16 bits). */
NK void base_block(const uint8_t *row, int64_t i, int type, int8x16_t *lo, int8x16_t *hi,
                   uint16_t *d, uint16_t *m) {
  static const size_t bs[] = {sizeof(brisk_block_q8_0), sizeof(brisk_block_q4_0),
                              sizeof(brisk_block_q4_1), sizeof(brisk_block_q5_0),
                              sizeof(brisk_block_q5_1)};
  const uint8_t *b = row + (size_t)i * bs[type];
  *m = 0;
  memcpy(d, b, 2);
  if (type == NK_Q8_0) {
    *lo = vld1q_s8((const int8_t *)(b + 2));
    *hi = vld1q_s8((const int8_t *)(b + 18));
    return;
  }
  const bool has_min = type == NK_Q4_1 || type == NK_Q5_1;
  const bool five = type == NK_Q5_0 || type == NK_Q5_1;
  if (has_min) memcpy(m, b + 2, 2);
  const uint8_t *qh = b + (has_min ? 4 : 2);
  const uint8x16_t q = vld1q_u8(qh + (five ? 4 : 0));
  uint8x16_t l = vandq_u8(q, vdupq_n_u8(0x0f)), h = vshrq_n_u8(q, 4);
  if (five) {
    l = vorrq_u8(l, spread16(qh));
    h = vorrq_u8(h, spread16(qh + 2));
  }
  *lo = vreinterpretq_s8_u8(l);
  *hi = vreinterpretq_s8_u8(h);
}

/* One base-layout weight row against R activation rows (the block unpacked
 * once for all R). */
NK void q32_row(const brisk_mm_tile *t, int type, int c, const int R) {
  const bool has_min = type == NK_Q4_1 || type == NK_Q5_1;
  const int off = type == NK_Q4_0 ? 1 : type == NK_Q5_0 ? 2 : 0; /* x sum(ls) */
  const uint8_t *w = t->w + (size_t)c * t->w_stride;
  float s[BRISK_MM_MAX_X] = {0}, sm[BRISK_MM_MAX_X] = {0};
  for (int64_t i = 0; i < t->k / 32; i++) {
    int8x16_t lo, hi;
    uint16_t d, m;
    base_block(w, i, type, &lo, &hi, &d, &m);
    const float dw = brisk_f16_to_f32(d), mw = brisk_f16_to_f32(m);
    for (int r = 0; r < R; r++) {
      const brisk_mm_q8 *x = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      int32x4_t acc = dot4(vdupq_n_s32(0), lo, vld1q_s8(x->qs));
      acc = dot4(acc, hi, vld1q_s8(x->qs + 16));
      int p = vaddvq_s32(acc);
      if (off) p -= off * ls_total(x);
      const float term = (float)p * (dw * x->d);
      s[r] += term;
      if (has_min) {
        const float mt = mw * x->s;
        sm[r] += mt;
      }
    }
  }
  for (int r = 0; r < R; r++)
    t->y[(size_t)r * t->y_stride + (size_t)c] = has_min ? s[r] + sm[r] : s[r];
}

NK void q32_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  for (int c = 0; c < n_w; c++) switch (n_x) {
    case 1: q32_row(t, type, c, 1); break;
    case 2: q32_row(t, type, c, 2); break;
    case 3: q32_row(t, type, c, 3); break;
    default: q32_row(t, type, c, 4); break;
    }
}

#define NK_Q32_TILE(name, TYPE)                                                                    \
  NKF void NK_NAME(tile_##name)(const brisk_mm_tile *t, int n_w, int n_x) {                        \
    q32_tile(t, n_w, n_x, TYPE);                                                                   \
  }
#if !NEON_I8MM /* there: the smmla kernels (mm_neon_mmla.h) */
NK_Q32_TILE(q8_0, NK_Q8_0)
NK_Q32_TILE(q4_0, NK_Q4_0)
#endif
NK_Q32_TILE(q4_1, NK_Q4_1)
NK_Q32_TILE(q5_0, NK_Q5_0)
NK_Q32_TILE(q5_1, NK_Q5_1)

#include "backend/cpu/matmul/mm_neon_k.h"

/* ---- packed _R8 layouts (pack.h) of the 32-element types: a 32-byte chunk
 * holds 4 level bytes of each of the 8 rows of a group, so rows 0-3 take one
 * vector and rows 4-7 the other, and one dot4 against 4 broadcast activation
 * bytes gives each row's partial sum in its own lane. Per row the exact
 * block sum and the float steps are those above. */

/* The activation bytes x[4c .. 4c+3] in every lane. */
NK int8x16_t bcast4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

NK float32x4_t f16x4(const uint8_t *p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

/* One group of 8 rows against R activation rows. */
NK void r8_group(const brisk_mm_tile *t, int type, const uint8_t *g0, int c0, const int R) {
  static const size_t bs[] = {sizeof(brisk_block_q8_0), sizeof(brisk_block_q4_0),
                              sizeof(brisk_block_q4_1), sizeof(brisk_block_q5_0),
                              sizeof(brisk_block_q5_1)};
  const bool has_min = type == NK_Q4_1 || type == NK_Q5_1;
  const bool five = type == NK_Q5_0 || type == NK_Q5_1;
  const int off = type == NK_Q4_0 ? 1 : type == NK_Q5_0 ? 2 : 0;
  const size_t mo = 2 * BRISK_PACK_ROWS;                  /* mins */
  const size_t ho = has_min ? 4 * BRISK_PACK_ROWS : mo;   /* q5_x hb */
  const size_t qo = five ? ho + 4 * BRISK_PACK_ROWS : ho; /* chunks */
  const size_t gbs = BRISK_PACK_ROWS * bs[type];
  const int n_chunks = type == NK_Q8_0 ? 8 : 4;
  float32x4_t s[BRISK_MM_MAX_X][2], sm[BRISK_MM_MAX_X][2];
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = sm[r][0] = sm[r][1] = vdupq_n_f32(0);
  for (int64_t i = 0; i < t->k / 32; i++) {
    const uint8_t *g = g0 + (size_t)i * gbs;
    prefetch_group(t, g);
    const brisk_mm_q8 *x[BRISK_MM_MAX_X];
    int32x4_t p[BRISK_MM_MAX_X][2];
    for (int r = 0; r < R; r++) {
      x[r] = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride) + i;
      p[r][0] = p[r][1] = vdupq_n_s32(off ? -off * ls_total(x[r]) : 0);
    }
    const uint8x16_t hb0 = five ? vld1q_u8(g + ho) : vdupq_n_u8(0);
    const uint8x16_t hb1 = five ? vld1q_u8(g + ho + 16) : vdupq_n_u8(0);
    for (int c = 0; c < n_chunks; c++) {
      const uint8x16_t q0 = vld1q_u8(g + qo + 32 * (size_t)c);
      const uint8x16_t q1 = vld1q_u8(g + qo + 32 * (size_t)c + 16);
      if (type == NK_Q8_0) {
        for (int r = 0; r < R; r++) {
          const int8x16_t y = bcast4(x[r]->qs + 4 * c);
          p[r][0] = dot4(p[r][0], vreinterpretq_s8_u8(q0), y);
          p[r][1] = dot4(p[r][1], vreinterpretq_s8_u8(q1), y);
        }
        continue;
      }
      uint8x16_t l0, l1, h0, h1;
      if (five) { /* byte = lo | (hi & 7) << 5; hb bits 2c, 2c+1 = hi bits 3, 4 */
        const uint8x16_t m31 = vdupq_n_u8(0x1f), m24 = vdupq_n_u8(0x18);
        const int8x16_t sh = vdupq_n_s8((int8_t)(3 - 2 * c));
        l0 = vandq_u8(q0, m31);
        l1 = vandq_u8(q1, m31);
        h0 = vorrq_u8(vshrq_n_u8(q0, 5), vandq_u8(vshlq_u8(hb0, sh), m24));
        h1 = vorrq_u8(vshrq_n_u8(q1, 5), vandq_u8(vshlq_u8(hb1, sh), m24));
      } else {
        const uint8x16_t m4 = vdupq_n_u8(0x0f);
        l0 = vandq_u8(q0, m4);
        l1 = vandq_u8(q1, m4);
        h0 = vshrq_n_u8(q0, 4);
        h1 = vshrq_n_u8(q1, 4);
      }
      for (int r = 0; r < R; r++) {
        const int8x16_t yl = bcast4(x[r]->qs + 4 * c), yh = bcast4(x[r]->qs + 16 + 4 * c);
        p[r][0] = dot4(dot4(p[r][0], vreinterpretq_s8_u8(l0), yl), vreinterpretq_s8_u8(h0), yh);
        p[r][1] = dot4(dot4(p[r][1], vreinterpretq_s8_u8(l1), yl), vreinterpretq_s8_u8(h1), yh);
      }
    }
    const float32x4_t dw0 = f16x4(g), dw1 = f16x4(g + 8);
    const float32x4_t mw0 = has_min ? f16x4(g + mo) : vdupq_n_f32(0);
    const float32x4_t mw1 = has_min ? f16x4(g + mo + 8) : vdupq_n_f32(0);
    for (int r = 0; r < R; r++) {
      s[r][0] = vaddq_f32(s[r][0], vmulq_f32(vcvtq_f32_s32(p[r][0]), vmulq_n_f32(dw0, x[r]->d)));
      s[r][1] = vaddq_f32(s[r][1], vmulq_f32(vcvtq_f32_s32(p[r][1]), vmulq_n_f32(dw1, x[r]->d)));
      if (has_min) {
        sm[r][0] = vaddq_f32(sm[r][0], vmulq_n_f32(mw0, x[r]->s));
        sm[r][1] = vaddq_f32(sm[r][1], vmulq_n_f32(mw1, x[r]->s));
      }
    }
  }
  for (int r = 0; r < R; r++) {
    float *y = t->y + (size_t)r * t->y_stride + (size_t)c0;
    vst1q_f32(y, has_min ? vaddq_f32(s[r][0], sm[r][0]) : s[r][0]);
    vst1q_f32(y + 4, has_min ? vaddq_f32(s[r][1], sm[r][1]) : s[r][1]);
  }
}

NK void r8_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  for (int c = 0; c < n_w; c += BRISK_PACK_ROWS) {
    const uint8_t *g = t->w + (size_t)(c / BRISK_PACK_ROWS) * gstride;
    switch (n_x) {
    case 1: r8_group(t, type, g, c, 1); break;
    case 2: r8_group(t, type, g, c, 2); break;
    case 3: r8_group(t, type, g, c, 3); break;
    default: r8_group(t, type, g, c, 4); break;
    }
  }
}

#define NK_R8_TILE(name, TYPE)                                                                     \
  NKF void NK_NAME(tile_##name##_r8)(const brisk_mm_tile *t, int n_w, int n_x) {                   \
    r8_tile(t, n_w, n_x, TYPE);                                                                    \
  }
#if !NEON_I8MM
NK_R8_TILE(q8_0, NK_Q8_0)
NK_R8_TILE(q4_0, NK_Q4_0)
#endif
NK_R8_TILE(q4_1, NK_Q4_1)
NK_R8_TILE(q5_0, NK_Q5_0)
NK_R8_TILE(q5_1, NK_Q5_1)

#include "backend/cpu/matmul/mm_neon_r8_k.h"

#if NEON_I8MM
#  include "backend/cpu/matmul/mm_neon_mmla.h"
#  define NK_MMLA(name) NK_NAME(name##_mmla)
#else
#  define NK_MMLA(name) NK_NAME(name)
#endif

/* The table: NULL for a type these kernels do not cover. */
brisk_mm_tile_fn NK_NAME(brisk_mm_neon_tile)(uint32_t w_type);
brisk_mm_tile_fn NK_NAME(brisk_mm_neon_tile)(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return NK_NAME(tile_f32);
  case BRISK_DTYPE_F16: return NK_NAME(tile_f16);
  case BRISK_DTYPE_BF16: return NK_NAME(tile_bf16);
  case BRISK_DTYPE_Q8_0: return NK_MMLA(tile_q8_0);
  case BRISK_DTYPE_Q4_0: return NK_MMLA(tile_q4_0);
  case BRISK_DTYPE_Q4_1: return NK_NAME(tile_q4_1);
  case BRISK_DTYPE_Q5_0: return NK_NAME(tile_q5_0);
  case BRISK_DTYPE_Q5_1: return NK_NAME(tile_q5_1);
  case BRISK_DTYPE_Q4_K: return NK_NAME(tile_q4_k);
  case BRISK_DTYPE_Q5_K: return NK_NAME(tile_q5_k);
  case BRISK_DTYPE_Q6_K: return NK_NAME(tile_q6_k);
  case BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8: return NK_MMLA(tile_q8_0_r8);
  case BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8: return NK_MMLA(tile_q4_0_r8);
  case BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q4_1_r8);
  case BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q5_0_r8);
  case BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q5_1_r8);
  case BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q4_k_r8);
  case BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q5_k_r8);
  case BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8: return NK_NAME(tile_q6_k_r8);
  default: return NULL;
  }
}

#undef NK_MMLA
#undef NK_TARGET
#undef NK_NAME
#undef NK
#undef NKF
