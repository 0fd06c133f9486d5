/* The attention kernels (kernels/attention.cu) through the SIMT emulation,
 * against the CPU backend's attention on fresh random caches: shuffled block
 * tables with holes (entries before every query's window are -1, the unused
 * tail is garbage, unwritten slots are NaN), several sequences per call,
 * GQA ratios 1..8 and 5, sliding windows, F16, F32, INT8 and FP8 caches (the
 * quantized rows written by the reference quantizer), odd head sizes
 * and block sizes, sequences long enough for several split-KV chunks; and
 * bitwise batch invariance: a query computed alone, or with a larger launch
 * bound, gives the same bits.
 *
 * Tolerance, per output element of query head h: both implementations
 * compute each score in fp32 (a dot of head_dim terms, then the scale): an
 * error of at most ds = (head_dim + 4) u S, S = max_j scale sum_i |q_i k_ji|
 * (u = 2^-24). Moving scores by ds moves softmax weights by a factor within
 * exp(+-2 ds), so the output by <= 2 ds max_j |v_j|; expf (<= 2 ulp), the
 * online rescales and the sums over n keys add <= (2n + 16) u max_j |v_j|.
 * So each is within B = max|v| (2 ds + (2n + 16) u) of the exact value and
 * they are within 2B (x 1.1) of each other. */
#include "cuda_test.h"

#include "backend/backend.h"
#include "backend/cpu/ops/cpu_backend.h"
#include "core/dtype.h"
#include "core/half.h"
#include "kernels/attention.h"
#include "quant/kv_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  /* Exact sizes, so that the sanitizers see any access past the end. */
  assert_int_equal(posix_memalign(&p, 64, bytes ? bytes : 1), 0);
  return p;
}

typedef struct acase {
  uint32_t dtype;
  int32_t head_dim, n_kv_heads, group, block_size, window, n_seqs, max_len;
  bool prefill;  /* the kernel: prefill, else split-KV decode */
  bool runs;     /* queries: runs of consecutive positions, else each sequence's last */
  float scale;   /* 0: backend.h's default 1 / sqrt(head_dim) */
  float softcap; /* > 0: scores soft-capped (Gemma 2) */
} acase;

typedef struct asetup {
  brisk_kv_layout kv;
  void *k_cache, *v_cache; // [n_blocks][n_kv_heads][block_size][head_dim]
  int32_t *len, *tables;   // [n_seqs], [n_seqs][max_blocks]
  int32_t max_blocks, n_tokens, n_heads;
  int32_t *positions, *seq_of; // [n_tokens]
  float *q;                    // [n_tokens][n_heads][head_dim]
} asetup;

static float kv_value(const asetup *S, const void *cache, int32_t seq, int32_t pos, int32_t kvh,
                      int32_t i) {
  const int32_t bs = S->kv.block_size, hd = S->kv.head_dim;
  const int64_t blk = S->tables[seq * S->max_blocks + pos / bs];
  const size_t row = ((size_t)blk * S->kv.n_kv_heads + kvh) * bs + pos % bs, at = row * hd + i;
  if (brisk_kvq_is_quantized(S->kv.dtype)) {
    float x[BRISK_MAX_HEAD_DIM];
    brisk_kvq_dequantize_row(
        S->kv.dtype, (const uint8_t *)cache + row * brisk_kvq_row_bytes(S->kv.dtype, hd), x, hd);
    return x[i];
  }
  return S->kv.dtype == BRISK_DTYPE_F16 ? brisk_f16_to_f32(((const uint16_t *)cache)[at])
                                        : ((const float *)cache)[at];
}

static int32_t first_key(int32_t p, int32_t w) { return w > 0 && p - w + 1 > 0 ? p - w + 1 : 0; }

static void setup(asetup *S, const acase *c, test_rng *r) {
  memset(S, 0, sizeof *S);
  const int32_t hd = c->head_dim, nkv = c->n_kv_heads, bs = c->block_size;
  S->n_heads = nkv * c->group;
  S->len = malloc(c->n_seqs * sizeof *S->len);
  int32_t total = 0;
  for (int s = 0; s < c->n_seqs; s++) {
    S->len[s] = rand_int(r, 1, c->max_len);
    const int32_t nb = (S->len[s] + bs - 1) / bs;
    total += nb;
    S->max_blocks = nb + 2 > S->max_blocks ? nb + 2 : S->max_blocks;
  }
  const int32_t n_blocks = total + rand_int(r, 0, 4);
  int32_t *perm = malloc(n_blocks * sizeof *perm);
  for (int32_t i = 0; i < n_blocks; i++) perm[i] = i;
  for (int32_t i = n_blocks - 1; i > 0; i--) {
    int32_t j = rand_int(r, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  S->kv = (brisk_kv_layout){c->dtype, n_blocks, nkv, bs, hd};
  const size_t rb = brisk_kvq_row_bytes(c->dtype, hd);
  const size_t bytes = (size_t)n_blocks * nkv * bs * rb;
  S->k_cache = dev_alloc(bytes), S->v_cache = dev_alloc(bytes);
  memset(S->k_cache, 0xff, bytes); /* NaN: a read of an unwritten slot shows */
  memset(S->v_cache, 0xff, bytes);
  S->tables = dev_alloc((size_t)c->n_seqs * S->max_blocks * sizeof *S->tables);
  int32_t next = 0;
  for (int s = 0; s < c->n_seqs; s++) {
    int32_t *tab = S->tables + s * S->max_blocks;
    for (int32_t b = 0; b < S->max_blocks; b++) tab[b] = b % 2 ? -7 : 1 << 30;
    for (int32_t b = 0; b < (S->len[s] + bs - 1) / bs; b++) tab[b] = perm[next++];
  }
  free(perm);
  /* Queries: per sequence either its last position (decode) or a run of
   * consecutive last positions (prefill chunk), interleaved across
   * sequences in a shuffled order of runs. */
  int32_t cap = 0;
  int32_t *run = malloc(c->n_seqs * sizeof *run);
  for (int s = 0; s < c->n_seqs; s++) {
    run[s] = c->runs ? rand_int(r, 1, S->len[s] < 48 ? S->len[s] : 48) : 1;
    cap += run[s];
  }
  S->positions = dev_alloc(cap * sizeof(int32_t)), S->seq_of = dev_alloc(cap * sizeof(int32_t));
  int32_t *left = malloc(c->n_seqs * sizeof *left);
  memcpy(left, run, c->n_seqs * sizeof *left);
  while (S->n_tokens < cap) {
    int s = rand_int(r, 0, c->n_seqs - 1);
    if (!left[s]) continue;
    int32_t take = rand_int(r, 1, left[s]); /* pieces of a run stay in order */
    for (int32_t i = 0; i < take; i++) {
      S->seq_of[S->n_tokens] = s;
      S->positions[S->n_tokens++] = S->len[s] - left[s] + i;
    }
    left[s] -= take;
  }
  /* Write every key a query can see, and punch holes into blocks that lie
   * wholly before all of a sequence's windows. */
  for (int s = 0; s < c->n_seqs; s++) {
    int32_t lo = S->len[s];
    for (int32_t t = 0; t < S->n_tokens; t++)
      if (S->seq_of[t] == s)
        lo =
            first_key(S->positions[t], c->window) < lo ? first_key(S->positions[t], c->window) : lo;
    for (int32_t pos = lo; pos < S->len[s]; pos++)
      for (int32_t g = 0; g < nkv; g++) {
        if (brisk_kvq_is_quantized(c->dtype)) { /* whole rows, by the reference quantizer */
          float kr[BRISK_MAX_HEAD_DIM], vr[BRISK_MAX_HEAD_DIM];
          for (int32_t i = 0; i < hd; i++)
            kr[i] = (float)test_rng_normal(r), vr[i] = (float)test_rng_normal(r);
          const int64_t blk = S->tables[s * S->max_blocks + pos / bs];
          const size_t row = ((size_t)blk * nkv + g) * bs + pos % bs;
          brisk_kvq_quantize_row(c->dtype, kr, (uint8_t *)S->k_cache + row * rb, hd);
          brisk_kvq_quantize_row(c->dtype, vr, (uint8_t *)S->v_cache + row * rb, hd);
          continue;
        }
        for (int32_t i = 0; i < hd; i++) {
          const int64_t blk = S->tables[s * S->max_blocks + pos / bs];
          const size_t at = (((size_t)blk * nkv + g) * bs + pos % bs) * hd + i;
          const float kf = (float)test_rng_normal(r), vf = (float)test_rng_normal(r);
          if (c->dtype == BRISK_DTYPE_F16) {
            ((uint16_t *)S->k_cache)[at] = brisk_f32_to_f16(kf);
            ((uint16_t *)S->v_cache)[at] = brisk_f32_to_f16(vf);
          } else {
            ((float *)S->k_cache)[at] = kf, ((float *)S->v_cache)[at] = vf;
          }
        }
      }
    for (int32_t b = 0; b < lo / bs; b++) S->tables[s * S->max_blocks + b] = -1;
  }
  const size_t nq = (size_t)S->n_tokens * S->n_heads * hd;
  S->q = dev_alloc(nq * sizeof *S->q);
  for (size_t i = 0; i < nq; i++) S->q[i] = (float)test_rng_normal(r);
  free(run), free(left);
}

static void teardown_setup(asetup *S) {
  free(S->k_cache), free(S->v_cache), free(S->len), free(S->tables), free(S->positions);
  free(S->seq_of), free(S->q);
}

static brisk_kattn_desc desc_of(const asetup *S, const acase *c, float scale) {
  return (brisk_kattn_desc){.kv_dtype = c->dtype,
                            .n_kv_heads = c->n_kv_heads,
                            .block_size = c->block_size,
                            .head_dim = c->head_dim,
                            .n_heads = S->n_heads,
                            .scale = scale,
                            .sliding_window = c->window,
                            .n_tokens = S->n_tokens,
                            .max_blocks = S->max_blocks,
                            .softcap = c->softcap};
}

/* Runs the kernel of the case: prefill, or decode with launch bound max_ctx. */
static void run_kernel(const asetup *S, const acase *c, const brisk_kattn_desc *d,
                       const int32_t *positions, const int32_t *seq_of, const float *q,
                       int32_t max_ctx, float *out) {
  if (c->prefill) {
    ASSERT_LAUNCH(
        brisk_kattn_prefill(d, S->k_cache, S->v_cache, q, positions, seq_of, S->tables, out, NULL));
    return;
  }
  const size_t ws_bytes =
      brisk_kattn_decode_workspace_bytes(d->n_tokens, d->n_heads, d->head_dim, max_ctx);
  assert_true(ws_bytes > 0);
  void *ws = dev_alloc(ws_bytes);
  memset(ws, 0xff, ws_bytes);
  ASSERT_LAUNCH(brisk_kattn_decode(d, S->k_cache, S->v_cache, q, positions, seq_of, S->tables,
                                   max_ctx, ws, out, NULL));
  free(ws);
}

static void check_case(brisk_backend *cpu, const acase *c, test_rng *r) {
  asetup S;
  setup(&S, c, r);
  const int32_t hd = c->head_dim, nh = S.n_heads, group = c->group;
  /* The host side resolves backend.h's 0 as the CPU backend does. */
  const float scale = c->scale != 0 ? c->scale : (float)(1.0 / sqrt((double)hd));
  const size_t nq = (size_t)S.n_tokens * nh * hd;
  float *out = dev_alloc(nq * sizeof *out), *ref = malloc(nq * sizeof *ref);
  brisk_attn_batch batch = {S.n_tokens, S.positions, S.seq_of, S.tables, c->n_seqs, S.max_blocks};
  brisk_attn_params params = {nh, c->scale, c->window, c->softcap};
  if (c->dtype == BRISK_KVQ_DTYPE_Q8) {
    /* The CPU reads an INT8 cache with an INT8-quantized query; the kernel
     * keeps the float query, whose reference is the F32 cache of the
     * dequantized rows. */
    const size_t n_rows = (size_t)S.kv.n_blocks * (size_t)S.kv.n_kv_heads * (size_t)S.kv.block_size;
    const size_t rb = brisk_kvq_row_bytes(c->dtype, hd);
    float *kf = malloc(n_rows * (size_t)hd * 4), *vf = malloc(n_rows * (size_t)hd * 4);
    for (size_t q = 0; q < n_rows; q++) {
      brisk_kvq_dequantize_row(c->dtype, (const uint8_t *)S.k_cache + q * rb, kf + q * (size_t)hd,
                               hd);
      brisk_kvq_dequantize_row(c->dtype, (const uint8_t *)S.v_cache + q * rb, vf + q * (size_t)hd,
                               hd);
    }
    brisk_kv_layout kv32 = S.kv;
    kv32.dtype = BRISK_DTYPE_F32;
    assert_int_equal(cpu->attention(cpu, &kv32, kf, vf, S.q, &batch, &params, ref), BRISK_OK);
    free(kf), free(vf);
  } else {
    assert_int_equal(cpu->attention(cpu, &S.kv, S.k_cache, S.v_cache, S.q, &batch, &params, ref),
                     BRISK_OK);
  }
  brisk_kattn_desc d = desc_of(&S, c, scale);
  const int32_t max_ctx = S.max_blocks * c->block_size;
  run_kernel(&S, c, &d, S.positions, S.seq_of, S.q, max_ctx, out);
  const double u = ldexp(1, -24);
  for (int32_t t = 0; t < S.n_tokens; t++) {
    const int32_t p = S.positions[t], s = S.seq_of[t], lo = first_key(p, c->window);
    double vmax = 0; /* of the kv head of h, computed once per group */
    for (int32_t h = 0; h < nh; h++) {
      const float *qh = S.q + ((size_t)t * nh + h) * hd;
      if (h % group == 0) {
        vmax = 0;
        for (int32_t j = lo; j <= p; j++)
          for (int32_t i = 0; i < hd; i++) {
            const double v = fabs(kv_value(&S, S.v_cache, s, j, h / group, i));
            vmax = v > vmax ? v : vmax;
          }
      }
      double smax = 0;
      for (int32_t j = lo; j <= p; j++) {
        double a = 0;
        for (int32_t i = 0; i < hd; i++)
          a += fabs((double)qh[i] * kv_value(&S, S.k_cache, s, j, h / group, i));
        smax = a * scale > smax ? a * scale : smax;
      }
      const double ds = (hd + 4) * u * smax;
      const double tol = 2.2 * vmax * (2 * ds + (2.0 * (p - lo + 1) + 16) * u) + 1e-30;
      for (int32_t i = 0; i < hd; i++) {
        const size_t at = ((size_t)t * nh + h) * hd + i;
        if (!(fabs((double)out[at] - ref[at]) <= tol))
          fail_msg("%s%s %s hd=%d nkv=%d group=%d bs=%d window=%d: token %d (seq %d pos %d) head "
                   "%d [%d]: %.9g vs cpu %.9g (tol %.3g)",
                   c->prefill ? "prefill" : "decode", c->runs ? " (runs)" : "",
                   brisk_kvq_name(c->dtype) ? brisk_kvq_name(c->dtype) : brisk_dtype_name(c->dtype),
                   hd, c->n_kv_heads, group, c->block_size, c->window, t, s, p, h, i,
                   (double)out[at], (double)ref[at], tol);
      }
    }
  }
  /* Batch invariance, bit for bit: one query alone (decode: with a larger
   * launch bound too) gives the same result as in the full batch. */
  const int32_t t = rand_int(r, 0, S.n_tokens - 1);
  brisk_kattn_desc d1 = d;
  d1.n_tokens = 1;
  float *one = dev_alloc((size_t)nh * hd * sizeof *one);
  run_kernel(&S, c, &d1, S.positions + t, S.seq_of + t, S.q + (size_t)t * nh * hd,
             max_ctx + (c->prefill ? 0 : rand_int(r, 1, 600)), one);
  assert_memory_equal(one, out + (size_t)t * nh * hd, (size_t)nh * hd * sizeof *one);
  free(one), free(out), free(ref);
  teardown_setup(&S);
}

/* Each kernel on both query patterns: decode steps (one query per sequence)
 * and prefill chunks (runs of queries, which for the decode kernel is a
 * speculative verification batch). */
static void run_cases(bool prefill, const char *name) {
  test_rng r = test_rng_seeded(name);
  brisk_backend *cpu;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &cpu), BRISK_OK);
  /* dtype, head_dim, n_kv_heads, group, block_size, window, n_seqs, max_len */
  const acase cases[] = {
      {BRISK_DTYPE_F16, 64, 2, 4, 16, 0, 3, 600, prefill, false, 0, 0},
      {BRISK_DTYPE_F32, 64, 1, 8, 32, 0, 2, 600, prefill, false, 0, 0},
      {BRISK_DTYPE_F16, 80, 3, 2, 7, 100, 3, 520, prefill, false, 0, 0},
      {BRISK_DTYPE_F32, 40, 2, 1, 16, 300, 2, 640, prefill, false, 0, 0},
      {BRISK_DTYPE_F16, 128, 1, 5, 16, 33, 2, 300, prefill, false, 0, 0},
      {BRISK_DTYPE_F32, 24, 4, 3, 5, 0, 4, 90, prefill, false, 0, 0},
      {BRISK_DTYPE_F16, 256, 1, 2, 32, 0, 1, 280, prefill, false, 0, 0},
      {BRISK_DTYPE_F32, 1024, 1, 4, 8, 20, 1, 40, prefill, false, 0, 0},
      /* A GQA group wider than one block's heads (split over two blocks). */
      {BRISK_DTYPE_F16, 128, 1, 32, 16, 0, 1, 300, prefill, false, 0, 0},
      /* One key per block; blocks longer than a split-KV chunk; a scale. */
      {BRISK_DTYPE_F16, 32, 2, 2, 1, 0, 2, 60, prefill, false, 0, 0},
      {BRISK_DTYPE_F32, 48, 1, 3, 300, 0, 2, 600, prefill, false, 0.3f, 0},
      /* Soft-capped scores (a cap below and above the scores' range). */
      {BRISK_DTYPE_F16, 64, 2, 2, 16, 40, 2, 200, prefill, false, 0.5f, 0.7f},
      {BRISK_DTYPE_F32, 32, 1, 4, 8, 0, 2, 150, prefill, false, 0, 50.0f},
      /* Quantized caches: odd heads (a short last group), windows, GQA. */
      {BRISK_KVQ_DTYPE_Q8, 64, 2, 4, 16, 0, 2, 520, prefill, false, 0, 0},
      {BRISK_KVQ_DTYPE_FP8, 64, 1, 3, 16, 0, 2, 300, prefill, false, 0, 0},
      {BRISK_KVQ_DTYPE_Q8, 80, 2, 2, 7, 100, 2, 300, prefill, false, 0, 0},
      {BRISK_KVQ_DTYPE_FP8, 136, 1, 5, 5, 33, 2, 200, prefill, false, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int runs = 0; runs < 2; runs++) {
      acase c = cases[i];
      c.runs = runs;
      check_case(cpu, &c, &r);
    }
  brisk_backend_free(cpu);
}

static void test_decode_split_kv(void **state) {
  (void)state;
  run_cases(false, "kattn_decode");
}

static void test_prefill_flash(void **state) {
  (void)state;
  run_cases(true, "kattn_prefill");
}

static void test_bad_launches(void **state) {
  (void)state;
  brisk_kattn_desc d = {.kv_dtype = BRISK_DTYPE_Q8_0, /* GGUF's Q8_0 blocks, not a cache type */
                        .n_kv_heads = 1,
                        .block_size = 16,
                        .head_dim = 64,
                        .n_heads = 1,
                        .scale = 1,
                        .n_tokens = 1,
                        .max_blocks = 1};
  int32_t pos = 0, seq = 0, table = 0;
  float q[64] = {0}, out[64], ws[1024];
  /* A cache type without kernels, a workspace bound that is not positive. */
  assert_int_equal(brisk_kattn_prefill(&d, q, q, q, &pos, &seq, &table, out, NULL), 1);
  assert_int_equal(brisk_kattn_decode(&d, q, q, q, &pos, &seq, &table, 16, ws, out, NULL), 1);
  d.kv_dtype = BRISK_DTYPE_F32;
  assert_int_equal(brisk_kattn_decode(&d, q, q, q, &pos, &seq, &table, 0, ws, out, NULL), 1);
  assert_int_equal(brisk_kattn_decode_workspace_bytes(0, 1, 64, 16), 0);
  assert_int_equal(brisk_kattn_decode_workspace_bytes(1 << 30, 1 << 30, 1024, 1 << 30), 0);
  /* A launch the grid cannot hold (65536 kv heads: grid.y > 65535) fails
   * with the platform's status before any thread runs. */
  brisk_kattn_desc big = {.kv_dtype = BRISK_DTYPE_F32,
                          .n_kv_heads = 70000,
                          .block_size = 16,
                          .head_dim = 1,
                          .n_heads = 70000,
                          .scale = 1,
                          .n_tokens = 1,
                          .max_blocks = 1};
  assert_int_not_equal(brisk_kattn_prefill(&big, q, q, q, &pos, &seq, &table, out, NULL), 0);
  assert_int_not_equal(brisk_kattn_decode(&big, q, q, q, &pos, &seq, &table, 16, ws, out, NULL), 0);
  /* The workspace bound: whole chunks of BRISK_KATTN_CHUNK keys. */
  assert_true(brisk_kattn_decode_workspace_bytes(3, 4, 64, 257) >= 3 * 4 * 2 * (64 + 2) * 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_split_kv),
      cmocka_unit_test(test_prefill_flash),
      cmocka_unit_test(test_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
