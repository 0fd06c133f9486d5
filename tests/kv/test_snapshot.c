/* brisk_seq_export / brisk_seq_import on a real context (random-weight
 * llama): a restored sequence continues with bitwise the same logits as the
 * original (same block size; other block sizes to rounding, and the same
 * greedy tokens), for every KV type, into another sequence id of another
 * context of another load of the model; buffer and callback forms write the
 * same bytes; every header field, the payload's token ids and positions,
 * truncations and trailing bytes are refused with a message and leave the
 * context as it was; a context of another model or KV type refuses the
 * snapshot. */
#include "test_models.h"

#include "core/hash.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static brisk_model *model, *model2, *other;
static int32_t n_vocab;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("snapshot_model");
  if (test_model_load(dir, "llama", &s, &r, &model)) return -1;
  /* The same file loaded again: what another process would see. */
  char path[128];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  if (brisk_model_load(path, NULL, &model2)) return -1;
  test_model_spec s2 = test_model_default("llama");
  s2.n_layer += 1;
  if (test_model_load(dir, "other", &s2, &r, &other)) return -1;
  n_vocab = brisk_model_n_vocab(model);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(model);
  brisk_model_free(model2);
  brisk_model_free(other);
  test_tmpdir_remove(dir);
  return 0;
}

static brisk_context *make_ctx(const brisk_model *m, brisk_kv_type type, int32_t kv_tokens,
                               int32_t block_size) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = kv_tokens;
  p.block_size = block_size;
  p.kv_type = type;
  p.n_seq_max = 6;
  p.max_batch_tokens = 64;
  p.n_threads = 1;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  return c;
}

/* Decodes tokens[from, to) of seq in chunks of 64; the last logits to out. */
static void feed(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t from, int32_t to,
                 float *out) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(64, &b), BRISK_OK);
  int32_t last = 0;
  for (int32_t at = from; at < to; at += 64) {
    int32_t end = at + 64 < to ? at + 64 : to;
    brisk_batch_clear(b);
    for (int32_t p = at; p < end; p++) brisk_batch_add(b, tokens[p], p, seq, p == to - 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    last = end - at - 1;
  }
  if (out) memcpy(out, brisk_get_logits(c, last), (size_t)n_vocab * sizeof *out);
  brisk_batch_free(b);
}

static int32_t argmax(const float *x) {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

static unsigned char *export_buf(brisk_context *c, int32_t seq, size_t *n) {
  assert_int_equal(brisk_seq_export(c, seq, NULL, 0, n), BRISK_E_BUFFER_TOO_SMALL);
  unsigned char *buf = malloc(*n);
  size_t n2 = 0;
  assert_int_equal(brisk_seq_export(c, seq, buf, *n, &n2), BRISK_OK);
  assert_int_equal(n2, *n);
  return buf;
}

/* Greedy continuation of seq for n steps, the first token `first` at
 * position at; ids to out, the first step's logits to logits0. */
static void greedy(brisk_context *c, int32_t seq, int32_t first, int32_t at, int n, int32_t *out,
                   float *logits0) {
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(1, &b), BRISK_OK);
  int32_t tok = first;
  for (int i = 0; i < n; i++) {
    brisk_batch_clear(b);
    brisk_batch_add(b, tok, at + i, seq, 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    out[i] = tok = argmax(brisk_get_logits(c, 0));
    if (i == 0 && logits0) memcpy(logits0, brisk_get_logits(c, 0), (size_t)n_vocab * 4);
  }
  brisk_batch_free(b);
}

static void test_roundtrip_bitwise(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("snapshot_roundtrip");
  const brisk_kv_type types[] = {BRISK_KV_F16, BRISK_KV_F32, BRISK_KV_Q8_0, BRISK_KV_FP8_E4M3};
  for (int ti = 0; ti < 4; ti++) {
    int32_t toks[70];
    for (int i = 0; i < 70; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
    brisk_context *a = make_ctx(model, types[ti], 256, 16);
    feed(a, 1, toks, 0, 37, NULL); /* a partial last block */
    size_t n = 0;
    unsigned char *snap = export_buf(a, 1, &n);
    /* Another load of the model, another sequence id, other sequences
     * already there (so other block ids). */
    brisk_context *b = make_ctx(model2, types[ti], 256, 16);
    feed(b, 0, toks + 10, 0, 23, NULL);
    brisk_kv_stats ks = {.struct_size = sizeof ks};
    assert_int_equal(brisk_seq_import(b, 4, snap, n), BRISK_OK);
    assert_int_equal(brisk_seq_len(b, 4), 37);
    assert_int_equal(brisk_context_kv_stats(b, &ks), BRISK_OK);
    /* The next tokens: bitwise equal logits. */
    int32_t ga[6], gb[6];
    float *la = malloc((size_t)n_vocab * 4), *lb = malloc((size_t)n_vocab * 4);
    brisk_batch *bt;
    assert_int_equal(brisk_batch_create(1, &bt), BRISK_OK);
    int32_t ta = toks[37], tb = toks[37];
    for (int i = 0; i < 6; i++) {
      brisk_batch_clear(bt);
      brisk_batch_add(bt, ta, 37 + i, 1, 1);
      assert_int_equal(brisk_decode(a, bt), BRISK_OK);
      memcpy(la, brisk_get_logits(a, 0), (size_t)n_vocab * 4);
      brisk_batch_clear(bt);
      brisk_batch_add(bt, tb, 37 + i, 4, 1);
      assert_int_equal(brisk_decode(b, bt), BRISK_OK);
      memcpy(lb, brisk_get_logits(b, 0), (size_t)n_vocab * 4);
      assert_memory_equal(la, lb, (size_t)n_vocab * 4);
      ga[i] = ta = argmax(la), gb[i] = tb = argmax(lb);
    }
    assert_memory_equal(ga, gb, sizeof ga);
    /* A snapshot of the restored sequence's first 37 tokens is the same
     * bytes as the original one. */
    assert_int_equal(brisk_seq_truncate(b, 4, 37), BRISK_OK);
    size_t n2 = 0;
    unsigned char *again = export_buf(b, 4, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(again, snap, n);
    free(again), free(snap), free(la), free(lb);
    brisk_batch_free(bt);
    brisk_context_free(a);
    brisk_context_free(b);
  }
}

/* Block size 16 to block size 5 and 1: the same K/V, attention sums in
 * other chunks, so logits agree to rounding and greedy tokens exactly. */
static void test_other_block_size(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("snapshot_block_size");
  int32_t toks[50];
  for (int i = 0; i < 50; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  brisk_context *a = make_ctx(model, BRISK_KV_F32, 128, 16);
  feed(a, 0, toks, 0, 49, NULL);
  size_t n;
  unsigned char *snap = export_buf(a, 0, &n);
  const int32_t sizes[] = {5, 1, 64};
  int32_t want[5];
  float *l0 = malloc((size_t)n_vocab * 4), *l1 = malloc((size_t)n_vocab * 4);
  greedy(a, 0, toks[49], 49, 5, want, l0);
  for (int i = 0; i < 3; i++) {
    brisk_context *b = make_ctx(model, BRISK_KV_F32, 128, sizes[i]);
    assert_int_equal(brisk_seq_import(b, 2, snap, n), BRISK_OK);
    int32_t got[5];
    greedy(b, 2, toks[49], 49, 5, got, l1);
    assert_memory_equal(got, want, sizeof got);
    for (int32_t v = 0; v < n_vocab; v++) assert_true(fabsf(l0[v] - l1[v]) <= 1e-4f);
    brisk_context_free(b);
  }
  free(l0), free(l1), free(snap);
  brisk_context_free(a);
}

typedef struct mem_stream {
  unsigned char *p;
  size_t n, cap, at;
  size_t fail_after; /* writer/reader fails once this many bytes passed */
} mem_stream;

static int mem_write(void *u, const void *d, size_t n) {
  mem_stream *s = u;
  if (s->n + n > s->fail_after) return 1;
  if (s->n + n > s->cap) {
    s->cap = (s->n + n) * 2;
    s->p = realloc(s->p, s->cap);
  }
  memcpy(s->p + s->n, d, n);
  s->n += n;
  return 0;
}

static int mem_read(void *u, void *d, size_t n) {
  mem_stream *s = u;
  if (n > s->n - s->at || s->at + n > s->fail_after) return 1;
  memcpy(d, s->p + s->at, n);
  s->at += n;
  return 0;
}

static void test_callbacks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("snapshot_callbacks");
  int32_t toks[40];
  for (int i = 0; i < 40; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  brisk_context *a = make_ctx(model, BRISK_KV_Q8_0, 128, 8);
  feed(a, 3, toks, 0, 40, NULL);
  size_t n;
  unsigned char *snap = export_buf(a, 3, &n);
  mem_stream s = {.fail_after = SIZE_MAX};
  assert_int_equal(brisk_seq_export_to(a, 3, mem_write, &s), BRISK_OK);
  assert_int_equal(s.n, n);
  assert_memory_equal(s.p, snap, n);
  brisk_context *b = make_ctx(model, BRISK_KV_Q8_0, 128, 8);
  assert_int_equal(brisk_seq_import_from(b, 0, mem_read, &s), BRISK_OK);
  assert_int_equal(brisk_seq_len(b, 0), 40);
  /* A writer that fails: BRISK_E_IO; a reader that fails anywhere:
   * BRISK_E_IO and nothing imported. */
  mem_stream w = {.fail_after = n / 2};
  assert_int_equal(brisk_seq_export_to(a, 3, mem_write, &w), BRISK_E_IO);
  free(w.p);
  for (size_t cut = 0; cut < n; cut += 1 + cut / 3) {
    s.at = 0, s.fail_after = cut;
    assert_int_equal(brisk_seq_import_from(b, 1, mem_read, &s), BRISK_E_IO);
    assert_int_equal(brisk_seq_len(b, 1), 0);
  }
  free(s.p), free(snap);
  brisk_context_free(a);
  brisk_context_free(b);
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Rewrites the header checksum and the chained trailer after an edit, so
 * that the field checks themselves are reached. */
static void reseal(unsigned char *s, size_t n, uint32_t n_layer) {
  put64(s + 56, brisk_hash64(s, 56, 0));
  uint32_t nt = (uint32_t)(s[40] | s[41] << 8 | s[42] << 16 | (uint32_t)s[43] << 24);
  if ((uint64_t)nt * 8 + 72 > n) return; /* the header alone */
  size_t section = (n - 72 - (size_t)nt * 8) / (2 * (size_t)n_layer);
  uint64_t h = brisk_hash64(s + 64, (size_t)nt * 8, get64(s + 56));
  for (uint32_t i = 0; i < 2 * n_layer; i++)
    h = brisk_hash64(s + 64 + (size_t)nt * 8 + i * section, section, h);
  put64(s + n - 8, h);
}

static void expect_refused(brisk_context *c, const unsigned char *s, size_t n, brisk_status want,
                           const char *words) {
  brisk_kv_stats before = {.struct_size = sizeof before}, after = before;
  assert_int_equal(brisk_context_kv_stats(c, &before), BRISK_OK);
  brisk_status st = brisk_seq_import(c, 2, s, n);
  if (st != want) fail_msg("import gave %d (%s), wanted %d", st, brisk_last_error(), want);
  if (words && !strstr(brisk_last_error(), words))
    fail_msg("message '%s' does not mention '%s'", brisk_last_error(), words);
  assert_int_equal(brisk_seq_len(c, 2), 0);
  assert_int_equal(brisk_context_kv_stats(c, &after), BRISK_OK);
  assert_int_equal(after.n_free_blocks, before.n_free_blocks);
  assert_int_equal(after.n_cached_blocks, before.n_cached_blocks);
}

static void test_every_field_checked(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("snapshot_fields");
  int32_t toks[30];
  for (int i = 0; i < 30; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  brisk_context *a = make_ctx(model, BRISK_KV_F16, 128, 16);
  feed(a, 0, toks, 0, 30, NULL);
  size_t n;
  unsigned char *snap = export_buf(a, 0, &n), *s = malloc(n + 16);
  const uint32_t n_layer = (uint32_t)brisk_model_n_layer(model);
  brisk_context *b = make_ctx(model, BRISK_KV_F16, 128, 16);
  feed(b, 0, toks, 0, 5, NULL);
#define FRESH() memcpy(s, snap, n)
  FRESH(), memcpy(s, "BRISKSEX", 8);
  expect_refused(b, s, n, BRISK_E_FORMAT, "not a brisk");
  FRESH(), s[20] ^= 1; /* without resealing: the header checksum */
  expect_refused(b, s, n, BRISK_E_FORMAT, "checksum");
  FRESH(), put32(s + 8, 3), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "version 3");
  /* Version 1 (8-bit rows unrotated, F16 / F32 rows as today): an F16
   * snapshot still imports. */
  FRESH(), put32(s + 8, 1), reseal(s, n, n_layer);
  assert_int_equal(brisk_seq_import(b, 3, s, n), BRISK_OK);
  assert_int_equal(brisk_seq_len(b, 3), 30);
  assert_int_equal(brisk_seq_free(b, 3), BRISK_OK);
  FRESH(), put32(s + 12, 72), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "header");
  FRESH(), put32(s + 44, 1), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "flags");
  FRESH(), s[16] ^= 0x40, reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_INVALID_ARGUMENT, "another model");
  FRESH(), put32(s + 24, BRISK_KV_F32), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_INVALID_ARGUMENT, "type");
  FRESH(), put32(s + 28, n_layer + 1), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "layers");
  FRESH(), put32(s + 32, 99), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "layers");
  FRESH(), put32(s + 36, 7), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "layers");
  FRESH(), put32(s + 40, 0), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, NULL);
  FRESH(), put32(s + 40, 0x80000000u), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, NULL);
  FRESH(), put32(s + 40, 31), put64(s + 56, brisk_hash64(s, 56, 0));
  expect_refused(b, s, n, BRISK_E_FORMAT, NULL); /* the buffer's size disagrees */
  FRESH(), put64(s + 48, get64(s + 48) + 1), put64(s + 56, brisk_hash64(s, 56, 0));
  expect_refused(b, s, n, BRISK_E_FORMAT, "bytes");
  FRESH(), put64(s + 48, UINT64_MAX), put64(s + 56, brisk_hash64(s, 56, 0));
  expect_refused(b, s, n, BRISK_E_FORMAT, NULL);
  FRESH(), put32(s + 64 + 4 * 7, (uint32_t)n_vocab), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "token 7");
  FRESH(), put32(s + 64 + 4 * 7, 0xffffffffu), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "token 7");
  FRESH(), put32(s + 64 + 4 * 30 + 4 * 3, 4), reseal(s, n, n_layer);
  expect_refused(b, s, n, BRISK_E_FORMAT, "position 3");
  FRESH(), s[n / 2] ^= 0x10; /* K/V bytes without resealing */
  expect_refused(b, s, n, BRISK_E_FORMAT, "checksum");
  FRESH(), s[n - 1] ^= 1;
  expect_refused(b, s, n, BRISK_E_FORMAT, "checksum");
  FRESH(), memset(s + n, 0, 16);
  expect_refused(b, s, n + 16, BRISK_E_FORMAT, "bytes");
  for (size_t cut = 0; cut < n; cut += 1 + cut / 2) { /* every truncation */
    FRESH();
    expect_refused(b, s, cut, cut >= 64 ? BRISK_E_FORMAT : BRISK_E_IO, NULL);
  }
  /* Arguments and state. */
  assert_int_equal(brisk_seq_import(NULL, 0, snap, n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_import(b, 6, snap, n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_import(b, -1, snap, n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_import(b, 0, snap, n), BRISK_E_INVALID_ARGUMENT); /* not empty */
  assert_non_null(strstr(brisk_last_error(), "free it first"));
  assert_int_equal(brisk_seq_import(b, 1, NULL, 5), BRISK_E_INVALID_ARGUMENT);
  size_t m = 0;
  assert_int_equal(brisk_seq_export(b, 1, NULL, 0, &m), BRISK_E_INVALID_ARGUMENT); /* empty */
  assert_int_equal(brisk_seq_export(b, 0, NULL, 0, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_seq_export(b, 0, NULL, 10, &m), BRISK_E_INVALID_ARGUMENT);
  /* Another model, another KV type: refused before anything changes. */
  brisk_context *o = make_ctx(other, BRISK_KV_F16, 128, 16);
  expect_refused(o, snap, n, BRISK_E_INVALID_ARGUMENT, "another model");
  brisk_context_free(o);
  o = make_ctx(model, BRISK_KV_Q8_0, 128, 16);
  expect_refused(o, snap, n, BRISK_E_INVALID_ARGUMENT, "type");
  /* A version 1 snapshot of an 8-bit cache: its rows are not the rotated
   * ones this library reads, so it is refused with the reason. */
  feed(o, 0, toks, 0, 30, NULL);
  size_t n8;
  unsigned char *s8 = export_buf(o, 0, &n8);
  put32(s8 + 8, 1), reseal(s8, n8, n_layer);
  assert_int_equal(brisk_seq_free(o, 0), BRISK_OK);
  expect_refused(o, s8, n8, BRISK_E_FORMAT, "export it again");
  free(s8);
  brisk_context_free(o);
  /* A pool too small for the tokens: BRISK_E_KV_FULL. */
  o = make_ctx(model, BRISK_KV_F16, 16, 16);
  expect_refused(o, snap, n, BRISK_E_KV_FULL, NULL);
  brisk_context_free(o);
  /* After all that, the intact snapshot still imports. */
  assert_int_equal(brisk_seq_import(b, 2, snap, n), BRISK_OK);
  assert_int_equal(brisk_seq_len(b, 2), 30);
  free(snap), free(s);
  brisk_context_free(a);
  brisk_context_free(b);
}

typedef struct oom_case {
  brisk_context *src, *dst;
  const unsigned char *snap;
  size_t n;
} oom_case;

static brisk_status import_op(void *u) {
  oom_case *o = u;
  brisk_status st = brisk_seq_import(o->dst, 1, o->snap, o->n);
  if (!st) brisk_seq_free(o->dst, 1);
  return st;
}

static brisk_status export_op(void *u) {
  oom_case *o = u;
  mem_stream s = {.fail_after = SIZE_MAX};
  brisk_status st = brisk_seq_export_to(o->src, 0, mem_write, &s);
  free(s.p);
  return st;
}

static void test_out_of_memory(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("snapshot_oom");
  int32_t toks[20];
  for (int i = 0; i < 20; i++) toks[i] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_vocab);
  brisk_context *a = make_ctx(model, BRISK_KV_F16, 64, 4);
  feed(a, 0, toks, 0, 20, NULL);
  size_t n;
  unsigned char *snap = export_buf(a, 0, &n);
  brisk_context *b = make_ctx(model, BRISK_KV_F16, 64, 4);
  oom_case o = {a, b, snap, n};
  assert_int_equal(import_op(&o), BRISK_OK); /* the block table's room, kept */
  assert_true(test_every_allocation_fails(import_op, &o) > 0);
  assert_true(test_every_allocation_fails(export_op, &o) > 0);
  free(snap);
  brisk_context_free(a);
  brisk_context_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_bitwise), cmocka_unit_test(test_other_block_size),
      cmocka_unit_test(test_callbacks),         cmocka_unit_test(test_every_field_checked),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
