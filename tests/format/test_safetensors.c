/* safetensors: writer -> reader round trips for every dtype and many shapes
 * (scalars, empty and 5-D tensors included), through memory, mmap and read;
 * every malformed-header case returns its status with a message naming the
 * culprit; truncation at every byte; allocation-failure injection. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/half.h"
#include "format/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------------- */

/* Fresh random values, never zero, encoded in dtype. */
static void *random_data(test_rng *r, uint32_t dtype, uint64_t n, uint64_t *n_bytes) {
  size_t elem = dtype == BRISK_DTYPE_F32 || dtype == BRISK_DTYPE_I32 ? 4 : 2;
  *n_bytes = n * elem;
  unsigned char *p = malloc(n ? n * elem : 1);
  assert_non_null(p);
  for (uint64_t i = 0; i < n; i++) {
    float v = (float)test_rng_normal(r);
    if (v == 0.0f) v = 0.5f;
    if (dtype == BRISK_DTYPE_F32) {
      memcpy(p + 4 * i, &v, 4);
    } else if (dtype == BRISK_DTYPE_I32) { /* GPTQ / AWQ packed words */
      int32_t q = (int32_t)(v * 1e8f);
      memcpy(p + 4 * i, &q, 4);
    } else {
      uint16_t h = dtype == BRISK_DTYPE_F16 ? brisk_f32_to_f16(v) : brisk_f32_to_bf16(v);
      memcpy(p + 2 * i, &h, 2);
    }
  }
  return p;
}

/* A file of: 8-byte length, header text, then data_len bytes of 0x5a. The
 * header length written is hlen_override unless it is UINT64_MAX. */
static unsigned char *make_file(const char *header, uint64_t hlen_override, size_t data_len,
                                size_t *size) {
  size_t h = strlen(header);
  *size = 8 + h + data_len;
  unsigned char *p = malloc(*size);
  assert_non_null(p);
  uint64_t len = hlen_override == UINT64_MAX ? h : hlen_override;
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(len >> (8 * i));
  memcpy(p + 8, header, h);
  memset(p + 8 + h, 0x5a, data_len);
  return p;
}

/* Opens header+data from memory and checks status and message fragments. */
static void expect_header(const char *header, size_t data_len, brisk_status want, const char *frag1,
                          const char *frag2) {
  size_t size;
  unsigned char *p = make_file(header, UINT64_MAX, data_len, &size);
  brisk_safetensors *st = NULL;
  brisk_status s = brisk_safetensors_open_memory(p, size, &st);
  if (s != want || (frag1 && !strstr(brisk_last_error(), frag1)) ||
      (frag2 && !strstr(brisk_last_error(), frag2))) {
    fprintf(stderr, "header %s\n  gave status %d (%s), wanted %d with '%s' '%s'\n", header, s,
            brisk_last_error(), want, frag1 ? frag1 : "", frag2 ? frag2 : "");
    fail();
  }
  if (s == BRISK_OK)
    brisk_safetensors_close(st);
  else
    assert_null(st);
  free(p);
}

typedef struct shape_case {
  uint32_t n_dims;
  uint64_t shape[BRISK_SAFETENSORS_MAX_DIMS];
} shape_case;

static const shape_case shapes[] = {
    {0, {0}},          {1, {1}},          {1, {7}},
    {2, {3, 5}},       {2, {1, 13}},      {3, {2, 3, 4}},
    {4, {1, 1, 1, 1}}, {4, {2, 3, 1, 5}}, {5, {2, 1, 3, 1, 2}},
    {2, {0, 3}},       {1, {0}},          {8, {1, 2, 1, 2, 1, 2, 1, 3}},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])
static const uint32_t dtypes[] = {BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_BF16,
                                  BRISK_DTYPE_I32};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

typedef struct written {
  char name[64];
  uint32_t dtype;
  shape_case sc;
  void *data;
  uint64_t n_bytes;
} written;

/* Adds every dtype x shape with random data; returns the count. */
static size_t fill_writer(brisk_safetensors_writer *w, test_rng *r, written *out) {
  size_t k = 0;
  for (size_t d = 0; d < N_DTYPES; d++) {
    for (size_t i = 0; i < N_SHAPES; i++) {
      written *t = &out[k++];
      snprintf(t->name, sizeof t->name, "layers.%zu.w_%s \"q\\", i,
               brisk_safetensors_dtype_name(dtypes[d]));
      t->dtype = dtypes[d];
      t->sc = shapes[i];
      uint64_t n = 1;
      for (uint32_t j = 0; j < t->sc.n_dims; j++) n *= t->sc.shape[j];
      t->data = random_data(r, t->dtype, n, &t->n_bytes);
      assert_int_equal(brisk_safetensors_writer_add_tensor(w, t->name, t->dtype, t->sc.n_dims,
                                                           t->sc.shape, t->data, t->n_bytes),
                       BRISK_OK);
    }
  }
  return k;
}

static void check_read(const brisk_safetensors *st, const written *ws, size_t n) {
  assert_int_equal(brisk_safetensors_n_tensors(st), n);
  for (size_t i = 0; i < n; i++) {
    const brisk_safetensors_tensor *t = brisk_safetensors_tensor_at(st, i);
    assert_non_null(t);
    assert_string_equal(t->name, ws[i].name); /* header order is insertion order */
    assert_ptr_equal(brisk_safetensors_find(st, ws[i].name), t);
    assert_int_equal(t->dtype, ws[i].dtype);
    assert_int_equal(t->n_dims, ws[i].sc.n_dims);
    uint64_t n_el = 1;
    for (uint32_t j = 0; j < BRISK_SAFETENSORS_MAX_DIMS; j++) {
      uint64_t want = j < ws[i].sc.n_dims ? ws[i].sc.shape[j] : 1;
      assert_int_equal(t->shape[j], want);
      n_el *= want;
    }
    assert_int_equal(t->n_elements, n_el);
    assert_int_equal(t->n_bytes, ws[i].n_bytes);
    size_t elem = t->dtype == BRISK_DTYPE_F32 || t->dtype == BRISK_DTYPE_I32 ? 4 : 2;
    if (t->n_bytes) {
      assert_memory_equal(t->data, ws[i].data, ws[i].n_bytes);
      /* The writer keeps every tensor aligned to its element size. */
      assert_int_equal(t->offset % elem, 0);
    }
  }
  assert_null(brisk_safetensors_tensor_at(st, n));
  assert_null(brisk_safetensors_find(st, "absent"));
  assert_null(brisk_safetensors_find(st, NULL));
}

static char *temp_path(const char *tag) {
  static char buf[128];
  snprintf(buf, sizeof buf, "/tmp/brisk-st-%s-%ld.safetensors", tag, (long)getpid());
  return buf;
}

/* ---- round trips --------------------------------------------------------------- */

static void test_roundtrip_memory_mmap_read(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  written ws[N_DTYPES * N_SHAPES];
  size_t n = fill_writer(w, &r, ws);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "format", "pt"), BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "note \"x\"\n", "caf\xc3\xa9 \\ \t"),
                   BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "format", "np"),
                   BRISK_OK); /* replace */

  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_OK);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | ((unsigned char *)buf)[i];
  assert_int_equal(hlen % 8, 0); /* data section starts 8-aligned */

  brisk_safetensors *st;
  assert_int_equal(brisk_safetensors_open_memory(buf, size, &st), BRISK_OK);
  check_read(st, ws, n);
  assert_int_equal(brisk_safetensors_n_metadata(st), 2);
  assert_string_equal(brisk_safetensors_metadata(st, "format"), "np");
  assert_string_equal(brisk_safetensors_metadata(st, "note \"x\"\n"), "caf\xc3\xa9 \\ \t");
  assert_null(brisk_safetensors_metadata(st, "absent"));
  const char *k, *v;
  assert_true(brisk_safetensors_metadata_at(st, 0, &k, &v));
  assert_string_equal(k, "format");
  assert_false(brisk_safetensors_metadata_at(st, 2, &k, &v));
  assert_int_equal(brisk_safetensors_file_size(st), size);
  brisk_safetensors_close(st);

  const char *path = temp_path("rt");
  assert_int_equal(brisk_safetensors_writer_write_file(w, path), BRISK_OK);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  void *disk = malloc(size + 1);
  assert_int_equal(fread(disk, 1, size + 1, f), size); /* the same bytes as in memory */
  fclose(f);
  assert_memory_equal(disk, buf, size);
  free(disk);

  assert_int_equal(brisk_safetensors_open(path, &st), BRISK_OK);
  assert_true(brisk_safetensors_is_mapped(st));
  check_read(st, ws, n);
  for (size_t i = 0; i < n; i++) {
    const brisk_safetensors_tensor *t = brisk_safetensors_tensor_at(st, i);
    size_t elem = t->dtype == BRISK_DTYPE_F32 ? 4 : 2;
    assert_int_equal((uintptr_t)t->data % elem, 0); /* aligned in the mapping */
  }
  brisk_safetensors_close(st);
  assert_int_equal(brisk_safetensors_open_read(path, &st), BRISK_OK);
  assert_false(brisk_safetensors_is_mapped(st));
  check_read(st, ws, n);
  brisk_safetensors_close(st);
  unlink(path);

  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  for (size_t i = 0; i < n; i++) free(ws[i].data);
}

/* Values decode to what was encoded: f16/bf16 within their rounding. */
static void test_values_against_float64(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  enum { N = 257 };
  double ref[N];
  float f32[N];
  uint16_t f16[N], bf16[N];
  for (int i = 0; i < N; i++) {
    ref[i] = test_rng_uniform(&r, -8, 8);
    if (ref[i] == 0) ref[i] = 1;
    f32[i] = (float)ref[i];
    f16[i] = brisk_f32_to_f16(f32[i]);
    bf16[i] = brisk_f32_to_bf16(f32[i]);
  }
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  uint64_t shape[1] = {N};
  assert_int_equal(
      brisk_safetensors_writer_add_tensor(w, "a", BRISK_DTYPE_F32, 1, shape, f32, 4 * N), BRISK_OK);
  assert_int_equal(
      brisk_safetensors_writer_add_tensor(w, "b", BRISK_DTYPE_F16, 1, shape, f16, 2 * N), BRISK_OK);
  assert_int_equal(
      brisk_safetensors_writer_add_tensor(w, "c", BRISK_DTYPE_BF16, 1, shape, bf16, 2 * N),
      BRISK_OK);
  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_OK);
  brisk_safetensors *st;
  assert_int_equal(brisk_safetensors_open_memory(buf, size, &st), BRISK_OK);
  const brisk_safetensors_tensor *a = brisk_safetensors_find(st, "a"),
                                 *b = brisk_safetensors_find(st, "b"),
                                 *c = brisk_safetensors_find(st, "c");
  for (int i = 0; i < N; i++) {
    float x;
    uint16_t h;
    memcpy(&x, (const char *)a->data + 4 * i, 4);
    /* float32 keeps 24 bits: relative error below 2^-24. */
    assert_true(fabs(x - ref[i]) <= fabs(ref[i]) * 0x1p-24);
    memcpy(&h, (const char *)b->data + 2 * i, 2);
    /* binary16 keeps 11 bits: half an ulp is 2^-11 relative (2^-25 absolute
     * for subnormals), on top of the float32 rounding. */
    assert_true(fabs(brisk_f16_to_f32(h) - ref[i]) <= fabs(ref[i]) * 0x1.01p-11 + 0x1p-25);
    memcpy(&h, (const char *)c->data + 2 * i, 2);
    /* bfloat16 keeps 8 bits: half an ulp is 2^-8 relative, plus float32's. */
    assert_true(fabs(brisk_bf16_to_f32(h) - ref[i]) <= fabs(ref[i]) * 0x1.01p-8);
  }
  brisk_safetensors_close(st);
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
}

static void test_empty_file_and_padding(void **state) {
  (void)state;
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_OK);
  assert_int_equal(size, 16); /* length + "{}" padded to 8 */
  brisk_safetensors *st;
  assert_int_equal(brisk_safetensors_open_memory(buf, size, &st), BRISK_OK);
  assert_int_equal(brisk_safetensors_n_tensors(st), 0);
  assert_int_equal(brisk_safetensors_n_metadata(st), 0);
  brisk_safetensors_close(st);
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  /* Gaps between tensors and trailing bytes are tolerated; empty tensors
   * overlap nothing. */
  expect_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                "\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[9,9]}}   \n",
                20, BRISK_OK, NULL, NULL);
}

static void test_writer_rejects_bad_input(void **state) {
  (void)state;
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  float x[6] = {1, 2, 3, 4, 5, 6};
  uint64_t shape[2] = {2, 3};
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "q", BRISK_DTYPE_Q4_0, 2, shape, x, 24),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "dtype 2"));
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "a", BRISK_DTYPE_F32, 2, shape, x, 20),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "20 bytes given, shape needs 24"));
  assert_int_equal(
      brisk_safetensors_writer_add_tensor(w, "__metadata__", BRISK_DTYPE_F32, 2, shape, x, 24),
      BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "", BRISK_DTYPE_F32, 2, shape, x, 24),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "\xff", BRISK_DTYPE_F32, 2, shape, x, 24),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "a", BRISK_DTYPE_F32, 9, shape, x, 24),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "k", "\xc3"), BRISK_E_INVALID_ARGUMENT);
  uint64_t huge[3] = {1ull << 32, 1ull << 32, 1ull << 2};
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "h", BRISK_DTYPE_F32, 3, huge, x, 24),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "overflows"));
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "a", BRISK_DTYPE_F32, 2, shape, x, 24),
                   BRISK_OK);
  assert_int_equal(
      brisk_safetensors_writer_add_tensor_ref(w, "a", BRISK_DTYPE_F32, 2, shape, x, 24), BRISK_OK);
  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "tensor 'a' added twice"));
  brisk_safetensors_writer_free(w);
  brisk_safetensors_writer_free(NULL);
  brisk_safetensors_close(NULL);
}

/* ---- malformed input -------------------------------------------------------------- */

#define ENTRY(name, body) "\"" name "\":{" body "}"
#define F32_4 "\"dtype\":\"F32\",\"shape\":[4]"

static void test_header_length(void **state) {
  (void)state;
  size_t size;
  brisk_safetensors *st = NULL;
  /* Shorter than the length field. */
  unsigned char small[5] = {1, 0, 0, 0, 0};
  assert_int_equal(brisk_safetensors_open_memory(small, sizeof small, &st), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "5 bytes is too short"));
  const char *hdr = "{}      ";
  struct {
    uint64_t len;
    const char *frag;
  } cases[] = {
      {0, "header length is 0"},
      {9, "header length 9 runs past the end of the 16-byte file"},
      {1ull << 63, "header length 9223372036854775808 is over the"},
      {BRISK_SAFETENSORS_MAX_HEADER + 1ull, "is over the 100000000-byte limit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned char *p = make_file(hdr, cases[i].len, 0, &size);
    assert_int_equal(brisk_safetensors_open_memory(p, size, &st), BRISK_E_FORMAT);
    if (!strstr(brisk_last_error(), cases[i].frag)) {
      fprintf(stderr, "got '%s', wanted '%s'\n", brisk_last_error(), cases[i].frag);
      fail();
    }
    free(p);
  }
  assert_null(st);
}

static void test_bad_json(void **state) {
  (void)state;
  expect_header("{\"a\":{", 0, BRISK_E_FORMAT, "header", "JSON");
  expect_header("{\"a\":{\"dtype\":}}", 0, BRISK_E_FORMAT, "invalid JSON at line 1, column 15",
                NULL);
  expect_header("{\"a\":1,}", 0, BRISK_E_FORMAT, "invalid JSON", NULL); /* strict: no trailing , */
  expect_header("{\"a\":tru}", 0, BRISK_E_FORMAT, "invalid JSON", NULL);
  expect_header("{/* c */}", 0, BRISK_E_FORMAT, "invalid JSON", NULL); /* strict: no comments */
  expect_header("[1, 2]", 0, BRISK_E_FORMAT, "does not start with '{'", NULL);
  expect_header(" {}", 0, BRISK_E_FORMAT, "does not start with '{'", NULL);
  expect_header("{} x", 0, BRISK_E_FORMAT, "invalid JSON", NULL);
  expect_header("{\"a\xff\":1}", 0, BRISK_E_FORMAT, "utf-8", NULL);
  /* NUL padding is not the spaces the format allows. */
  size_t size;
  unsigned char *p = make_file("{}\x01\x01", UINT64_MAX, 0, &size);
  p[10] = p[11] = 0;
  brisk_safetensors *st;
  assert_int_equal(brisk_safetensors_open_memory(p, size, &st), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "unexpected byte 0x00"));
  free(p);
}

static void test_missing_and_mistyped_fields(void **state) {
  (void)state;
  expect_header("{" ENTRY("w", "\"shape\":[4],\"data_offsets\":[0,16]") "}", 16, BRISK_E_FORMAT,
                "tensor 'w' has no \"dtype\"", NULL);
  expect_header("{" ENTRY("w", "\"dtype\":\"F32\",\"data_offsets\":[0,16]") "}", 16, BRISK_E_FORMAT,
                "tensor 'w' has no \"shape\"", NULL);
  expect_header("{" ENTRY("w", F32_4) "}", 16, BRISK_E_FORMAT, "tensor 'w' has no \"data_offsets\"",
                NULL);
  expect_header("{\"w\":[1]}", 16, BRISK_E_FORMAT, "tensor 'w': entry is an array", NULL);
  expect_header("{" ENTRY("w", "\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,16]") "}", 16,
                BRISK_E_FORMAT, "tensor 'w': \"dtype\" is an integer", NULL);
  expect_header("{" ENTRY("w", "\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]") "}", 16,
                BRISK_E_FORMAT, "tensor 'w': \"shape\" is a string", NULL);
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":{}") "}", 16, BRISK_E_FORMAT,
                "tensor 'w': \"data_offsets\" is an object", NULL);
  expect_header("{" ENTRY("w", "\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]") "}", 16,
                BRISK_E_FORMAT, "tensor 'w'", "shape[0]' is negative");
  expect_header("{" ENTRY("w", "\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0,16]") "}", 16,
                BRISK_E_FORMAT, "tensor 'w'", "shape[0]' is a number");
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[0,16,32]") "}", 32, BRISK_E_FORMAT,
                "tensor 'w'", "has 3 entries, expected 2");
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[0,\"16\"]") "}", 16, BRISK_E_FORMAT,
                "tensor 'w'", "data_offsets[1]' is a string");
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[0,99999999999999999999999]") "}", 16,
                BRISK_E_FORMAT, "tensor 'w'", "out of range");
  expect_header("{\"__metadata__\":[1]}", 0, BRISK_E_FORMAT, "\"__metadata__\" is an array", NULL);
  expect_header("{\"__metadata__\":{\"k\":1}}", 0, BRISK_E_FORMAT, "value of 'k' is an integer",
                NULL);
  expect_header("{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, BRISK_E_FORMAT, "'k'", "NUL");
}

static void test_bad_extents(void **state) {
  (void)state;
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[0,16]") "}", 15, BRISK_E_FORMAT,
                "tensor 'w': data_offsets [0, 16] run past the 15-byte data section", NULL);
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[16,0]") "}", 16, BRISK_E_FORMAT,
                "tensor 'w': data_offsets [16, 0] end before they begin", NULL);
  expect_header("{" ENTRY("w", F32_4 ",\"data_offsets\":[0,12]") "}", 16, BRISK_E_FORMAT,
                "tensor 'w': data_offsets [0, 12] hold 12 bytes but shape [4] of F32 needs 16",
                NULL);
  expect_header("{" ENTRY("s", "\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,4]") "}", 4,
                BRISK_E_FORMAT, "tensor 's'", "shape [] of BF16 needs 2");
  expect_header("{" ENTRY("big", "\"dtype\":\"F16\",\"shape\":[4294967296,4294967296,2],"
                                 "\"data_offsets\":[0,0]") "}",
                0, BRISK_E_FORMAT, "tensor 'big': shape [4294967296, 4294967296, 2]",
                "more than 2^64 elements");
  expect_header("{" ENTRY("big", "\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                                 "\"data_offsets\":[0,0]") "}",
                0, BRISK_E_FORMAT, "tensor 'big'", "more than 2^64 bytes");
  expect_header("{" ENTRY("a", F32_4 ",\"data_offsets\":[0,16]") "," ENTRY(
                    "b", F32_4 ",\"data_offsets\":[12,28]") "}",
                28, BRISK_E_FORMAT, "tensors 'a' [0, 16] and 'b' [12, 28] overlap", NULL);
  expect_header("{" ENTRY("a", F32_4 ",\"data_offsets\":[0,16]") "," ENTRY(
                    "b", F32_4 ",\"data_offsets\":[0,16]") "}",
                16, BRISK_E_FORMAT, "overlap", NULL);
}

static void test_unsupported(void **state) {
  (void)state;
  const char *names[] = {"F64", "I64", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "XYZ", ""};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char hdr[256], frag[64];
    snprintf(hdr, sizeof hdr,
             "{\"ok\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
             "\"model.embed\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[4,8]}}",
             names[i]);
    snprintf(frag, sizeof frag, "dtype '%s' is not supported", names[i]);
    expect_header(hdr, 8, BRISK_E_UNSUPPORTED, "tensor 'model.embed'", frag);
  }
  expect_header("{" ENTRY("r9", "\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                                "\"data_offsets\":[0,4]") "}",
                4, BRISK_E_UNSUPPORTED, "tensor 'r9' has 9 dimensions", NULL);
}

static void test_duplicates_and_nul_names(void **state) {
  (void)state;
  /* json-c keeps the last of duplicate keys; the reader notices anyway. */
  expect_header("{" ENTRY("a", F32_4 ",\"data_offsets\":[0,16]") "," ENTRY(
                    "a", F32_4 ",\"data_offsets\":[16,32]") "}",
                32, BRISK_E_FORMAT, "tensor name 'a' appears twice", NULL);
  expect_header("{" ENTRY("a\\u0062", F32_4 ",\"data_offsets\":[0,16]") "," ENTRY(
                    "ab", F32_4 ",\"data_offsets\":[16,32]") "}",
                32, BRISK_E_FORMAT, "2 header entries but only 1 distinct names", NULL);
  expect_header("{'a':{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}," ENTRY(
                    "a", F32_4 ",\"data_offsets\":[16,32]") "}",
                32, BRISK_E_FORMAT, "tensor name 'a' appears twice", NULL);
  expect_header("{" ENTRY("a\\u0000b", F32_4 ",\"data_offsets\":[0,16]") "}", 16, BRISK_E_FORMAT,
                "name 'a\\u0000b' contains an escaped NUL", NULL);
  /* Strings holding quotes, brackets and commas do not confuse the count. */
  expect_header("{" ENTRY("x\\\",{[", F32_4 ",\"data_offsets\":[0,16]") ",\"__metadata__\":{"
                                                                        "\"k,\":\"}]\"}}",
                16, BRISK_OK, NULL, NULL);
}

static void test_open_file_errors(void **state) {
  (void)state;
  brisk_safetensors *st = NULL;
  assert_int_equal(brisk_safetensors_open("/nonexistent/x.safetensors", &st), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "/nonexistent/x.safetensors"));
  assert_int_equal(brisk_safetensors_open("/tmp", &st), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "not a regular file"));
  const char *path = temp_path("empty");
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(brisk_safetensors_open(path, &st), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "0 bytes is too short"));
  assert_int_equal(brisk_safetensors_open_read(path, &st), BRISK_E_FORMAT);
  unlink(path);
  assert_null(st);
  assert_int_equal(brisk_safetensors_open_memory(NULL, 8, &st), BRISK_E_INVALID_ARGUMENT);
}

/* Every proper prefix of a valid file fails cleanly; each prefix lives in an
 * exactly-sized heap block so that ASan sees any read past it. */
static void test_truncation_at_every_byte(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "format", "pt"), BRISK_OK);
  uint64_t s1[2] = {2, 3}, s2[1] = {5};
  uint64_t nb1, nb2;
  void *d1 = random_data(&r, BRISK_DTYPE_F32, 6, &nb1),
       *d2 = random_data(&r, BRISK_DTYPE_BF16, 5, &nb2);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "w1", BRISK_DTYPE_F32, 2, s1, d1, nb1),
                   BRISK_OK);
  assert_int_equal(brisk_safetensors_writer_add_tensor(w, "w2", BRISK_DTYPE_BF16, 1, s2, d2, nb2),
                   BRISK_OK);
  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_OK);
  for (size_t k = 0; k < size; k++) {
    unsigned char *p = malloc(k ? k : 1);
    memcpy(p, buf, k);
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_safetensors_open_memory(p, k, &st);
    if (s != BRISK_E_FORMAT) {
      fprintf(stderr, "prefix of %zu/%zu bytes gave %d (%s)\n", k, size, s, brisk_last_error());
      fail();
    }
    assert_null(st);
    free(p);
  }
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  free(d1);
  free(d2);
}

/* ---- allocation failures ---------------------------------------------------------- */

typedef struct mem_ctx {
  const void *buf;
  size_t size;
  const char *path;
} mem_ctx;

static brisk_status op_open_memory(void *ctx) {
  mem_ctx *m = ctx;
  brisk_safetensors *st;
  brisk_status s = brisk_safetensors_open_memory(m->buf, m->size, &st);
  if (s == BRISK_OK) brisk_safetensors_close(st);
  return s;
}

static brisk_status op_open_read(void *ctx) {
  mem_ctx *m = ctx;
  brisk_safetensors *st;
  brisk_status s = brisk_safetensors_open_read(m->path, &st);
  if (s == BRISK_OK) brisk_safetensors_close(st);
  return s;
}

static brisk_status op_write(void *ctx) {
  (void)ctx;
  float x[3] = {1.5f, -2, 3};
  uint16_t h[2] = {0x3c00, 0x4000};
  uint64_t s3[1] = {3}, s2[2] = {1, 2};
  brisk_safetensors_writer *w;
  brisk_status s = brisk_safetensors_writer_create(&w);
  if (s != BRISK_OK) return s;
  void *buf = NULL;
  size_t size;
  if ((s = brisk_safetensors_writer_set_metadata(w, "k", "v")) == BRISK_OK &&
      (s = brisk_safetensors_writer_set_metadata(w, "k2", "v2")) == BRISK_OK &&
      (s = brisk_safetensors_writer_add_tensor(w, "x", BRISK_DTYPE_F32, 1, s3, x, 12)) ==
          BRISK_OK &&
      (s = brisk_safetensors_writer_add_tensor_ref(w, "h", BRISK_DTYPE_F16, 2, s2, h, 4)) ==
          BRISK_OK)
    s = brisk_safetensors_writer_write_memory(w, &buf, &size);
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  return s;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  brisk_safetensors_writer *w;
  assert_int_equal(brisk_safetensors_writer_create(&w), BRISK_OK);
  written ws[N_DTYPES * N_SHAPES];
  size_t n = fill_writer(w, &r, ws);
  assert_int_equal(brisk_safetensors_writer_set_metadata(w, "format", "pt"), BRISK_OK);
  void *buf;
  size_t size;
  assert_int_equal(brisk_safetensors_writer_write_memory(w, &buf, &size), BRISK_OK);
  mem_ctx m = {buf, size, temp_path("oom")};
  assert_int_equal(brisk_safetensors_writer_write_file(w, m.path), BRISK_OK);
  /* json-c's own allocations use malloc and are not injected; ours unwind. */
  assert_true(test_every_allocation_fails(op_open_memory, &m) >= 4);
  assert_true(test_every_allocation_fails(op_open_read, &m) >= 5);
  assert_true(test_every_allocation_fails(op_write, NULL) >= 6);
  unlink(m.path);
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  for (size_t i = 0; i < n; i++) free(ws[i].data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_memory_mmap_read),
      cmocka_unit_test(test_values_against_float64),
      cmocka_unit_test(test_empty_file_and_padding),
      cmocka_unit_test(test_writer_rejects_bad_input),
      cmocka_unit_test(test_header_length),
      cmocka_unit_test(test_bad_json),
      cmocka_unit_test(test_missing_and_mistyped_fields),
      cmocka_unit_test(test_bad_extents),
      cmocka_unit_test(test_unsupported),
      cmocka_unit_test(test_duplicates_and_nul_names),
      cmocka_unit_test(test_open_file_errors),
      cmocka_unit_test(test_truncation_at_every_byte),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
