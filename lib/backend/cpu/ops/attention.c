/* Paged attention on the CPU. A unit of work is one query token and a group
 * of query heads sharing a KV head: it walks the sequence's blocks in chunks
 * of keys and keeps an online softmax (running max and sum) with float32
 * accumulators. The kernels read F16 and INT8 rows in place where the
 * table has kernels for them: F16 widened in registers (the F32 cache's
 * arithmetic), INT8 by integer dot products with the query quantized to
 * INT8 per 32 values (attn_kernels_q8.c). Otherwise (FP8, and F16 on the
 * scalar and NEON tables) a chunk is widened once to float32 for the whole
 * group, so the arithmetic after the widening is the F32 cache's.
 * Chunk boundaries depend only on the query's position, the window, the
 * block size and head_dim, and each head's arithmetic only on its own data,
 * so a query's result is bitwise the same whatever else is in the batch,
 * however heads are grouped and however the work is split over threads. */
#include "backend/cpu/ops/attn_kernels.h"
#include "backend/cpu/ops/ops.h"

#include "core/dtype.h"
#include "core/error.h"
#include "quant/kv_quant.h"

#include <math.h>

/* Floats of each per-task scratch array (on the stack: 4 of them, 32 KiB):
 * the group's scaled queries, its accumulators, and a chunk of keys and of
 * values. Chunks and groups are sized to fit. */
#define SCRATCH 2048
/* At most this many heads per unit, so that wide GQA groups still split
 * over threads. */
#define MAX_GROUP 16
/* Keys requested ahead of the chunk being computed. */
#ifndef PREFETCH_KEYS
#  define PREFETCH_KEYS 64
#endif

typedef struct attn_job {
  const brisk_kv_layout *kv;
  const void *k_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  const void *v_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  const float *q;      // [n_tokens][n_heads][head_dim]
  float *out;          // [n_tokens][n_heads][head_dim]
  const brisk_attn_batch *batch;
  const brisk_attn_kernels *kern;
  int32_t n_heads, group, window;
  int32_t heads_per_unit, units_per_kv_head, keys_per_chunk;
  size_t row_bytes; // of one cache row
  float scale;
  float softcap; /* > 0: scores become softcap * tanh(score / softcap) */
} attn_job;

/* The keys a query at position p sees: [first_key, p]. */

/* Keys from `pos` in one chunk: never crosses a block or passes p. */
static int32_t chunk_len(const attn_job *j, int32_t pos, int32_t p) {
  int32_t n = j->kv->block_size - pos % j->kv->block_size;
  if (n > j->keys_per_chunk) n = j->keys_per_chunk;
  if (n > p + 1 - pos) n = p + 1 - pos;
  return n;
}

/* Asks for the chunk at `pos` while this one computes: blocks are scattered,
 * so the hardware prefetcher stalls at each block boundary. */
static void prefetch_chunk(const attn_job *j, const int32_t *table, int32_t kvh, int32_t pos,
                           int32_t p) {
  const brisk_kv_layout *kv = j->kv;
  const int32_t bs = kv->block_size;
  const int64_t at =
      (((int64_t)table[pos / bs] * kv->n_kv_heads + kvh) * bs + pos % bs) * (int64_t)j->row_bytes;
  const size_t bytes = (size_t)chunk_len(j, pos, p) * j->row_bytes;
  const char *k = (const char *)j->k_cache + at, *v = (const char *)j->v_cache + at;
  for (size_t off = 0; off < bytes; off += 64) {
    __builtin_prefetch(k + off);
    __builtin_prefetch(v + off);
  }
}

/* Query token t, heads h0 .. h0 + nh - 1 of KV head kvh. */
static void attend(const attn_job *j, int32_t t, int32_t kvh, int32_t h0, int32_t nh) {
  const brisk_kv_layout *kv = j->kv;
  const brisk_attn_kernels *kern = j->kern;
  const int32_t hd = kv->head_dim, bs = kv->block_size, p = j->batch->positions[t];
  const int32_t *table =
      j->batch->block_tables + (int64_t)j->batch->seq_of_token[t] * j->batch->max_blocks;
  const bool f16 = kv->dtype == BRISK_DTYPE_F16, quant = brisk_kvq_is_quantized(kv->dtype);
  /* Rows read in place, without the float32 copy of the chunk. */
  const bool q8 = kv->dtype == BRISK_KVQ_DTYPE_Q8 && kern->scores_q8;
  const bool f16_direct = f16 && kern->scores_f16;
  const int32_t nqb = brisk_kvq_n_qblocks(hd);
  float qs[SCRATCH], acc[SCRATCH];                  // [nh][hd] each
  float kbuf[SCRATCH], vbuf[SCRATCH];               // [keys_per_chunk][hd] each, for widened rows
  int8_t qq[SCRATCH];                               // [nh][hd]: the INT8 queries (q8)
  float qd[SCRATCH / BRISK_KVQ_QBLOCK + MAX_GROUP]; // [nh][nqb]: their block scales
  /* Each head's scores, then probabilities, of a chunk. */
  float scs[MAX_GROUP][BRISK_ATTN_MAX_CHUNK] __attribute__((aligned(32)));
  float m[MAX_GROUP], l[MAX_GROUP];
  for (int32_t g = 0; g < nh; g++) {
    const float *q = j->q + ((int64_t)t * j->n_heads + h0 + g) * hd;
    for (int32_t i = 0; i < hd; i++) qs[g * hd + i] = q[i] * j->scale, acc[g * hd + i] = 0;
    if (quant) brisk_kvq_rotate(qs + g * hd, hd); /* 8-bit rows hold R k and R v */
    if (q8) brisk_kvq_quantize_query(qs + g * hd, qq + g * hd, qd + g * nqb, hd);
    m[g] = -INFINITY, l[g] = 0;
  }
  int32_t ahead = brisk_attn_first_key(p, j->window); /* next chunk to prefetch */
  for (int32_t pos = ahead; pos <= p;) {
    const int32_t n = chunk_len(j, pos, p);
    const int64_t row = ((int64_t)table[pos / bs] * kv->n_kv_heads + kvh) * bs + pos % bs;
    const int64_t at = row * hd;
    /* Keep PREFETCH_KEYS keys in flight: one chunk ahead is too short a
     * distance for the memory latency when a chunk computes quickly (8-bit
     * rows, small groups). */
    for (; ahead <= p && ahead < pos + n + PREFETCH_KEYS; ahead += chunk_len(j, ahead, p))
      if (ahead >= pos + n) prefetch_chunk(j, table, kvh, ahead, p);
    const float *kf = NULL, *vf = NULL; // [n][hd] float32 rows, unless read in place
    const uint8_t *kr = (const uint8_t *)j->k_cache + row * (int64_t)j->row_bytes;
    const uint8_t *vr = (const uint8_t *)j->v_cache + row * (int64_t)j->row_bytes;
    if (q8 || f16_direct) {
      /* kr, vr */
    } else if (quant) {
      kern->dequant_rows(kv->dtype, kr, n, hd, kbuf);
      kern->dequant_rows(kv->dtype, vr, n, hd, vbuf);
      kf = kbuf, vf = vbuf;
    } else if (f16) {
      kern->f16_to_f32((const uint16_t *)j->k_cache + at, kbuf, (size_t)n * hd);
      kern->f16_to_f32((const uint16_t *)j->v_cache + at, vbuf, (size_t)n * hd);
      kf = kbuf, vf = vbuf;
    } else {
      kf = (const float *)j->k_cache + at, vf = (const float *)j->v_cache + at;
    }
    for (int32_t g = 0; g < nh; g++) {
      float *sc = scs[g];
      if (q8)
        kern->scores_q8(qq + g * hd, qd + g * nqb, kr, n, hd, sc);
      else if (f16_direct)
        kern->scores_f16(qs + g * hd, (const uint16_t *)j->k_cache + at, n, hd, sc);
      else
        kern->scores(qs + g * hd, kf, n, hd, sc);
      if (j->softcap > 0)
        for (int32_t c = 0; c < n; c++) sc[c] = j->softcap * tanhf(sc[c] / j->softcap);
      float cm = -INFINITY;
      for (int32_t c = 0; c < n; c++) cm = sc[c] > cm ? sc[c] : cm;
      if (cm > m[g]) { /* rescale what was summed under the old max */
        float alpha = expf(m[g] - cm);
        kern->scale(acc + g * hd, alpha, hd);
        l[g] *= alpha;
        m[g] = cm;
      }
      kern->exp_shift(sc, n, m[g]);
      for (int32_t c = 0; c < n; c++) l[g] += sc[c];
      if (q8)
        continue; /* below, all heads at once */
      else if (f16_direct)
        kern->accumulate_f16(acc + g * hd, sc, (const uint16_t *)j->v_cache + at, n, hd);
      else
        kern->accumulate(acc + g * hd, sc, vf, n, hd);
    }
    /* Each value row widened once for the whole group (each head's sums are
     * still its own, in key order). */
    if (q8) kern->accumulate_q8(acc, &scs[0][0], nh, vr, n, hd);
    pos += n;
  }
  for (int32_t g = 0; g < nh; g++) {
    float *o = j->out + ((int64_t)t * j->n_heads + h0 + g) * hd;
    kern->scale(acc + g * hd, 1.0f / l[g], hd);
    if (quant) brisk_kvq_rotate(acc + g * hd, hd);
    for (int32_t i = 0; i < hd; i++) o[i] = acc[g * hd + i];
  }
}

static void attend_range(void *p, int64_t u0, int64_t u1) {
  const attn_job *j = p;
  const int64_t per_token = (int64_t)j->kv->n_kv_heads * j->units_per_kv_head;
  for (int64_t u = u0; u < u1; u++) {
    int32_t t = (int32_t)(u / per_token), r = (int32_t)(u % per_token);
    int32_t kvh = r / j->units_per_kv_head, sub = r % j->units_per_kv_head;
    int32_t first = sub * j->heads_per_unit;
    int32_t nh = j->group - first < j->heads_per_unit ? j->group - first : j->heads_per_unit;
    attend(j, t, kvh, kvh * j->group + first, nh);
  }
}

brisk_status brisk_cpu_ops_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                     const void *k_cache, const void *v_cache, const float *q,
                                     const brisk_attn_batch *batch, const brisk_attn_params *params,
                                     float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  double n_keys = 0;
  brisk_status st = brisk_check_attention(kv, k_cache, v_cache, q, batch, params, out, &n_keys);
  if (st != BRISK_OK || batch->n_tokens == 0) return st;
  const int32_t hd = kv->head_dim, group = params->n_heads / kv->n_kv_heads;
  int32_t heads_per_unit = SCRATCH / hd < MAX_GROUP ? SCRATCH / hd : MAX_GROUP;
  if (heads_per_unit > group) heads_per_unit = group;
  int32_t keys_per_chunk =
      SCRATCH / hd < BRISK_ATTN_MAX_CHUNK ? SCRATCH / hd : BRISK_ATTN_MAX_CHUNK;
  attn_job job = {
      .kv = kv,
      .k_cache = k_cache,
      .v_cache = v_cache,
      .q = q,
      .out = out,
      .batch = batch,
      .n_heads = params->n_heads,
      .group = group,
      .window = params->sliding_window,
      .heads_per_unit = heads_per_unit,
      .units_per_kv_head = (group + heads_per_unit - 1) / heads_per_unit,
      .keys_per_chunk = keys_per_chunk,
      .row_bytes = brisk_kvq_row_bytes(kv->dtype, kv->head_dim),
      .scale = params->scale != 0 ? params->scale : (float)(1.0 / sqrt((double)kv->head_dim)),
      .softcap = params->softcap,
  };
  job.kern = c->avx512    ? brisk_attn_kernels_avx512()
             : c->avxvnni ? brisk_attn_kernels_avxvnni()
             : c->avx2    ? brisk_attn_kernels_avx2()
             : c->neon    ? brisk_attn_kernels_neon()
                          : brisk_attn_kernels_scalar();
  int64_t n_units = (int64_t)batch->n_tokens * kv->n_kv_heads * job.units_per_kv_head;
  double work = 4.0 * n_keys * params->n_heads * kv->head_dim;
  brisk_cpu_ops_parallel(c->pool, n_units, 1, work, attend_range, &job);
  return BRISK_OK;
}
