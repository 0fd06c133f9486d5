/* Multi-head latent attention on the CPU (backend.h, brisk_mla_params).
 * The cache holds one latent row per token; every head reads the same row,
 * so a unit of work is one query token and a group of heads: each key row is
 * widened to float32 once for the group. A head's arithmetic (its absorbed
 * query, online softmax and latent accumulator, then the value projection)
 * runs in a fixed order over its own data only, so results do not depend on
 * the grouping, the thread split or the rest of the batch. */
#include "backend/cpu/ops/attn_kernels.h"
#include "backend/cpu/ops/ops.h"

#include "core/dtype.h"
#include "core/half.h"

#include <math.h>
#include <string.h>

/* Floats of each per-unit scratch array (on the stack: 3 of them, 48 KiB):
 * the group's absorbed queries and accumulators, and a chunk of widened
 * latent rows. Groups and chunks are sized to fit. */
#define MLA_SCRATCH 4096
#define MLA_MAX_GROUP 64

typedef struct mla_job {
  const brisk_kv_layout *kv;
  const void *cache[2]; /* the two halves of each latent row */
  void *wcache[2];
  const float *src[2]; /* mla_kv_write: latent [n][rank], k_rope [n][rope_dim] */
  const int64_t *slots;
  const float *q;    /* [n_tokens][n_heads][nope + rope] */
  const float *kv_b; /* [n_heads][nope + v][rank] */
  const brisk_attn_batch *batch;
  const brisk_mla_params *p;
  float *out; /* [n_tokens][n_heads][v] */
  const brisk_attn_kernels *kern;
  int32_t heads_per_unit, units_per_token, keys_per_chunk;
} mla_job;

/* Stores x as values [from, from + n) of latent row `row` (its halves in the
 * two pools), in the cache dtype. */
static void put_row(const mla_job *j, int64_t row, const float *x, int32_t from, int32_t n) {
  const int32_t half = j->kv->head_dim;
  for (int32_t i = 0; i < n; i++) {
    int32_t at = from + i, c = at >= half;
    int64_t idx = row * half + (at - c * half);
    if (j->kv->dtype == BRISK_DTYPE_F32)
      ((float *)j->wcache[c])[idx] = x[i];
    else
      ((uint16_t *)j->wcache[c])[idx] = brisk_f32_to_f16(x[i]);
  }
}

static void write_range(void *ctx, int64_t t0, int64_t t1) {
  const mla_job *j = ctx;
  for (int64_t t = t0; t < t1; t++) {
    int64_t slot = j->slots[t];
    if (slot < 0) continue;
    /* One kv head: the pool row of a slot is the slot itself. */
    put_row(j, slot, j->src[0] + t * j->p->rank, 0, j->p->rank);
    put_row(j, slot, j->src[1] + t * j->p->rope_dim, j->p->rank, j->p->rope_dim);
  }
}

brisk_status brisk_cpu_ops_mla_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                        void *v_cache, const float *latent, const float *k_rope,
                                        const int64_t *slots, int32_t n_tokens,
                                        const brisk_mla_params *params) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st =
      brisk_check_mla_kv_write(kv, k_cache, v_cache, latent, k_rope, slots, n_tokens, params);
  if (st != BRISK_OK || n_tokens == 0) return st;
  mla_job job = {
      .kv = kv, .wcache = {k_cache, v_cache}, .src = {latent, k_rope}, .slots = slots, .p = params};
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, 4.0 * n_tokens * (double)(2 * kv->head_dim),
                         write_range, &job);
  return BRISK_OK;
}

/* Query token t, heads h0 .. h0 + nh - 1. Each head's query is absorbed
 * and scaled once, qs = scale [K_h^T q_n | q_r] ([D]); then chunks of keys
 * are widened to float32 rows [c | k_rope] ([n][D]) and each head scores
 * them (one dot over D: a . c + q_r . k_rope), keeps the online softmax,
 * and accumulates the weighted rows (the k_rope part of acc is unused).
 * Last, out = V_h acc / l. The inner arithmetic is attention.c's kernels. */
static void attend_unit(const mla_job *j, int64_t unit) {
  const brisk_mla_params *p = j->p;
  const brisk_kv_layout *kv = j->kv;
  const brisk_attn_kernels *kern = j->kern;
  const int32_t t = (int32_t)(unit / j->units_per_token);
  const int32_t h0 = (int32_t)(unit % j->units_per_token) * j->heads_per_unit;
  const int32_t nh = p->n_heads - h0 < j->heads_per_unit ? p->n_heads - h0 : j->heads_per_unit;
  const int32_t r = p->rank, D = r + p->rope_dim, half = D / 2, bs = kv->block_size;
  const int32_t dq = p->nope_dim + p->rope_dim, dkb = p->nope_dim + p->v_dim;
  float qs[MLA_SCRATCH], acc[MLA_SCRATCH], rows[MLA_SCRATCH]; /* [nh][D], [nh][D], [n][D] */
  float sc[BRISK_ATTN_MAX_CHUNK] __attribute__((aligned(32))) = {0};
  float m[MLA_MAX_GROUP], l[MLA_MAX_GROUP];
  for (int32_t g = 0; g < nh; g++) {
    const int32_t h = h0 + g;
    const float *qn = j->q + ((int64_t)t * p->n_heads + h) * dq;
    const float *kb = j->kv_b + (int64_t)h * dkb * r;
    float *qh = qs + (int64_t)g * D;
    for (int32_t c = 0; c < D; c++) qh[c] = 0, acc[(int64_t)g * D + c] = 0;
    /* a = sum_d q_n[d] K_h[d] (rows of kv_b), d ascending. */
    for (int32_t d0 = 0; d0 < p->nope_dim; d0 += BRISK_ATTN_MAX_CHUNK) {
      int32_t n = p->nope_dim - d0 < BRISK_ATTN_MAX_CHUNK ? p->nope_dim - d0 : BRISK_ATTN_MAX_CHUNK;
      kern->accumulate(qh, qn + d0, kb + (int64_t)d0 * r, n, r);
    }
    memcpy(qh + r, qn + p->nope_dim, (size_t)p->rope_dim * sizeof(float));
    kern->scale(qh, p->scale, D);
    m[g] = -INFINITY, l[g] = 0;
  }
  const int32_t pos_end = j->batch->positions[t] + 1;
  const int32_t *table =
      j->batch->block_tables + (int64_t)j->batch->seq_of_token[t] * j->batch->max_blocks;
  for (int32_t pos = 0; pos < pos_end;) {
    const int32_t n = pos_end - pos < j->keys_per_chunk ? pos_end - pos : j->keys_per_chunk;
    for (int32_t c = 0; c < n; c++) {
      const int64_t slot = (int64_t)table[(pos + c) / bs] * bs + (pos + c) % bs;
      float *row = rows + (int64_t)c * D;
      for (int h = 0; h < 2; h++) {
        if (kv->dtype == BRISK_DTYPE_F32)
          memcpy(row + h * half, (const float *)j->cache[h] + slot * half,
                 (size_t)half * sizeof(float));
        else
          kern->f16_to_f32((const uint16_t *)j->cache[h] + slot * half, row + h * half,
                           (size_t)half);
      }
    }
    for (int32_t g = 0; g < nh; g++) {
      float *ac = acc + (int64_t)g * D;
      kern->scores(qs + (int64_t)g * D, rows, n, D, sc);
      float cm = -INFINITY;
      for (int32_t c = 0; c < n; c++) cm = sc[c] > cm ? sc[c] : cm;
      if (cm > m[g]) { /* rescale what was summed under the old max */
        float alpha = expf(m[g] - cm);
        kern->scale(ac, alpha, D);
        l[g] *= alpha;
        m[g] = cm;
      }
      kern->exp_shift(sc, n, m[g]);
      for (int32_t c = 0; c < n; c++) l[g] += sc[c];
      kern->accumulate(ac, sc, rows, n, D);
    }
    pos += n;
  }
  /* out_h = V_h (acc / l): dots of acc with V_h's rows. */
  for (int32_t g = 0; g < nh; g++) {
    const int32_t h = h0 + g;
    const float *vb = j->kv_b + ((int64_t)h * dkb + p->nope_dim) * r;
    float *o = j->out + ((int64_t)t * p->n_heads + h) * p->v_dim;
    kern->scale(acc + (int64_t)g * D, 1.0f / l[g], r);
    for (int32_t v0 = 0; v0 < p->v_dim; v0 += BRISK_ATTN_MAX_CHUNK) {
      int32_t n = p->v_dim - v0 < BRISK_ATTN_MAX_CHUNK ? p->v_dim - v0 : BRISK_ATTN_MAX_CHUNK;
      kern->scores(acc + (int64_t)g * D, vb + (int64_t)v0 * r, n, r, sc);
      memcpy(o + v0, sc, (size_t)n * sizeof(float));
    }
  }
}

static void attend_range(void *ctx, int64_t u0, int64_t u1) {
  for (int64_t u = u0; u < u1; u++) attend_unit(ctx, u);
}

brisk_status brisk_cpu_ops_mla_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                         const void *k_cache, const void *v_cache, const float *q,
                                         const float *kv_b, const brisk_attn_batch *batch,
                                         const brisk_mla_params *params, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  double n_keys = 0;
  brisk_status st =
      brisk_check_mla_attention(kv, k_cache, v_cache, q, kv_b, batch, params, out, &n_keys);
  if (st != BRISK_OK || batch->n_tokens == 0) return st;
  const int32_t D = params->rank + params->rope_dim; /* <= 2 BRISK_MAX_HEAD_DIM: 2048 */
  int32_t per = MLA_SCRATCH / D < MLA_MAX_GROUP ? MLA_SCRATCH / D : MLA_MAX_GROUP;
  if (per > params->n_heads) per = params->n_heads;
  mla_job job = {.kv = kv,
                 .cache = {k_cache, v_cache},
                 .q = q,
                 .kv_b = kv_b,
                 .batch = batch,
                 .p = params,
                 .out = out,
                 .heads_per_unit = per,
                 .units_per_token = (params->n_heads + per - 1) / per,
                 .keys_per_chunk = MLA_SCRATCH / D < BRISK_ATTN_MAX_CHUNK ? MLA_SCRATCH / D
                                                                          : BRISK_ATTN_MAX_CHUNK};
  job.kern = c->avx512 ? brisk_attn_kernels_avx512()
             : c->avx2 ? brisk_attn_kernels_avx2()
             : c->neon ? brisk_attn_kernels_neon()
                       : brisk_attn_kernels_scalar();
  double work = n_keys * params->n_heads * 4.0 * D;
  brisk_cpu_ops_parallel(c->pool, (int64_t)batch->n_tokens * job.units_per_token, 1, work,
                         attend_range, &job);
  return BRISK_OK;
}
