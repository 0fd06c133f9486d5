/* Attention kernels that read an INT8 (BRISK_KVQ_DTYPE_Q8) cache in place:
 * no float32 copy of a chunk of keys or values. Scores are integer dot
 * products of the INT8 query (brisk_kvq_quantize_query: one float scale per
 * 32 values) with the INT8 keys, one exact int32 per query block, then
 *   score = sum over groups g of s_g * (sum over blocks b in g of d_b * dot_b)
 * in float32, in that order, with separate multiplies and adds (no FMA: the
 * build's ISO C mode keeps the compiler from contracting them). The
 * integers are exact on every path and the float steps are the same, so the
 * AVX2, AVX-VNNI and AVX-512 VNNI scores equal the scalar ones bit for bit.
 * Values: acc += (p_c * s_g) * v, the INT8 value widened in a register;
 * the vector paths fuse the multiply-add, so they agree with the scalar one
 * to rounding only (tests/backend/ops: test_attn_int8.c). */
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

void brisk_attn_accumulate_q8_scalar(float *acc, const float *p, const uint8_t *rows, int32_t n,
                                     int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  for (int32_t c = 0; c < n; c++) {
    const uint8_t *row = rows + (size_t)c * rb;
    const int8_t *v = (const int8_t *)(row + 2 * ng);
    for (int32_t g = 0; g < ng; g++) {
      const float w = p[c] * group_scale(row, g);
      const int32_t i0 = g * BRISK_KVQ_GROUP;
      const int32_t i1 = i0 + BRISK_KVQ_GROUP < hd ? i0 + BRISK_KVQ_GROUP : hd;
      for (int32_t i = i0; i < i1; i++) acc[i] += w * (float)v[i];
    }
  }
}

/* Elements i0 .. hd - 1 one at a time (the vector kernels' last few). */
static inline void accumulate_q8_tail(float *acc, const float *p, const uint8_t *rows, int32_t n,
                                      int32_t hd, int32_t i0) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  for (int32_t i = i0; i < hd; i++) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    float a = acc[i];
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      a += p[c] * group_scale(row, g) * (float)((const int8_t *)(row + 2 * ng))[i];
    }
    acc[i] = a;
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

/* Eight INT8 values at p as floats (exact). */
BRISK_AVX2 static inline __m256 load_i8x8(const int8_t *p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}

/* Output slices of 32 (inside one group: 64 is a multiple of 32)
 * outermost, keys inside, as accumulate_avx2; per element the keys are
 * added in order. */
BRISK_AVX2 void brisk_attn_accumulate_q8_avx2(float *acc, const float *p, const uint8_t *rows,
                                              int32_t n, int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  int32_t i = 0;
  for (; i + 32 <= hd; i += 32) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
    __m256 a2 = _mm256_loadu_ps(acc + i + 16), a3 = _mm256_loadu_ps(acc + i + 24);
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      const int8_t *v = (const int8_t *)(row + 2 * ng) + i;
      const __m256 w = _mm256_set1_ps(p[c] * group_scale(row, g));
      a0 = _mm256_fmadd_ps(w, load_i8x8(v), a0);
      a1 = _mm256_fmadd_ps(w, load_i8x8(v + 8), a1);
      a2 = _mm256_fmadd_ps(w, load_i8x8(v + 16), a2);
      a3 = _mm256_fmadd_ps(w, load_i8x8(v + 24), a3);
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= hd; i += 8) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    __m256 a = _mm256_loadu_ps(acc + i);
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      const __m256 w = _mm256_set1_ps(p[c] * group_scale(row, g));
      a = _mm256_fmadd_ps(w, load_i8x8((const int8_t *)(row + 2 * ng) + i), a);
    }
    _mm256_storeu_ps(acc + i, a);
  }
  accumulate_q8_tail(acc, p, rows, n, hd, i);
}

/* Sixteen INT8 values at p as floats (exact). */
BRISK_AVX512 static inline __m512 load_i8x16(const int8_t *p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}

/* accumulate_q8_avx2 on 16 lanes: a slice of 64 is one whole group. */
BRISK_AVX512 void brisk_attn_accumulate_q8_avx512(float *acc, const float *p, const uint8_t *rows,
                                                  int32_t n, int32_t hd) {
  const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
  const int32_t ng = brisk_kvq_n_groups(hd);
  int32_t i = 0;
  for (; i + 64 <= hd; i += 64) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    __m512 a0 = _mm512_loadu_ps(acc + i), a1 = _mm512_loadu_ps(acc + i + 16);
    __m512 a2 = _mm512_loadu_ps(acc + i + 32), a3 = _mm512_loadu_ps(acc + i + 48);
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      const int8_t *v = (const int8_t *)(row + 2 * ng) + i;
      const __m512 w = _mm512_set1_ps(p[c] * group_scale(row, g));
      a0 = _mm512_fmadd_ps(w, load_i8x16(v), a0);
      a1 = _mm512_fmadd_ps(w, load_i8x16(v + 16), a1);
      a2 = _mm512_fmadd_ps(w, load_i8x16(v + 32), a2);
      a3 = _mm512_fmadd_ps(w, load_i8x16(v + 48), a3);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i + 16 <= hd; i += 16) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    __m512 a = _mm512_loadu_ps(acc + i);
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      const __m512 w = _mm512_set1_ps(p[c] * group_scale(row, g));
      a = _mm512_fmadd_ps(w, load_i8x16((const int8_t *)(row + 2 * ng) + i), a);
    }
    _mm512_storeu_ps(acc + i, a);
  }
  for (; i + 8 <= hd; i += 8) {
    const int32_t g = i / BRISK_KVQ_GROUP;
    __m256 a = _mm256_loadu_ps(acc + i);
    for (int32_t c = 0; c < n; c++) {
      const uint8_t *row = rows + (size_t)c * rb;
      const __m256 w = _mm256_set1_ps(p[c] * group_scale(row, g));
      a = _mm256_fmadd_ps(w, load_i8x8((const int8_t *)(row + 2 * ng) + i), a);
    }
    _mm256_storeu_ps(acc + i, a);
  }
  accumulate_q8_tail(acc, p, rows, n, hd, i);
}

#endif
