/* The prefix cache's host tier on a real context: a prefix the pool
 * evicted comes back from host memory and decoding after it gives logits
 * bitwise equal to recomputing it (a fresh context, and the same context
 * without the tier), for every KV type and for the latent cache of
 * multi-head latent attention; its bytes (index included) are in
 * brisk_kv_stats and in the context's memory; a memory limit that leaves
 * no room for copies only drops them; tensor parallelism refuses it. */
#include "test_models.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *llama, *mla;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("prefix_host_model");
  if (test_model_load(dir, "llama", &s, &r, &llama)) return -1;
  test_model_spec m = test_model_default("deepseek2");
  m.n_layer = 2;
  test_rng r2 = test_rng_seeded("prefix_host_mla_model");
  return test_model_load(dir, "deepseek2", &m, &r2, &mla) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(llama);
  brisk_model_free(mla);
  test_tmpdir_remove(dir);
  return 0;
}

enum { BS = 4, POOL = 48, N = 40, NU = 48 };

static brisk_context *make_ctx(const brisk_model *m, brisk_kv_type type, int32_t kv_tokens,
                               int prefix_cache, uint64_t host_bytes) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  assert_int_equal(p.prefix_host_bytes, 0); /* off by default */
  p.kv_tokens = kv_tokens;
  p.block_size = BS;
  p.kv_type = type;
  p.n_seq_max = 4;
  p.max_batch_tokens = 64;
  p.n_threads = 1;
  p.prefix_cache = prefix_cache;
  p.prefix_host_bytes = host_bytes;
  brisk_context *c = NULL;
  if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* Decodes tokens[from, to) of seq in chunks of `chunk`; the last entry's
 * logits into out if set. */
static void feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t from, int32_t to,
                 int32_t chunk, float *out) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  int32_t last = 0;
  for (int32_t at = from; at < to; at += chunk) {
    int32_t end = at + chunk < to ? at + chunk : to;
    brisk_batch_clear(b);
    for (int32_t p = at; p < end; p++) brisk_batch_add(b, tokens[p], p, seq, p == to - 1);
    if (brisk_decode(c, b)) fail_msg("decode: %s", brisk_last_error());
    last = end - at - 1;
  }
  if (out) {
    const float *l = brisk_get_logits(c, last);
    assert_non_null(l);
    memcpy(out, l, (size_t)brisk_model_n_vocab(brisk_context_model(c)) * sizeof *out);
  }
  brisk_batch_free(b);
}

static brisk_kv_stats kv_stats(const brisk_context *c) {
  brisk_kv_stats s = {.struct_size = sizeof s};
  assert_int_equal(brisk_context_kv_stats(c, &s), BRISK_OK);
  return s;
}

static int32_t match(brisk_context *c, int32_t seq, const int32_t *t, int32_t n) {
  int32_t reused = -1;
  assert_int_equal(brisk_seq_match_prefix(c, seq, t, n, &reused), BRISK_OK);
  assert_int_equal(brisk_seq_len(c, seq), reused);
  return reused;
}

/* t's first 28 tokens (7 blocks) are computed and released, u's 48 fill
 * the 12-block pool and evict them; then t comes back and its last 12
 * tokens are decoded: the logits of t's last position into out, and the
 * tokens reused. */
static int32_t evict_and_return(brisk_context *c, const int32_t *t, const int32_t *u, float *out) {
  feed(c, 0, t, 0, 28, 5, NULL);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  feed(c, 1, u, 0, NU, 32, NULL);
  assert_int_equal(brisk_seq_free(c, 1), BRISK_OK);
  int32_t reused = match(c, 2, t, 29);
  feed(c, 2, t, reused, N, 7, out);
  assert_int_equal(brisk_seq_free(c, 2), BRISK_OK);
  return reused;
}

static void check_model(const brisk_model *m, brisk_kv_type type, const char *seed) {
  test_rng r = test_rng_seeded(seed);
  const int32_t nv = brisk_model_n_vocab(m);
  int32_t t[N], u[NU];
  for (int32_t i = 0; i < NU; i++) {
    if (i < N) t[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
    u[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  }
  float *want = malloc((size_t)nv * sizeof *want);
  float *host = malloc((size_t)nv * sizeof *host);
  float *recompute = malloc((size_t)nv * sizeof *recompute);
  /* Reference: t alone in a large pool without a cache. */
  brisk_context *ref = make_ctx(m, type, 256, 0, 0);
  feed(ref, 0, t, 0, N, 64, want);
  brisk_context_free(ref);
  /* The same pool without a host tier recomputes t. */
  brisk_context *c = make_ctx(m, type, POOL, 1, 0);
  assert_int_equal(evict_and_return(c, t, u, recompute), 0);
  assert_true(kv_stats(c).host_tier_bytes == 0 && kv_stats(c).n_host_tier_hits == 0);
  brisk_context_free(c);
  assert_memory_equal(recompute, want, (size_t)nv * sizeof *want);
  /* With the tier all 7 blocks come back. */
  c = make_ctx(m, type, POOL, 1, 64u << 20);
  uint64_t mem0 = brisk_context_memory_used(c);
  feed(c, 0, t, 0, 28, 5, NULL);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  feed(c, 1, u, 0, NU, 32, NULL);
  assert_int_equal(brisk_seq_free(c, 1), BRISK_OK);
  brisk_kv_stats s = kv_stats(c);
  assert_true(s.n_host_tier_blocks == 7);
  /* Each entry is a block's K/V plus its index record; the index part
   * holds at least the token ids. */
  assert_true(s.host_tier_index_bytes < s.host_tier_bytes);
  assert_true(s.host_tier_bytes - s.host_tier_index_bytes == 7 * s.bytes_per_block);
  assert_true(s.host_tier_index_bytes >= 7 * BS * sizeof(int32_t));
  assert_true(brisk_context_memory_used(c) >= mem0 + s.host_tier_bytes);
  assert_int_equal(match(c, 2, t, 29), 28);
  s = kv_stats(c);
  assert_true(s.n_host_tier_hits == 7 && s.n_host_tier_misses == 0);
  /* u's evicted blocks took the returning ones' place in the tier. */
  assert_true(s.n_host_tier_blocks == 7);
  feed(c, 2, t, 28, N, 7, host);
  assert_memory_equal(host, want, (size_t)nv * sizeof *want);
  /* And a second return (from the pool now) too. */
  assert_int_equal(brisk_seq_free(c, 2), BRISK_OK);
  assert_int_equal(match(c, 3, t, N), 36);
  assert_true(kv_stats(c).n_host_tier_hits == 7);
  feed(c, 3, t, 36, N, 7, host);
  assert_memory_equal(host, want, (size_t)nv * sizeof *want);
  brisk_context_free(c);
  free(want);
  free(host);
  free(recompute);
}

static void test_bitwise_every_kv_type(void **state) {
  (void)state;
  const brisk_kv_type types[4] = {BRISK_KV_F32, BRISK_KV_F16, BRISK_KV_Q8_0, BRISK_KV_FP8_E4M3};
  for (int k = 0; k < 4; k++) check_model(llama, types[k], "prefix_host_types");
}

static void test_bitwise_latent_cache(void **state) {
  (void)state;
  check_model(mla, BRISK_KV_F16, "prefix_host_mla");
  check_model(mla, BRISK_KV_F32, "prefix_host_mla32");
}

/* A context memory limit that leaves no room for a block's copy: blocks
 * are dropped, every call succeeds, and t is recomputed exactly. */
static void test_memory_limit_drops(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("prefix_host_limit");
  const int32_t nv = brisk_model_n_vocab(llama);
  int32_t t[N], u[NU];
  for (int32_t i = 0; i < NU; i++) {
    if (i < N) t[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
    u[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  }
  float *want = malloc((size_t)nv * sizeof *want);
  float *got = malloc((size_t)nv * sizeof *got);
  brisk_context *ref = make_ctx(llama, BRISK_KV_F16, 256, 0, 0);
  feed(ref, 0, t, 0, N, 64, want);
  brisk_context_free(ref);
  brisk_context *c = make_ctx(llama, BRISK_KV_F16, POOL, 1, 64u << 20);
  /* Grow the per-decode tables and every sequence's first, so that only
   * the tier is short (t's blocks evict 7 of u's into the tier). */
  for (int32_t q = 0; q < 4; q++) {
    feed(c, q, u, 0, NU, 32, NULL);
    assert_int_equal(brisk_seq_free(c, q), BRISK_OK);
  }
  feed(c, 0, t, 0, 28, 5, NULL);
  assert_int_equal(brisk_seq_free(c, 0), BRISK_OK);
  brisk_kv_stats s = kv_stats(c);
  const uint64_t held = s.n_host_tier_blocks;
  const uint64_t limit = brisk_context_memory_used(c) + s.bytes_per_block / 2;
  assert_int_equal(brisk_context_set_memory_limit(c, limit), BRISK_OK);
  feed(c, 1, u, 0, NU, 32, NULL); /* evicts t: no room for copies */
  assert_int_equal(brisk_seq_free(c, 1), BRISK_OK);
  s = kv_stats(c);
  assert_true(s.n_host_tier_blocks == held);
  assert_true(brisk_context_memory_used(c) <= limit);
  assert_int_equal(match(c, 2, t, 29), 0);
  feed(c, 2, t, 0, N, 7, got);
  assert_memory_equal(got, want, (size_t)nv * sizeof *want);
  brisk_context_free(c);
  free(want);
  free(got);
}

static void test_tensor_parallel_refuses(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = 2;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &mp, &m)) fail_msg("tp model: %s", brisk_last_error());
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = POOL;
  p.n_threads = 2;
  p.prefix_host_bytes = 1u << 20;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "host tier"));
  assert_null(c);
  p.prefix_host_bytes = 0;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  brisk_context_free(c);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bitwise_every_kv_type),
      cmocka_unit_test(test_bitwise_latent_cache),
      cmocka_unit_test(test_memory_limit_drops),
      cmocka_unit_test(test_tensor_parallel_refuses),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
