/* Portable kernels: one dot product per output, integer sums per block
 * against 8-bit activations, float accumulation across blocks. Also the
 * reference for what the AVX2 kernels compute. */
#include "backend/cpu/matmul/mm_internal.h"

#include "core/dtype.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <pthread.h>

static float f16_table[65536];
static pthread_once_t f16_table_once = PTHREAD_ONCE_INIT;
static void f16_table_init(void) {
  for (uint32_t h = 0; h < 65536; h++) f16_table[h] = brisk_f16_to_f32((uint16_t)h);
}
const float *brisk_mm_f16_table(void) {
  pthread_once(&f16_table_once, f16_table_init);
  return f16_table;
}

/* The table, for the loops below (also where there is no F16C). */
#define F16(h) (f16_table[(uint16_t)(h)])

brisk_mm_act brisk_mm_act_format(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q4_0:
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_0:
  case BRISK_DTYPE_Q5_1:
  case BRISK_DTYPE_Q8_0: return BRISK_MM_ACT_Q8;
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K:
  case BRISK_DTYPE_Q6_K: return BRISK_MM_ACT_Q8K;
  default: return BRISK_MM_ACT_F32;
  }
}

size_t brisk_mm_act_row_bytes(brisk_mm_act act, int64_t k) {
  switch (act) {
  case BRISK_MM_ACT_Q8: return (size_t)(k / 32) * sizeof(brisk_mm_q8);
  case BRISK_MM_ACT_Q8K: return (size_t)(k / BRISK_QK_K) * sizeof(brisk_block_q8_k);
  default: return (size_t)k * sizeof(float);
  }
}

/* Same rounding as the AVX2 version (round half to even), so both write the
 * same bytes. */
void brisk_mm_quantize_q8_scalar(const float *x, void *dst, int64_t k) {
  brisk_mm_q8 *b = dst;
  for (int64_t i = 0; i < k / 32; i++, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax > 0 ? 127 / amax : 0;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
      float v = nearbyintf(x[j] * id);
      int q = v > -127 ? (v < 127 ? (int)v : 127) : -127; /* NaN -> -127: no UB */
      b[i].qs[j] = (int8_t)q;
      sum += q;
    }
    b[i].d = amax / 127;
    b[i].s = b[i].d * (float)sum;
    for (int l = 0; l < 8; l++)
      b[i].ls[l] =
          8 * (b[i].qs[4 * l] + b[i].qs[4 * l + 1] + b[i].qs[4 * l + 2] + b[i].qs[4 * l + 3]);
  }
}

static void quantize_q8k_scalar(const float *x, void *dst, int64_t k) {
  brisk_quantize_row_q8_k(x, dst, k);
}

brisk_mm_act_fn brisk_mm_scalar_act(brisk_mm_act act) {
  switch (act) {
  case BRISK_MM_ACT_Q8: return brisk_mm_quantize_q8_scalar;
  case BRISK_MM_ACT_Q8K: return quantize_q8k_scalar;
  default: return NULL;
  }
}

/* ---- float weights: 8 interleaved partial sums (vectorizable without
 * reassociation), then the remainder. */

static float dot_f32(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const float *a = (const float *)w, *x = (const float *)xb;
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; l++) acc[l] += a[i + l] * x[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < k; i++) s += a[i] * x[i];
  return s;
}

static float dot_f16(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const uint16_t *a = (const uint16_t *)w;
  const float *x = (const float *)xb;
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; l++) acc[l] += F16(a[i + l]) * x[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < k; i++) s += F16(a[i]) * x[i];
  return s;
}

static float dot_bf16(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const uint16_t *a = (const uint16_t *)w;
  const float *x = (const float *)xb;
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; l++) acc[l] += brisk_bf16_to_f32(a[i + l]) * x[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < k; i++) s += brisk_bf16_to_f32(a[i]) * x[i];
  return s;
}

/* ---- 32-element types against brisk_mm_q8 blocks. */

static float dot_q8_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q8_0 *a = (const brisk_block_q8_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) {
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += a[i].qs[j] * x[i].qs[j];
    s += (float)sum * (F16(a[i].d) * x[i].d);
  }
  return s;
}

static float dot_q4_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q4_0 *a = (const brisk_block_q4_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) {
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      sum += ((a[i].qs[j] & 0xf) - 8) * x[i].qs[j];
      sum += ((a[i].qs[j] >> 4) - 8) * x[i].qs[j + 16];
    }
    s += (float)sum * (F16(a[i].d) * x[i].d);
  }
  return s;
}

static float dot_q4_1(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q4_1 *a = (const brisk_block_q4_1 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0, sm = 0; /* scaled sums, min terms */
  for (int64_t i = 0; i < k / 32; i++) {
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      sum += (a[i].qs[j] & 0xf) * x[i].qs[j];
      sum += (a[i].qs[j] >> 4) * x[i].qs[j + 16];
    }
    s += (float)sum * (F16(a[i].d) * x[i].d);
    sm += F16(a[i].m) * x[i].s;
  }
  return s + sm;
}

static inline uint32_t load_qh(const uint8_t qh[4]) {
  return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static float dot_q5_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q5_0 *a = (const brisk_block_q5_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) {
    const uint32_t h = load_qh(a[i].qh);
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      int q0 = (a[i].qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
      int q1 = (a[i].qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
      sum += (q0 - 16) * x[i].qs[j] + (q1 - 16) * x[i].qs[j + 16];
    }
    s += (float)sum * (F16(a[i].d) * x[i].d);
  }
  return s;
}

static float dot_q5_1(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q5_1 *a = (const brisk_block_q5_1 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / 32; i++) {
    const uint32_t h = load_qh(a[i].qh);
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      int q0 = (a[i].qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
      int q1 = (a[i].qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
      sum += q0 * x[i].qs[j] + q1 * x[i].qs[j + 16];
    }
    s += (float)sum * (F16(a[i].d) * x[i].d);
    sm += F16(a[i].m) * x[i].s;
  }
  return s + sm;
}

/* ---- K-types against Q8_K: integer sums over the whole super-block with the
 * 6/8-bit sub-block scales, mins through the activation's 16-sums. */

static float dot_q4_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q4_k *a = (const brisk_block_q4_k *)w;
  const brisk_block_q8_k *x = (const brisk_block_q8_k *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
      uint8_t sc, mn;
      brisk_k4_scale_min(a[i].scales, j, &sc, &mn);
      const uint8_t *q = a[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int sub = 0;
      for (int l = 0; l < 32; l++) sub += ((q[l] >> shift) & 0xf) * x[i].qs[32 * j + l];
      sumi += sc * sub;
      summ += mn * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    s += (float)sumi * (F16(a[i].d) * x[i].d);
    sm -= (float)summ * (F16(a[i].dmin) * x[i].d);
  }
  return s + sm;
}

static float dot_q5_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q5_k *a = (const brisk_block_q5_k *)w;
  const brisk_block_q8_k *x = (const brisk_block_q8_k *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
      uint8_t sc, mn;
      brisk_k4_scale_min(a[i].scales, j, &sc, &mn);
      const uint8_t *q = a[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int sub = 0;
      for (int l = 0; l < 32; l++) {
        int v = ((q[l] >> shift) & 0xf) | ((a[i].qh[l] >> j) & 1) << 4;
        sub += v * x[i].qs[32 * j + l];
      }
      sumi += sc * sub;
      summ += mn * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    s += (float)sumi * (F16(a[i].d) * x[i].d);
    sm -= (float)summ * (F16(a[i].dmin) * x[i].d);
  }
  return s + sm;
}

static float dot_q6_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q6_k *a = (const brisk_block_q6_k *)w;
  const brisk_block_q8_k *x = (const brisk_block_q8_k *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++) {
    int sumi = 0, offs = 0;
    for (int g = 0; g < 16; g++) { /* sub-blocks of 16 */
      int sub = 0;
      for (int l = 0; l < 16; l++) {
        int e = 16 * g + l, half = e / 128, t = (e % 128) / 32, p = e % 32;
        int lo = (a[i].ql[64 * half + p + 32 * (t % 2)] >> (4 * (t / 2))) & 0xf;
        int hi = (a[i].qh[32 * half + p] >> (2 * t)) & 3;
        sub += (lo | hi << 4) * x[i].qs[e];
      }
      sumi += a[i].scales[g] * sub;
      offs += a[i].scales[g] * x[i].bsums[g];
    }
    const float dd = F16(a[i].d) * x[i].d;
    s += (float)sumi * dd;
    sm -= (float)(32 * offs) * dd; /* the -32 offset of every level */
  }
  return s + sm;
}

typedef float (*dot_fn)(const uint8_t *w, const uint8_t *x, int64_t k);

static inline void tile_with(dot_fn dot, const brisk_mm_tile *t, int n_w, int n_x) {
  (void)brisk_mm_f16_table(); /* built before the dots read it */
  for (int r = 0; r < n_x; r++)
    for (int c = 0; c < n_w; c++)
      t->y[(size_t)r * t->y_stride + (size_t)c] =
          dot(t->w + (size_t)c * t->w_stride, t->x + (size_t)r * t->x_stride, t->k);
}

#define SCALAR_TILE(name)                                                                          \
  static void tile_##name(const brisk_mm_tile *t, int n_w, int n_x) {                              \
    tile_with(dot_##name, t, n_w, n_x);                                                            \
  }
SCALAR_TILE(f32)
SCALAR_TILE(f16)
SCALAR_TILE(bf16)
SCALAR_TILE(q8_0)
SCALAR_TILE(q4_0)
SCALAR_TILE(q4_1)
SCALAR_TILE(q5_0)
SCALAR_TILE(q5_1)
SCALAR_TILE(q4_k)
SCALAR_TILE(q5_k)
SCALAR_TILE(q6_k)

brisk_mm_tile_fn brisk_mm_scalar_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_F32: return tile_f32;
  case BRISK_DTYPE_F16: return tile_f16;
  case BRISK_DTYPE_BF16: return tile_bf16;
  case BRISK_DTYPE_Q8_0: return tile_q8_0;
  case BRISK_DTYPE_Q4_0: return tile_q4_0;
  case BRISK_DTYPE_Q4_1: return tile_q4_1;
  case BRISK_DTYPE_Q5_0: return tile_q5_0;
  case BRISK_DTYPE_Q5_1: return tile_q5_1;
  case BRISK_DTYPE_Q4_K: return tile_q4_k;
  case BRISK_DTYPE_Q5_K: return tile_q5_k;
  case BRISK_DTYPE_Q6_K: return tile_q6_k;
  default: return NULL;
  }
}
