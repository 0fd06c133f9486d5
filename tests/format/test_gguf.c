/* GGUF writer -> reader round trips of every value type and every tensor
 * type, for v2 and v3 and several alignments, through open_memory, mmap and
 * the read() path; accessor semantics; writer argument checks; and
 * allocation-failure injection over open_memory and the writer. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static const brisk_gguf_type scalar_types[] = {
    BRISK_GGUF_UINT8,  BRISK_GGUF_INT8,  BRISK_GGUF_UINT16,  BRISK_GGUF_INT16,
    BRISK_GGUF_UINT32, BRISK_GGUF_INT32, BRISK_GGUF_FLOAT32, BRISK_GGUF_BOOL,
    BRISK_GGUF_UINT64, BRISK_GGUF_INT64, BRISK_GGUF_FLOAT64,
};
#define N_SCALAR_TYPES (sizeof scalar_types / sizeof scalar_types[0])

/* ------------------------------------------------------------------------ */
/* A random file description, written with the writer and checked against  */
/* what the reader returns.                                                  */

typedef struct spec_kv {
  char key[64];
  brisk_gguf_type type, elem;
  unsigned char scalar[8];
  uint64_t n;           /* array length, or string length */
  unsigned char *bytes; /* numeric array [n][size], or string [n] */
  brisk_gguf_str *strs; /* string array [n], each ptr malloc'ed */
} spec_kv;

typedef struct spec_tensor {
  char name[64];
  uint32_t type, n_dims;
  uint64_t ne[4];
  uint64_t n_bytes;
  unsigned char *data; /* [n_bytes] random */
} spec_tensor;

typedef struct spec {
  spec_kv kvs[128];
  size_t n_kv;
  spec_tensor tensors[64];
  size_t n_tensors;
} spec;

static void random_bytes(test_rng *r, unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)test_rng_u64(r);
}

/* Random raw value of a scalar type; bools must be 0 or 1. */
static void random_scalar(test_rng *r, brisk_gguf_type t, unsigned char *out) {
  memset(out, 0, 8);
  random_bytes(r, out, brisk_gguf_type_size(t));
  if (t == BRISK_GGUF_BOOL) out[0] &= 1;
}

/* A string with ASCII, embedded NULs, multi-byte UTF-8 and, if `raw`, bytes
 * that are not UTF-8 (string values may hold any bytes). Sometimes empty. */
static unsigned char *random_string(test_rng *r, bool raw, uint64_t *len) {
  static const char *pieces[] = {"a", "Z", "\0", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                 " "};
  static const size_t piece_len[] = {1, 1, 1, 2, 3, 4, 1};
  unsigned char *s = malloc(64);
  size_t n = 0, parts = test_rng_u64(r) % 9; /* 0 parts: the empty string */
  for (size_t k = 0; k < parts; k++) {
    if (raw && test_rng_u64(r) % 5 == 0) {
      s[n++] = (unsigned char)(0x80 | test_rng_u64(r)); /* a lone continuation or lead byte */
      continue;
    }
    size_t j = test_rng_u64(r) % 7;
    memcpy(s + n, pieces[j], piece_len[j]);
    n += piece_len[j];
  }
  *len = n;
  return s;
}

static spec_kv *add_kv(spec *s, brisk_gguf_type type, const char *fmt, size_t i) {
  assert_true(s->n_kv < sizeof s->kvs / sizeof s->kvs[0]);
  spec_kv *kv = &s->kvs[s->n_kv++];
  memset(kv, 0, sizeof *kv);
  snprintf(kv->key, sizeof kv->key, fmt, i, brisk_gguf_type_name(type));
  kv->type = type;
  return kv;
}

static void build_spec(test_rng *r, spec *s) {
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < N_SCALAR_TYPES; i++) {
    spec_kv *kv = add_kv(s, scalar_types[i], "scalar.%zu.%s", i);
    random_scalar(r, kv->type, kv->scalar);
  }
  for (size_t i = 0; i < 3; i++) { /* string values, keys with UTF-8 too */
    spec_kv *kv = add_kv(s, BRISK_GGUF_STRING, "string.%zu.\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87.%s", i);
    kv->bytes = random_string(r, true, &kv->n);
  }
  for (size_t i = 0; i < N_SCALAR_TYPES; i++) {
    spec_kv *kv = add_kv(s, BRISK_GGUF_ARRAY, "array.%zu.%s", i);
    kv->elem = scalar_types[i];
    kv->n = i == 0 ? 0 : test_rng_u64(r) % 40 + 1; /* one empty array */
    size_t size = brisk_gguf_type_size(kv->elem);
    kv->bytes = malloc(kv->n * size + 1);
    for (uint64_t j = 0; j < kv->n; j++) {
      unsigned char v[8];
      random_scalar(r, kv->elem, v);
      memcpy(kv->bytes + j * size, v, size);
    }
  }
  for (size_t i = 0; i < 3; i++) {
    spec_kv *kv = add_kv(s, BRISK_GGUF_ARRAY, "strings.%zu.%s", i);
    kv->elem = BRISK_GGUF_STRING;
    kv->n = i == 2 ? 0 : test_rng_u64(r) % 30 + 2;
    kv->strs = calloc(kv->n + 1, sizeof *kv->strs);
    for (uint64_t j = 0; j < kv->n; j++) {
      uint64_t len;
      kv->strs[j].ptr = (const char *)random_string(r, true, &len);
      kv->strs[j].len = len;
    }
  }
  /* Every tensor type in the table, random shapes, rows whole blocks. */
  for (uint32_t id = 0; id < BRISK_DTYPE_COUNT; id++) {
    const brisk_dtype_info *info = brisk_dtype_get(id);
    if (!info) continue;
    spec_tensor *t = &s->tensors[s->n_tensors];
    snprintf(t->name, sizeof t->name, "blk.%zu.%s.weight", s->n_tensors, info->name);
    s->n_tensors++;
    t->type = id;
    t->n_dims = 1 + (uint32_t)(test_rng_u64(r) % 4);
    uint64_t n = 1;
    for (uint32_t d = 0; d < 4; d++) {
      t->ne[d] = d >= t->n_dims ? 1
                 : d == 0       ? info->block_size * (1 + test_rng_u64(r) % 3)
                                : 1 + test_rng_u64(r) % 3;
      n *= t->ne[d];
    }
    t->n_bytes = n / info->block_size * info->type_size;
    t->data = malloc(t->n_bytes);
    random_bytes(r, t->data, t->n_bytes);
  }
}

static void free_spec(spec *s) {
  for (size_t i = 0; i < s->n_kv; i++) {
    free(s->kvs[i].bytes);
    for (uint64_t j = 0; s->kvs[i].strs && j < s->kvs[i].n; j++)
      free((void *)s->kvs[i].strs[j].ptr);
    free(s->kvs[i].strs);
  }
  for (size_t i = 0; i < s->n_tensors; i++) free(s->tensors[i].data);
}

static brisk_status write_spec(const spec *s, uint32_t version, uint32_t alignment,
                               brisk_gguf_writer **out) {
  brisk_gguf_writer *w;
  brisk_status st = brisk_gguf_writer_create(version, alignment, &w);
  if (st) return st;
  for (size_t i = 0; i < s->n_kv && !st; i++) {
    const spec_kv *kv = &s->kvs[i];
    if (kv->type == BRISK_GGUF_STRING)
      st = brisk_gguf_writer_set_strn(w, kv->key, (const char *)kv->bytes, kv->n);
    else if (kv->type == BRISK_GGUF_ARRAY && kv->elem == BRISK_GGUF_STRING)
      st = brisk_gguf_writer_set_arr_strn(w, kv->key, kv->strs, kv->n);
    else if (kv->type == BRISK_GGUF_ARRAY)
      st = brisk_gguf_writer_set_arr(w, kv->key, kv->elem, kv->bytes, kv->n);
    else
      st = brisk_gguf_writer_set_scalar(w, kv->key, kv->type, kv->scalar);
  }
  for (size_t i = 0; i < s->n_tensors && !st; i++) {
    const spec_tensor *t = &s->tensors[i];
    st = brisk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes);
  }
  if (st) {
    brisk_gguf_writer_free(w);
    return st;
  }
  *out = w;
  return BRISK_OK;
}

static void check_str(brisk_gguf_str got, const void *want, uint64_t len) {
  assert_non_null(got.ptr);
  assert_int_equal(got.len, len);
  if (len) assert_memory_equal(got.ptr, want, len);
  assert_int_equal(got.ptr[len], 0); /* always NUL-terminated */
}

/* The typed getters agree with the raw value: integers through i64/u64
 * (each succeeds exactly when the value fits), floats through f64. */
static void check_typed_getters(const brisk_gguf *g, const spec_kv *kv) {
  uint64_t raw = 0;
  size_t size = brisk_gguf_type_size(kv->type);
  for (size_t k = size; k-- > 0;) raw = raw << 8 | kv->scalar[k];
  int64_t s = 0;
  bool is_signed = true;
  switch (kv->type) {
  case BRISK_GGUF_INT8: s = (int8_t)raw; break;
  case BRISK_GGUF_INT16: s = (int16_t)raw; break;
  case BRISK_GGUF_INT32: s = (int32_t)raw; break;
  case BRISK_GGUF_INT64: s = (int64_t)raw; break;
  case BRISK_GGUF_UINT8:
  case BRISK_GGUF_UINT16:
  case BRISK_GGUF_UINT32:
  case BRISK_GGUF_UINT64: is_signed = false; break;
  case BRISK_GGUF_FLOAT32: {
    float f, got;
    memcpy(&f, kv->scalar, 4);
    assert_int_equal(brisk_gguf_get_f32(g, kv->key, &got), BRISK_OK);
    /* Random bits can be a signaling NaN, which a float conversion quiets. */
    if (isnan(f)) assert_true(isnan(got));
    else assert_memory_equal(&got, &f, 4);
    return;
  }
  case BRISK_GGUF_FLOAT64: {
    double d, got;
    memcpy(&d, kv->scalar, 8);
    assert_int_equal(brisk_gguf_get_f64(g, kv->key, &got), BRISK_OK);
    if (isnan(d)) assert_true(isnan(got));
    else assert_memory_equal(&got, &d, 8);
    return;
  }
  default: { /* bool */
    bool b;
    assert_int_equal(brisk_gguf_get_bool(g, kv->key, &b), BRISK_OK);
    assert_int_equal(b, kv->scalar[0]);
    return;
  }
  }
  int64_t i64;
  uint64_t u64;
  int32_t i32;
  uint32_t u32;
  brisk_status st_i64 = brisk_gguf_get_i64(g, kv->key, &i64);
  brisk_status st_u64 = brisk_gguf_get_u64(g, kv->key, &u64);
  brisk_status st_i32 = brisk_gguf_get_i32(g, kv->key, &i32);
  brisk_status st_u32 = brisk_gguf_get_u32(g, kv->key, &u32);
  if (is_signed) {
    assert_int_equal(st_i64, BRISK_OK);
    assert_int_equal(i64, s);
    assert_int_equal(st_u64, s >= 0 ? BRISK_OK : BRISK_E_FORMAT);
    if (s >= 0) assert_int_equal(u64, (uint64_t)s);
    assert_int_equal(st_i32, s >= INT32_MIN && s <= INT32_MAX ? BRISK_OK : BRISK_E_FORMAT);
    if (!st_i32) assert_int_equal(i32, s);
    assert_int_equal(st_u32, s >= 0 && s <= (int64_t)UINT32_MAX ? BRISK_OK : BRISK_E_FORMAT);
    if (!st_u32) assert_int_equal(u32, s);
  } else {
    assert_int_equal(st_u64, BRISK_OK);
    assert_int_equal(u64, raw);
    assert_int_equal(st_i64, raw <= INT64_MAX ? BRISK_OK : BRISK_E_FORMAT);
    if (!st_i64) assert_int_equal(i64, (int64_t)raw);
    assert_int_equal(st_i32, raw <= INT32_MAX ? BRISK_OK : BRISK_E_FORMAT);
    if (!st_i32) assert_int_equal(i32, (int32_t)raw);
    assert_int_equal(st_u32, raw <= UINT32_MAX ? BRISK_OK : BRISK_E_FORMAT);
    if (!st_u32) assert_int_equal(u32, raw);
  }
}

static void verify(const brisk_gguf *g, const spec *s, uint32_t version, uint32_t alignment) {
  uint32_t align = alignment ? alignment : 32;
  assert_int_equal(brisk_gguf_version(g), version);
  assert_int_equal(brisk_gguf_alignment(g), align);
  int64_t first = align != 32; /* the writer records a non-default alignment first */
  assert_int_equal(brisk_gguf_n_kv(g), (int64_t)s->n_kv + first);
  if (first) {
    uint32_t a = 0;
    assert_string_equal(brisk_gguf_key(g, 0), "general.alignment");
    assert_int_equal(brisk_gguf_get_u32(g, "general.alignment", &a), BRISK_OK);
    assert_int_equal(a, align);
  }
  for (size_t i = 0; i < s->n_kv; i++) {
    const spec_kv *kv = &s->kvs[i];
    int64_t idx = (int64_t)i + first;
    assert_string_equal(brisk_gguf_key(g, idx), kv->key);
    assert_int_equal(brisk_gguf_find_key(g, kv->key), idx);
    assert_int_equal(brisk_gguf_kv_type(g, idx), kv->type);
    if (kv->type == BRISK_GGUF_STRING) {
      brisk_gguf_str str = {0};
      assert_int_equal(brisk_gguf_get_str(g, kv->key, &str), BRISK_OK);
      check_str(str, kv->bytes, kv->n);
      check_str(brisk_gguf_kv_str(g, idx), kv->bytes, kv->n);
    } else if (kv->type == BRISK_GGUF_ARRAY) {
      brisk_gguf_type et;
      uint64_t n;
      assert_int_equal(brisk_gguf_get_arr(g, kv->key, &et, &n), BRISK_OK);
      assert_int_equal(et, kv->elem);
      assert_int_equal(n, kv->n);
      assert_int_equal(brisk_gguf_kv_arr_type(g, idx), kv->elem);
      assert_int_equal(brisk_gguf_kv_arr_len(g, idx), kv->n);
      if (kv->elem == BRISK_GGUF_STRING) {
        for (uint64_t j = 0; j < kv->n; j++)
          check_str(brisk_gguf_arr_str(g, idx, j), kv->strs[j].ptr, kv->strs[j].len);
        assert_null(brisk_gguf_arr_str(g, idx, kv->n).ptr); /* past the end */
      } else if (kv->n) {
        const void *data = brisk_gguf_arr_data(g, idx);
        assert_non_null(data);
        assert_memory_equal(data, kv->bytes, kv->n * brisk_gguf_type_size(kv->elem));
      }
    } else {
      unsigned char raw[8] = {0};
      assert_int_equal(brisk_gguf_get_scalar(g, kv->key, kv->type, raw), BRISK_OK);
      assert_memory_equal(raw, kv->scalar, brisk_gguf_type_size(kv->type));
      assert_memory_equal(brisk_gguf_kv_scalar(g, idx), kv->scalar, brisk_gguf_type_size(kv->type));
      check_typed_getters(g, kv);
    }
  }
  assert_int_equal(brisk_gguf_n_tensors(g), (int64_t)s->n_tensors);
  const unsigned char *base = brisk_gguf_bytes(g);
  uint64_t data_offset = brisk_gguf_data_offset(g);
  assert_int_equal(data_offset % align, 0);
  for (size_t i = 0; i < s->n_tensors; i++) {
    const spec_tensor *st = &s->tensors[i];
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, (int64_t)i);
    assert_non_null(t);
    assert_ptr_equal(brisk_gguf_find_tensor(g, st->name), t);
    assert_string_equal(t->name, st->name);
    assert_int_equal(t->type, st->type);
    assert_int_equal(t->n_dims, st->n_dims);
    for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], st->ne[d]);
    assert_int_equal(t->n_bytes, st->n_bytes);
    assert_int_equal(t->offset % align, 0);
    /* In place: the pointer is into the file bytes, not a copy. */
    assert_ptr_equal(t->data, base + data_offset + t->offset);
    assert_memory_equal(t->data, st->data, st->n_bytes);
  }
  assert_null(brisk_gguf_tensor_at(g, (int64_t)s->n_tensors));
  assert_null(brisk_gguf_tensor_at(g, -1));
  assert_null(brisk_gguf_find_tensor(g, "no.such.tensor"));
  assert_int_equal(brisk_gguf_find_key(g, "no.such.key"), -1);
}

/* A fresh file name under TMPDIR (or /tmp); the caller unlinks it. */
static void temp_path(char *buf, size_t cap) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, cap, "%s/brisk-gguf-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(buf);
  assert_true(fd >= 0);
  close(fd);
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)n + 1);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return p;
}

static void test_round_trip(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_round_trip");
  static const uint32_t alignments[] = {0, 1, 8, 64, 4096};
  uint64_t live0 = brisk_alloc_live_count();
  for (uint32_t version = 2; version <= 3; version++) {
    for (size_t a = 0; a < sizeof alignments / sizeof alignments[0]; a++) {
      spec s;
      build_spec(&r, &s);
      brisk_gguf_writer *w;
      assert_int_equal(write_spec(&s, version, alignments[a], &w), BRISK_OK);
      void *mem;
      size_t size;
      assert_int_equal(brisk_gguf_writer_write_memory(w, &mem, &size), BRISK_OK);

      brisk_gguf *g;
      assert_int_equal(brisk_gguf_open_memory(mem, size, &g), BRISK_OK);
      assert_false(brisk_gguf_is_mapped(g));
      assert_int_equal(brisk_gguf_file_size(g), size);
      assert_ptr_equal(brisk_gguf_bytes(g), mem);
      verify(g, &s, version, alignments[a]);
      brisk_gguf_close(g);

      char path[512];
      temp_path(path, sizeof path);
      assert_int_equal(brisk_gguf_writer_write_file(w, path), BRISK_OK);
      size_t fsize;
      void *fbytes = read_file(path, &fsize);
      assert_int_equal(fsize, size); /* the file and memory writers agree byte for byte */
      assert_memory_equal(fbytes, mem, size);
      free(fbytes);

      assert_int_equal(brisk_gguf_open(path, &g), BRISK_OK);
      assert_true(brisk_gguf_is_mapped(g));
      verify(g, &s, version, alignments[a]);
      brisk_gguf_close(g);

      assert_int_equal(brisk_gguf_open_flags(path, BRISK_GGUF_OPEN_NO_MMAP, &g), BRISK_OK);
      assert_false(brisk_gguf_is_mapped(g));
      assert_int_equal((uintptr_t)brisk_gguf_bytes(g) % 4096, 0); /* page-aligned like mmap */
      verify(g, &s, version, alignments[a]);
      brisk_gguf_close(g);

      unlink(path);
      brisk_free(mem);
      brisk_gguf_writer_free(w);
      free_spec(&s);
    }
  }
  assert_int_equal(brisk_alloc_live_count(), live0);
}

/* The typed setters, and the typed getters' conversions. */
static void test_typed_values(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_typed_values");
  uint32_t u32 = (uint32_t)test_rng_u64(&r) | 0x80000000u;  /* above INT32_MAX */
  int32_t i32 = -(int32_t)(test_rng_u64(&r) % 1000000) - 1; /* negative */
  uint64_t u64 = test_rng_u64(&r) | (1ull << 63);           /* above INT64_MAX */
  float f32 = (float)test_rng_uniform(&r, -1e6, 1e6);
  brisk_gguf_writer *w;
  assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_u32(w, "u32", u32), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_i32(w, "i32", i32), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_u64(w, "u64", u64), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_u64(w, "u64.small", 7), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_f32(w, "f32", f32), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_bool(w, "yes", true), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_bool(w, "no", false), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_str(w, "name", "caf\xc3\xa9"), BRISK_OK);
  unsigned char u8 = 200, i8 = 0x80 /* -128 */;
  double f64 = test_rng_uniform(&r, -1e300, 1e300);
  unsigned char f64le[8];
  memcpy(f64le, &f64, 8); /* the test host is little-endian, as brisk requires */
  assert_int_equal(brisk_gguf_writer_set_scalar(w, "u8", BRISK_GGUF_UINT8, &u8), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_scalar(w, "i8", BRISK_GGUF_INT8, &i8), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_scalar(w, "f64", BRISK_GGUF_FLOAT64, f64le), BRISK_OK);
  const char *toks[] = {"<s>", "", "\xe2\x96\x81the"};
  assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokens", toks, 3), BRISK_OK);
  void *mem;
  size_t size;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &mem, &size), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_gguf *g;
  assert_int_equal(brisk_gguf_open_memory(mem, size, &g), BRISK_OK);

  uint32_t ou32;
  int32_t oi32;
  uint64_t ou64;
  int64_t oi64;
  float of32;
  double of64;
  bool ob;
  brisk_gguf_str os;
  assert_int_equal(brisk_gguf_get_u32(g, "u32", &ou32), BRISK_OK);
  assert_int_equal(ou32, u32);
  assert_int_equal(brisk_gguf_get_i32(g, "u32", &oi32), BRISK_E_FORMAT); /* too big */
  assert_non_null(strstr(brisk_last_error(), "'u32'"));
  assert_int_equal(brisk_gguf_get_i64(g, "u32", &oi64), BRISK_OK);
  assert_int_equal(oi64, (int64_t)u32);
  assert_int_equal(brisk_gguf_get_i32(g, "i32", &oi32), BRISK_OK);
  assert_int_equal(oi32, i32);
  assert_int_equal(brisk_gguf_get_u32(g, "i32", &ou32), BRISK_E_FORMAT); /* negative */
  assert_int_equal(brisk_gguf_get_u64(g, "i32", &ou64), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_i64(g, "i32", &oi64), BRISK_OK);
  assert_int_equal(oi64, i32);
  assert_int_equal(brisk_gguf_get_u64(g, "u64", &ou64), BRISK_OK);
  assert_int_equal(ou64, u64);
  assert_int_equal(brisk_gguf_get_i64(g, "u64", &oi64), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_u32(g, "u64", &ou32), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_u32(g, "u64.small", &ou32), BRISK_OK); /* any int that fits */
  assert_int_equal(ou32, 7);
  assert_int_equal(brisk_gguf_get_u32(g, "u8", &ou32), BRISK_OK);
  assert_int_equal(ou32, 200);
  assert_int_equal(brisk_gguf_get_i32(g, "i8", &oi32), BRISK_OK);
  assert_int_equal(oi32, -128);
  assert_int_equal(brisk_gguf_get_u32(g, "i8", &ou32), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_f32(g, "f32", &of32), BRISK_OK);
  assert_memory_equal(&of32, &f32, 4);
  assert_int_equal(brisk_gguf_get_f64(g, "f64", &of64), BRISK_OK);
  assert_memory_equal(&of64, &f64, 8);
  assert_int_equal(brisk_gguf_get_f32(g, "f64", &of32), BRISK_OK);
  assert_true(of32 == (float)f64);
  assert_int_equal(brisk_gguf_get_f32(g, "u32", &of32), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_u32(g, "f32", &ou32), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "type f32"));
  assert_int_equal(brisk_gguf_get_bool(g, "yes", &ob), BRISK_OK);
  assert_true(ob);
  assert_int_equal(brisk_gguf_get_bool(g, "no", &ob), BRISK_OK);
  assert_false(ob);
  assert_int_equal(brisk_gguf_get_bool(g, "u8", &ob), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_u32(g, "yes", &ou32), BRISK_E_FORMAT); /* bool is not an int */
  assert_int_equal(brisk_gguf_get_str(g, "name", &os), BRISK_OK);
  assert_string_equal(os.ptr, "caf\xc3\xa9");
  assert_int_equal(brisk_gguf_get_str(g, "u8", &os), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_arr(g, "name", NULL, NULL), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_u32(g, "missing", &ou32), BRISK_E_NOT_FOUND);
  assert_non_null(strstr(brisk_last_error(), "'missing'"));
  assert_int_equal(brisk_gguf_get_u32(NULL, "u32", &ou32), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_get_u32(g, NULL, &ou32), BRISK_E_INVALID_ARGUMENT);
  unsigned char raw[8];
  assert_int_equal(brisk_gguf_get_scalar(g, "u8", BRISK_GGUF_INT8, raw), BRISK_E_FORMAT);
  assert_int_equal(brisk_gguf_get_scalar(g, "u8", BRISK_GGUF_STRING, raw),
                   BRISK_E_INVALID_ARGUMENT);

  int64_t it = brisk_gguf_find_key(g, "tokens");
  assert_true(it >= 0);
  assert_string_equal(brisk_gguf_arr_str(g, it, 0).ptr, "<s>");
  assert_int_equal(brisk_gguf_arr_str(g, it, 1).len, 0);
  assert_string_equal(brisk_gguf_arr_str(g, it, 2).ptr, "\xe2\x96\x81the");
  assert_null(brisk_gguf_arr_data(g, brisk_gguf_find_key(g, "u8"))); /* not an array */
  assert_null(brisk_gguf_arr_str(g, brisk_gguf_find_key(g, "u8"), 0).ptr);
  assert_null(brisk_gguf_key(g, -1));
  assert_null(brisk_gguf_key(g, brisk_gguf_n_kv(g)));

  char buf[64], want[64];
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "u32"), buf, sizeof buf);
  snprintf(want, sizeof want, "%u", u32);
  assert_string_equal(buf, want);
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "i32"), buf, sizeof buf);
  snprintf(want, sizeof want, "%d", i32);
  assert_string_equal(buf, want);
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "i8"), buf, sizeof buf);
  assert_string_equal(buf, "-128");
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "yes"), buf, sizeof buf);
  assert_string_equal(buf, "true");
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "name"), buf, sizeof buf);
  assert_string_equal(buf, "caf\xc3\xa9");
  brisk_gguf_format_value(g, it, buf, sizeof buf);
  assert_string_equal(buf, "[array of 3 string]");
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "f32"), buf, sizeof buf);
  assert_true(strtof(buf, NULL) == f32); /* %.9g round-trips every float */
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "f64"), buf, sizeof buf);
  assert_true(strtod(buf, NULL) == f64);
  brisk_gguf_format_value(g, brisk_gguf_find_key(g, "name"), buf, 3); /* truncates */
  assert_string_equal(buf, "ca");
  brisk_gguf_close(g);
  brisk_free(mem);
}

static void expect_invalid(brisk_status st, const char *needle, int line) {
  if (st != BRISK_E_INVALID_ARGUMENT || !strstr(brisk_last_error(), needle)) {
    fprintf(stderr, "line %d: status %d, message '%s', expected '%s'\n", line, st,
            brisk_last_error(), needle);
    fail();
  }
}

/* Bad writer arguments fail with INVALID_ARGUMENT and change nothing: the
 * file written afterwards is the same as one written without them. */
static void test_writer_rejects(void **state) {
  (void)state;
  brisk_gguf_writer *w, *ref;
  assert_int_equal(brisk_gguf_writer_create(1, 0, &w), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_writer_create(4, 0, &w), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_writer_create(3, 3, &w), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "3"));
  assert_int_equal(brisk_gguf_writer_create(3, 0, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_writer_create(3, 64, &w), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_create(3, 64, &ref), BRISK_OK);
  brisk_gguf_writer_free(NULL);

  uint64_t ne[4] = {32, 2, 1, 1};
  unsigned char data[2 * 34] = {1, 2, 3};
  for (brisk_gguf_writer *x = w; x; x = x == w ? ref : NULL) {
    assert_int_equal(brisk_gguf_writer_set_u32(x, "a", 1), BRISK_OK);
    assert_int_equal(
        brisk_gguf_writer_add_tensor(x, "t", BRISK_DTYPE_Q8_0, 2, ne, data, sizeof data), BRISK_OK);
  }
  unsigned char two = 2, b[2] = {1, 5};
  uint64_t bad_ne[4] = {32, 0, 1, 1}, odd_ne[4] = {33, 1, 1, 1};
#define TRY(call, what) expect_invalid((call), (what), __LINE__)
  TRY(brisk_gguf_writer_set_u32(w, "a", 2), "duplicate key 'a'");
  TRY(brisk_gguf_writer_set_u32(w, "", 2), "empty key");
  TRY(brisk_gguf_writer_set_u32(w, NULL, 2), "NULL key");
  TRY(brisk_gguf_writer_set_u32(w, "bad\xff", 2), "UTF-8");
  TRY(brisk_gguf_writer_set_u32(w, "bad\xc0\xaf", 2), "UTF-8"); /* overlong '/' */
  TRY(brisk_gguf_writer_set_u32(w, "two\nlines", 2), "control characters");
  TRY(brisk_gguf_writer_set_u32(w, "general.alignment", 64), "general.alignment");
  TRY(brisk_gguf_writer_set_scalar(w, "b", BRISK_GGUF_BOOL, &two), "bool value 2");
  TRY(brisk_gguf_writer_set_scalar(w, "b", BRISK_GGUF_STRING, &two), "not a scalar");
  TRY(brisk_gguf_writer_set_scalar(w, "b", (brisk_gguf_type)13, &two), "not a scalar");
  TRY(brisk_gguf_writer_set_arr(w, "b", BRISK_GGUF_BOOL, b, 2), "bool element 1 is 5");
  TRY(brisk_gguf_writer_set_arr(w, "b", BRISK_GGUF_ARRAY, b, 2), "arrays of arrays");
  TRY(brisk_gguf_writer_set_arr(w, "b", BRISK_GGUF_UINT8, NULL, 2), "NULL data");
  TRY(brisk_gguf_writer_set_str(w, "b", NULL), "NULL string");
  const char *with_null[] = {"x", NULL};
  TRY(brisk_gguf_writer_set_arr_str(w, "b", with_null, 2), "string 1 is NULL");
  TRY(brisk_gguf_writer_add_tensor(w, "t", BRISK_DTYPE_Q8_0, 2, ne, data, sizeof data),
      "duplicate tensor 't'");
  TRY(brisk_gguf_writer_add_tensor(w, "u", 99, 2, ne, data, sizeof data), "unknown type id 99");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_1, 2, ne, data, sizeof data),
      "unknown type id 9");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 0, ne, data, sizeof data), "n_dims 0");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 5, ne, data, sizeof data), "n_dims 5");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 2, bad_ne, data, sizeof data),
      "dim 1");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 1, odd_ne, data, 34), "row length 33");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 2, ne, data, 34), "34 bytes given");
  TRY(brisk_gguf_writer_add_tensor(w, "u", BRISK_DTYPE_Q8_0, 2, ne, NULL, sizeof data),
      "NULL data");
  TRY(brisk_gguf_writer_add_tensor(w, "", BRISK_DTYPE_Q8_0, 2, ne, data, sizeof data),
      "empty tensor");
#undef TRY
  void *m1, *m2;
  size_t s1, s2;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &m1, &s1), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_write_memory(ref, &m2, &s2), BRISK_OK);
  assert_int_equal(s1, s2);
  assert_memory_equal(m1, m2, s1);
  brisk_free(m1);
  brisk_free(m2);
  assert_int_equal(brisk_gguf_writer_write_file(w, "/nonexistent-dir/x.gguf"), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "/nonexistent-dir/x.gguf"));
  brisk_gguf_writer_free(w);
  brisk_gguf_writer_free(ref);
}

static void test_open_errors(void **state) {
  (void)state;
  brisk_gguf *g = NULL;
  assert_int_equal(brisk_gguf_open("/nonexistent/model.gguf", &g), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "/nonexistent/model.gguf"));
  assert_int_equal(brisk_gguf_open("/tmp", &g), BRISK_E_IO); /* a directory */
  assert_non_null(strstr(brisk_last_error(), "regular file"));
  assert_int_equal(brisk_gguf_open(NULL, &g), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_open_memory(NULL, 10, &g), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_gguf_open_memory("GGUF", 4, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_null(g);
  /* An empty file fails the same way on both paths, naming the file. */
  char path[512];
  temp_path(path, sizeof path);
  assert_int_equal(brisk_gguf_open(path, &g), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), path));
  assert_non_null(strstr(brisk_last_error(), "too short"));
  assert_int_equal(brisk_gguf_open_flags(path, BRISK_GGUF_OPEN_NO_MMAP, &g), BRISK_E_FORMAT);
  unlink(path);
  brisk_gguf_close(NULL);
  /* Accessors on a NULL handle are harmless. */
  assert_int_equal(brisk_gguf_n_kv(NULL), 0);
  assert_int_equal(brisk_gguf_n_tensors(NULL), 0);
  assert_int_equal(brisk_gguf_find_key(NULL, "a"), -1);
  assert_null(brisk_gguf_find_tensor(NULL, "a"));
  char buf[8] = "x";
  brisk_gguf_format_value(NULL, 0, buf, sizeof buf);
  assert_string_equal(buf, "");
}

/* Many keys and tensors: lookups through the hash index find each one. */
static void test_many_names(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_many_names");
  size_t n = 3000 + test_rng_u64(&r) % 1000;
  brisk_gguf_writer *w;
  assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
  float v = 1.0f;
  uint64_t ne[1] = {1};
  char name[64];
  for (size_t i = 0; i < n; i++) {
    snprintf(name, sizeof name, "key.%zu", i);
    assert_int_equal(brisk_gguf_writer_set_u64(w, name, i * 7), BRISK_OK);
    snprintf(name, sizeof name, "blk.%zu.w", i);
    assert_int_equal(brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, 1, ne, &v, 4),
                     BRISK_OK);
  }
  void *mem;
  size_t size;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &mem, &size), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_gguf *g;
  assert_int_equal(brisk_gguf_open_memory(mem, size, &g), BRISK_OK);
  for (size_t i = 0; i < n; i++) {
    uint64_t got;
    snprintf(name, sizeof name, "key.%zu", i);
    assert_int_equal(brisk_gguf_get_u64(g, name, &got), BRISK_OK);
    assert_int_equal(got, i * 7);
    snprintf(name, sizeof name, "blk.%zu.w", i);
    const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, name);
    assert_non_null(t);
    assert_ptr_equal(t, brisk_gguf_tensor_at(g, (int64_t)i));
  }
  brisk_gguf_close(g);
  brisk_free(mem);
}

/* Allocation failures: every allocation of open_memory and of the writer,
 * failed in turn, gives OUT_OF_MEMORY with nothing leaked. */
typedef struct oom_ctx {
  const void *data;
  size_t size;
  spec *s;
  const char *path;
  uint32_t flags;
} oom_ctx;

static brisk_status oom_open(void *arg) {
  oom_ctx *c = arg;
  brisk_gguf *g;
  brisk_status st = brisk_gguf_open_memory(c->data, c->size, &g);
  if (st) return st;
  brisk_gguf_close(g);
  return BRISK_OK;
}

static brisk_status oom_write(void *arg) {
  oom_ctx *c = arg;
  brisk_gguf_writer *w;
  brisk_status st = write_spec(c->s, 3, 64, &w);
  if (st) return st;
  void *mem;
  size_t size;
  st = brisk_gguf_writer_write_memory(w, &mem, &size);
  brisk_gguf_writer_free(w);
  if (!st) brisk_free(mem);
  return st;
}

static brisk_status oom_open_file(void *arg) {
  oom_ctx *c = arg;
  brisk_gguf *g;
  brisk_status st = brisk_gguf_open_flags(c->path, c->flags, &g);
  if (st) return st;
  brisk_gguf_close(g);
  return BRISK_OK;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_allocation_failures");
  spec *s = malloc(sizeof *s);
  build_spec(&r, s);
  oom_ctx c = {.s = s};
  uint64_t n_write = test_every_allocation_fails(oom_write, &c);
  assert_true(n_write > 10);
  brisk_gguf_writer *w;
  assert_int_equal(write_spec(s, 3, 64, &w), BRISK_OK);
  void *mem;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &mem, &c.size), BRISK_OK);
  brisk_gguf_writer_free(w);
  c.data = mem;
  uint64_t n_open = test_every_allocation_fails(oom_open, &c);
  assert_true(n_open > 3);
  /* The file paths too: mmap, and read() into a buffer (one more allocation). */
  char path[512];
  temp_path(path, sizeof path);
  FILE *f = fopen(path, "wb");
  assert_int_equal(fwrite(mem, 1, c.size, f), c.size);
  fclose(f);
  c.path = path;
  c.flags = 0;
  assert_int_equal(test_every_allocation_fails(oom_open_file, &c), n_open);
  c.flags = BRISK_GGUF_OPEN_NO_MMAP;
  assert_int_equal(test_every_allocation_fails(oom_open_file, &c), n_open + 1);
  unlink(path);
  brisk_free(mem);
  free_spec(s);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_typed_values),
      cmocka_unit_test(test_writer_rejects), cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_many_names),     cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
