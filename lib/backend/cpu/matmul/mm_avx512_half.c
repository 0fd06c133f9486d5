/* 16-bit float weights (F16, BF16) at the AVX-512 level: an
 * outer-product GEMM (each widened weight vector serves up to 12
 * activation rows) and a GEMV that sums in the same order, both on the
 * weights as stored.
 *
 * The order, per output y[r][j] (row j of W, row r of x):
 *
 *   total = +0
 *   for each block of BRISK_MM_HALF_KC consecutive k (the last one shorter):
 *     s = +0
 *     for each k in the block, in order: s = fma(W[j][k], x[r][k], s)
 *     total = total + s
 *   y[r][j] = total
 *
 * A serial chain per output lets one vector hold 16 outputs (lanes are
 * weight rows, not positions along k), so a weight vector widened once
 * multiplies a broadcast of each activation row: 24 accumulators of 32
 * registers for 32 rows x 12 activation rows, where the dot-product
 * kernels (mm_avx512_float.c) keep 16 lane sums per output and give each
 * widened vector 4 FMAs. The blocks bound the chain's rounding (KC + k / KC
 * additions per output) and let the GEMM keep a block of weights in L1.
 *
 * Rows are read as stored and turned k-major in registers. The GEMM widens
 * 16 rows x 16 elements (F16 with vcvtph2ps, BF16 with a 16-bit shift),
 * transposes them as floats into a KC x 32 panel on the stack and runs the
 * micro-kernel over it for every activation row of its tile; the GEMV
 * transposes 16 rows x 32 as 16-bit values (half the shuffles per element)
 * and widens each column as it consumes it. Both make the same FMAs in the
 * same order, and an output depends only on its weight row and activation
 * row: not on m (GEMV or GEMM), n, the tile or the thread count. The
 * widening is exact, so the results are those of float32 weights summed in
 * this order; they are not the AVX2 kernels' bits (another order).
 *
 * AVX512-BF16's vdpbf16ps is not used: it multiplies bf16 by bf16, so the
 * activations would have to be rounded to bf16 (8 bits of mantissa), an
 * error the other paths do not make. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx512.h"
#include "core/dtype.h"

#ifdef BRISK_MM_HAVE_AVX512

enum { W_F16, W_BF16 };

/* 16 weights as floats, exactly. */
MM_INLINE __m512 widen(const __m256i h, const int kind) {
  if (kind == W_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#  define PANEL 32   /* weight rows per GEMM panel: two vectors */
#  define MICRO_X 12 /* activation rows per micro-kernel call */

/* 16 rows (row i at w + i * ws; rows i >= nr read as zeros) x elements
 * [k0, k0 + len) (len <= 16; the rest zeros) as 16 vectors: t[e] holds
 * element k0 + e of the 16 rows, row i in lane i. */
MM_INLINE void load_t16(const uint16_t *w, size_t ws, int nr, int64_t k0, int len, __m512 t[16],
                        const int kind) {
  const __mmask16 km = (__mmask16)(len >= 16 ? 0xffff : (1u << len) - 1);
  __m512 r[16];
  MM_UNROLL(16)
  for (int i = 0; i < 16; i++)
    r[i] = i < nr ? widen(_mm256_maskz_loadu_epi16(km, w + (size_t)i * ws + k0), kind)
                  : _mm512_setzero_ps();
  /* Pairs, then quads of lanes, then 128-bit lanes twice. */
  __m512 a[16];
  MM_UNROLL(8)
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  MM_UNROLL(4)
  for (int i = 0; i < 4; i++) {
    const __m512d p0 = _mm512_castps_pd(a[4 * i]), p1 = _mm512_castps_pd(a[4 * i + 1]);
    const __m512d p2 = _mm512_castps_pd(a[4 * i + 2]), p3 = _mm512_castps_pd(a[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(p0, p2));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p0, p2));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(p1, p3));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(p1, p3));
  }
  /* r[4q + e] holds, for rows 4q .. 4q + 3, element e (of 4) of each
   * 128-bit lane L: lane L of the result gathers elements 4L + e. */
  MM_UNROLL(4)
  for (int e = 0; e < 4; e++) {
    a[e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);
    a[4 + e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xdd);
    a[8 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
    a[12 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xdd);
  }
  MM_UNROLL(4)
  for (int e = 0; e < 4; e++) {
    t[e] = _mm512_shuffle_f32x4(a[e], a[8 + e], 0x88);
    t[8 + e] = _mm512_shuffle_f32x4(a[e], a[8 + e], 0xdd);
    t[4 + e] = _mm512_shuffle_f32x4(a[4 + e], a[12 + e], 0x88);
    t[12 + e] = _mm512_shuffle_f32x4(a[4 + e], a[12 + e], 0xdd);
  }
}

static __mmask16 row_mask(int nr) { return (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1); }

/* 16 rows (row i at w + i * ws; rows i >= nr read as zeros) x elements
 * [k0, k0 + len) (len <= 32; the rest zeros), transposed as fp16 before
 * widening, which takes half the shuffles of load_t16 per element: u[e][h]
 * holds, for L = 2h and 2h + 1, element k0 + 8L + e of the 16 rows in its
 * 256-bit half L - 2h (row i in 16-bit lane i). */
MM_INLINE void load_t32h(const uint16_t *w, size_t ws, int nr, int64_t k0, int len,
                         __m512i u[8][2]) {
  const __mmask32 km = (__mmask32)(len >= 32 ? 0xffffffffu : (1u << len) - 1);
  __m512i r[16];
  MM_UNROLL(16)
  for (int i = 0; i < 16; i++)
    r[i] = i < nr ? _mm512_maskz_loadu_epi16(km, w + (size_t)i * ws + k0) : _mm512_setzero_si512();
  /* Rows 2p, 2p + 1 as dwords: a[p][0] at 8L + 0..3, a[p][1] at 8L + 4..7. */
  __m512i a[8][2];
  MM_UNROLL(8)
  for (int p = 0; p < 8; p++) {
    a[p][0] = _mm512_unpacklo_epi16(r[2 * p], r[2 * p + 1]);
    a[p][1] = _mm512_unpackhi_epi16(r[2 * p], r[2 * p + 1]);
  }
  /* Rows 4q .. 4q + 3 as qwords: b[q][c] at 8L + 2c, 8L + 2c + 1. */
  __m512i b[4][4];
  MM_UNROLL(4)
  for (int q = 0; q < 4; q++) {
    MM_UNROLL(2)
    for (int h = 0; h < 2; h++) {
      b[q][2 * h] = _mm512_unpacklo_epi32(a[2 * q][h], a[2 * q + 1][h]);
      b[q][2 * h + 1] = _mm512_unpackhi_epi32(a[2 * q][h], a[2 * q + 1][h]);
    }
  }
  /* Rows 0..7 (z[0][e]) and 8..15 (z[1][e]) in 128-bit lane L at 8L + e. */
  __m512i z[2][8];
  MM_UNROLL(2)
  for (int g = 0; g < 2; g++) {
    MM_UNROLL(4)
    for (int c = 0; c < 4; c++) {
      z[g][2 * c] = _mm512_unpacklo_epi64(b[2 * g][c], b[2 * g + 1][c]);
      z[g][2 * c + 1] = _mm512_unpackhi_epi64(b[2 * g][c], b[2 * g + 1][c]);
    }
  }
  /* Lanes (L0 of rows 0..7, L0 of rows 8..15, L1, L1), then L2, L3. */
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  MM_UNROLL(8)
  for (int e = 0; e < 8; e++) {
    u[e][0] = _mm512_permutex2var_epi64(z[0][e], lo, z[1][e]);
    u[e][1] = _mm512_permutex2var_epi64(z[0][e], hi, z[1][e]);
  }
}

/* Element k0 + kk (kk < 32) of load_t32h's rows as 16 floats. */
MM_INLINE __m512 t32_elem(__m512i u[8][2], const int kk, const int kind) {
  const int L = kk / 8, e = kk % 8;
  const __m512i v = u[e][L / 2];
  return widen(L % 2 ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v), kind);
}

/* GEMV: weight rows [0, nr) (nr <= 16) against R <= 4 activation rows, the
 * whole k. */
MM_INLINE void gemv16(const uint16_t *w, int64_t k, int nr, const float *x, size_t xs, float *y,
                      size_t ys, const int kind, const int R) {
  __m512 tot[BRISK_MM_MAX_X];
  MM_UNROLL(4)
  for (int r = 0; r < R; r++) tot[r] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < k; kb += BRISK_MM_HALF_KC) {
    const int64_t ke = kb + BRISK_MM_HALF_KC < k ? kb + BRISK_MM_HALF_KC : k;
    __m512 s[BRISK_MM_MAX_X];
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) s[r] = _mm512_setzero_ps();
    for (int64_t k0 = kb; k0 < ke; k0 += 32) {
      const int len = (int)(ke - k0 < 32 ? ke - k0 : 32);
      __m512i u[8][2];
      load_t32h(w, (size_t)k, nr, k0, len, u);
      if (len == 32) {
        MM_UNROLL(32)
        for (int e = 0; e < 32; e++) {
          const __m512 t = t32_elem(u, e, kind);
          MM_UNROLL(4)
          for (int r = 0; r < R; r++)
            s[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(x[(size_t)r * xs + k0 + e]), s[r]);
        }
      } else {
        /* The tail: elements one by one, the same FMAs. */
        __m512 t[32];
        MM_UNROLL(32)
        for (int e = 0; e < 32; e++) t[e] = t32_elem(u, e, kind);
        for (int e = 0; e < len; e++) {
          MM_UNROLL(4)
          for (int r = 0; r < R; r++)
            s[r] = _mm512_fmadd_ps(t[e], _mm512_set1_ps(x[(size_t)r * xs + k0 + e]), s[r]);
        }
      }
    }
    MM_UNROLL(4)
    for (int r = 0; r < R; r++) tot[r] = _mm512_add_ps(tot[r], s[r]);
  }
  MM_UNROLL(4)
  for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)r * ys, row_mask(nr), tot[r]);
}

#  define GEMV_SHAPE(name, kind, R)                                                                \
    static MM_TARGET void name##_##R(const uint16_t *w, int64_t k, int nr, const float *x,         \
                                     size_t xs, float *y, size_t ys) {                             \
      gemv16(w, k, nr, x, xs, y, ys, kind, R);                                                     \
    }
#  define GEMV_SHAPES(name, kind)                                                                  \
    GEMV_SHAPE(name, kind, 1)                                                                      \
    GEMV_SHAPE(name, kind, 2) GEMV_SHAPE(name, kind, 3) GEMV_SHAPE(name, kind, 4)
GEMV_SHAPES(gemv_f16, W_F16)
GEMV_SHAPES(gemv_bf16, W_BF16)

typedef void (*gemv_fn)(const uint16_t *, int64_t, int, const float *, size_t, float *, size_t);
static const gemv_fn gemvs[2][BRISK_MM_MAX_X] = {
    {gemv_f16_1, gemv_f16_2, gemv_f16_3, gemv_f16_4},
    {gemv_bf16_1, gemv_bf16_2, gemv_bf16_3, gemv_bf16_4},
};

/* The KC x 32 panel of weight rows [j0, j0 + nr) (nr <= 32), elements
 * [kb, kb + len): p[e * 32 + i] = W[j0 + i][kb + e], zeros past nr. */
MM_INLINE void pack_panel(const uint16_t *w, int64_t k, int nr, int64_t kb, int len, float *p,
                          const int kind) {
  for (int g = 0; g < 2; g++) {
    const int gr = nr - 16 * g < 16 ? nr - 16 * g : 16;
    for (int e0 = 0; e0 < len; e0 += 16) {
      const int l = len - e0 < 16 ? len - e0 : 16;
      __m512 t[16];
      if (gr > 0)
        load_t16(w + (size_t)(16 * g) * (size_t)k, (size_t)k, gr, kb + e0, l, t, kind);
      else
        for (int e = 0; e < 16; e++) t[e] = _mm512_setzero_ps();
      for (int e = 0; e < l; e++) _mm512_storeu_ps(p + (size_t)(e0 + e) * PANEL + 16 * g, t[e]);
    }
  }
}

static MM_TARGET void pack_f16(const uint16_t *w, int64_t k, int nr, int64_t kb, int len,
                               float *p) {
  pack_panel(w, k, nr, kb, len, p, W_F16);
}
static MM_TARGET void pack_bf16(const uint16_t *w, int64_t k, int nr, int64_t kb, int len,
                                float *p) {
  pack_panel(w, k, nr, kb, len, p, W_BF16);
}

/* The micro-kernel: one block (len elements) of a panel against R <= 12
 * activation rows (x: element kb of row 0; rows xs apart), added to y
 * (first block: to +0) for the panel's nr rows. */
MM_INLINE void micro(const float *p, int len, const float *x, size_t xs, float *y, size_t ys,
                     int nr, bool first, const int R) {
  __m512 s[MICRO_X][2];
  MM_UNROLL(12)
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = _mm512_setzero_ps();
  for (int e = 0; e < len; e++) {
    const __m512 w0 = _mm512_loadu_ps(p + (size_t)e * PANEL);
    const __m512 w1 = _mm512_loadu_ps(p + (size_t)e * PANEL + 16);
    MM_UNROLL(12)
    for (int r = 0; r < R; r++) {
      const __m512 b = _mm512_set1_ps(x[(size_t)r * xs + e]);
      s[r][0] = _mm512_fmadd_ps(w0, b, s[r][0]);
      s[r][1] = _mm512_fmadd_ps(w1, b, s[r][1]);
    }
  }
  const __mmask16 m0 = row_mask(nr), m1 = row_mask(nr > 16 ? nr - 16 : 0);
  MM_UNROLL(12)
  for (int r = 0; r < R; r++) {
    float *yr = y + (size_t)r * ys;
    const __m512 t0 = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, yr);
    const __m512 t1 = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, yr + 16);
    _mm512_mask_storeu_ps(yr, m0, _mm512_add_ps(t0, s[r][0]));
    if (m1) _mm512_mask_storeu_ps(yr + 16, m1, _mm512_add_ps(t1, s[r][1]));
  }
}

#  define MICRO_SHAPE(R)                                                                           \
    static MM_TARGET void micro_##R(const float *p, int len, const float *x, size_t xs, float *y,  \
                                    size_t ys, int nr, bool first) {                               \
      micro(p, len, x, xs, y, ys, nr, first, R);                                                   \
    }
MICRO_SHAPE(1)
MICRO_SHAPE(2)
MICRO_SHAPE(3)
MICRO_SHAPE(4)
MICRO_SHAPE(5)
MICRO_SHAPE(6)
MICRO_SHAPE(7)
MICRO_SHAPE(8)
MICRO_SHAPE(9)
MICRO_SHAPE(10)
MICRO_SHAPE(11)
MICRO_SHAPE(12)

typedef void (*micro_fn)(const float *, int, const float *, size_t, float *, size_t, int, bool);
static const micro_fn micros[MICRO_X] = {micro_1, micro_2, micro_3, micro_4,  micro_5,  micro_6,
                                         micro_7, micro_8, micro_9, micro_10, micro_11, micro_12};

typedef struct f16_job {
  int kind;          /* W_F16 or W_BF16 */
  const uint16_t *w; /* [n][k] */
  const float *x;    /* [m][k] */
  float *y;          /* [m][n] */
  int64_t n, k, m;
  int64_t rows;     /* weight rows per task: a multiple of 16 (GEMV) or 32 (GEMM) */
  int64_t x_rows;   /* activation rows per GEMM task: a multiple of MICRO_X */
  int64_t n_wtasks; /* ceil(n / rows) */
} f16_job;

static void gemv_task(void *ctx, size_t i) {
  const f16_job *j = ctx;
  const gemv_fn fn = gemvs[j->kind][j->m - 1];
  const int64_t c0 = (int64_t)i * j->rows, c1 = c0 + j->rows < j->n ? c0 + j->rows : j->n;
  for (int64_t c = c0; c < c1; c += 16)
    fn(j->w + (size_t)c * (size_t)j->k, j->k, (int)(c1 - c < 16 ? c1 - c : 16), j->x, (size_t)j->k,
       j->y + c, (size_t)j->n);
}

static void gemm_task(void *ctx, size_t i) {
  const f16_job *j = ctx;
  const int64_t wt = (int64_t)i % j->n_wtasks, xt = (int64_t)i / j->n_wtasks;
  const int64_t c0 = wt * j->rows, c1 = c0 + j->rows < j->n ? c0 + j->rows : j->n;
  const int64_t r0 = xt * j->x_rows, r1 = r0 + j->x_rows < j->m ? r0 + j->x_rows : j->m;
  float panel[BRISK_MM_HALF_KC * PANEL] __attribute__((aligned(64)));
  for (int64_t c = c0; c < c1; c += PANEL) {
    const int nr = (int)(c1 - c < PANEL ? c1 - c : PANEL);
    for (int64_t kb = 0; kb < j->k; kb += BRISK_MM_HALF_KC) {
      const int len = (int)(j->k - kb < BRISK_MM_HALF_KC ? j->k - kb : BRISK_MM_HALF_KC);
      (j->kind == W_F16 ? pack_f16 : pack_bf16)(j->w + (size_t)c * (size_t)j->k, j->k, nr, kb, len,
                                                panel);
      for (int64_t r = r0; r < r1; r += MICRO_X) {
        const int R = (int)(r1 - r < MICRO_X ? r1 - r : MICRO_X);
        micros[R - 1](panel, len, j->x + (size_t)r * (size_t)j->k + (size_t)kb, (size_t)j->k,
                      j->y + (size_t)r * (size_t)j->n + (size_t)c, (size_t)j->n, nr, kb == 0);
      }
    }
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool brisk_mm_avx512_half(brisk_threadpool *pool, uint32_t w_type, const uint16_t *w, int64_t n,
                          int64_t k, const float *x, int64_t m, float *y) {
  if (w_type != BRISK_DTYPE_F16 && w_type != BRISK_DTYPE_BF16) return false;
  f16_job j = {.kind = w_type == BRISK_DTYPE_F16 ? W_F16 : W_BF16,
               .w = w,
               .x = x,
               .y = y,
               .n = n,
               .k = k,
               .m = m};
  const int64_t conc = brisk_parallel_concurrency(pool);
  if (m <= BRISK_MM_MAX_X) {
    /* About 4 tasks per thread, whole groups of 16 rows. */
    j.rows = ceil_div(ceil_div(n, 4 * conc), 16) * 16;
    brisk_parallel_for(pool, (size_t)ceil_div(n, j.rows), gemv_task, &j);
    return true;
  }
  /* The activation rows of a task stay in L2 (about 768 KiB) while its
   * panels pass; a block of the panel (16 KiB) stays in L1 while they do. */
  j.x_rows = (768 * 1024 / (k * (int64_t)sizeof(float))) / MICRO_X * MICRO_X;
  if (j.x_rows < MICRO_X) j.x_rows = MICRO_X;
  if (j.x_rows > 16 * MICRO_X) j.x_rows = 16 * MICRO_X;
  /* Enough tasks for every thread: fewer panels per task when m is small. */
  const int64_t x_tasks = ceil_div(m, j.x_rows), panels = ceil_div(n, PANEL);
  int64_t per = panels * x_tasks / (4 * conc);
  per = per < 1 ? 1 : per > panels ? panels : per;
  per = ceil_div(panels, ceil_div(panels, per)); /* even tasks */
  j.rows = per * PANEL;
  j.n_wtasks = ceil_div(n, j.rows);
  brisk_parallel_for(pool, (size_t)(j.n_wtasks * x_tasks), gemm_task, &j);
  return true;
}

#else

bool brisk_mm_avx512_half(brisk_threadpool *pool, uint32_t w_type, const uint16_t *w, int64_t n,
                          int64_t k, const float *x, int64_t m, float *y) {
  (void)pool, (void)w_type, (void)w, (void)n, (void)k, (void)x, (void)m, (void)y;
  return false;
}

#endif
