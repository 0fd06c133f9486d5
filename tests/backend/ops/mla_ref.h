/* Multi-head latent attention and group-limited routing against float64
 * references, for any backend (the CPU paths here, the CUDA backend in
 * tests/cudabe): the reference expands every head's keys [K_h c | k_rope]
 * and values V_h c explicitly, as transformers does, which the backend
 * never forms. Random sizes, shuffled block tables, several sequences per
 * batch, F16 and F32 caches; results independent of the batch, bit for
 * bit. The caller provides assert/fail (cmocka). */
#ifndef BRISK_TESTS_BACKEND_OPS_MLA_REF_H
#define BRISK_TESTS_BACKEND_OPS_MLA_REF_H

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/half.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int mla_rand_int(test_rng *r, int lo, int hi) { /* [lo, hi] */
  return lo + (int)(test_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

static inline float *mla_rand(test_rng *r, size_t n, double sigma) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(test_rng_normal(r) * sigma);
  return x;
}

/* Backend memory holding a copy of host data. */
static inline void *mla_upload(brisk_backend *be, const void *src, size_t bytes) {
  void *d = NULL;
  assert_int_equal(be->buffer_alloc(be, bytes ? bytes : 4, &d), BRISK_OK);
  if (bytes) assert_int_equal(be->upload(be, d, src, bytes), BRISK_OK);
  return d;
}

/* One random case on `be`: returns the worst |got - want| / (1 + |want|). */
static inline double mla_check_case(brisk_backend *be, test_rng *r, uint32_t dtype) {
  brisk_mla_params p;
  p.n_heads = mla_rand_int(r, 1, 6);
  p.rope_dim = 2 * mla_rand_int(r, 1, 8);
  p.rank = 2 * mla_rand_int(r, 1, 40) + (p.rope_dim % 2); /* rank + rope even */
  p.nope_dim = mla_rand_int(r, 1, 24);
  p.v_dim = mla_rand_int(r, 1, 24);
  p.scale =
      (float)(1.0 / sqrt((double)(p.nope_dim + p.rope_dim)) * (0.5 + test_rng_uniform(r, 0, 1)));
  const int32_t D = p.rank + p.rope_dim, half = D / 2, bs = mla_rand_int(r, 1, 9);
  const int32_t n_seqs = mla_rand_int(r, 1, 3), dq = p.nope_dim + p.rope_dim;
  const int32_t dkb = p.nope_dim + p.v_dim;
  int32_t len[3], total_blocks = 0, max_blocks = 1;
  for (int s = 0; s < n_seqs; s++) {
    len[s] = mla_rand_int(r, 1, 40);
    int32_t nb = (len[s] + bs - 1) / bs;
    total_blocks += nb;
    if (nb > max_blocks) max_blocks = nb;
  }
  const int32_t n_blocks = total_blocks + mla_rand_int(r, 0, 4);
  int32_t *perm = malloc((size_t)n_blocks * sizeof *perm);
  for (int32_t i = 0; i < n_blocks; i++) perm[i] = i;
  for (int32_t i = n_blocks - 1; i > 0; i--) {
    int32_t j = mla_rand_int(r, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int32_t *tables = calloc((size_t)n_seqs * max_blocks, sizeof *tables);
  for (int s = 0, next = 0; s < n_seqs; s++)
    for (int32_t b = 0; b * bs < len[s]; b++) tables[s * max_blocks + b] = perm[next++];
  brisk_kv_layout kv = {dtype, n_blocks, 1, bs, half};
  const size_t elt = dtype == BRISK_DTYPE_F32 ? 4 : 2;
  const size_t pool_bytes = (size_t)n_blocks * bs * half * elt;
  void *kc = NULL, *vc = NULL;
  assert_int_equal(be->buffer_alloc(be, pool_bytes, &kc), BRISK_OK);
  assert_int_equal(be->buffer_alloc(be, pool_bytes, &vc), BRISK_OK);
  /* Every sequence's rows, written in a few calls with one padding token. */
  float *c_seq[3], *kr_seq[3];
  for (int s = 0; s < n_seqs; s++) {
    c_seq[s] = mla_rand(r, (size_t)len[s] * p.rank, 1.0);
    kr_seq[s] = mla_rand(r, (size_t)len[s] * p.rope_dim, 1.0);
    for (int32_t t0 = 0; t0 < len[s];) {
      int32_t n = mla_rand_int(r, 1, len[s] - t0);
      int64_t *slots = malloc((size_t)(n + 1) * sizeof *slots);
      float *lat = malloc((size_t)(n + 1) * p.rank * sizeof *lat);
      float *kr = malloc((size_t)(n + 1) * p.rope_dim * sizeof *kr);
      for (int32_t i = 0; i < n; i++) {
        int32_t pos = t0 + i;
        slots[i] = (int64_t)tables[s * max_blocks + pos / bs] * bs + pos % bs;
        memcpy(lat + (size_t)i * p.rank, c_seq[s] + (size_t)pos * p.rank, p.rank * sizeof(float));
        memcpy(kr + (size_t)i * p.rope_dim, kr_seq[s] + (size_t)pos * p.rope_dim,
               p.rope_dim * sizeof(float));
      }
      slots[n] = -1; /* padding: skipped */
      memset(lat + (size_t)n * p.rank, 0x7f, p.rank * sizeof(float));
      memset(kr + (size_t)n * p.rope_dim, 0x7f, p.rope_dim * sizeof(float));
      float *d_lat = mla_upload(be, lat, (size_t)(n + 1) * p.rank * sizeof(float));
      float *d_kr = mla_upload(be, kr, (size_t)(n + 1) * p.rope_dim * sizeof(float));
      assert_int_equal(be->mla_kv_write(be, &kv, kc, vc, d_lat, d_kr, slots, n + 1, &p), BRISK_OK);
      be->buffer_free(be, d_lat);
      be->buffer_free(be, d_kr);
      free(slots), free(lat), free(kr);
      t0 += n;
    }
    /* What the cache holds: F16 rounds each value once. */
    if (dtype == BRISK_DTYPE_F16) {
      for (size_t i = 0; i < (size_t)len[s] * p.rank; i++)
        c_seq[s][i] = brisk_f16_to_f32(brisk_f32_to_f16(c_seq[s][i]));
      for (size_t i = 0; i < (size_t)len[s] * p.rope_dim; i++)
        kr_seq[s][i] = brisk_f16_to_f32(brisk_f32_to_f16(kr_seq[s][i]));
    }
  }
  /* The first latent row, read back from the two pools. */
  {
    int64_t slot = (int64_t)tables[0] * bs;
    unsigned char *h0 = malloc((size_t)half * elt), *h1 = malloc((size_t)half * elt);
    assert_int_equal(be->download(be, h0, (char *)kc + slot * half * elt, (size_t)half * elt),
                     BRISK_OK);
    assert_int_equal(be->download(be, h1, (char *)vc + slot * half * elt, (size_t)half * elt),
                     BRISK_OK);
    for (int32_t i = 0; i < D; i++) {
      const unsigned char *src = i < half ? h0 : h1;
      int32_t at = i < half ? i : i - half;
      float got;
      if (elt == 4) {
        memcpy(&got, src + 4 * at, 4);
      } else {
        uint16_t h;
        memcpy(&h, src + 2 * at, 2);
        got = brisk_f16_to_f32(h);
      }
      float want = i < p.rank ? c_seq[0][i] : kr_seq[0][i - p.rank];
      assert_memory_equal(&got, &want, sizeof got);
    }
    free(h0), free(h1);
  }
  /* Queries: random positions of random sequences. */
  const int32_t nt = mla_rand_int(r, 1, 12);
  int32_t *pos = malloc((size_t)nt * sizeof *pos), *seq = malloc((size_t)nt * sizeof *seq);
  for (int32_t t = 0; t < nt; t++) {
    seq[t] = mla_rand_int(r, 0, n_seqs - 1);
    pos[t] = mla_rand_int(r, 0, len[seq[t]] - 1);
  }
  float *q = mla_rand(r, (size_t)nt * p.n_heads * dq, 1.0);
  float *kvb = mla_rand(r, (size_t)p.n_heads * dkb * p.rank, 1.0 / sqrt((double)p.rank));
  float *d_q = mla_upload(be, q, (size_t)nt * p.n_heads * dq * sizeof(float));
  float *d_kvb = mla_upload(be, kvb, (size_t)p.n_heads * dkb * p.rank * sizeof(float));
  const size_t out_n = (size_t)nt * p.n_heads * p.v_dim;
  float *d_out = NULL, *out = malloc(out_n * sizeof *out), *one = malloc(out_n * sizeof *one);
  assert_int_equal(be->buffer_alloc(be, out_n * sizeof(float), (void **)&d_out), BRISK_OK);
  brisk_attn_batch batch = {nt, pos, seq, tables, n_seqs, max_blocks};
  assert_int_equal(be->mla_attention(be, &kv, kc, vc, d_q, d_kvb, &batch, &p, d_out), BRISK_OK);
  assert_int_equal(be->download(be, out, d_out, out_n * sizeof(float)), BRISK_OK);
  /* The same queries one at a time: bit for bit. */
  for (int32_t t = 0; t < nt; t++) {
    brisk_attn_batch b1 = {1, pos + t, seq + t, tables, n_seqs, max_blocks};
    const size_t per = (size_t)p.n_heads * p.v_dim;
    assert_int_equal(
        be->mla_attention(be, &kv, kc, vc, d_q + (size_t)t * p.n_heads * dq, d_kvb, &b1, &p, d_out),
        BRISK_OK);
    assert_int_equal(be->download(be, one + t * per, d_out, per * sizeof(float)), BRISK_OK);
  }
  assert_memory_equal(out, one, out_n * sizeof(float));
  /* float64 reference with explicit per-head keys and values. */
  double worst = 0;
  double *k = malloc(sizeof(double) * dq), *sc = malloc(sizeof(double) * 64);
  double *vh = malloc(sizeof(double) * p.v_dim);
  for (int32_t t = 0; t < nt; t++) {
    const int s = seq[t];
    for (int32_t h = 0; h < p.n_heads; h++) {
      const float *qh = q + ((size_t)t * p.n_heads + h) * dq;
      const float *kb = kvb + (size_t)h * dkb * p.rank;
      double m = -INFINITY;
      for (int32_t j = 0; j <= pos[t]; j++) {
        const float *c = c_seq[s] + (size_t)j * p.rank;
        for (int32_t d = 0; d < p.nope_dim; d++) {
          k[d] = 0;
          for (int32_t i = 0; i < p.rank; i++) k[d] += (double)kb[d * p.rank + i] * c[i];
        }
        for (int32_t d = 0; d < p.rope_dim; d++) k[p.nope_dim + d] = kr_seq[s][j * p.rope_dim + d];
        double dot = 0;
        for (int32_t d = 0; d < dq; d++) dot += (double)qh[d] * k[d];
        sc[j] = dot * p.scale;
        if (sc[j] > m) m = sc[j];
      }
      double sum = 0;
      for (int32_t j = 0; j <= pos[t]; j++) sum += (sc[j] = exp(sc[j] - m));
      for (int32_t v = 0; v < p.v_dim; v++) vh[v] = 0;
      for (int32_t j = 0; j <= pos[t]; j++) {
        const float *c = c_seq[s] + (size_t)j * p.rank;
        for (int32_t v = 0; v < p.v_dim; v++) {
          double val = 0;
          for (int32_t i = 0; i < p.rank; i++)
            val += (double)kb[(p.nope_dim + v) * p.rank + i] * c[i];
          vh[v] += sc[j] / sum * val;
        }
      }
      for (int32_t v = 0; v < p.v_dim; v++) {
        double got = out[((size_t)t * p.n_heads + h) * p.v_dim + v];
        double e = fabs(got - vh[v]) / (1 + fabs(vh[v]));
        if (e > worst) worst = e;
      }
    }
  }
  free(k), free(sc), free(vh);
  be->buffer_free(be, d_q), be->buffer_free(be, d_kvb), be->buffer_free(be, d_out);
  be->buffer_free(be, kc), be->buffer_free(be, vc);
  for (int s = 0; s < n_seqs; s++) free(c_seq[s]), free(kr_seq[s]);
  free(q), free(kvb), free(out), free(one), free(pos), free(seq), free(tables), free(perm);
  return worst;
}

/* Bad calls: a quantized or mis-shaped latent pool, bad params. */
static inline void mla_check_refusals(brisk_backend *be) {
  brisk_mla_params p = {2, 6, 4, 2, 4, 0.5f};
  brisk_kv_layout kv = {BRISK_DTYPE_F16, 2, 1, 4, 4};
  void *pool = NULL;
  assert_int_equal(be->buffer_alloc(be, 64, &pool), BRISK_OK);
  float x[64] = {0};
  int64_t slot = 0;
  int32_t pos = 0, seq = 0, table = 0;
  brisk_attn_batch b = {1, &pos, &seq, &table, 1, 1};
  brisk_kv_layout wrong = kv;
  wrong.head_dim = 3; /* not (rank + rope) / 2 */
  assert_int_equal(be->mla_kv_write(be, &wrong, pool, pool, x, x, &slot, 1, &p),
                   BRISK_E_INVALID_ARGUMENT);
  wrong = kv;
  wrong.n_kv_heads = 2;
  assert_int_equal(be->mla_attention(be, &wrong, pool, pool, x, x, &b, &p, x),
                   BRISK_E_INVALID_ARGUMENT);
  wrong = kv;
  wrong.dtype = BRISK_DTYPE_Q8_0;
  assert_int_equal(be->mla_kv_write(be, &wrong, pool, pool, x, x, &slot, 1, &p),
                   BRISK_E_UNSUPPORTED);
  brisk_mla_params bad = p;
  bad.scale = 0;
  assert_int_equal(be->mla_attention(be, &kv, pool, pool, x, x, &b, &bad, x),
                   BRISK_E_INVALID_ARGUMENT);
  slot = 8; /* 2 blocks of 4 slots */
  assert_int_equal(be->mla_kv_write(be, &kv, pool, pool, x, x, &slot, 1, &p),
                   BRISK_E_INVALID_ARGUMENT);
  be->buffer_free(be, pool);
}

/* Group-limited routing against a float64 reference: groups by their
 * largest probability, experts of the kept groups, ties to lower ids. */
static inline void mla_check_route_group(brisk_backend *be, test_rng *r) {
  for (int iter = 0; iter < 40; iter++) {
    const int32_t n_group = mla_rand_int(r, 1, 8), per = mla_rand_int(r, 1, 8);
    const int32_t ne = n_group * per, kg = mla_rand_int(r, 1, n_group);
    const int32_t k = mla_rand_int(r, 1, kg * per), nt = mla_rand_int(r, 1, 9);
    const bool renorm = iter % 2;
    float *x = malloc((size_t)nt * ne * sizeof *x);
    for (int32_t i = 0; i < nt * ne; i++) /* some ties */
      x[i] = mla_rand_int(r, 0, 3) == 0 ? (float)mla_rand_int(r, -2, 2) : (float)test_rng_normal(r);
    float *d_x = mla_upload(be, x, (size_t)nt * ne * sizeof(float));
    int32_t *ids = malloc((size_t)nt * k * sizeof *ids);
    float *w = malloc((size_t)nt * k * sizeof *w);
    assert_int_equal(be->moe_route_group(be, d_x, nt, ne, k, n_group, kg, renorm, ids, w),
                     BRISK_OK);
    for (int32_t t = 0; t < nt; t++) {
      const float *xt = x + (size_t)t * ne;
      double m = -INFINITY, total = 0;
      for (int32_t e = 0; e < ne; e++) m = xt[e] > m ? xt[e] : m;
      for (int32_t e = 0; e < ne; e++) total += exp((double)xt[e] - m);
      /* Groups in rank order: higher maximum first, then lower index. */
      bool kept[8] = {0}, used[64] = {0};
      for (int32_t i = 0; i < kg; i++) {
        int32_t best = -1;
        double bv = 0;
        for (int32_t g = 0; g < n_group; g++) {
          if (kept[g]) continue;
          double gv = -INFINITY;
          for (int32_t e = g * per; e < (g + 1) * per; e++) gv = xt[e] > gv ? xt[e] : gv;
          if (best < 0 || gv > bv) best = g, bv = gv;
        }
        kept[best] = true;
      }
      double chosen = 0;
      int32_t want[64];
      for (int32_t i = 0; i < k; i++) {
        int32_t best = -1;
        for (int32_t e = 0; e < ne; e++)
          if (kept[e / per] && !used[e] && (best < 0 || xt[e] > xt[best])) best = e;
        used[best] = true;
        want[i] = best;
        chosen += exp((double)xt[best] - m);
      }
      for (int32_t i = 0; i < k; i++) {
        assert_int_equal(ids[t * k + i], want[i]);
        double wv = exp((double)xt[want[i]] - m) / (renorm ? chosen : total);
        if (fabs(w[t * k + i] - wv) > 1e-6 * (1 + wv)) {
          fprintf(stderr, "route_group: token %d choice %d weight %.9g want %.9g\n", t, i,
                  (double)w[t * k + i], wv);
          fail();
        }
      }
    }
    /* Groups that do not divide the experts are refused. */
    if (ne > 1 && n_group > 1 && per > 1)
      assert_int_equal(be->moe_route_group(be, d_x, nt, ne - 1, 1, n_group, 1, false, ids, w),
                       BRISK_E_INVALID_ARGUMENT);
    be->buffer_free(be, d_x);
    free(x), free(ids), free(w);
  }
}

#endif
