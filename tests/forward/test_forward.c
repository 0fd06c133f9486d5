/* The forward pass through the public decode API, against the float64
 * reference forward (tests/support/ref_forward.c) on random models of every
 * architecture and weight type, plus incremental decoding, batch invariance,
 * fork, KV-full and argument checks. Golden logits from another engine are
 * in test_golden.c. */
#include "ref_forward.h"
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_model *make_model(const test_model_spec *s, const char *tag) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, tag);
  test_rng r = test_rng_seeded(tag);
  assert_int_equal(test_model_write(path, s, &r, NULL), BRISK_OK);
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, NULL, &m);
  if (st) fail_msg("%s: %s", tag, brisk_last_error());
  return m;
}

static brisk_context *make_ctx(const brisk_model *m, brisk_kv_type kv, int32_t kv_tokens,
                               int32_t block_size) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = kv;
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.n_threads = 2;
  p.max_batch_tokens = 64;
  p.n_seq_max = 8;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(m, &p, &c);
  if (st) fail_msg("context: %s", brisk_last_error());
  return c;
}

static double rel_l2(const float *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* Prefills `n` tokens as one batch (all logits) and compares every row with
 * the reference run token by token. Returns the worst relative L2 error. */
static double worst_vs_reference(const brisk_model *m, brisk_kv_type kv, const int32_t *toks,
                                 int n) {
  brisk_context *c = make_ctx(m, kv, 256, 16);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(n, &b), BRISK_OK);
  for (int i = 0; i < n; i++) assert_int_equal(brisk_batch_add(b, toks[i], i, 0, 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
  int32_t nv = brisk_model_n_vocab(m);
  ref_model *r = ref_create(m, n);
  double *want = malloc((size_t)nv * sizeof(double)), worst = 0;
  for (int i = 0; i < n; i++) {
    ref_eval(r, toks[i], want);
    double e = rel_l2(brisk_get_logits(c, i), want, nv);
    if (e > worst) worst = e;
  }
  free(want);
  ref_free(r);
  brisk_batch_free(b);
  brisk_context_free(c);
  return worst;
}

static void random_tokens(test_rng *r, int32_t n_vocab, int32_t *toks, int n) {
  for (int i = 0; i < n; i++) toks[i] = (int32_t)(test_rng_u64(r) % (uint64_t)n_vocab);
}

/* Every architecture with float32 weights: the pass itself must match the
 * float64 reference to float32 rounding (1e-4 relative, the golden
 * tolerance for F32 weights with an F32 cache). A 20-token prompt with an
 * 8-token sliding window exercises the window for mistral. */
static void test_architectures_vs_reference(void **state) {
  (void)state;
  const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral"};
  test_rng r = test_rng_seeded("arch_tokens");
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    test_model_spec s = test_model_default(archs[a]);
    if (!strcmp(archs[a], "mistral")) s.sliding_window = 8;
    brisk_model *m = make_model(&s, archs[a]);
    int32_t toks[20];
    random_tokens(&r, (int32_t)s.n_vocab, toks, 20);
    double e32 = worst_vs_reference(m, BRISK_KV_F32, toks, 20);
    double e16 = worst_vs_reference(m, BRISK_KV_F16, toks, 20);
    fprintf(stderr, "%-8s f32 kv %.2e  f16 kv %.2e\n", archs[a], e32, e16);
    assert_true(e32 < 1e-4);
    /* The golden bound for an F16 cache. Not for MoE: rounding K/V to F16
     * moves router logits a little, and where two experts nearly tie that
     * flips the top-k choice, a discrete change (seen: 0.17) that says
     * nothing about the kernels; the F32-cache check above covers MoE. */
    if (s.n_expert == 0) assert_true(e16 < 2e-3);
    brisk_model_free(m);
  }
}

/* Every weight type the matmul computes with. Quantized weights multiply
 * activations quantized to 8 bits on the fly (as the reference engine does),
 * while the reference uses exact activations: 3e-2 is the golden bound for
 * Q8_0/Q4_0; float weights keep 1e-3 (F16/BF16 round nothing but weights). */
static void test_weight_types_vs_reference(void **state) {
  (void)state;
  const uint32_t types[] = {BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_0,
                            BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1, BRISK_DTYPE_Q4_K,
                            BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  test_rng r = test_rng_seeded("type_tokens");
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    test_model_spec s = test_model_default("llama");
    s.weight_type = types[t];
    if (brisk_dtype_get(types[t])->block_size == 256) s.n_embd = 256, s.n_ff = 512, s.head_dim = 64;
    char tag[32];
    snprintf(tag, sizeof tag, "type_%s", brisk_dtype_name(types[t]));
    brisk_model *m = make_model(&s, tag);
    int32_t toks[12];
    random_tokens(&r, (int32_t)s.n_vocab, toks, 12);
    double e = worst_vs_reference(m, BRISK_KV_F32, toks, 12);
    bool quantized = brisk_dtype_get(types[t])->quantized;
    fprintf(stderr, "%-5s %.2e\n", brisk_dtype_name(types[t]), e);
    /* K-quants pair with Q8_K activations, one scale per 256 values: coarser.
     * Over 25 seeds the worst was 4.4e-2 (K) and 1.8e-2 (32-blocks); a wrong
     * kernel or layout is off by more than 0.2. */
    bool k_quant = brisk_dtype_get(types[t])->block_size == 256;
    assert_true(e < (k_quant ? 8e-2 : quantized ? 3e-2 : 1e-3));
    brisk_model_free(m);
  }
}

static void decode_one(brisk_context *c, brisk_batch *b, int32_t tok, int32_t pos, int32_t seq) {
  brisk_batch_clear(b);
  assert_int_equal(brisk_batch_add(b, tok, pos, seq, 1), BRISK_OK);
  if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
}

/* Token-by-token decoding gives the same logits as one prefill, bitwise:
 * every row's arithmetic is independent of how many rows share the call. */
static void test_incremental_equals_prefill(void **state) {
  (void)state;
  test_model_spec s = test_model_default("qwen2");
  brisk_model *m = make_model(&s, "incremental");
  int32_t nv = brisk_model_n_vocab(m), toks[21];
  test_rng r = test_rng_seeded("incremental");
  random_tokens(&r, nv, toks, 21);
  brisk_context *c1 = make_ctx(m, BRISK_KV_F16, 128, 4), *c2 = make_ctx(m, BRISK_KV_F16, 128, 4);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(32, &b), BRISK_OK);
  for (int i = 0; i < 21; i++) brisk_batch_add(b, toks[i], i, 3, 1);
  assert_int_equal(brisk_decode(c1, b), BRISK_OK);
  float *prefill = malloc(21 * (size_t)nv * sizeof(float));
  for (int i = 0; i < 21; i++) memcpy(prefill + i * nv, brisk_get_logits(c1, i), (size_t)nv * 4);
  for (int i = 0; i < 21; i++) {
    decode_one(c2, b, toks[i], i, 3);
    assert_memory_equal(brisk_get_logits(c2, 0), prefill + i * nv, (size_t)nv * 4);
  }
  assert_int_equal(brisk_seq_len(c2, 3), 21);
  free(prefill);
  brisk_batch_free(b);
  brisk_context_free(c1);
  brisk_context_free(c2);
  brisk_model_free(m);
}

/* A sequence's logits do not depend on the other sequences in its batch:
 * decoding A alone and A interleaved with B and C gives identical bits. */
static void test_batch_invariance(void **state) {
  (void)state;
  test_model_spec s = test_model_default("mixtral");
  brisk_model *m = make_model(&s, "invariance");
  int32_t nv = brisk_model_n_vocab(m), a[9], bb[14], cc[5];
  test_rng r = test_rng_seeded("invariance");
  random_tokens(&r, nv, a, 9);
  random_tokens(&r, nv, bb, 14);
  random_tokens(&r, nv, cc, 5);
  brisk_context *alone = make_ctx(m, BRISK_KV_F16, 256, 8), *mixed = make_ctx(m, BRISK_KV_F16, 256, 8);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int i = 0; i < 9; i++) brisk_batch_add(b, a[i], i, 0, 1);
  assert_int_equal(brisk_decode(alone, b), BRISK_OK);
  brisk_batch_clear(b);
  /* Interleaved, A's tokens at batch indices 1, 4, 7, ... */
  int idx_a[9], na = 0, nb = 0, nc = 0;
  while (na < 9 || nb < 14 || nc < 5) {
    if (nb < 14) brisk_batch_add(b, bb[nb], nb, 1, 1), nb++;
    if (na < 9) idx_a[na] = brisk_batch_size(b), brisk_batch_add(b, a[na], na, 0, 1), na++;
    if (nc < 5) brisk_batch_add(b, cc[nc], nc, 2, nc == 4), nc++;
  }
  assert_int_equal(brisk_decode(mixed, b), BRISK_OK);
  for (int i = 0; i < 9; i++)
    assert_memory_equal(brisk_get_logits(mixed, idx_a[i]), brisk_get_logits(alone, i), (size_t)nv * 4);
  /* Entries that did not ask for logits have none. */
  assert_null(brisk_get_logits(mixed, idx_a[0] + 1 == 2 ? 2 : 2));
  assert_null(brisk_get_logits(mixed, -1));
  assert_null(brisk_get_logits(mixed, brisk_batch_size(b)));
  brisk_batch_free(b);
  brisk_context_free(alone);
  brisk_context_free(mixed);
  brisk_model_free(m);
}

/* A fork continues exactly like a sequence prefilled with the same tokens,
 * and writing to the fork never changes the parent (the shared, partly
 * filled last block is copied on write). */
static void test_fork(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  brisk_model *m = make_model(&s, "fork");
  int32_t nv = brisk_model_n_vocab(m), p[11], x[4], y[4];
  test_rng r = test_rng_seeded("fork");
  random_tokens(&r, nv, p, 11);
  random_tokens(&r, nv, x, 4);
  random_tokens(&r, nv, y, 4);
  brisk_context *c = make_ctx(m, BRISK_KV_F16, 128, 4), *ref = make_ctx(m, BRISK_KV_F16, 128, 4);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(32, &b), BRISK_OK);
  for (int i = 0; i < 11; i++) brisk_batch_add(b, p[i], i, 0, 0);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  int32_t free_before = ks.n_free_blocks;
  assert_int_equal(brisk_seq_fork(c, 0, 5), BRISK_OK);
  assert_int_equal(brisk_seq_len(c, 5), 11);
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  assert_int_equal(ks.n_free_blocks, free_before); /* shared, nothing copied yet */
  /* The fork goes on with y, the parent with x, interleaved. */
  float *fork_logits = malloc(4 * (size_t)nv * 4), *parent_logits = malloc(4 * (size_t)nv * 4);
  for (int i = 0; i < 4; i++) {
    brisk_batch_clear(b);
    brisk_batch_add(b, y[i], 11 + i, 5, 1);
    brisk_batch_add(b, x[i], 11 + i, 0, 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    memcpy(fork_logits + i * nv, brisk_get_logits(c, 0), (size_t)nv * 4);
    memcpy(parent_logits + i * nv, brisk_get_logits(c, 1), (size_t)nv * 4);
  }
  /* References: p + y and p + x prefilled from scratch. */
  const int32_t *conts[2] = {y, x};
  float *got[2] = {fork_logits, parent_logits};
  for (int k = 0; k < 2; k++) {
    brisk_seq_free(ref, 0);
    brisk_batch_clear(b);
    for (int i = 0; i < 11; i++) brisk_batch_add(b, p[i], i, 0, 0);
    for (int i = 0; i < 4; i++) brisk_batch_add(b, conts[k][i], 11 + i, 0, 1);
    assert_int_equal(brisk_decode(ref, b), BRISK_OK);
    for (int i = 0; i < 4; i++)
      assert_memory_equal(brisk_get_logits(ref, 11 + i), got[k] + i * nv, (size_t)nv * 4);
  }
  assert_int_equal(brisk_seq_fork(c, 0, 5), BRISK_E_INVALID_ARGUMENT); /* 5 is not empty */
  free(fork_logits);
  free(parent_logits);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_context_free(ref);
  brisk_model_free(m);
}

/* Truncating a sequence and decoding other tokens matches a fresh run. */
static void test_truncate_and_rewrite(void **state) {
  (void)state;
  test_model_spec s = test_model_default("qwen3");
  brisk_model *m = make_model(&s, "truncate");
  int32_t nv = brisk_model_n_vocab(m), t[10], u[3];
  test_rng r = test_rng_seeded("truncate");
  random_tokens(&r, nv, t, 10);
  random_tokens(&r, nv, u, 3);
  brisk_context *c = make_ctx(m, BRISK_KV_F32, 64, 4), *ref = make_ctx(m, BRISK_KV_F32, 64, 4);
  brisk_batch *b;
  brisk_batch_create(16, &b);
  for (int i = 0; i < 10; i++) brisk_batch_add(b, t[i], i, 1, 0);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  assert_int_equal(brisk_seq_truncate(c, 1, 11), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_truncate(c, 1, 6), BRISK_OK);
  brisk_batch_clear(b);
  for (int i = 0; i < 3; i++) brisk_batch_add(b, u[i], 6 + i, 1, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  brisk_batch_clear(b);
  for (int i = 0; i < 6; i++) brisk_batch_add(b, t[i], i, 1, 0);
  for (int i = 0; i < 3; i++) brisk_batch_add(b, u[i], 6 + i, 1, 1);
  assert_int_equal(brisk_decode(ref, b), BRISK_OK);
  for (int i = 0; i < 3; i++)
    assert_memory_equal(brisk_get_logits(c, i), brisk_get_logits(ref, 6 + i), (size_t)nv * 4);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_context_free(ref);
  brisk_model_free(m);
}

static int abort_after(void *user) {
  int *left = user;
  return (*left)-- <= 0;
}

/* Bad batches, a full KV pool and an abort each leave the context as it was. */
static void test_errors_leave_context_unchanged(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  brisk_model *m = make_model(&s, "errors");
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 16; /* 4 blocks of 4 */
  p.block_size = 4;
  p.max_batch_tokens = 32;
  p.n_seq_max = 4;
  int left = 1000;
  p.abort_callback = abort_after;
  p.abort_user_data = &left;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  brisk_batch *b;
  brisk_batch_create(32, &b);
  for (int i = 0; i < 10; i++) brisk_batch_add(b, 5 + i, i, 0, i == 9);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  const float *l = brisk_get_logits(c, 9);
  float *saved = malloc((size_t)s.n_vocab * 4);
  memcpy(saved, l, (size_t)s.n_vocab * 4);
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  brisk_context_kv_stats(c, &ks);
  int32_t free0 = ks.n_free_blocks;
  assert_int_equal(free0, 1);
  /* Too many tokens for the pool: KV_FULL, nothing written. */
  brisk_batch_clear(b);
  for (int i = 0; i < 7; i++) brisk_batch_add(b, 1, 10 + i, 0, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_E_KV_FULL);
  /* Bad entries. */
  brisk_batch_clear(b);
  brisk_batch_add(b, (int32_t)s.n_vocab, 10, 0, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "token"));
  brisk_batch_clear(b);
  brisk_batch_add(b, 1, 11, 0, 1); /* skips position 10 */
  assert_int_equal(brisk_decode(c, b), BRISK_E_INVALID_ARGUMENT);
  brisk_batch_clear(b);
  brisk_batch_add(b, 1, 0, 4, 1); /* sequence id out of range */
  assert_int_equal(brisk_decode(c, b), BRISK_E_INVALID_ARGUMENT);
  brisk_batch_clear(b);
  assert_int_equal(brisk_decode(c, b), BRISK_E_INVALID_ARGUMENT); /* empty */
  /* Abort in the middle of the layers. */
  left = 1;
  brisk_batch_add(b, 1, 10, 0, 1);
  brisk_batch_add(b, 2, 0, 1, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_E_CANCELLED);
  left = 1000;
  /* After all that: same lengths, same free blocks, the old logits. */
  assert_int_equal(brisk_seq_len(c, 0), 10);
  assert_int_equal(brisk_seq_len(c, 1), 0);
  brisk_context_kv_stats(c, &ks);
  assert_int_equal(ks.n_free_blocks, free0);
  assert_memory_equal(brisk_get_logits(c, 9), saved, (size_t)s.n_vocab * 4);
  /* And the context still works. */
  brisk_batch_clear(b);
  brisk_batch_add(b, 3, 10, 0, 1);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  assert_non_null(brisk_get_logits(c, 0));
  /* Full batch object. */
  brisk_batch *small;
  brisk_batch_create(1, &small);
  assert_int_equal(brisk_batch_add(small, 1, 0, 0, 0), BRISK_OK);
  assert_int_equal(brisk_batch_add(small, 1, 1, 0, 0), BRISK_E_BUFFER_TOO_SMALL);
  brisk_batch_free(small);
  free(saved);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

static void test_context_params(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  brisk_model *m = make_model(&s, "params");
  brisk_context_params p;
  brisk_context_params_init(&p);
  brisk_context *c = NULL;
  p.block_size = 0;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_INVALID_ARGUMENT);
  brisk_context_params_init(&p);
  p.kv_type = (brisk_kv_type)7;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_INVALID_ARGUMENT);
  brisk_context_params_init(&p);
  p.struct_size = 6; /* ends inside n_threads */
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_INVALID_ARGUMENT);
  brisk_context_params_init(&p);
  p.kv_bytes = 10; /* less than a block */
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_INVALID_ARGUMENT);
  assert_null(c);
  /* A byte budget sizes the pool. */
  brisk_context_params_init(&p);
  p.kv_bytes = 1 << 20;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  assert_true(ks.kv_bytes <= (1u << 20) && ks.kv_bytes + ks.bytes_per_block > (1u << 20));
  /* 2 (K, V) * layers * kv heads * block * head_dim * 2 bytes (f16) */
  assert_int_equal(ks.bytes_per_block, 2ull * s.n_layer * s.n_head_kv * 16 * s.head_dim * 2);
  assert_int_equal(ks.n_free_blocks, ks.n_blocks);
  brisk_context_free(c);
  brisk_context_free(NULL);
  assert_int_equal(brisk_context_create(NULL, NULL, &c), BRISK_E_INVALID_ARGUMENT);
  brisk_model_free(m);
}

static const brisk_model *oom_model;
static brisk_status create_decode_free(void *ctx) {
  (void)ctx;
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 64;
  p.n_threads = 2;
  p.max_batch_tokens = 8;
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(oom_model, &p, &c);
  if (st) return st;
  brisk_batch *b = NULL;
  if ((st = brisk_batch_create(8, &b))) {
    brisk_context_free(c);
    return st;
  }
  for (int i = 0; i < 6; i++) brisk_batch_add(b, i + 3, i, 0, 1);
  st = brisk_decode(c, b);
  if (!st) {
    brisk_batch_clear(b);
    brisk_batch_add(b, 4, 6, 0, 1);
    brisk_batch_add(b, 4, 0, 1, 1);
    st = brisk_decode(c, b);
  }
  brisk_batch_free(b);
  brisk_context_free(c);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_model_spec s = test_model_default("mixtral");
  brisk_model *m = make_model(&s, "oom");
  oom_model = m;
  assert_true(test_every_allocation_fails(create_decode_free, NULL) > 10);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_architectures_vs_reference),
      cmocka_unit_test(test_weight_types_vs_reference),
      cmocka_unit_test(test_incremental_equals_prefill),
      cmocka_unit_test(test_batch_invariance),
      cmocka_unit_test(test_fork),
      cmocka_unit_test(test_truncate_and_rewrite),
      cmocka_unit_test(test_errors_leave_context_unchanged),
      cmocka_unit_test(test_context_params),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
