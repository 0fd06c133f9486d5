/* Paged attention on the CPU: each (query token, head) walks its sequence's
 * blocks in chunks of keys, with an online softmax (running max and sum) and
 * a float32 accumulator. The chunks depend only on the query's position, the
 * window and the block size, so a query's result is bitwise the same
 * whatever else is in the batch and however the work is split. */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

#include <math.h>

/* Keys scored together before the max/sum update: a multiple of 8 (one AVX2
 * exp per 8 scores) and small enough for the scores to stay in L1. */
#define CHUNK 32

typedef struct attn_job {
  const brisk_kv_layout *kv;
  const void *k_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  const void *v_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  const float *q;      // [n_tokens][n_heads][head_dim]
  float *out;          // [n_tokens][n_heads][head_dim]
  const brisk_attn_batch *batch;
  int32_t n_heads, group, window;
  float scale;
} attn_job;

/* A key or value row of head_dim elements of the cache's dtype. */
static const void *cache_row(const attn_job *j, const void *cache, int32_t block, int32_t kv_head,
                             int32_t slot) {
  const brisk_kv_layout *kv = j->kv;
  int64_t at = (((int64_t)block * kv->n_kv_heads + kv_head) * kv->block_size + slot) * kv->head_dim;
  return kv->dtype == BRISK_DTYPE_F16 ? (const void *)((const uint16_t *)cache + at)
                                      : (const void *)((const float *)cache + at);
}

/* The keys a query at position p sees: [*lo, p]. */
static int32_t first_key(int32_t p, int32_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* Key chunk starting at `pos`: never crosses a block or passes p. */
static int32_t chunk_len(int32_t pos, int32_t p, int32_t block_size) {
  int32_t n = block_size - pos % block_size;
  if (n > CHUNK) n = CHUNK;
  if (n > p + 1 - pos) n = p + 1 - pos;
  return n;
}

static float load_elem(const void *row, int64_t i, bool f16) {
  return f16 ? brisk_f16_to_f32(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

static void attend_scalar(const attn_job *j, int32_t t, int32_t h) {
  const brisk_kv_layout *kv = j->kv;
  const int32_t hd = kv->head_dim, bs = kv->block_size, kvh = h / j->group;
  const bool f16 = kv->dtype == BRISK_DTYPE_F16;
  const int32_t p = j->batch->positions[t];
  const int32_t *table =
      j->batch->block_tables + (int64_t)j->batch->seq_of_token[t] * j->batch->max_blocks;
  const float *q = j->q + ((int64_t)t * j->n_heads + h) * hd;
  float qs[BRISK_MAX_HEAD_DIM], acc[BRISK_MAX_HEAD_DIM], sc[CHUNK];
  for (int32_t i = 0; i < hd; i++) {
    qs[i] = q[i] * j->scale;
    acc[i] = 0;
  }
  float m = -INFINITY, l = 0;
  for (int32_t pos = first_key(p, j->window); pos <= p;) {
    int32_t n = chunk_len(pos, p, bs), block = table[pos / bs];
    float cm = -INFINITY;
    for (int32_t c = 0; c < n; c++) {
      const void *k = cache_row(j, j->k_cache, block, kvh, pos % bs + c);
      float s = 0;
      for (int32_t i = 0; i < hd; i++) s += qs[i] * load_elem(k, i, f16);
      sc[c] = s;
      cm = fmaxf(cm, s);
    }
    if (cm > m) {
      float alpha = expf(m - cm);
      for (int32_t i = 0; i < hd; i++) acc[i] *= alpha;
      l *= alpha;
      m = cm;
    }
    for (int32_t c = 0; c < n; c++) {
      const void *v = cache_row(j, j->v_cache, block, kvh, pos % bs + c);
      float e = expf(sc[c] - m);
      l += e;
      for (int32_t i = 0; i < hd; i++) acc[i] += e * load_elem(v, i, f16);
    }
    pos += n;
  }
  float *o = j->out + ((int64_t)t * j->n_heads + h) * hd;
  float inv = 1.0f / l;
  for (int32_t i = 0; i < hd; i++) o[i] = acc[i] * inv;
}

#ifdef BRISK_HAVE_AVX2_KERNELS
BRISK_AVX2 static float dot_avx2(const float *q, const void *k, int32_t hd, bool f16) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int32_t i = 0;
  if (f16) {
    const uint16_t *kh = k;
    for (; i + 16 <= hd; i += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), brisk_avx2_load_f16(kh + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), brisk_avx2_load_f16(kh + i + 8), a1);
    }
    for (; i + 8 <= hd; i += 8)
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), brisk_avx2_load_f16(kh + i), a0);
  } else {
    const float *kf = k;
    for (; i + 16 <= hd; i += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kf + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(kf + i + 8), a1);
    }
    for (; i + 8 <= hd; i += 8)
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kf + i), a0);
  }
  float s = brisk_avx2_hsum(_mm256_add_ps(a0, a1));
  for (; i < hd; i++) s += q[i] * load_elem(k, i, f16);
  return s;
}

/* acc += e * v */
BRISK_AVX2 static void axpy_avx2(float *acc, float e, const void *v, int32_t hd, bool f16) {
  const __m256 ve = _mm256_set1_ps(e);
  int32_t i = 0;
  if (f16)
    for (; i + 8 <= hd; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(ve, brisk_avx2_load_f16((const uint16_t *)v + i),
                                                _mm256_loadu_ps(acc + i)));
  else
    for (; i + 8 <= hd; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(ve, _mm256_loadu_ps((const float *)v + i),
                                                _mm256_loadu_ps(acc + i)));
  for (; i < hd; i++) acc[i] += e * load_elem(v, i, f16);
}

BRISK_AVX2 static void scale_avx2(float *x, float s, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(s)));
  for (; i < n; i++) x[i] *= s;
}

BRISK_AVX2 static void attend_avx2(const attn_job *j, int32_t t, int32_t h) {
  const brisk_kv_layout *kv = j->kv;
  const int32_t hd = kv->head_dim, bs = kv->block_size, kvh = h / j->group;
  const bool f16 = kv->dtype == BRISK_DTYPE_F16;
  const int32_t p = j->batch->positions[t];
  const int32_t *table =
      j->batch->block_tables + (int64_t)j->batch->seq_of_token[t] * j->batch->max_blocks;
  const float *q = j->q + ((int64_t)t * j->n_heads + h) * hd;
  float qs[BRISK_MAX_HEAD_DIM], acc[BRISK_MAX_HEAD_DIM];
  float sc[CHUNK] __attribute__((aligned(32)));
  for (int32_t i = 0; i < hd; i++) {
    qs[i] = q[i] * j->scale;
    acc[i] = 0;
  }
  float m = -INFINITY, l = 0;
  for (int32_t pos = first_key(p, j->window); pos <= p;) {
    int32_t n = chunk_len(pos, p, bs), block = table[pos / bs];
    float cm = -INFINITY;
    for (int32_t c = 0; c < n; c++) {
      sc[c] = dot_avx2(qs, cache_row(j, j->k_cache, block, kvh, pos % bs + c), hd, f16);
      cm = fmaxf(cm, sc[c]);
    }
    if (cm > m) {
      float alpha = expf(m - cm);
      scale_avx2(acc, alpha, hd);
      l *= alpha;
      m = cm;
    }
    /* Unused score lanes hold -inf, whose exp is 0, and are not read. */
    for (int32_t c = n; c < (n + 7) / 8 * 8; c++) sc[c] = -INFINITY;
    const __m256 vm = _mm256_set1_ps(m);
    for (int32_t c = 0; c < n; c += 8)
      _mm256_store_ps(sc + c, brisk_avx2_exp(_mm256_sub_ps(_mm256_load_ps(sc + c), vm)));
    for (int32_t c = 0; c < n; c++) {
      l += sc[c];
      axpy_avx2(acc, sc[c], cache_row(j, j->v_cache, block, kvh, pos % bs + c), hd, f16);
    }
    pos += n;
  }
  scale_avx2(acc, 1.0f / l, hd);
  float *o = j->out + ((int64_t)t * j->n_heads + h) * hd;
  for (int32_t i = 0; i < hd; i++) o[i] = acc[i];
}

static void attn_range_avx2(void *p, int64_t u0, int64_t u1) {
  const attn_job *j = p;
  for (int64_t u = u0; u < u1; u++)
    attend_avx2(j, (int32_t)(u / j->n_heads), (int32_t)(u % j->n_heads));
}
#endif

static void attn_range_scalar(void *p, int64_t u0, int64_t u1) {
  const attn_job *j = p;
  for (int64_t u = u0; u < u1; u++)
    attend_scalar(j, (int32_t)(u / j->n_heads), (int32_t)(u % j->n_heads));
}

/* Every query's position, sequence and the blocks it will read. */
static brisk_status check_batch(const brisk_kv_layout *kv, const brisk_attn_batch *b,
                                int32_t window, double *n_keys) {
  if (b->n_tokens < 0 || b->n_seqs < 1 || b->max_blocks < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: batch of %d tokens, %d sequences, %d blocks per table (needs "
                       "tokens >= 0, sequences and blocks >= 1)",
                       (int)b->n_tokens, (int)b->n_seqs, (int)b->max_blocks);
  if (b->n_tokens > 0 && (!b->positions || !b->seq_of_token || !b->block_tables))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: positions, seq_of_token or block_tables is NULL");
  *n_keys = 0;
  for (int32_t t = 0; t < b->n_tokens; t++) {
    int32_t p = b->positions[t], s = b->seq_of_token[t];
    if (s < 0 || s >= b->n_seqs)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "attention: token %d's sequence %d is outside [0, %d)", (int)t, (int)s,
                         (int)b->n_seqs);
    if (p < 0 || p / kv->block_size >= b->max_blocks)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "attention: token %d's position %d needs block %d of a %d-block table",
                         (int)t, (int)p, p < 0 ? -1 : (int)(p / kv->block_size),
                         (int)b->max_blocks);
    const int32_t *table = b->block_tables + (int64_t)s * b->max_blocks;
    int32_t lo = first_key(p, window);
    for (int32_t i = lo / kv->block_size; i <= p / kv->block_size; i++)
      if (table[i] < 0 || table[i] >= kv->n_blocks)
        return brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "attention: sequence %d's block table entry %d is block %d, outside "
                           "[0, %d)",
                           (int)s, (int)i, (int)table[i], (int)kv->n_blocks);
    *n_keys += (double)(p - lo + 1);
  }
  return BRISK_OK;
}

brisk_status brisk_cpu_ops_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                     const void *k_cache, const void *v_cache, const float *q,
                                     const brisk_attn_batch *batch, const brisk_attn_params *params,
                                     float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_cpu_ops_check_kv("attention", kv, NULL);
  if (st != BRISK_OK) return st;
  if (!batch || !params)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: batch or params is NULL");
  if (params->n_heads < 1 || params->n_heads % kv->n_kv_heads)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: %d query heads is not a positive multiple of %d kv heads",
                       (int)params->n_heads, (int)kv->n_kv_heads);
  if (params->sliding_window < 0 || !isfinite(params->scale))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: sliding window %d must be >= 0 and scale %g finite",
                       (int)params->sliding_window, (double)params->scale);
  double n_keys = 0;
  st = check_batch(kv, batch, params->sliding_window, &n_keys);
  if (st != BRISK_OK) return st;
  if (batch->n_tokens == 0) return BRISK_OK;
  st = brisk_cpu_ops_check_matrix("attention", batch->n_tokens,
                                  (int64_t)params->n_heads * kv->head_dim);
  if (st != BRISK_OK) return st;
  if (!k_cache || !v_cache || !q || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: a cache, q or out is NULL");
  attn_job job = {
      .kv = kv,
      .k_cache = k_cache,
      .v_cache = v_cache,
      .q = q,
      .out = out,
      .batch = batch,
      .n_heads = params->n_heads,
      .group = params->n_heads / kv->n_kv_heads,
      .window = params->sliding_window,
      .scale = params->scale != 0 ? params->scale : (float)(1.0 / sqrt((double)kv->head_dim)),
  };
  brisk_cpu_range_fn fn = attn_range_scalar;
#ifdef BRISK_HAVE_AVX2_KERNELS
  if (c->avx2) fn = attn_range_avx2;
#endif
  int64_t n_units = (int64_t)batch->n_tokens * params->n_heads;
  double work = 4.0 * n_keys * params->n_heads * kv->head_dim;
  brisk_cpu_ops_parallel(c->pool, n_units, 1, work, fn, &job);
  return BRISK_OK;
}
