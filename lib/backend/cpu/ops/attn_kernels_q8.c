/* Attention kernels that read an INT8 (BRISK_KVQ_DTYPE_Q8) cache in place:
 * no float32 copy of a chunk of keys or values. Scores are integer dot
 * products of the INT8 query (brisk_kvq_quantize_query: one float scale per
 * 32 values) with the INT8 keys, one exact int32 per query block, then
 *   score = sum over groups g of s_g * (sum over blocks b in g of d_b * dot_b)
 * in float32, in that order, with separate multiplies and adds (no FMA: the
 * build's ISO C mode keeps the compiler from contracting them). The
 * integers are exact on every path and the float steps are the same, so the
 * AVX2, AVX-VNNI and AVX-512 VNNI scores equal the scalar ones bit for bit.
 * Values: acc += (p_c * s_g) * v, the INT8 value widened in a register
 * once for all the heads of a GQA group (a float32 copy of the chunk would
 * cost the same widening plus a store and a load); the vector paths fuse
 * the multiply-add, so they agree with the scalar one to rounding only
 * (tests/backend/ops: test_attn_int8.c). */
#include "backend/cpu/ops/attn_kernels.h"

#include "backend/cpu/ops/vec.h"
#include "core/half.h"

#include "quant/kv_quant.h"

#include <string.h>

/* Query blocks per cache group. */
#define QB_PER_GROUP (BRISK_KVQ_GROUP / BRISK_KVQ_QBLOCK)
_Static_assert(BRISK_KVQ_GROUP % BRISK_KVQ_QBLOCK == 0, "query blocks tile the cache groups");

static inline float group_scale(const uint8_t *row, int32_t g) {
  uint16_t h;
  memcpy(&h, row + 2 * g, 2);
  return brisk_f16_to_f32(h);
}

void brisk_attn_scores_q8_scalar(const int8_t *qq, const float *qd, const uint8_t *rows, int32_t n,
                                 int32_t hd, float *sc) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd), nb = brisk_kvq_n_qblocks(hd);
  for (int32_t c = 0; c < n; c++) {
    const uint8_t *row = rows + (size_t)c * rb;
    const int8_t *k = (const int8_t *)(row + 2 * ng);
    float s = 0;
    for (int32_t g = 0; g < ng; g++) {
      float part = 0;
      const int32_t b1 = (g + 1) * QB_PER_GROUP < nb ? (g + 1) * QB_PER_GROUP : nb;
      for (int32_t b = g * QB_PER_GROUP; b < b1; b++) {
        const int32_t i0 = b * BRISK_KVQ_QBLOCK;
        const int32_t i1 = i0 + BRISK_KVQ_QBLOCK < hd ? i0 + BRISK_KVQ_QBLOCK : hd;
        int32_t dot = 0;
        for (int32_t i = i0; i < i1; i++) dot += (int32_t)qq[i] * k[i];
        part += qd[b] * (float)dot;
      }
      s += group_scale(row, g) * part;
    }
    sc[c] = s;
  }
}

/* w[h][c] = p[h][c] * s_g(c) for heads h < nh of one group g: the one
 * rounding of the weight, the same on every path. */
static void group_weights(const float *p, int32_t nh, const uint8_t *rows, size_t rb, int32_t n,
                          int32_t g, float w[][BRISK_ATTN_MAX_CHUNK]) {
  float s[BRISK_ATTN_MAX_CHUNK];
  for (int32_t c = 0; c < n; c++) s[c] = group_scale(rows + (size_t)c * rb, g);
  for (int32_t h = 0; h < nh; h++)
    for (int32_t c = 0; c < n; c++) w[h][c] = p[(size_t)h * BRISK_ATTN_MAX_CHUNK + c] * s[c];
}

/* Elements i0 .. i1 - 1 (inside one group) of heads h < nh, one at a time. */
static void accumulate_q8_elems(float *acc, int32_t hd, float w[][BRISK_ATTN_MAX_CHUNK], int32_t nh,
                                const int8_t *v0, size_t rb, int32_t n, int32_t i0, int32_t i1) {
  for (int32_t h = 0; h < nh; h++)
    for (int32_t i = i0; i < i1; i++) {
      float a = acc[(size_t)h * hd + i];
      for (int32_t c = 0; c < n; c++) a += w[h][c] * (float)v0[(size_t)c * rb + i];
      acc[(size_t)h * hd + i] = a;
    }
}

/* Heads are taken this many at a time (the vector kernels' registers). */
#define HEAD_TILE 4

void brisk_attn_accumulate_q8_scalar(float *acc, const float *p, int32_t nh, const uint8_t *rows,
                                     int32_t n, int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  const int8_t *v0 = (const int8_t *)(rows + 2 * ng);
  float w[HEAD_TILE][BRISK_ATTN_MAX_CHUNK];
  for (int32_t g = 0; g < ng; g++) {
    const int32_t i0 = g * BRISK_KVQ_GROUP;
    const int32_t i1 = i0 + BRISK_KVQ_GROUP < hd ? i0 + BRISK_KVQ_GROUP : hd;
    for (int32_t h0 = 0; h0 < nh; h0 += HEAD_TILE) {
      const int32_t nt = nh - h0 < HEAD_TILE ? nh - h0 : HEAD_TILE;
      group_weights(p + (size_t)h0 * BRISK_ATTN_MAX_CHUNK, nt, rows, rb, n, g, w);
      accumulate_q8_elems(acc + (size_t)h0 * hd, hd, w, nt, v0, rb, n, i0, i1);
    }
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS

/* Eight keys a step: per query block, one 32-byte load of each key, the
 * signs moved onto the keys (|q| unsigned times sign(q) k signed: the
 * products fit int16 since neither side is -128), an int32 dot per key by
 * DOT (maddubs + madd, or one vpdpbusd), the eight reduced together, then
 * the float steps of the scalar kernel on eight lanes. Leftover keys and a
 * head_dim that is not a multiple of 32 take the scalar kernel (the same
 * numbers). */
#  define Q8_SCORES(NAME, TARGET, DOT)                                                             \
    TARGET static __m256i NAME##_hsum8(__m256i a0, __m256i a1, __m256i a2, __m256i a3, __m256i a4, \
                                       __m256i a5, __m256i a6, __m256i a7) {                       \
      __m256i s0 = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));        \
      __m256i s1 = _mm256_hadd_epi32(_mm256_hadd_epi32(a4, a5), _mm256_hadd_epi32(a6, a7));        \
      return _mm256_add_epi32(_mm256_permute2x128_si256(s0, s1, 0x20),                             \
                              _mm256_permute2x128_si256(s0, s1, 0x31));                            \
    }                                                                                              \
    TARGET void NAME(const int8_t *qq, const float *qd, const uint8_t *rows, int32_t n,            \
                     int32_t hd, float *sc) {                                                      \
      const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);                               \
      const int32_t ng = brisk_kvq_n_groups(hd), nb = brisk_kvq_n_qblocks(hd);                     \
      int32_t c = 0;                                                                               \
      if (hd % BRISK_KVQ_QBLOCK == 0) {                                                            \
        for (; c + 8 <= n; c += 8) {                                                               \
          const uint8_t *r0 = rows + (size_t)c * rb;                                               \
          __m256 s = _mm256_setzero_ps();                                                          \
          for (int32_t g = 0; g < ng; g++) {                                                       \
            __m256 part = _mm256_setzero_ps();                                                     \
            const int32_t b1 = (g + 1) * QB_PER_GROUP < nb ? (g + 1) * QB_PER_GROUP : nb;          \
            for (int32_t b = g * QB_PER_GROUP; b < b1; b++) {                                      \
              const __m256i qv = _mm256_loadu_si256((const __m256i *)(const void *)(qq + 32 * b)); \
              const __m256i ax = _mm256_sign_epi8(qv, qv);                                         \
              const uint8_t *kb = r0 + 2 * ng + 32 * b;                                            \
              __m256i d[8];                                                                        \
              for (int j = 0; j < 8; j++)                                                          \
                d[j] = DOT(ax, _mm256_sign_epi8(_mm256_loadu_si256(                                \
                                                    (const __m256i *)(const void *)(kb + j * rb)), \
                                                qv));                                              \
              const __m256i dot = NAME##_hsum8(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);    \
              part = _mm256_add_ps(part,                                                           \
                                   _mm256_mul_ps(_mm256_set1_ps(qd[b]), _mm256_cvtepi32_ps(dot))); \
            }                                                                                      \
            uint16_t h[8];                                                                         \
            for (int j = 0; j < 8; j++) memcpy(h + j, r0 + j * rb + 2 * g, 2);                     \
            const __m256 sg = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));  \
            s = _mm256_add_ps(s, _mm256_mul_ps(sg, part));                                         \
          }                                                                                        \
          _mm256_storeu_ps(sc + c, s);                                                             \
        }                                                                                          \
      }                                                                                            \
      if (c < n) brisk_attn_scores_q8_scalar(qq, qd, rows + (size_t)c * rb, n - c, hd, sc + c);    \
    }

#  define DOT_AVX2(ax, sy) _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1))
Q8_SCORES(brisk_attn_scores_q8_avx2, BRISK_AVX2, DOT_AVX2)

/* vpdpbusd sums the same four u8 x s8 products per lane as maddubs + madd
 * (which cannot saturate here), so the integers are the AVX2 ones. */
#  define BRISK_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#  define DOT_AVXVNNI(ax, sy) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, sy)
Q8_SCORES(brisk_attn_scores_q8_avxvnni, BRISK_AVXVNNI, DOT_AVXVNNI)

#  define BRISK_AVX512VNNI                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#  define DOT_AVX512VNNI(ax, sy) _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy)
Q8_SCORES(brisk_attn_scores_q8_avx512vnni, BRISK_AVX512VNNI, DOT_AVX512VNNI)

/* group_weights with the scales widened by F16C (the same exact floats). */
BRISK_AVX2 static void group_weights_f16c(const float *p, int32_t nh, const uint8_t *rows,
                                          size_t rb, int32_t n, int32_t g,
                                          float w[][BRISK_ATTN_MAX_CHUNK]) {
  float s[BRISK_ATTN_MAX_CHUNK];
  for (int32_t c = 0; c < n; c++) {
    uint16_t h;
    memcpy(&h, rows + (size_t)c * rb + 2 * g, 2);
    s[c] = _cvtsh_ss(h);
  }
  for (int32_t h = 0; h < nh; h++)
    for (int32_t c = 0; c < n; c++) w[h][c] = p[(size_t)h * BRISK_ATTN_MAX_CHUNK + c] * s[c];
}

/* Eight INT8 values at p as floats (exact). */
BRISK_AVX2 static inline __m256 load_i8x8(const int8_t *p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}

/* 8 NV elements of NT heads over the n keys: each value widened once, then
 * one FMA per head; per element the keys are added in order. NT and NV are
 * constants at every call, so the accumulators stay in registers (NT * NV
 * <= 8, leaving room for the widened values). */
BRISK_AVX2 static inline __attribute__((always_inline)) void
acc_avx2(float *acc, int32_t hd, float w[][BRISK_ATTN_MAX_CHUNK], const int8_t *v0, size_t rb,
         int32_t n, const int NT, const int NV) {
  __m256 a[HEAD_TILE][4];
  for (int h = 0; h < NT; h++)
    for (int k = 0; k < NV; k++) a[h][k] = _mm256_loadu_ps(acc + (size_t)h * hd + 8 * k);
  for (int32_t c = 0; c < n; c++) {
    const int8_t *v = v0 + (size_t)c * rb;
    __m256 x[4];
    for (int k = 0; k < NV; k++) x[k] = load_i8x8(v + 8 * k);
    for (int h = 0; h < NT; h++) {
      const __m256 wc = _mm256_broadcast_ss(&w[h][c]);
      for (int k = 0; k < NV; k++) a[h][k] = _mm256_fmadd_ps(wc, x[k], a[h][k]);
    }
  }
  for (int h = 0; h < NT; h++)
    for (int k = 0; k < NV; k++) _mm256_storeu_ps(acc + (size_t)h * hd + 8 * k, a[h][k]);
}

BRISK_AVX2 void brisk_attn_accumulate_q8_avx2(float *acc, const float *p, int32_t nh,
                                              const uint8_t *rows, int32_t n, int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  const int8_t *v0 = (const int8_t *)(rows + 2 * ng);
  float w[HEAD_TILE][BRISK_ATTN_MAX_CHUNK];
  for (int32_t g = 0; g < ng; g++) {
    const int32_t i0 = g * BRISK_KVQ_GROUP;
    const int32_t i1 = i0 + BRISK_KVQ_GROUP < hd ? i0 + BRISK_KVQ_GROUP : hd;
    for (int32_t h0 = 0; h0 < nh; h0 += HEAD_TILE) {
      const int32_t nt = nh - h0 < HEAD_TILE ? nh - h0 : HEAD_TILE;
      group_weights_f16c(p + (size_t)h0 * BRISK_ATTN_MAX_CHUNK, nt, rows, rb, n, g, w);
      float *a = acc + (size_t)h0 * hd;
      int32_t i = i0;
      /* One or two heads: 32 elements a step, four FMA chains each. */
      if (nt <= 2)
        for (; i + 32 <= i1; i += 32) {
          if (nt == 1)
            acc_avx2(a + i, hd, w, v0 + i, rb, n, 1, 4);
          else
            acc_avx2(a + i, hd, w, v0 + i, rb, n, 2, 4);
        }
      for (; i + 16 <= i1; i += 16) {
        switch (nt) {
        case 1: acc_avx2(a + i, hd, w, v0 + i, rb, n, 1, 2); break;
        case 2: acc_avx2(a + i, hd, w, v0 + i, rb, n, 2, 2); break;
        case 3: acc_avx2(a + i, hd, w, v0 + i, rb, n, 3, 2); break;
        default: acc_avx2(a + i, hd, w, v0 + i, rb, n, 4, 2); break;
        }
      }
      accumulate_q8_elems(a, hd, w, nt, v0, rb, n, i, i1);
    }
  }
}

/* Sixteen INT8 values at p as floats (exact). */
BRISK_AVX512 static inline __m512 load_i8x16(const int8_t *p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}

/* acc16_avx2 on NV vectors of 16 (a whole group of 64 at NV = 4). */
BRISK_AVX512 static inline __attribute__((always_inline)) void
acc_avx512(float *acc, int32_t hd, float w[][BRISK_ATTN_MAX_CHUNK], const int8_t *v0, size_t rb,
           int32_t n, const int NT, const int NV) {
  __m512 a[HEAD_TILE][4];
  for (int h = 0; h < NT; h++)
    for (int k = 0; k < NV; k++) a[h][k] = _mm512_loadu_ps(acc + (size_t)h * hd + 16 * k);
  for (int32_t c = 0; c < n; c++) {
    const int8_t *v = v0 + (size_t)c * rb;
    __m512 x[4];
    for (int k = 0; k < NV; k++) x[k] = load_i8x16(v + 16 * k);
    for (int h = 0; h < NT; h++) {
      const __m512 wc = _mm512_set1_ps(w[h][c]);
      for (int k = 0; k < NV; k++) a[h][k] = _mm512_fmadd_ps(wc, x[k], a[h][k]);
    }
  }
  for (int h = 0; h < NT; h++)
    for (int k = 0; k < NV; k++) _mm512_storeu_ps(acc + (size_t)h * hd + 16 * k, a[h][k]);
}

#  define ACC512(NV)                                                                               \
    switch (nt) {                                                                                  \
    case 1: acc_avx512(a + i, hd, w, v0 + i, rb, n, 1, NV); break;                                 \
    case 2: acc_avx512(a + i, hd, w, v0 + i, rb, n, 2, NV); break;                                 \
    case 3: acc_avx512(a + i, hd, w, v0 + i, rb, n, 3, NV); break;                                 \
    default: acc_avx512(a + i, hd, w, v0 + i, rb, n, 4, NV); break;                                \
    }

BRISK_AVX512 void brisk_attn_accumulate_q8_avx512(float *acc, const float *p, int32_t nh,
                                                  const uint8_t *rows, int32_t n, int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  const int8_t *v0 = (const int8_t *)(rows + 2 * ng);
  float w[HEAD_TILE][BRISK_ATTN_MAX_CHUNK];
  for (int32_t g = 0; g < ng; g++) {
    const int32_t i0 = g * BRISK_KVQ_GROUP;
    const int32_t i1 = i0 + BRISK_KVQ_GROUP < hd ? i0 + BRISK_KVQ_GROUP : hd;
    for (int32_t h0 = 0; h0 < nh; h0 += HEAD_TILE) {
      const int32_t nt = nh - h0 < HEAD_TILE ? nh - h0 : HEAD_TILE;
      group_weights_f16c(p + (size_t)h0 * BRISK_ATTN_MAX_CHUNK, nt, rows, rb, n, g, w);
      float *a = acc + (size_t)h0 * hd;
      int32_t i = i0;
      if (i + 64 <= i1) {
        ACC512(4)
        i += 64;
      }
      for (; i + 16 <= i1; i += 16) ACC512(1)
      accumulate_q8_elems(a, hd, w, nt, v0, rb, n, i, i1);
    }
  }
}

#endif
