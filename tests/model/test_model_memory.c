/* Loading from the caller's memory and through a reader callback: the same
 * logits as from the file (mapped and read), the caller's buffer never
 * written (even with repacking on), readers that return short reads,
 * fail, or end early at every kind of offset (a status, nothing leaked),
 * cancellation from the progress callback, and every allocation failing. */
#include "test_models.h"

#include "core/dtype.h"
#include "core/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64], path[128];
static unsigned char *image;
static size_t image_size;

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  snprintf(path, sizeof path, "%s/m.gguf", dir);
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q8_0; /* a type the CPU regroups */
  test_rng r = test_rng_seeded("model_memory");
  if (test_model_write(path, &s, &r, NULL)) return -1;
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  image_size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  image = aligned_alloc(64, (image_size + 63) / 64 * 64);
  size_t got = fread(image, 1, image_size, f);
  fclose(f);
  return got == image_size ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  free(image);
  test_tmpdir_remove(dir);
  return 0;
}

/* Logits of a 6-token prefill, all rows. */
static float *logits_of(brisk_model *m) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 32;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &c), BRISK_OK);
  brisk_batch *b = NULL;
  assert_int_equal(brisk_batch_create(6, &b), BRISK_OK);
  for (int i = 0; i < 6; i++) assert_int_equal(brisk_batch_add(b, 3 + 7 * i, i, 0, 1), BRISK_OK);
  assert_int_equal(brisk_decode(c, b), BRISK_OK);
  const int32_t nv = brisk_model_n_vocab(m);
  float *out = malloc((size_t)6 * (size_t)nv * sizeof(float));
  for (int i = 0; i < 6; i++) memcpy(out + (size_t)i * nv, brisk_get_logits(c, i), (size_t)nv * 4);
  brisk_batch_free(b);
  brisk_context_free(c);
  return out;
}

typedef struct reader_state {
  const unsigned char *data;
  uint64_t size;
  test_rng rng;
  uint64_t fail_at;  /* first read at or past this offset fails (UINT64_MAX: never) */
  int64_t fail_with; /* -1 (error) or 0 (early end) */
  int max_chunk;     /* short reads of 1..max_chunk bytes (0: whole) */
} reader_state;

static int64_t read_cb(void *user, uint64_t off, void *buf, size_t n) {
  reader_state *r = user;
  if (off + n > r->size) return -1; /* brisk never reads past size */
  if (off + n > r->fail_at) return r->fail_with;
  size_t give = n;
  if (r->max_chunk > 0) {
    size_t k = 1 + (size_t)(test_rng_u64(&r->rng) % (uint64_t)r->max_chunk);
    if (k < give) give = k;
  }
  memcpy(buf, r->data + off, give);
  return (int64_t)give;
}

static brisk_model_reader make_reader(reader_state *rs) {
  brisk_model_reader rd = {sizeof rd, image_size, read_cb, rs};
  return rd;
}

static void test_same_logits_everywhere(void **state) {
  (void)state;
  uint64_t before = brisk_hash64(image, image_size, 0);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  brisk_model *from_file = NULL, *from_read = NULL, *from_mem = NULL, *from_reader = NULL;
  assert_int_equal(brisk_model_load(path, &mp, &from_file), BRISK_OK);
  mp.use_mmap = 0;
  assert_int_equal(brisk_model_load(path, &mp, &from_read), BRISK_OK);
  mp.use_mmap = 1;
  assert_int_equal(brisk_model_load_from_memory(image, image_size, &mp, &from_mem), BRISK_OK);
  reader_state rs = {image, image_size, test_rng_seeded("reader"), UINT64_MAX, -1, 4093};
  brisk_model_reader rd = make_reader(&rs);
  assert_int_equal(brisk_model_load_from_reader(&rd, &mp, &from_reader), BRISK_OK);
  float *want = logits_of(from_file);
  brisk_model *others[] = {from_read, from_mem, from_reader};
  const size_t n = (size_t)6 * (size_t)brisk_model_n_vocab(from_file) * sizeof(float);
  for (size_t i = 0; i < 3; i++) {
    float *got = logits_of(others[i]);
    assert_memory_equal(got, want, n);
    free(got);
  }
  free(want);
  assert_int_equal(brisk_model_n_params(from_mem), brisk_model_n_params(from_file));
  brisk_model_free(from_file);
  brisk_model_free(from_read);
  brisk_model_free(from_mem);
  brisk_model_free(from_reader);
  /* Borrowed, and never written. */
  assert_true(brisk_hash64(image, image_size, 0) == before);
}

static void test_reader_failures(void **state) {
  (void)state;
  const uint64_t offsets[] = {0, 1, 7, 24, 100, image_size / 2, image_size - 1};
  for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++)
    for (int64_t with = -1; with <= 0; with++) {
      reader_state rs = {image, image_size, test_rng_seeded("reader_fail"), offsets[i], with, 97};
      brisk_model_reader rd = make_reader(&rs);
      brisk_model *m = NULL;
      assert_int_equal(brisk_model_load_from_reader(&rd, NULL, &m), BRISK_E_IO);
      assert_null(m);
      assert_non_null(strstr(brisk_last_error(), with < 0 ? "failed at offset" : "ended at"));
    }
  /* A truncated image (the reader claims fewer bytes) is malformed. */
  reader_state rs = {image, image_size, test_rng_seeded("reader_short"), UINT64_MAX, -1, 0};
  brisk_model_reader rd = make_reader(&rs);
  rd.size = image_size - 10;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load_from_reader(&rd, NULL, &m), BRISK_E_FORMAT);
  assert_int_equal(brisk_model_load_from_memory(image, image_size / 3, NULL, &m), BRISK_E_FORMAT);
}

static int cancel_after_half(float fraction, void *user) {
  (void)user;
  return fraction < 0.25f;
}

static void test_arguments_and_cancel(void **state) {
  (void)state;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load_from_memory(NULL, 10, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_load_from_memory(image, 0, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_load_from_memory(image, image_size, NULL, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_model_load_from_reader(NULL, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  reader_state rs = {image, image_size, (test_rng){7}, UINT64_MAX, -1, 0};
  brisk_model_reader rd = make_reader(&rs);
  rd.struct_size = 4;
  assert_int_equal(brisk_model_load_from_reader(&rd, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  rd = make_reader(&rs);
  rd.read = NULL;
  assert_int_equal(brisk_model_load_from_reader(&rd, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  rd = make_reader(&rs);
  rd.size = 0;
  assert_int_equal(brisk_model_load_from_reader(&rd, NULL, &m), BRISK_E_INVALID_ARGUMENT);
  /* Cancelled while reading (small chunks make many progress reports). */
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.progress = cancel_after_half;
  rd = make_reader(&rs);
  assert_int_equal(brisk_model_load_from_reader(&rd, &mp, &m), BRISK_E_CANCELLED);
  assert_null(m);
}

static brisk_status load_reader_op(void *ctx) {
  (void)ctx;
  reader_state rs = {image, image_size, (test_rng){42}, UINT64_MAX, -1, 0};
  brisk_model_reader rd = make_reader(&rs);
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load_from_reader(&rd, NULL, &m);
  brisk_model_free(m);
  return st;
}

static brisk_status load_memory_op(void *ctx) {
  (void)ctx;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load_from_memory(image, image_size, NULL, &m);
  brisk_model_free(m);
  return st;
}

static void test_every_allocation(void **state) {
  (void)state;
  assert_true(test_every_allocation_fails(load_reader_op, NULL) > 0);
  assert_true(test_every_allocation_fails(load_memory_op, NULL) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_logits_everywhere),
      cmocka_unit_test(test_reader_failures),
      cmocka_unit_test(test_arguments_and_cancel),
      cmocka_unit_test(test_every_allocation),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
