/* KV write into paged blocks and paged attention, against a naive float64
 * attention over a contiguous copy of each sequence's keys and values:
 * shuffled non-contiguous block tables, several sequences per batch, GQA
 * ratios 1/2/4/8, sliding windows, F16, F32, INT8 and FP8 caches (the
 * reference reads the values the reference quantizer gives back, and for
 * INT8, whose scores are INT8 dot products, the query the reference query
 * quantizer gives back; 8-bit rows hold R k and R v, so the reference
 * rotates the query and rotates its output back, R from its float64
 * definition), odd head sizes; and
 * batch and thread invariance, bit for bit. */
#include "ops_test.h"

#include "core/dtype.h"
#include "core/half.h"
#include "quant/kv_quant.h"

typedef struct attn_case {
  uint32_t dtype;
  int32_t head_dim, n_kv_heads, group, block_size, window, n_seqs, max_len, max_queries;
  float scale;   /* 0: default */
  float softcap; /* > 0: scores soft-capped (Gemma 2) */
} attn_case;

typedef struct attn_setup {
  brisk_kv_layout kv;
  void *k_cache, *v_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  int32_t *len;            // [n_seqs] tokens written per sequence
  int32_t *tables;         // [n_seqs][max_blocks]
  int32_t max_blocks;
  float **k_seq, **v_seq; // per sequence [len][n_kv_heads][head_dim], as stored (8-bit: R k, R v)
  brisk_attn_batch batch;
  int32_t *positions, *seq_of; // [n_tokens]
  float *q;                    // [n_tokens][n_heads][head_dim]
  int32_t n_heads;
} attn_setup;

/* The cache dtypes, and what a row of each reads back as. */
static const uint32_t kv_dtypes[] = {BRISK_DTYPE_F16, BRISK_DTYPE_F32, BRISK_KVQ_DTYPE_Q8,
                                     BRISK_KVQ_DTYPE_FP8};

static const char *kv_name(uint32_t dtype) {
  return brisk_kvq_name(dtype) ? brisk_kvq_name(dtype) : brisk_dtype_name(dtype);
}

/* Rows of hd values as the cache stores them, through the reference
 * quantizers of quant/kv_quant.h (8-bit types: the stored, rotated values). */
static void store_rows(uint32_t dtype, float *x, size_t n_rows, int32_t hd) {
  uint8_t row[2 * BRISK_MAX_HEAD_DIM + 64];
  for (size_t r = 0; r < n_rows; r++) {
    float *xr = x + r * (size_t)hd;
    if (brisk_kvq_is_quantized(dtype)) {
      brisk_kvq_quantize_row(dtype, xr, row, hd);
      brisk_kvq_dequantize_row_rotated(dtype, row, xr, hd);
    } else if (dtype == BRISK_DTYPE_F16) {
      for (int32_t i = 0; i < hd; i++) xr[i] = brisk_f16_to_f32(brisk_f32_to_f16(xr[i]));
    }
  }
}

/* Builds caches through be->kv_write with shuffled block ids. */
static void setup(attn_setup *S, const attn_case *c, test_rng *r, brisk_backend *be) {
  memset(S, 0, sizeof *S);
  const int32_t hd = c->head_dim, nkv = c->n_kv_heads, bs = c->block_size;
  S->len = malloc(c->n_seqs * sizeof *S->len);
  int32_t total_blocks = 0;
  S->max_blocks = 1;
  for (int s = 0; s < c->n_seqs; s++) {
    S->len[s] = rand_int(r, 1, c->max_len);
    int32_t nb = (S->len[s] + bs - 1) / bs;
    total_blocks += nb;
    if (nb + 1 > S->max_blocks) S->max_blocks = nb + 1;
  }
  int32_t n_blocks = total_blocks + rand_int(r, 0, 5); /* some never used */
  int32_t *perm = malloc(n_blocks * sizeof *perm);
  for (int32_t i = 0; i < n_blocks; i++) perm[i] = i;
  for (int32_t i = n_blocks - 1; i > 0; i--) {
    int32_t j = rand_int(r, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  S->kv = (brisk_kv_layout){c->dtype, n_blocks, nkv, bs, hd};
  size_t cache_bytes = (size_t)n_blocks * nkv * bs * brisk_kvq_row_bytes(c->dtype, hd);
  assert_int_equal(be->buffer_alloc(be, cache_bytes, &S->k_cache), BRISK_OK);
  assert_int_equal(be->buffer_alloc(be, cache_bytes, &S->v_cache), BRISK_OK);
  /* NaN fill: a read of a slot that was never written would show. */
  memset(S->k_cache, 0xff, cache_bytes);
  memset(S->v_cache, 0xff, cache_bytes);
  S->tables = malloc((size_t)c->n_seqs * S->max_blocks * sizeof *S->tables);
  S->k_seq = malloc(c->n_seqs * sizeof *S->k_seq);
  S->v_seq = malloc(c->n_seqs * sizeof *S->v_seq);
  int32_t next = 0;
  for (int s = 0; s < c->n_seqs; s++) {
    int32_t *tab = S->tables + s * S->max_blocks;
    for (int32_t b = 0; b < S->max_blocks; b++) tab[b] = -7; /* unused tail: garbage */
    for (int32_t b = 0; b < (S->len[s] + bs - 1) / bs; b++) tab[b] = perm[next++];
    size_t n = (size_t)S->len[s] * nkv * hd;
    float *k = rand_floats(r, n, 1), *v = rand_floats(r, n, 1);
    /* Write in a few uneven batches, with a padding token (slot -1). */
    for (int32_t t0 = 0; t0 < S->len[s];) {
      int32_t nt = rand_int(r, 1, 37);
      if (nt > S->len[s] - t0) nt = S->len[s] - t0;
      int64_t slots[40];
      float *kb = malloc((size_t)(nt + 1) * nkv * hd * sizeof *kb);
      float *vb = malloc((size_t)(nt + 1) * nkv * hd * sizeof *vb);
      for (int32_t i = 0; i < nt; i++) {
        int32_t p = t0 + i;
        slots[i] = (int64_t)tab[p / bs] * bs + p % bs;
        memcpy(kb + (size_t)i * nkv * hd, k + (size_t)p * nkv * hd, (size_t)nkv * hd * 4);
        memcpy(vb + (size_t)i * nkv * hd, v + (size_t)p * nkv * hd, (size_t)nkv * hd * 4);
      }
      slots[nt] = -1;
      for (int32_t i = 0; i < nkv * hd; i++) kb[nt * nkv * hd + i] = vb[nt * nkv * hd + i] = 1e9f;
      assert_int_equal(be->kv_write(be, &S->kv, S->k_cache, S->v_cache, kb, vb, slots, nt + 1),
                       BRISK_OK);
      free(kb), free(vb);
      t0 += nt;
    }
    store_rows(c->dtype, k, (size_t)S->len[s] * nkv, hd);
    store_rows(c->dtype, v, (size_t)S->len[s] * nkv, hd);
    S->k_seq[s] = k, S->v_seq[s] = v;
  }
  free(perm);
  /* Queries: each sequence's last few positions (a prefill chunk or one
   * decode step) plus random earlier ones, interleaved across sequences. */
  S->n_heads = nkv * c->group;
  int32_t cap = c->n_seqs * c->max_queries;
  S->positions = malloc(cap * sizeof *S->positions);
  S->seq_of = malloc(cap * sizeof *S->seq_of);
  int32_t nt = 0;
  for (int s = 0; s < c->n_seqs; s++) {
    int32_t nq = rand_int(r, 1, c->max_queries);
    for (int32_t i = 0; i < nq; i++) {
      int32_t p = i < nq / 2 + 1 ? S->len[s] - 1 - i : rand_int(r, 0, S->len[s] - 1);
      if (p < 0) p = 0;
      S->positions[nt] = p, S->seq_of[nt] = s, nt++;
    }
  }
  for (int32_t i = nt - 1; i > 0; i--) { /* interleave */
    int32_t j = rand_int(r, 0, i), tp = S->positions[i], ts = S->seq_of[i];
    S->positions[i] = S->positions[j], S->seq_of[i] = S->seq_of[j];
    S->positions[j] = tp, S->seq_of[j] = ts;
  }
  S->q = rand_floats(r, (size_t)nt * S->n_heads * hd, 1);
  S->batch = (brisk_attn_batch){nt, S->positions, S->seq_of, S->tables, c->n_seqs, S->max_blocks};
}

static void teardown(attn_setup *S, const attn_case *c, brisk_backend *be) {
  be->buffer_free(be, S->k_cache);
  be->buffer_free(be, S->v_cache);
  for (int s = 0; s < c->n_seqs; s++) free(S->k_seq[s]), free(S->v_seq[s]);
  free(S->k_seq), free(S->v_seq), free(S->len), free(S->tables), free(S->positions);
  free(S->seq_of), free(S->q);
}

/* Naive attention of every query, float64 throughout. */
static double *reference(const attn_setup *S, const attn_case *c) {
  const int32_t hd = c->head_dim, nkv = c->n_kv_heads, nh = S->n_heads;
  double scale = c->scale != 0 ? c->scale : 1 / sqrt((double)hd);
  double *out = malloc((size_t)S->batch.n_tokens * nh * hd * sizeof *out);
  double *w = malloc((size_t)(c->max_len + 1) * sizeof *w);
  float qf[BRISK_MAX_HEAD_DIM], qd[BRISK_MAX_HEAD_DIM / BRISK_KVQ_QBLOCK + 1];
  int8_t qq[BRISK_MAX_HEAD_DIM];
  for (int32_t t = 0; t < S->batch.n_tokens; t++) {
    int32_t p = S->positions[t], s = S->seq_of[t];
    int32_t lo = c->window > 0 ? p - c->window + 1 : 0;
    if (lo < 0) lo = 0;
    for (int32_t h = 0; h < nh; h++) {
      const float *q = S->q + ((size_t)t * nh + h) * hd;
      int32_t g = h / c->group;
      /* An INT8 cache is read by INT8 dot products: the scaled query (in
       * float, as the kernels scale it) goes through the reference query
       * quantizer, as the rows went through the row quantizer. */
      const bool q8 = c->dtype == BRISK_KVQ_DTYPE_Q8, rot = brisk_kvq_is_quantized(c->dtype);
      if (q8) { /* the query rotated in float, as the kernels do, then quantized */
        const float fs = c->scale != 0 ? c->scale : (float)(1 / sqrt((double)hd));
        for (int32_t i = 0; i < hd; i++) qf[i] = q[i] * fs;
        brisk_kvq_rotate(qf, hd);
        brisk_kvq_quantize_query(qf, qq, qd, hd);
      }
      double qr[BRISK_MAX_HEAD_DIM], orot[BRISK_MAX_HEAD_DIM];
      for (int32_t i = 0; i < hd; i++) orot[i] = q[i];
      if (rot)
        test_kvq_rotate_f64(orot, qr, hd);
      else
        memcpy(qr, orot, (size_t)hd * sizeof *qr);
      double m = -INFINITY, sum = 0;
      for (int32_t j = lo; j <= p; j++) {
        const float *k = S->k_seq[s] + ((size_t)j * nkv + g) * hd;
        double d = 0;
        if (q8)
          for (int32_t i = 0; i < hd; i++) d += (double)qd[i / BRISK_KVQ_QBLOCK] * qq[i] * k[i];
        else
          for (int32_t i = 0; i < hd; i++) d += qr[i] * k[i];
        w[j] = q8 ? d : d * scale;
        if (c->softcap > 0) w[j] = c->softcap * tanh(w[j] / c->softcap);
        m = fmax(m, w[j]);
      }
      for (int32_t j = lo; j <= p; j++) sum += (w[j] = exp(w[j] - m));
      double *o = out + ((size_t)t * nh + h) * hd;
      for (int32_t i = 0; i < hd; i++) o[i] = 0;
      for (int32_t j = lo; j <= p; j++) {
        const float *v = S->v_seq[s] + ((size_t)j * nkv + g) * hd;
        for (int32_t i = 0; i < hd; i++) o[i] += w[j] / sum * v[i];
      }
      if (rot) {
        memcpy(orot, o, (size_t)hd * sizeof *o);
        test_kvq_rotate_f64(orot, o, hd);
      }
    }
  }
  free(w);
  return out;
}

static double worst_error; /* largest |out - reference| seen, for the log */

static void run_case(const attn_case *c, test_rng *r, ops_paths *P, ops_paths *serial) {
  for (int b = 0; b < P->n; b++) {
    brisk_backend *be = P->be[b];
    attn_setup S;
    setup(&S, c, r, be);
    double *want = reference(&S, c);
    size_t n_out = (size_t)S.batch.n_tokens * S.n_heads * c->head_dim;
    float *out = malloc(n_out * sizeof *out);
    brisk_attn_params ap = {S.n_heads, c->scale, c->window, c->softcap};
    assert_int_equal(be->attention(be, &S.kv, S.k_cache, S.v_cache, S.q, &S.batch, &ap, out),
                     BRISK_OK);
    /* Scores: float dot products of <= 256 terms (|q.k| scale <~ 5, error
     * ~1e-6); weights through exp (2 ulp) and an online rescale; outputs
     * are convex mixes of values |v| <~ 5 summed in float over <= 300 keys.
     * 2e-5 is about 7x the largest error seen over many seeds (3e-6). */
    for (size_t i = 0; i < n_out; i++) worst_error = fmax(worst_error, fabs(out[i] - want[i]));
    ASSERT_CLOSE(out, want, n_out, 2e-5, 0, "%s attention %s hd %d kv %d group %d bs %d window %d",
                 be->name, kv_name(c->dtype), c->head_dim, c->n_kv_heads, c->group, c->block_size,
                 c->window);
    /* Batch invariance: each of a few queries alone gives the same bits. */
    float *one = malloc((size_t)S.n_heads * c->head_dim * sizeof *one);
    for (int k = 0; k < 3; k++) {
      int32_t t = rand_int(r, 0, S.batch.n_tokens - 1);
      brisk_attn_batch b1 = S.batch;
      b1.n_tokens = 1;
      b1.positions = S.positions + t;
      b1.seq_of_token = S.seq_of + t;
      assert_int_equal(be->attention(be, &S.kv, S.k_cache, S.v_cache,
                                     S.q + (size_t)t * S.n_heads * c->head_dim, &b1, &ap, one),
                       BRISK_OK);
      assert_memory_equal(one, out + (size_t)t * S.n_heads * c->head_dim,
                          (size_t)S.n_heads * c->head_dim * sizeof *one);
    }
    /* Thread invariance: the same backend kind without a pool. */
    float *out1 = malloc(n_out * sizeof *out1);
    brisk_backend *sb = serial->be[b];
    assert_int_equal(sb->attention(sb, &S.kv, S.k_cache, S.v_cache, S.q, &S.batch, &ap, out1),
                     BRISK_OK);
    assert_memory_equal(out1, out, n_out * sizeof *out);
    free(one), free(out1), free(out), free(want);
    teardown(&S, c, be);
  }
}

static void test_paged_attention(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("paged_attention");
  ops_paths P = ops_paths_open(2), serial = ops_paths_open(0);
  const int32_t head_dims[] = {64, 128, 48, 20, 8};
  const int32_t groups[] = {1, 2, 4, 8};
  const int32_t block_sizes[] = {16, 1, 5, 32};
  int n = 0;
  for (int dt = 0; dt < 4; dt++) {
    for (size_t hi = 0; hi < sizeof head_dims / sizeof *head_dims; hi++) {
      for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++) {
        attn_case c = {
            .dtype = kv_dtypes[dt],
            .head_dim = head_dims[hi],
            .n_kv_heads = rand_int(&r, 1, 2),
            .group = groups[gi],
            .block_size = block_sizes[(hi + gi) % 4],
            .window = rand_int(&r, 0, 2) ? 0 : rand_int(&r, 1, 40),
            .n_seqs = rand_int(&r, 1, 4),
            .max_len = head_dims[hi] >= 128 ? 120 : 260,
            .max_queries = 6,
            .scale = rand_int(&r, 0, 2) ? 0.0f : (float)test_rng_uniform(&r, 0.05, 0.3),
            .softcap = rand_int(&r, 0, 3) ? 0.0f : (float)test_rng_uniform(&r, 0.5, 50),
        };
        run_case(&c, &r, &P, &serial);
        n++;
      }
    }
  }
  fprintf(stderr, "%d attention cases on %d kernel paths, largest error %.3g\n", n, P.n,
          worst_error);
  ops_paths_close(&P);
  ops_paths_close(&serial);
}

/* A long decode over many blocks with a window smaller than a block and one
 * bigger than the context. */
static void test_attention_windows(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("attention_windows");
  ops_paths P = ops_paths_open(2), serial = ops_paths_open(0);
  const int32_t windows[] = {1, 3, 16, 17, 100, 100000};
  for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++) {
    attn_case c = {kv_dtypes[wi % 4], 64, 2, 4, 16, windows[wi], 2, 400, 3, 0, 0};
    run_case(&c, &r, &P, &serial);
  }
  ops_paths_close(&P);
  ops_paths_close(&serial);
}

/* Groups wider than one unit of work (MQA with 32 heads, very large heads)
 * are split into sub-groups; chunks shrink with head_dim. */
static void test_attention_wide_groups(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("attention_wide_groups");
  ops_paths P = ops_paths_open(2), serial = ops_paths_open(0);
  const attn_case cases[] = {
      {BRISK_DTYPE_F16, 64, 1, 32, 16, 0, 2, 90, 3, 0, 0},
      {BRISK_DTYPE_F32, 512, 2, 8, 16, 0, 2, 40, 2, 0, 0},
      {BRISK_DTYPE_F16, 1024, 1, 3, 8, 5, 1, 30, 2, 0, 0},
      {BRISK_DTYPE_F16, 136, 2, 2, 7, 0, 3, 60, 3, 0, 0},
      {BRISK_KVQ_DTYPE_Q8, 1024, 1, 3, 8, 5, 1, 30, 2, 0, 0},
      {BRISK_KVQ_DTYPE_FP8, 136, 2, 2, 7, 0, 3, 60, 3, 0, 0},
      {BRISK_KVQ_DTYPE_Q8, 100, 1, 32, 16, 0, 2, 90, 3, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], &r, &P, &serial);
  ops_paths_close(&P);
  ops_paths_close(&serial);
}

/* The cache holds exactly the converted values at the documented address. */
static void test_kv_write_layout(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_write");
  ops_paths P = ops_paths_open(2);
  for (int b = 0; b < P.n; b++) {
    brisk_backend *be = P.be[b];
    for (int dt = 0; dt < 4; dt++) {
      brisk_kv_layout kv = {kv_dtypes[dt], 7, 3, 5, rand_int(&r, 1, 150)};
      size_t rb = brisk_kvq_row_bytes(kv.dtype, kv.head_dim);
      size_t per_slot = (size_t)kv.n_kv_heads * kv.head_dim;
      size_t bytes = (size_t)kv.n_blocks * kv.n_kv_heads * kv.block_size * rb;
      uint8_t *kc = malloc(bytes), *vc = malloc(bytes), *before = malloc(bytes);
      memset(kc, 0x5a, bytes), memset(vc, 0x5a, bytes), memcpy(before, kc, bytes);
      int32_t nt = 20;
      int64_t slots[20];
      /* Distinct random slots, some tokens skipped. */
      int32_t all[35];
      for (int i = 0; i < 35; i++) all[i] = i;
      for (int i = 34; i > 0; i--) {
        int j = rand_int(&r, 0, i), t = all[i];
        all[i] = all[j], all[j] = t;
      }
      for (int i = 0; i < nt; i++) slots[i] = i % 7 == 3 ? -1 : all[i];
      float *k = rand_floats(&r, nt * per_slot, 3), *v = rand_floats(&r, nt * per_slot, 3);
      if (dt >= 2) { /* a zero group and a huge one: the scales' edge cases */
        for (int i = 0; i < kv.head_dim && i < 64; i++) k[i] = 0;
        for (int i = 0; i < kv.head_dim; i++) v[per_slot + i] *= 1e6f;
      }
      assert_int_equal(be->kv_write(be, &kv, kc, vc, k, v, slots, nt), BRISK_OK);
      bool written[35] = {0};
      uint8_t want_k[2 * BRISK_MAX_HEAD_DIM + 64], want_v[sizeof want_k];
      for (int t = 0; t < nt; t++) {
        if (slots[t] < 0) continue;
        written[slots[t]] = true;
        int64_t blk = slots[t] / kv.block_size, sl = slots[t] % kv.block_size;
        for (int h = 0; h < kv.n_kv_heads; h++) {
          size_t at = (((size_t)blk * kv.n_kv_heads + h) * kv.block_size + sl) * rb;
          const float *kx = k + (size_t)t * per_slot + h * kv.head_dim;
          const float *vx = v + (size_t)t * per_slot + h * kv.head_dim;
          if (brisk_kvq_is_quantized(kv.dtype)) {
            brisk_kvq_quantize_row(kv.dtype, kx, want_k, kv.head_dim);
            brisk_kvq_quantize_row(kv.dtype, vx, want_v, kv.head_dim);
          } else if (kv.dtype == BRISK_DTYPE_F32) {
            memcpy(want_k, kx, rb), memcpy(want_v, vx, rb);
          } else {
            for (int i = 0; i < kv.head_dim; i++) {
              uint16_t kh = brisk_f32_to_f16(kx[i]), vh = brisk_f32_to_f16(vx[i]);
              memcpy(want_k + 2 * i, &kh, 2), memcpy(want_v + 2 * i, &vh, 2);
            }
          }
          assert_memory_equal(kc + at, want_k, rb);
          assert_memory_equal(vc + at, want_v, rb);
        }
      }
      /* Slots not written keep their bytes. */
      for (int s = 0; s < 35; s++) {
        if (written[s]) continue;
        int64_t blk = s / kv.block_size, sl = s % kv.block_size;
        for (int h = 0; h < kv.n_kv_heads; h++) {
          size_t at = (((size_t)blk * kv.n_kv_heads + h) * kv.block_size + sl) * rb;
          assert_memory_equal(kc + at, before + at, rb);
          assert_memory_equal(vc + at, before + at, rb);
        }
      }
      /* A slot past the end is refused before anything is written. */
      memcpy(before, kc, bytes);
      slots[nt - 1] = 35;
      assert_int_equal(be->kv_write(be, &kv, kc, vc, k, v, slots, nt), BRISK_E_INVALID_ARGUMENT);
      assert_non_null(strstr(brisk_last_error(), "beyond"));
      assert_memory_equal(kc, before, bytes);
      free(kc), free(vc), free(before), free(k), free(v);
    }
  }
  ops_paths_close(&P);
}

static void test_kv_copy_blocks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_copy_blocks");
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  brisk_kv_layout kv = {BRISK_DTYPE_F16, 6, 2, 4, rand_int(&r, 1, 40)};
  size_t block = (size_t)kv.n_kv_heads * kv.block_size * kv.head_dim * 2;
  uint8_t *cache = malloc(block * 6), *want = malloc(block * 6);
  for (size_t i = 0; i < block * 6; i++) cache[i] = (uint8_t)test_rng_u64(&r);
  memcpy(want, cache, block * 6);
  /* In order: block 4 gets 1, then block 0 gets the new 4. */
  const int32_t pairs[3][2] = {{1, 4}, {4, 0}, {5, 2}};
  memcpy(want + 4 * block, want + 1 * block, block);
  memcpy(want + 0 * block, want + 4 * block, block);
  memcpy(want + 2 * block, want + 5 * block, block);
  assert_int_equal(be->kv_copy_blocks(be, &kv, cache, &pairs[0][0], 3), BRISK_OK);
  assert_memory_equal(cache, want, block * 6);
  const int32_t bad[2][2] = {{1, 2}, {3, 6}};
  assert_int_equal(be->kv_copy_blocks(be, &kv, cache, &bad[0][0], 2), BRISK_E_INVALID_ARGUMENT);
  assert_memory_equal(cache, want, block * 6); /* checked before copying */
  const int32_t same[1][2] = {{3, 3}};
  assert_int_equal(be->kv_copy_blocks(be, &kv, cache, &same[0][0], 1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->kv_copy_blocks(be, &kv, cache, NULL, 0), BRISK_OK);
  free(cache), free(want);
  ops_paths_close(&P);
}

/* A host job system (here: tasks run in reverse order, claiming 5-way
 * concurrency) must give the same bits as the library's own pool. */
static void reverse_parallel_for(void *user, size_t n, brisk_task_fn task, void *ctx) {
  (void)user;
  for (size_t i = n; i-- > 0;) task(ctx, i);
}

static void test_attention_host_hook(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("attention_host_hook");
  ops_paths P = ops_paths_open(0);
  attn_case c = {BRISK_DTYPE_F16, 64, 2, 4, 16, 0, 3, 200, 4, 0, 0};
  for (int b = 0; b < P.n; b++) {
    brisk_backend *be = P.be[b];
    attn_setup S;
    setup(&S, &c, &r, be);
    size_t n_out = (size_t)S.batch.n_tokens * S.n_heads * c.head_dim;
    float *own = malloc(n_out * sizeof *own), *hooked = malloc(n_out * sizeof *hooked);
    brisk_attn_params ap = {S.n_heads, 0, 0, 0.0f};
    assert_int_equal(be->attention(be, &S.kv, S.k_cache, S.v_cache, S.q, &S.batch, &ap, own),
                     BRISK_OK);
    assert_int_equal(brisk_set_parallel_for(reverse_parallel_for, NULL, 5), BRISK_OK);
    brisk_status st = be->attention(be, &S.kv, S.k_cache, S.v_cache, S.q, &S.batch, &ap, hooked);
    assert_int_equal(brisk_set_parallel_for(NULL, NULL, 0), BRISK_OK);
    assert_int_equal(st, BRISK_OK);
    assert_memory_equal(own, hooked, n_out * sizeof *own);
    free(own), free(hooked);
    teardown(&S, &c, be);
  }
  ops_paths_close(&P);
}

static void test_attention_bad_arguments(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  brisk_kv_layout kv = {BRISK_DTYPE_F16, 4, 2, 4, 8};
  uint16_t kc[4 * 2 * 4 * 8] = {0}, vc[4 * 2 * 4 * 8] = {0};
  float q[2 * 4 * 8] = {0}, out[2 * 4 * 8];
  int32_t pos[2] = {3, 5}, seq[2] = {0, 1}, tables[2][2] = {{2, 0}, {1, 3}};
  brisk_attn_batch b = {2, pos, seq, &tables[0][0], 2, 2};
  brisk_attn_params ap = {4, 0, 0, 0.0f};
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_OK);
  ap.n_heads = 3;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  ap.n_heads = 4;
  tables[1][1] = 4; /* block id past the pool */
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "block table entry"));
  tables[1][1] = 3;
  pos[1] = 8; /* needs a third block */
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  pos[1] = -1;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  pos[1] = 5;
  seq[1] = 2;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  seq[1] = 1;
  ap.sliding_window = -1;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  ap.sliding_window = 2; /* the window skips block 1's table entry: may be garbage */
  tables[1][0] = 99;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_OK);
  tables[1][0] = 1;
  ap.sliding_window = 0;
  kv.dtype = BRISK_DTYPE_BF16;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_UNSUPPORTED);
  kv.dtype = BRISK_DTYPE_F16;
  kv.head_dim = BRISK_MAX_HEAD_DIM + 1;
  assert_int_equal(be->attention(be, &kv, kc, vc, q, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  kv.head_dim = 8;
  assert_int_equal(be->attention(be, &kv, kc, vc, NULL, &b, &ap, out), BRISK_E_INVALID_ARGUMENT);
  int64_t slot = 0;
  assert_int_equal(be->kv_write(be, &kv, kc, vc, q, q, &slot, -1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->kv_write(be, &kv, NULL, vc, q, q, &slot, 1), BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kv_write_layout),         cmocka_unit_test(test_paged_attention),
      cmocka_unit_test(test_attention_windows),       cmocka_unit_test(test_attention_wide_groups),
      cmocka_unit_test(test_kv_copy_blocks),          cmocka_unit_test(test_attention_host_hook),
      cmocka_unit_test(test_attention_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
