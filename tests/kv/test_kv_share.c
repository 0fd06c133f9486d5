/* Cross-layer KV sharing on a real context: random-weight llama and mistral
 * files that declare {arch}.attention.shared_kv_layers. The layers each
 * shared layer reads are the float64 reference's own choice (transformers'
 * rule); prefill in chunks and decode match the float64 reference forward,
 * which shares K/V on its own; the shared layers hold no KV memory
 * (brisk_context_kv_stats); a StreamingLLM window over a sharing model
 * matches the reference's; a swapped-out sequence comes back with the same
 * logits; what the loader refuses. */
#include "ref_forward.h"
#include "test_models.h"

#include "context/context.h"
#include "format/gguf.h"
#include "model/kv_share.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static brisk_model *load(const char *arch, uint32_t n_layer, uint32_t shared, const char *seed) {
  test_model_spec s = test_model_default(arch);
  s.n_layer = n_layer;
  s.shared_kv_layers = shared;
  test_rng r = test_rng_seeded(seed);
  brisk_model *m = NULL;
  char name[64];
  snprintf(name, sizeof name, "%s_%u_%u", arch, n_layer, shared);
  if (test_model_load(dir, name, &s, &r, &m)) fail_msg("load %s: %s", name, brisk_last_error());
  return m;
}

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

static brisk_context *make_ctx(const brisk_model *m, int32_t kv_tokens, int32_t block_size) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = BRISK_KV_F32; /* the reference's cache is float64 */
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.n_seq_max = 4;
  p.max_batch_tokens = 32;
  p.n_threads = 1;
  brisk_context *c = NULL;
  if (brisk_context_create(m, &p, &c)) fail_msg("context: %s", brisk_last_error());
  return c;
}

/* Decodes tokens[from, to) of seq at positions from.. in one batch, every
 * row's logits into out[(p - from) * n_vocab] (when set). */
static brisk_status feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t from,
                         int32_t to, float *out) {
  int32_t nv = brisk_model_n_vocab(brisk_context_model(c));
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  for (int32_t p = from; p < to; p++) brisk_batch_add(b, tokens[p], p, seq, out != NULL);
  brisk_status st = brisk_decode(c, b);
  for (int32_t p = from; !st && out && p < to; p++)
    memcpy(out + (size_t)(p - from) * nv, brisk_get_logits(c, p - from), (size_t)nv * sizeof *out);
  brisk_batch_free(b);
  return st;
}

static double rel_l2(const float *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static brisk_kv_stats stats(const brisk_context *c) {
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  assert_int_equal(brisk_context_kv_stats(c, &ks), BRISK_OK);
  return ks;
}

/* The loader's source layers are the reference's, and sharing layers hold
 * no KV: bytes per token scale with the layers that keep K/V. */
static void test_sources_and_bytes(void **state) {
  (void)state;
  const struct {
    const char *arch;
    uint32_t n_layer, shared;
  } cases[] = {{"llama", 4, 2}, {"llama", 3, 1}, {"mistral", 5, 3}, {"qwen3", 4, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    brisk_model *plain = load(cases[i].arch, cases[i].n_layer, 0, "kv_share_sources");
    brisk_model *m = load(cases[i].arch, cases[i].n_layer, cases[i].shared, "kv_share_sources");
    assert_int_equal(m->hp.n_kv_shared, cases[i].shared);
    for (uint32_t l = 0; l < cases[i].n_layer; l++) {
      assert_int_equal(m->layers[l].kv_source, ref_kv_source(m, l));
      assert_int_equal(plain->layers[l].kv_source, (int32_t)l);
      if (l >= cases[i].n_layer - cases[i].shared)
        assert_int_equal(m->layers[l].kv_source, cases[i].n_layer - cases[i].shared - 1);
    }
    brisk_context *a = make_ctx(plain, 64, 8), *b = make_ctx(m, 64, 8);
    brisk_kv_stats sa = stats(a), sb = stats(b);
    uint32_t kept = cases[i].n_layer - cases[i].shared;
    assert_int_equal(sa.n_blocks, sb.n_blocks);
    assert_true(sb.bytes_per_token * cases[i].n_layer == sa.bytes_per_token * kept);
    assert_true(sb.kv_bytes * cases[i].n_layer == sa.kv_bytes * kept);
    /* The context's memory drops by the pools it does not hold. */
    assert_true(brisk_context_memory_used(a) - brisk_context_memory_used(b) >=
                sa.kv_bytes - sb.kv_bytes);
    uint64_t kv_est = 0, buf_est = 0;
    brisk_context_params p;
    brisk_context_params_init(&p);
    p.kv_type = BRISK_KV_F32;
    p.kv_tokens = 64;
    p.block_size = 8;
    assert_int_equal(brisk_context_estimate(m, &p, &kv_est, &buf_est), BRISK_OK);
    assert_true(kv_est == sb.kv_bytes);
    brisk_context_free(a);
    brisk_context_free(b);
    brisk_model_free(plain);
    brisk_model_free(m);
  }
}

/* Prefill in chunks, then decode: every row against the float64 reference. */
static void test_prefill_decode_vs_reference(void **state) {
  (void)state;
  const char *arches[] = {"llama", "mistral"}; /* mistral: sliding layers, window 32 */
  for (size_t a = 0; a < 2; a++) {
    brisk_model *m = load(arches[a], 4, 2, "kv_share_reference");
    int32_t nv = brisk_model_n_vocab(m);
    enum { N = 72, PROMPT = 45 };
    test_rng r = test_rng_seeded("kv_share_tokens");
    int32_t toks[N];
    for (int32_t i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
    brisk_context *c = make_ctx(m, 128, 8);
    float *got = malloc((size_t)N * nv * sizeof *got);
    /* Chunks of 20, 20, 5, then one token at a time. */
    assert_int_equal(feed(c, 0, toks, 0, 20, got), BRISK_OK);
    assert_int_equal(feed(c, 0, toks, 20, 40, got + (size_t)20 * nv), BRISK_OK);
    assert_int_equal(feed(c, 0, toks, 40, PROMPT, got + (size_t)40 * nv), BRISK_OK);
    for (int32_t p = PROMPT; p < N; p++)
      assert_int_equal(feed(c, 0, toks, p, p + 1, got + (size_t)p * nv), BRISK_OK);
    ref_model *ref = ref_create(m, N);
    double *want = malloc((size_t)nv * sizeof *want), worst = 0;
    for (int32_t p = 0; p < N; p++) {
      ref_eval(ref, toks[p], want);
      double e = rel_l2(got + (size_t)p * nv, want, nv);
      if (e > worst) worst = e;
    }
    fprintf(stderr, "%s, 2 of 4 layers sharing: worst rel. L2 vs reference %.2e\n", arches[a],
            worst);
    assert_true(worst < 1e-4);
    /* Sharing changes the model: the same weights without the key differ. */
    brisk_model *plain = load(arches[a], 4, 0, "kv_share_reference");
    brisk_context *pc = make_ctx(plain, 128, 8);
    float *other = malloc((size_t)N * nv * sizeof *other);
    assert_int_equal(feed(pc, 0, toks, 0, 20, other), BRISK_OK);
    assert_true(memcmp(other + (size_t)19 * nv, got + (size_t)19 * nv, (size_t)nv * sizeof *got));
    free(other);
    brisk_context_free(pc);
    brisk_model_free(plain);
    ref_free(ref);
    free(want);
    free(got);
    brisk_context_free(c);
    brisk_model_free(m);
  }
}

/* A StreamingLLM window over a sharing model: the sinks are rewritten in
 * the layers that hold K/V, and the shared layers see them; 10x the window
 * in a small pool against the reference's StreamingLLM. */
static void test_window_vs_reference(void **state) {
  (void)state;
  brisk_model *m = load("llama", 4, 2, "kv_share_window");
  int32_t nv = brisk_model_n_vocab(m);
  enum { BS = 4, SINKS = 4, WINDOW = 12, N = SINKS + 10 * WINDOW };
  test_rng r = test_rng_seeded("kv_share_window_tokens");
  int32_t toks[N];
  for (int32_t i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  brisk_context *c = make_ctx(m, SINKS + WINDOW + 3 * BS, BS);
  assert_int_equal(brisk_seq_set_window(c, 0, SINKS, WINDOW), BRISK_OK);
  ref_model *ref = ref_create(m, N);
  ref_set_stream(ref, SINKS, WINDOW, BS);
  float *got = malloc((size_t)nv * sizeof *got);
  double *want = malloc((size_t)nv * sizeof *want), worst = 0;
  for (int32_t p = 0; p < N; p++) {
    assert_int_equal(feed(c, 0, toks, p, p + 1, got), BRISK_OK);
    ref_eval(ref, toks[p], want);
    double e = rel_l2(got, want, nv);
    if (e > worst) worst = e;
  }
  fprintf(stderr, "window %d, sinks %d, 2 of 4 layers sharing: worst rel. L2 %.2e\n", WINDOW, SINKS,
          worst);
  assert_true(worst < 1e-4);
  ref_free(ref);
  free(got);
  free(want);
  brisk_context_free(c);
  brisk_model_free(m);
}

/* Copy-on-write of a forked sequence's shared last block and a snapshot
 * round trip give the logits of a sequence computed alone. */
static void test_fork_and_snapshot(void **state) {
  (void)state;
  brisk_model *m = load("llama", 4, 2, "kv_share_fork");
  int32_t nv = brisk_model_n_vocab(m);
  enum { N = 30 };
  test_rng r = test_rng_seeded("kv_share_fork_tokens");
  int32_t toks[N];
  for (int32_t i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)nv);
  brisk_context *c = make_ctx(m, 128, 8);
  float *a = malloc((size_t)nv * sizeof *a), *b = malloc((size_t)nv * sizeof *b);
  assert_int_equal(feed(c, 0, toks, 0, 21, NULL), BRISK_OK);
  assert_int_equal(brisk_seq_fork(c, 0, 1), BRISK_OK);
  assert_int_equal(feed(c, 1, toks, 21, 22, a), BRISK_OK); /* copies block 2 of seq 0 */
  assert_int_equal(feed(c, 2, toks, 0, 22, NULL), BRISK_OK);
  /* Seq 2, computed alone, has the same last logits as the fork. */
  assert_int_equal(brisk_seq_truncate(c, 2, 21), BRISK_OK);
  assert_int_equal(feed(c, 2, toks, 21, 22, b), BRISK_OK);
  assert_memory_equal(a, b, (size_t)nv * sizeof *a);
  /* Seq 0 was not disturbed by the fork's write. */
  assert_int_equal(feed(c, 0, toks, 21, 22, b), BRISK_OK);
  assert_memory_equal(a, b, (size_t)nv * sizeof *a);
  /* Export seq 0, import into seq 3, continue both. */
  size_t need = 0;
  assert_int_equal(brisk_seq_export(c, 0, NULL, 0, &need), BRISK_E_BUFFER_TOO_SMALL);
  void *buf = malloc(need);
  assert_int_equal(brisk_seq_export(c, 0, buf, need, &need), BRISK_OK);
  assert_int_equal(brisk_seq_import(c, 3, buf, need), BRISK_OK);
  assert_int_equal(feed(c, 0, toks, 22, 23, a), BRISK_OK);
  assert_int_equal(feed(c, 3, toks, 22, 23, b), BRISK_OK);
  assert_memory_equal(a, b, (size_t)nv * sizeof *a);
  free(buf);
  free(a);
  free(b);
  brisk_context_free(c);
  brisk_model_free(m);
}

/* The source rule over mixed layer types, on layer tables alone: Gemma 3n
 * E2B's pattern (30 layers, four sliding then one full, the last 10
 * sharing) gives llama.cpp's choice (n_layer_kv_from_start - 2 for a
 * sliding layer, - 1 for a full one) and the reference's; a pattern whose
 * last non-shared layers are both full makes the sliding ones read the
 * last sliding layer (transformers' rule; llama.cpp's gemma3n shortcut
 * would pick a full layer); no layer of a type before the shared ones is
 * refused. */
static void test_source_rule(void **state) {
  (void)state;
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  brisk_layer layers[30];
  brisk_model m;
  memset(&m, 0, sizeof m);
  m.layers = layers;
  m.hp.arch = BRISK_ARCH_GEMMA3;
  m.hp.n_layer = 30;
  m.hp.n_kv_shared = 10;
  memset(layers, 0, sizeof layers);
  for (int32_t l = 0; l < 30; l++) {
    layers[l].sliding_window = (l + 1) % 5 ? 512 : 0;
    layers[l].kv_source = l;
  }
  assert_int_equal(brisk_model_share_kv(&m, &mp), BRISK_OK);
  for (int32_t l = 0; l < 30; l++) {
    int32_t llama_cpp = l >= 20 ? 20 - (layers[l].sliding_window ? 2 : 1) : l;
    assert_int_equal(layers[l].kv_source, llama_cpp);
    assert_int_equal(layers[l].kv_source, ref_kv_source(&m, (uint32_t)l));
  }
  assert_int_equal(brisk_model_kv_layers(&m), 20);
  /* Layers 0-5 sliding, 6-7 full, 8-11 shared and alternating. */
  m.hp.n_layer = 12;
  m.hp.n_kv_shared = 4;
  for (int32_t l = 0; l < 12; l++) {
    layers[l].sliding_window = l < 6 || (l >= 8 && l % 2 == 0) ? 64 : 0;
    layers[l].kv_source = l;
  }
  assert_int_equal(brisk_model_share_kv(&m, &mp), BRISK_OK);
  const int32_t want[12] = {0, 1, 2, 3, 4, 5, 6, 7, 5, 7, 5, 7};
  for (int32_t l = 0; l < 12; l++) {
    assert_int_equal(layers[l].kv_source, want[l]);
    assert_int_equal(layers[l].kv_source, ref_kv_source(&m, (uint32_t)l));
  }
  /* A full layer among the shared ones, none before them. */
  for (int32_t l = 0; l < 8; l++) layers[l].sliding_window = 64;
  assert_int_equal(brisk_model_share_kv(&m, &mp), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "full-attention"));
}

static void extra_key(brisk_gguf_writer *w, const char *arch, void *user) {
  (void)arch;
  brisk_gguf_writer_set_u32(w, "llama.attention.shared_kv_layers", *(const uint32_t *)user);
}

/* Counts that leave no layer to read from, and parallelism, are refused
 * with a message. */
static void test_refusals(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.n_layer = 3;
  uint32_t all = 3;
  s.extra = extra_key;
  s.extra_user = &all;
  test_rng r = test_rng_seeded("kv_share_refusals");
  brisk_model *m = NULL;
  assert_int_equal(test_model_load(dir, "all_shared", &s, &r, &m), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "no layer is left"));
  s.extra = NULL;
  s.shared_kv_layers = 1;
  char path[128];
  snprintf(path, sizeof path, "%s/one_shared.gguf", dir);
  assert_int_equal(test_model_write(path, &s, &r, NULL), BRISK_OK);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.tp_size = 2;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "KV sharing"));
  brisk_model_params_init(&mp);
  mp.pp_size = 2;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_E_UNSUPPORTED);
  brisk_model_params_init(&mp);
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sources_and_bytes),
      cmocka_unit_test(test_source_rule),
      cmocka_unit_test(test_prefill_decode_vs_reference),
      cmocka_unit_test(test_window_vs_reference),
      cmocka_unit_test(test_fork_and_snapshot),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
