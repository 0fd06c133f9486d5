/* Multi-head latent attention on the CPU (backend.h, brisk_mla_params).
 * The cache holds one latent row per token; every head reads the same row,
 * so a unit of work is one query token and a group of heads: each key row is
 * widened to float32 once for the group. A head's arithmetic (its absorbed
 * query, online softmax and latent accumulator, then the value projection)
 * runs in a fixed order over its own data only, so results do not depend on
 * the grouping, the thread split or the rest of the batch. */
#include "backend/cpu/ops/ops.h"

#include "core/dtype.h"
#include "core/half.h"

#include <math.h>
#include <string.h>

/* Floats of the per-unit scratch (on the stack): the group's absorbed
 * queries and latent accumulators, and one widened key row. */
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
  int32_t heads_per_unit, units_per_token;
} mla_job;

/* Values [from, from + n) of a latent row of `half`-value halves, as float. */
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

/* Slot `row`'s latent row widened to float32 into r ([2 * half]). */
static void get_row(const mla_job *j, int64_t row, float *r) {
  const int32_t half = j->kv->head_dim;
  for (int c = 0; c < 2; c++) {
    if (j->kv->dtype == BRISK_DTYPE_F32) {
      memcpy(r + c * half, (const float *)j->cache[c] + row * half, (size_t)half * sizeof(float));
    } else {
      const uint16_t *h = (const uint16_t *)j->cache[c] + row * half;
      for (int32_t i = 0; i < half; i++) r[c * half + i] = brisk_f16_to_f32(h[i]);
    }
  }
}

static void attend_unit(const mla_job *j, int64_t unit) {
  const brisk_mla_params *p = j->p;
  const brisk_kv_layout *kv = j->kv;
  const int32_t t = (int32_t)(unit / j->units_per_token);
  const int32_t h0 = (int32_t)(unit % j->units_per_token) * j->heads_per_unit;
  const int32_t nh = p->n_heads - h0 < j->heads_per_unit ? p->n_heads - h0 : j->heads_per_unit;
  const int32_t r = p->rank, dq = p->nope_dim + p->rope_dim, dkb = p->nope_dim + p->v_dim;
  float a[MLA_SCRATCH], acc[MLA_SCRATCH], row[2 * BRISK_MAX_HEAD_DIM];
  float m[MLA_MAX_GROUP], l[MLA_MAX_GROUP];
  /* Absorbed queries: a_h = K_h^T q_n, summed over d in order. */
  for (int32_t g = 0; g < nh; g++) {
    const int32_t h = h0 + g;
    const float *qn = j->q + ((int64_t)t * p->n_heads + h) * dq;
    const float *kb = j->kv_b + (int64_t)h * dkb * r;
    float *ah = a + (int64_t)g * r;
    for (int32_t c = 0; c < r; c++) ah[c] = 0;
    for (int32_t d = 0; d < p->nope_dim; d++) {
      const float qd = qn[d], *w = kb + (int64_t)d * r;
      for (int32_t c = 0; c < r; c++) ah[c] += qd * w[c];
    }
    for (int32_t c = 0; c < r; c++) acc[(int64_t)g * r + c] = 0;
    m[g] = -INFINITY;
    l[g] = 0;
  }
  const int32_t pos = j->batch->positions[t];
  const int32_t *table =
      j->batch->block_tables + (int64_t)j->batch->seq_of_token[t] * j->batch->max_blocks;
  for (int32_t k = 0; k <= pos; k++) {
    get_row(j, (int64_t)table[k / kv->block_size] * kv->block_size + k % kv->block_size, row);
    const float *kr = row + r;
    for (int32_t g = 0; g < nh; g++) {
      const float *ah = a + (int64_t)g * r;
      const float *qr = j->q + ((int64_t)t * p->n_heads + h0 + g) * dq + p->nope_dim;
      float s = 0, s_r = 0;
      for (int32_t c = 0; c < r; c++) s += ah[c] * row[c];
      for (int32_t c = 0; c < p->rope_dim; c++) s_r += qr[c] * kr[c];
      s = (s + s_r) * p->scale;
      float *ac = acc + (int64_t)g * r;
      if (s > m[g]) {
        float f = expf(m[g] - s); /* 0 for the first key */
        for (int32_t c = 0; c < r; c++) ac[c] *= f;
        l[g] *= f;
        m[g] = s;
      }
      float e = expf(s - m[g]);
      l[g] += e;
      for (int32_t c = 0; c < r; c++) ac[c] += e * row[c];
    }
  }
  /* out_h = V_h (acc / l). */
  for (int32_t g = 0; g < nh; g++) {
    const int32_t h = h0 + g;
    const float *ac = acc + (int64_t)g * r;
    const float *vb = j->kv_b + ((int64_t)h * dkb + p->nope_dim) * r;
    float *o = j->out + ((int64_t)t * p->n_heads + h) * p->v_dim;
    const float inv = 1.0f / l[g];
    for (int32_t v = 0; v < p->v_dim; v++) {
      float s = 0;
      for (int32_t c = 0; c < r; c++) s += vb[(int64_t)v * r + c] * ac[c];
      o[v] = s * inv;
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
  int32_t per = MLA_SCRATCH / params->rank; /* rank <= BRISK_MAX_HEAD_DIM: >= 4 */
  if (per > MLA_MAX_GROUP) per = MLA_MAX_GROUP;
  if (per > params->n_heads) per = params->n_heads;
  mla_job job = {.kv = kv,
                 .cache = {k_cache, v_cache},
                 .q = q,
                 .kv_b = kv_b,
                 .batch = batch,
                 .p = params,
                 .out = out,
                 .heads_per_unit = per,
                 .units_per_token = (params->n_heads + per - 1) / per};
  double work = n_keys * params->n_heads * 4.0 * (params->rank + params->rope_dim);
  brisk_cpu_ops_parallel(c->pool, (int64_t)batch->n_tokens * job.units_per_token, 1, work,
                         attend_range, &job);
  return BRISK_OK;
}
