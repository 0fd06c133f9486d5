/* Portable kernels: one dot product per output, integer sums per block
 * against 8-bit activations, float accumulation across blocks. Also the
 * reference for what the AVX2 kernels compute. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static float f16_table[65536];
static pthread_once_t f16_table_once = PTHREAD_ONCE_INIT;
static uint64_t spread_bits[256];
static void f16_table_init(void) {
  for (uint32_t h = 0; h < 65536; h++) f16_table[h] = brisk_f16_to_f32((uint16_t)h);
  for (uint32_t b = 0; b < 256; b++) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)((b >> i) & 1) << (8 * i);
    spread_bits[b] = v;
  }
}
const float *brisk_mm_f16_table(void) {
  pthread_once(&f16_table_once, f16_table_init);
  return f16_table;
}

/* The table, for the loops below (also where there is no F16C). */
#define F16(h) (f16_table[(uint16_t)(h)])

brisk_mm_act brisk_mm_act_format(uint32_t w_type) {
  switch (brisk_dtype_base(w_type)) {
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

/* ---- 32-element types against brisk_mm_q8 blocks: each weight block is
 * unpacked to 32 signed levels, then one plain int8 dot product. */

static inline int dot32(const int8_t *a, const int8_t *b) {
  int s = 0;
  for (int j = 0; j < 32; j++) s += a[j] * b[j];
  return s;
}

static inline int dot32u(const uint8_t *a, const int8_t *b) {
  int s = 0;
  for (int j = 0; j < 32; j++) s += a[j] * b[j];
  return s;
}

/* Sum of a block's 32 activation values (its lane sums hold 8x each 4). */
static inline int sum32(const brisk_mm_q8 *x) {
  int s = 0;
  for (int l = 0; l < 8; l++) s += x->ls[l];
  return s / 8;
}

/* Unsigned levels of a q4 block, 8 at a time in 64-bit words (little-endian
 * byte order is element order): element j is the low nibble of byte j,
 * element j + 16 the high nibble. */
static inline void unpack_q4(const uint8_t qs[16], uint8_t q[32]) {
  const uint64_t m = 0x0f0f0f0f0f0f0f0full;
  uint64_t w[2], v[4];
  memcpy(w, qs, 16);
  v[0] = w[0] & m, v[1] = w[1] & m, v[2] = (w[0] >> 4) & m, v[3] = (w[1] >> 4) & m;
  memcpy(q, v, 32);
}

/* Byte i of spread_bits[b] (built with the fp16 table) is bit i of b: one
 * qh byte to 8 elements. */

/* As unpack_q4 plus bit j of the little-endian qh word as bit 4 of element j. */
static inline void unpack_q5(const uint8_t qs[16], const uint8_t qh[4], uint8_t q[32]) {
  const uint64_t m = 0x0f0f0f0f0f0f0f0full;
  uint64_t w[2], v[4];
  memcpy(w, qs, 16);
  v[0] = (w[0] & m) | spread_bits[qh[0]] << 4;
  v[1] = (w[1] & m) | spread_bits[qh[1]] << 4;
  v[2] = ((w[0] >> 4) & m) | spread_bits[qh[2]] << 4;
  v[3] = ((w[1] >> 4) & m) | spread_bits[qh[3]] << 4;
  memcpy(q, v, 32);
}

/* One block's term of a q8_0 / q4_0 dot product; the packed kernels below
 * add the same terms in the same order. */
static inline float term_q8_0(const brisk_block_q8_0 *a, const brisk_mm_q8 *x) {
  return (float)dot32(a->qs, x->qs) * (F16(a->d) * x->d);
}

/* The level offsets (-8, -16) come off as offset * sum(x) in integers. */
static inline float term_q4_0(const brisk_block_q4_0 *a, const brisk_mm_q8 *x) {
  uint8_t q[32];
  unpack_q4(a->qs, q);
  const int sum = dot32u(q, x->qs) - 8 * sum32(x);
  return (float)sum * (F16(a->d) * x->d);
}

static float dot_q8_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q8_0 *a = (const brisk_block_q8_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) s += term_q8_0(&a[i], &x[i]);
  return s;
}

static float dot_q4_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q4_0 *a = (const brisk_block_q4_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) s += term_q4_0(&a[i], &x[i]);
  return s;
}

/* q4_1 / q5_1: the scaled term, and the min term into *mt (summed apart
 * and added last). */
static inline float term_q4_1(const brisk_block_q4_1 *a, const brisk_mm_q8 *x, float *mt) {
  uint8_t q[32];
  unpack_q4(a->qs, q);
  *mt = F16(a->m) * x->s;
  return (float)dot32u(q, x->qs) * (F16(a->d) * x->d);
}

static inline float term_q5_0(const brisk_block_q5_0 *a, const brisk_mm_q8 *x) {
  uint8_t q[32];
  unpack_q5(a->qs, a->qh, q);
  const int sum = dot32u(q, x->qs) - 16 * sum32(x);
  return (float)sum * (F16(a->d) * x->d);
}

static inline float term_q5_1(const brisk_block_q5_1 *a, const brisk_mm_q8 *x, float *mt) {
  uint8_t q[32];
  unpack_q5(a->qs, a->qh, q);
  *mt = F16(a->m) * x->s;
  return (float)dot32u(q, x->qs) * (F16(a->d) * x->d);
}

static float dot_q4_1(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q4_1 *a = (const brisk_block_q4_1 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0, sm = 0; /* scaled sums, min terms */
  for (int64_t i = 0; i < k / 32; i++) {
    float mt;
    s += term_q4_1(&a[i], &x[i], &mt);
    sm += mt;
  }
  return s + sm;
}

static float dot_q5_0(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q5_0 *a = (const brisk_block_q5_0 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0;
  for (int64_t i = 0; i < k / 32; i++) s += term_q5_0(&a[i], &x[i]);
  return s;
}

static float dot_q5_1(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q5_1 *a = (const brisk_block_q5_1 *)w;
  const brisk_mm_q8 *x = (const brisk_mm_q8 *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / 32; i++) {
    float mt;
    s += term_q5_1(&a[i], &x[i], &mt);
    sm += mt;
  }
  return s + sm;
}

/* ---- K-types against Q8_K: the super-block unpacked to 256 levels, integer
 * sums with the sub-block scales over the whole super-block, mins through
 * the activation's 16-sums. */

/* q4_k / q5_k levels (0..15 / 0..31) of one super-block. */
static inline void unpack_k45(const uint8_t *qs, const uint8_t *qh, int8_t q[256]) {
  for (int c = 0; c < 4; c++) /* 32 bytes: sub-block 2c low nibbles, 2c + 1 high */
    for (int l = 0; l < 32; l++) {
      q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0xf);
      q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
    }
  if (qh)
    for (int j = 0; j < 8; j++)
      for (int l = 0; l < 32; l++) q[32 * j + l] |= (int8_t)(((qh[l] >> j) & 1) << 4);
}

/* One super-block's terms of a q4_k / q5_k dot product into *s and *sm; the
 * packed kernels add the same terms in the same order. */
static inline void term_k45(const uint8_t *blk, const brisk_block_q8_k *x, int five, float *s,
                            float *sm) {
  int8_t q[256];
  uint16_t d, dmin;
  const uint8_t *scales;
  if (five) {
    const brisk_block_q5_k *b = (const brisk_block_q5_k *)blk;
    unpack_k45(b->qs, b->qh, q);
    d = b->d, dmin = b->dmin, scales = b->scales;
  } else {
    const brisk_block_q4_k *b = (const brisk_block_q4_k *)blk;
    unpack_k45(b->qs, NULL, q);
    d = b->d, dmin = b->dmin, scales = b->scales;
  }
  int sumi = 0, summ = 0;
  for (int j = 0; j < 8; j++) {
    uint8_t sc, mn;
    brisk_k4_scale_min(scales, j, &sc, &mn);
    sumi += sc * dot32(q + 32 * j, x->qs + 32 * j);
    summ += mn * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
  }
  *s += (float)sumi * (F16(d) * x->d);
  *sm -= (float)summ * (F16(dmin) * x->d);
}

static float dot_k45(const uint8_t *w, const uint8_t *xb, int64_t k, int five) {
  const size_t bs = five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k);
  const brisk_block_q8_k *x = (const brisk_block_q8_k *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++) term_k45(w + (size_t)i * bs, &x[i], five, &s, &sm);
  return s + sm;
}

static float dot_q4_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  return dot_k45(w, xb, k, 0);
}
static float dot_q5_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  return dot_k45(w, xb, k, 1);
}

/* q6_k levels (0..63) of one super-block: per 128-element half, ql byte l
 * and l + 32 give the low nibbles of elements l, l + 32 (low) and l + 64,
 * l + 96 (high); qh byte l their top 2 bits at bits 0, 2, 4, 6. */
static inline void unpack_q6(const brisk_block_q6_k *b, int8_t q[256]) {
  for (int h = 0; h < 2; h++) {
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    int8_t *o = q + 128 * h;
    for (int l = 0; l < 32; l++) {
      o[l] = (int8_t)((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4);
      o[l + 32] = (int8_t)((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4);
      o[l + 64] = (int8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      o[l + 96] = (int8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
  }
}

/* One super-block's terms of a q6_k dot product, as term_k45. */
static inline void term_q6_k(const brisk_block_q6_k *a, const brisk_block_q8_k *x, float *s,
                             float *sm) {
  int8_t q[256];
  unpack_q6(a, q);
  int sumi = 0, offs = 0;
  for (int g = 0; g < 16; g++) { /* sub-blocks of 16 */
    int sub = 0;
    for (int l = 0; l < 16; l++) sub += q[16 * g + l] * x->qs[16 * g + l];
    sumi += a->scales[g] * sub;
    offs += a->scales[g] * x->bsums[g];
  }
  const float dd = F16(a->d) * x->d;
  *s += (float)sumi * dd;
  *sm -= (float)(32 * offs) * dd; /* the -32 offset of every level */
}

static float dot_q6_k(const uint8_t *w, const uint8_t *xb, int64_t k) {
  const brisk_block_q6_k *a = (const brisk_block_q6_k *)w;
  const brisk_block_q8_k *x = (const brisk_block_q8_k *)xb;
  float s = 0, sm = 0;
  for (int64_t i = 0; i < k / BRISK_QK_K; i++) term_q6_k(&a[i], &x[i], &s, &sm);
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

/* Packed (_R8) weights: a tile is whole groups of 8 rows (n_w = 8, 16, ..);
 * each block is put back in its base layout and added as above, so the
 * results equal the base type's bit for bit. */
static void tile_r8(const brisk_mm_tile *t, int n_w, int n_x, uint32_t type) {
  const uint32_t base = brisk_dtype_base(type);
  const bool has_min = base == BRISK_DTYPE_Q4_1 || base == BRISK_DTYPE_Q5_1;
  (void)brisk_mm_f16_table();
  for (int r = 0; r < n_x; r++) {
    const brisk_mm_q8 *x = (const brisk_mm_q8 *)(t->x + (size_t)r * t->x_stride);
    for (int c = 0; c < n_w; c++) {
      float s = 0, sm = 0; /* as the dot_ functions: scaled terms, min terms */
      for (int64_t i = 0; i < t->k / 32; i++) {
        union {
          brisk_block_q8_0 q8_0;
          brisk_block_q4_0 q4_0;
          brisk_block_q4_1 q4_1;
          brisk_block_q5_0 q5_0;
          brisk_block_q5_1 q5_1;
        } b;
        brisk_cpu_packed_block(type, t->w + (size_t)(c / 8) * 8 * t->w_stride, t->k, i, c % 8,
                               (uint8_t *)&b);
        float mt = 0;
        switch (base) {
        case BRISK_DTYPE_Q8_0: s += term_q8_0(&b.q8_0, &x[i]); break;
        case BRISK_DTYPE_Q4_0: s += term_q4_0(&b.q4_0, &x[i]); break;
        case BRISK_DTYPE_Q4_1: s += term_q4_1(&b.q4_1, &x[i], &mt); break;
        case BRISK_DTYPE_Q5_0: s += term_q5_0(&b.q5_0, &x[i]); break;
        default: s += term_q5_1(&b.q5_1, &x[i], &mt); break; /* q5_1 */
        }
        sm += mt;
      }
      t->y[(size_t)r * t->y_stride + (size_t)c] = has_min ? s + sm : s;
    }
  }
}
#define R8_TILE(name, TYPE)                                                                        \
  static void tile_##name##_r8(const brisk_mm_tile *t, int n_w, int n_x) {                         \
    tile_r8(t, n_w, n_x, TYPE | BRISK_DTYPE_PACKED_R8);                                            \
  }
R8_TILE(q8_0, BRISK_DTYPE_Q8_0)
R8_TILE(q4_0, BRISK_DTYPE_Q4_0)
R8_TILE(q4_1, BRISK_DTYPE_Q4_1)
R8_TILE(q5_0, BRISK_DTYPE_Q5_0)
R8_TILE(q5_1, BRISK_DTYPE_Q5_1)

/* The same for the K-types: each super-block back in its base layout. */
static void tile_r8_k(const brisk_mm_tile *t, int n_w, int n_x, uint32_t base) {
  const uint32_t type = base | BRISK_DTYPE_PACKED_R8;
  (void)brisk_mm_f16_table();
  for (int r = 0; r < n_x; r++) {
    const brisk_block_q8_k *x = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride);
    for (int c = 0; c < n_w; c++) {
      float s = 0, sm = 0;
      for (int64_t i = 0; i < t->k / BRISK_QK_K; i++) {
        union {
          brisk_block_q4_k q4;
          brisk_block_q5_k q5;
          brisk_block_q6_k q6;
        } b;
        brisk_cpu_packed_block(type, t->w + (size_t)(c / 8) * 8 * t->w_stride, t->k, i, c % 8,
                               (uint8_t *)&b);
        if (base == BRISK_DTYPE_Q4_K)
          term_k45((const uint8_t *)&b.q4, &x[i], 0, &s, &sm);
        else if (base == BRISK_DTYPE_Q5_K)
          term_k45((const uint8_t *)&b.q5, &x[i], 1, &s, &sm);
        else
          term_q6_k(&b.q6, &x[i], &s, &sm);
      }
      t->y[(size_t)r * t->y_stride + (size_t)c] = s + sm;
    }
  }
}
static void tile_q4_k_r8(const brisk_mm_tile *t, int n_w, int n_x) {
  tile_r8_k(t, n_w, n_x, BRISK_DTYPE_Q4_K);
}
static void tile_q5_k_r8(const brisk_mm_tile *t, int n_w, int n_x) {
  tile_r8_k(t, n_w, n_x, BRISK_DTYPE_Q5_K);
}
static void tile_q6_k_r8(const brisk_mm_tile *t, int n_w, int n_x) {
  tile_r8_k(t, n_w, n_x, BRISK_DTYPE_Q6_K);
}

brisk_mm_tile_fn brisk_mm_scalar_tile(uint32_t w_type) {
  switch (w_type) {
  case BRISK_DTYPE_Q8_0 | BRISK_DTYPE_PACKED_R8: return tile_q8_0_r8;
  case BRISK_DTYPE_Q4_0 | BRISK_DTYPE_PACKED_R8: return tile_q4_0_r8;
  case BRISK_DTYPE_Q4_1 | BRISK_DTYPE_PACKED_R8: return tile_q4_1_r8;
  case BRISK_DTYPE_Q5_0 | BRISK_DTYPE_PACKED_R8: return tile_q5_0_r8;
  case BRISK_DTYPE_Q5_1 | BRISK_DTYPE_PACKED_R8: return tile_q5_1_r8;
  case BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8: return tile_q4_k_r8;
  case BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8: return tile_q5_k_r8;
  case BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8: return tile_q6_k_r8;
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
