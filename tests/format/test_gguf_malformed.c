/* Malformed GGUF files, built byte by byte in the test: each must fail with
 * the expected status and a one-line message naming the culprit, and a
 * valid file truncated at every byte offset or with random bytes changed
 * must fail cleanly (never crash; ASan/UBSan builds check the reads). */
#include "test_support.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdlib.h>
#include <string.h>

typedef struct buf {
  unsigned char *p; /* [len] */
  size_t len, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
}
static void put_u32(buf *b, uint32_t v) {
  unsigned char le[4];
  for (int k = 0; k < 4; k++) le[k] = (unsigned char)(v >> (8 * k));
  put(b, le, 4);
}
static void put_u64(buf *b, uint64_t v) {
  unsigned char le[8];
  for (int k = 0; k < 8; k++) le[k] = (unsigned char)(v >> (8 * k));
  put(b, le, 8);
}
static void put_str(buf *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  put(b, "GGUF", 4);
  put_u32(b, version);
  put_u64(b, n_tensors);
  put_u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) {
  put_str(b, key);
  put_u32(b, BRISK_GGUF_UINT32);
  put_u32(b, v);
}
static void kv_str(buf *b, const char *key, const char *v) {
  put_str(b, key);
  put_u32(b, BRISK_GGUF_STRING);
  put_str(b, v);
}
static void tensor_info(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset) {
  put_str(b, name);
  put_u32(b, n_dims);
  for (uint32_t d = 0; d < n_dims; d++) put_u64(b, ne[d]);
  put_u32(b, type);
  put_u64(b, offset);
}
static void pad(buf *b, uint64_t align) {
  while (b->len % align) put(b, "", 1);
}
static void filler(buf *b, size_t n) {
  for (size_t i = 0; i < n; i++) put(b, "\x5a", 1);
}

/* A file with one kv and one tensor of the given info and `bytes` of data. */
static void one_tensor(buf *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                       size_t bytes) {
  header(b, 3, 1, 1);
  kv_str(b, "general.architecture", "llama");
  tensor_info(b, "w", n_dims, ne, type, offset);
  pad(b, 32);
  filler(b, bytes);
}

#define CASE(name) static void name(buf *b)
CASE(bad_magic) {
  put(b, "GGML\x03\0\0\0", 8);
  filler(b, 16);
}
CASE(too_short) { put(b, "GG", 2); }
CASE(version_1) { header(b, 1, 0, 0); }
CASE(version_4) { header(b, 4, 0, 0); }
CASE(big_endian) {
  put(b, "GGUF\0\0\0\x03", 8);
  filler(b, 16);
}
CASE(huge_n_kv) {
  header(b, 3, 0, 1ull << 62);
  kv_u32(b, "a", 1);
}
CASE(huge_n_tensors) {
  header(b, 3, UINT64_MAX, 1);
  kv_u32(b, "a", 1);
}
CASE(truncated_header) { put(b, "GGUF\x03\0\0\0\0\0", 10); }
CASE(huge_key_length) {
  header(b, 3, 0, 1);
  put_u64(b, UINT64_MAX);
  filler(b, 20);
}
CASE(empty_key) {
  header(b, 3, 0, 1);
  put_u64(b, 0);
  put_u32(b, 4);
  put_u32(b, 1);
}
CASE(invalid_utf8_key) {
  header(b, 3, 0, 1);
  kv_u32(b, "bad\xff\xfekey", 1);
}
CASE(surrogate_key) {
  header(b, 3, 0, 1);
  kv_u32(b, "k\xed\xa0\x80", 1);
} /* U+D800 */
CASE(nul_in_key) {
  header(b, 3, 0, 1);
  put_u64(b, 3);
  put(b, "a\0b", 3);
  put_u32(b, BRISK_GGUF_UINT8);
  put(b, "\1", 1);
}
CASE(newline_in_key) {
  header(b, 3, 0, 1);
  kv_u32(b, "a\nb", 1);
}
CASE(duplicate_key) {
  header(b, 3, 0, 3);
  kv_u32(b, "a", 1);
  kv_u32(b, "b", 2);
  kv_u32(b, "a", 3);
}
CASE(unknown_value_type) {
  header(b, 3, 0, 1);
  put_str(b, "weird");
  put_u32(b, 13);
  put_u32(b, 0);
}
CASE(huge_string_length) {
  header(b, 3, 0, 1);
  put_str(b, "general.name");
  put_u32(b, BRISK_GGUF_STRING);
  put_u64(b, 1ull << 60);
  filler(b, 40);
}
CASE(huge_array_length) {
  header(b, 3, 0, 1);
  put_str(b, "scores");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_FLOAT32);
  put_u64(b, 1ull << 62); /* * 4 bytes overflows 64 bits */
  filler(b, 64);
}
CASE(long_array) {
  header(b, 3, 0, 1);
  put_str(b, "ids");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_INT32);
  put_u64(b, 1000);
  filler(b, 64);
}
CASE(huge_string_array) {
  header(b, 3, 0, 1);
  put_str(b, "tokenizer.ggml.tokens");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_STRING);
  put_u64(b, 1ull << 40);
  filler(b, 64);
}
CASE(huge_string_in_array) {
  header(b, 3, 0, 1);
  put_str(b, "tokenizer.ggml.tokens");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_STRING);
  put_u64(b, 3);
  put_str(b, "<s>");
  put_u64(b, UINT64_MAX - 3);
  filler(b, 64);
}
CASE(array_of_arrays) {
  header(b, 3, 0, 1);
  put_str(b, "nested");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u64(b, 1);
  put_u32(b, BRISK_GGUF_UINT8);
  put_u64(b, 1);
  put(b, "\1", 1);
}
CASE(unknown_elem_type) {
  header(b, 3, 0, 1);
  put_str(b, "odd");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, 99);
  put_u64(b, 0);
}
CASE(bool_2) {
  header(b, 3, 0, 1);
  put_str(b, "flag");
  put_u32(b, BRISK_GGUF_BOOL);
  put(b, "\2", 1);
}
CASE(bool_array_3) {
  header(b, 3, 0, 1);
  put_str(b, "flags");
  put_u32(b, BRISK_GGUF_ARRAY);
  put_u32(b, BRISK_GGUF_BOOL);
  put_u64(b, 3);
  put(b, "\1\3\0", 3);
}
static void aligned(buf *b, uint32_t align) {
  uint64_t ne[2] = {32, 2};
  header(b, 3, 1, 1);
  kv_u32(b, "general.alignment", align);
  tensor_info(b, "w", 2, ne, BRISK_DTYPE_F32, 0);
  pad(b, 32);
  filler(b, 256);
}
CASE(alignment_0) { aligned(b, 0); }
CASE(alignment_3) { aligned(b, 3); }
CASE(alignment_2_31) { aligned(b, 1u << 31); }
CASE(alignment_u64) {
  header(b, 3, 0, 1);
  put_str(b, "general.alignment");
  put_u32(b, BRISK_GGUF_UINT64);
  put_u64(b, 32);
}
CASE(n_dims_0) { one_tensor(b, 0, NULL, BRISK_DTYPE_F32, 0, 64); }
CASE(n_dims_5) {
  uint64_t ne[5] = {1, 1, 1, 1, 1};
  one_tensor(b, 5, ne, BRISK_DTYPE_F32, 0, 64);
}
CASE(zero_dim) {
  uint64_t ne[2] = {32, 0};
  one_tensor(b, 2, ne, BRISK_DTYPE_F32, 0, 64);
}
CASE(dims_overflow) {
  uint64_t ne[3] = {1ull << 32, 1ull << 16, 1ull << 16}; /* 2^64 elements */
  one_tensor(b, 3, ne, BRISK_DTYPE_I8, 0, 64);
}
CASE(dims_2_63) {
  uint64_t ne[2] = {1ull << 32, 1ull << 31}; /* exactly 2^63: one past INT64_MAX */
  one_tensor(b, 2, ne, BRISK_DTYPE_I8, 0, 64);
}
CASE(bytes_overflow) {
  uint64_t ne[2] = {1ull << 31, 1ull << 31}; /* 2^62 elements of 8 bytes */
  one_tensor(b, 2, ne, BRISK_DTYPE_F64, 0, 64);
}
CASE(row_not_blocks) {
  uint64_t ne[2] = {33, 2};
  one_tensor(b, 2, ne, BRISK_DTYPE_Q4_0, 0, 64);
}
CASE(unknown_tensor_type) {
  uint64_t ne[1] = {16};
  one_tensor(b, 1, ne, 99, 0, 64);
}
CASE(unlisted_tensor_type) {
  uint64_t ne[1] = {32};
  one_tensor(b, 1, ne, BRISK_DTYPE_Q8_1, 0, 64); /* a ggml type brisk does not read */
}
CASE(offset_past_eof) {
  uint64_t ne[2] = {64, 4};
  one_tensor(b, 2, ne, BRISK_DTYPE_F32, 1024, 1024);
}
CASE(data_past_eof) {
  uint64_t ne[2] = {64, 4};
  one_tensor(b, 2, ne, BRISK_DTYPE_F32, 0, 1023); /* one byte short */
}
CASE(misaligned_offset) {
  uint64_t ne[1] = {4};
  one_tensor(b, 1, ne, BRISK_DTYPE_F32, 4, 64);
}
CASE(offset_overflow) {
  uint64_t ne[1] = {64};
  one_tensor(b, 1, ne, BRISK_DTYPE_F32, UINT64_MAX - 31, 64);
}
CASE(no_data_section) {
  uint64_t ne[1] = {8};
  header(b, 3, 1, 0);
  tensor_info(b, "w", 1, ne, BRISK_DTYPE_F32, 0); /* ends at 24 + 8+1+4+8+4+8 = 57, pads to 64 */
}
CASE(duplicate_tensor) {
  uint64_t ne[1] = {8};
  header(b, 3, 2, 0);
  tensor_info(b, "blk.0.w", 1, ne, BRISK_DTYPE_F32, 0);
  tensor_info(b, "blk.0.w", 1, ne, BRISK_DTYPE_F32, 32);
  pad(b, 32);
  filler(b, 64);
}
CASE(empty_tensor_name) {
  uint64_t ne[1] = {8};
  header(b, 3, 1, 0);
  tensor_info(b, "", 1, ne, BRISK_DTYPE_F32, 0);
  pad(b, 32);
  filler(b, 32);
}
CASE(invalid_utf8_tensor_name) {
  uint64_t ne[1] = {8};
  header(b, 3, 1, 0);
  tensor_info(b, "blk.\xc0\x80", 1, ne, BRISK_DTYPE_F32, 0); /* overlong NUL */
  pad(b, 32);
  filler(b, 32);
}
CASE(truncated_dims) {
  header(b, 3, 1, 0);
  put_str(b, "w");
  put_u32(b, 4);
  put_u64(b, 8);
  put_u64(b, 8); /* 2 of 4 dims, then the file ends (past the minimum size check) */
  filler(b, 4);
}

typedef struct malformed_case {
  const char *name;
  void (*build)(buf *b);
  brisk_status status;
  const char *needle[3]; /* all must appear in the message */
} malformed_case;

#define F BRISK_E_FORMAT
#define U BRISK_E_UNSUPPORTED
static const malformed_case cases[] = {
    {"bad_magic", bad_magic, F, {"magic", "47 47 4d 4c"}},
    {"too_short", too_short, F, {"2 bytes", "too short"}},
    {"truncated_header", truncated_header, F, {"truncated", "n_tensors"}},
    {"version_1", version_1, U, {"version 1 "}},
    {"version_4", version_4, U, {"version 4 "}},
    {"big_endian", big_endian, U, {"big-endian"}},
    {"huge_n_kv", huge_n_kv, F, {"n_kv 4611686018427387904"}},
    {"huge_n_tensors", huge_n_tensors, F, {"n_tensors 18446744073709551615"}},
    {"huge_key_length", huge_key_length, F, {"key #0", "name length 18446744073709551615"}},
    {"empty_key", empty_key, F, {"key #0", "empty name"}},
    {"invalid_utf8_key", invalid_utf8_key, F, {"'bad\\xff\\xfekey'", "UTF-8"}},
    {"surrogate_key", surrogate_key, F, {"'k\\xed\\xa0\\x80'", "UTF-8"}},
    {"nul_in_key", nul_in_key, F, {"'a\\x00b'", "control characters"}},
    {"newline_in_key", newline_in_key, F, {"'a\\x0ab'", "control characters"}},
    {"duplicate_key", duplicate_key, F, {"duplicate key 'a'", "#0 and #2"}},
    {"unknown_value_type", unknown_value_type, F, {"'weird'", "unknown value type 13"}},
    {"huge_string_length", huge_string_length, F, {"'general.name'", "1152921504606846976"}},
    {"huge_array_length", huge_array_length, F, {"'scores'", "4611686018427387904 f32"}},
    {"long_array", long_array, F, {"'ids'", "array of 1000 i32"}},
    {"huge_string_array",
     huge_string_array,
     F,
     {"'tokenizer.ggml.tokens'", "1099511627776 strings"}},
    {"huge_string_in_array", huge_string_in_array, F, {"string 1 of 3", "18446744073709551612"}},
    {"array_of_arrays", array_of_arrays, F, {"'nested'", "arrays of arrays"}},
    {"unknown_elem_type", unknown_elem_type, F, {"'odd'", "element type 99"}},
    {"bool_2", bool_2, F, {"'flag'", "bool value 2"}},
    {"bool_array_3", bool_array_3, F, {"'flags'", "element 1", "is 3"}},
    {"alignment_0", alignment_0, F, {"general.alignment", "0 is not a power of two"}},
    {"alignment_3", alignment_3, F, {"general.alignment", "3 is not a power of two"}},
    {"alignment_2_31", alignment_2_31, F, {"alignment 2147483648", "past the file size"}},
    {"alignment_u64", alignment_u64, F, {"general.alignment", "type u64"}},
    {"n_dims_0", n_dims_0, F, {"tensor 'w'", "n_dims 0"}},
    {"n_dims_5", n_dims_5, F, {"tensor 'w'", "n_dims 5"}},
    {"zero_dim", zero_dim, F, {"tensor 'w'", "dim 1 of shape [32, 0] is 0"}},
    {"dims_overflow", dims_overflow, F, {"tensor 'w'", "[4294967296, 65536, 65536]", "2^63-1"}},
    {"dims_2_63", dims_2_63, F, {"tensor 'w'", "2^63-1"}},
    {"bytes_overflow", bytes_overflow, F, {"tensor 'w'", "f64", "overflows"}},
    {"row_not_blocks", row_not_blocks, F, {"tensor 'w'", "row length 33", "q4_0 block size 32"}},
    {"unknown_tensor_type", unknown_tensor_type, U, {"tensor 'w'", "type id 99"}},
    {"unlisted_tensor_type", unlisted_tensor_type, U, {"tensor 'w'", "type id 9"}},
    {"offset_past_eof", offset_past_eof, F, {"tensor 'w'", "ends past file size"}},
    {"data_past_eof", data_past_eof, F, {"tensor 'w'", "data [", "ends past file size"}},
    {"misaligned_offset", misaligned_offset, F, {"tensor 'w'", "offset 4", "alignment 32"}},
    {"offset_overflow", offset_overflow, F, {"tensor 'w'", "18446744073709551584", "overflows"}},
    {"no_data_section", no_data_section, F, {"data section starts at offset 64", "file size 57"}},
    {"duplicate_tensor", duplicate_tensor, F, {"duplicate tensor name 'blk.0.w'"}},
    {"empty_tensor_name", empty_tensor_name, F, {"tensor #0", "empty name"}},
    {"invalid_utf8_tensor_name", invalid_utf8_tensor_name, F, {"'blk.\\xc0\\x80'", "UTF-8"}},
    {"truncated_dims", truncated_dims, F, {"truncated", "tensor 'w'", "4 dims"}},
};
#undef F
#undef U

/* Opens exactly-sized heap copies, so ASan flags any read past the end. */
static brisk_status open_copy(const unsigned char *p, size_t n, brisk_gguf **g) {
  unsigned char *copy = malloc(n ? n : 1);
  if (n) memcpy(copy, p, n);
  brisk_status st = brisk_gguf_open_memory(copy, n, g);
  if (st == BRISK_OK) {
    /* Walk it all, as a caller would, while the bytes are alive. */
    char text[256];
    for (int64_t i = 0; i < brisk_gguf_n_kv(*g); i++)
      brisk_gguf_format_value(*g, i, text, sizeof text);
    brisk_gguf_close(*g);
    *g = NULL;
  }
  free(copy);
  return st;
}

static void check_message(void) {
  const char *msg = brisk_last_error();
  assert_true(strlen(msg) > 10);
  assert_null(strchr(msg, '\n')); /* one line */
}

static void test_malformed_cases(void **state) {
  (void)state;
  uint64_t live0 = brisk_alloc_live_count();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const malformed_case *c = &cases[i];
    buf b = {0};
    c->build(&b);
    brisk_gguf *g = NULL;
    brisk_status st = open_copy(b.p, b.len, &g);
    const char *msg = brisk_last_error();
    bool ok = st == c->status;
    for (int k = 0; k < 3 && c->needle[k]; k++) ok = ok && strstr(msg, c->needle[k]);
    if (!ok) {
      fprintf(stderr, "case %s: status %d (want %d), message: %s\n", c->name, st, c->status, msg);
      fail();
    }
    check_message();
    assert_null(g);
    assert_int_equal(brisk_alloc_live_count(), live0);
    free(b.p);
  }
}

/* The big-endian, v1 and huge-count cases stop before any allocation. */
static void test_huge_counts_fail_fast(void **state) {
  (void)state;
  void (*builders[])(buf *) = {huge_n_kv, huge_n_tensors, huge_string_array, huge_array_length};
  for (size_t i = 0; i < sizeof builders / sizeof builders[0]; i++) {
    buf b = {0};
    builders[i](&b);
    brisk_alloc_fail_at(0, 0);
    brisk_gguf *g = NULL;
    assert_int_equal(brisk_gguf_open_memory(b.p, b.len, &g), BRISK_E_FORMAT);
    /* The handle, a few kvs and the arena: a handful, not one per claimed item. */
    assert_true(brisk_alloc_fail_at(0, 0) < 8);
    free(b.p);
  }
}

/* A small valid file with every kind of value and a few tensors. */
static void valid_file(test_rng *r, void **mem, size_t *size, uint64_t *data_end) {
  brisk_gguf_writer *w;
  assert_int_equal(brisk_gguf_writer_create(3, 32, &w), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_str(w, "general.architecture", "llama"), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_u32(w, "llama.block_count", 2), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_f32(w, "llama.rope.freq_base", 1e4f), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_bool(w, "flag", true), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_u64(w, "big", 1ull << 40), BRISK_OK);
  const char *toks[] = {"<unk>", "", "\xe2\x96\x81hi", "x"};
  assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4), BRISK_OK);
  float scores[4];
  for (int i = 0; i < 4; i++) scores[i] = (float)test_rng_normal(r);
  assert_int_equal(brisk_gguf_writer_set_arr(w, "scores", BRISK_GGUF_FLOAT32, scores, 4), BRISK_OK);
  unsigned char bools[3] = {1, 0, 1};
  assert_int_equal(brisk_gguf_writer_set_arr(w, "bools", BRISK_GGUF_BOOL, bools, 3), BRISK_OK);
  unsigned char data[2 * 34 * 3];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)test_rng_u64(r);
  uint64_t ne_q[2] = {32, 3}, ne_f[1] = {5};
  assert_int_equal(brisk_gguf_writer_add_tensor(w, "a", BRISK_DTYPE_Q8_0, 2, ne_q, data, 102),
                   BRISK_OK);
  assert_int_equal(brisk_gguf_writer_add_tensor(w, "b", BRISK_DTYPE_F32, 1, ne_f, data, 20),
                   BRISK_OK);
  assert_int_equal(brisk_gguf_writer_write_memory(w, mem, size), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_gguf *g;
  assert_int_equal(brisk_gguf_open_memory(*mem, *size, &g), BRISK_OK);
  const brisk_gguf_tensor *last = brisk_gguf_tensor_at(g, 1);
  *data_end = brisk_gguf_data_offset(g) + last->offset + last->n_bytes;
  brisk_gguf_close(g);
}

static void test_truncated_everywhere(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_truncated_everywhere");
  void *mem;
  size_t size;
  uint64_t data_end;
  valid_file(&r, &mem, &size, &data_end);
  uint64_t live0 = brisk_alloc_live_count();
  for (size_t n = 0; n < size; n++) {
    brisk_gguf *g = NULL;
    brisk_status st = open_copy(mem, n, &g);
    if (n >= data_end) { /* only the padding after the last tensor is gone */
      assert_int_equal(st, BRISK_OK);
      continue;
    }
    if (st != BRISK_E_FORMAT) {
      fprintf(stderr, "truncated at %zu of %zu: status %d: %s\n", n, size, st, brisk_last_error());
      fail();
    }
    check_message();
    assert_int_equal(brisk_alloc_live_count(), live0);
  }
  brisk_free(mem);
}

/* Random byte changes: any outcome but a crash, a leak or a silent error. */
static void test_random_corruption(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gguf_random_corruption");
  void *mem;
  size_t size;
  uint64_t data_end;
  valid_file(&r, &mem, &size, &data_end);
  unsigned char *copy = malloc(size);
  uint64_t live0 = brisk_alloc_live_count();
  int failed = 0;
  for (int iter = 0; iter < 20000; iter++) {
    memcpy(copy, mem, size);
    int n_changes = 1 + (int)(test_rng_u64(&r) % 4);
    for (int k = 0; k < n_changes; k++) {
      /* Mostly the metadata, where the parser looks; one byte or one u64 field. */
      size_t at = test_rng_u64(&r) % (size_t)data_end;
      if (test_rng_u64(&r) % 4 == 0 && at + 8 <= size) {
        uint64_t v = test_rng_u64(&r) >> (test_rng_u64(&r) % 64);
        memcpy(copy + at, &v, 8);
      } else {
        copy[at] = (unsigned char)test_rng_u64(&r);
      }
    }
    brisk_gguf *g = NULL;
    brisk_status st = open_copy(copy, size, &g);
    if (st) {
      failed++;
      assert_true(st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED);
      check_message();
    }
    assert_int_equal(brisk_alloc_live_count(), live0);
  }
  assert_true(failed > 1000); /* the corruption did reach the parser */
  free(copy);
  brisk_free(mem);
}

/* Files without tensors need no padding: the data section may start past
 * the end (gguf-py writes vocabulary files so). */
static void test_no_tensors_unpadded(void **state) {
  (void)state;
  buf b = {0};
  header(&b, 2, 0, 1);
  kv_str(&b, "general.architecture", "gpt2");
  brisk_gguf *g = NULL;
  assert_int_equal(brisk_gguf_open_memory(b.p, b.len, &g), BRISK_OK);
  assert_int_equal(brisk_gguf_version(g), 2);
  assert_true(brisk_gguf_data_offset(g) > b.len);
  assert_int_equal(brisk_gguf_data_offset(g) % 32, 0);
  brisk_gguf_close(g);
  free(b.p);
}

/* Each valid variant of the tensor cases opens, so the failures above come
 * from the one field each case breaks. */
static void test_controls_are_valid(void **state) {
  (void)state;
  buf b = {0};
  uint64_t ne[2] = {32, 2};
  one_tensor(&b, 2, ne, BRISK_DTYPE_Q4_0, 0, 36);
  brisk_gguf *g = NULL;
  assert_int_equal(brisk_gguf_open_memory(b.p, b.len, &g), BRISK_OK);
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, "w");
  assert_non_null(t);
  assert_int_equal(t->n_bytes, 36);
  brisk_gguf_close(g);
  free(b.p);
  memset(&b, 0, sizeof b);
  aligned(&b, 64);
  assert_int_equal(brisk_gguf_open_memory(b.p, b.len, &g), BRISK_OK);
  assert_int_equal(brisk_gguf_alignment(g), 64);
  brisk_gguf_close(g);
  free(b.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_malformed_cases),      cmocka_unit_test(test_huge_counts_fail_fast),
      cmocka_unit_test(test_truncated_everywhere), cmocka_unit_test(test_random_corruption),
      cmocka_unit_test(test_no_tensors_unpadded),  cmocka_unit_test(test_controls_are_valid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
