/* Fuzz target: GGUF bytes -> brisk_gguf_open_memory, then every accessor
 * over everything the file holds. Aborts when an opened file breaks what
 * gguf.h promises (tensor data inside the file and aligned, names found
 * again by lookup, strings NUL-terminated) or a failure has no message. */
#include "fuzz_target.h"

#include "core/dtype.h"
#include "format/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_gguf: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Folds bytes into a sum the compiler cannot drop, so every byte is read. */
static volatile uint64_t sink;
static void touch(const void *p, uint64_t n) {
  const unsigned char *b = p;
  uint64_t h = 0;
  for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
  sink += h;
}

static void walk_kv(const brisk_gguf *g, int64_t i) {
  const char *key = brisk_gguf_key(g, i);
  CHECK(key && key[0]);
  CHECK(brisk_gguf_find_key(g, key) == i);
  brisk_gguf_type type = brisk_gguf_kv_type(g, i);
  char text[128];
  brisk_gguf_format_value(g, i, text, sizeof text);
  CHECK(strlen(text) < sizeof text);
  if (type == BRISK_GGUF_STRING) {
    brisk_gguf_str s = brisk_gguf_kv_str(g, i);
    CHECK(s.ptr && s.ptr[s.len] == 0);
    touch(s.ptr, s.len);
  } else if (type == BRISK_GGUF_ARRAY) {
    brisk_gguf_type elem;
    uint64_t n;
    CHECK(brisk_gguf_get_arr(g, key, &elem, &n) == BRISK_OK);
    CHECK(elem == brisk_gguf_kv_arr_type(g, i) && n == brisk_gguf_kv_arr_len(g, i));
    CHECK(elem != BRISK_GGUF_ARRAY);
    if (elem == BRISK_GGUF_STRING) {
      for (uint64_t j = 0; j < n; j++) {
        brisk_gguf_str s = brisk_gguf_arr_str(g, i, j);
        CHECK(s.ptr && s.ptr[s.len] == 0);
        touch(s.ptr, s.len);
      }
      CHECK(brisk_gguf_arr_str(g, i, n).ptr == NULL);
    } else if (n) {
      const unsigned char *d = brisk_gguf_arr_data(g, i);
      const unsigned char *base = brisk_gguf_bytes(g);
      CHECK(d >= base && d + n * brisk_gguf_type_size(elem) <= base + brisk_gguf_file_size(g));
      touch(d, n * brisk_gguf_type_size(elem));
    }
  } else {
    const unsigned char *v = brisk_gguf_kv_scalar(g, i);
    CHECK(v);
    touch(v, brisk_gguf_type_size(type));
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    /* Each getter either succeeds or explains itself. */
    brisk_status st[] = {brisk_gguf_get_u32(g, key, &u32), brisk_gguf_get_i32(g, key, &i32),
                         brisk_gguf_get_u64(g, key, &u64), brisk_gguf_get_i64(g, key, &i64),
                         brisk_gguf_get_f32(g, key, &f32), brisk_gguf_get_f64(g, key, &f64),
                         brisk_gguf_get_bool(g, key, &b)};
    for (size_t k = 0; k < sizeof st / sizeof st[0]; k++)
      CHECK(st[k] == BRISK_OK || st[k] == BRISK_E_FORMAT);
  }
}

static void walk_tensor(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
  CHECK(t && t->name && t->name[0]);
  CHECK(brisk_gguf_find_tensor(g, t->name) == t);
  CHECK(t->n_dims >= 1 && t->n_dims <= BRISK_GGUF_MAX_DIMS);
  const brisk_dtype_info *info = brisk_dtype_get(t->type);
  CHECK(info);
  uint64_t row_bytes;
  CHECK(brisk_dtype_row_bytes(t->type, t->ne[0], &row_bytes));
  CHECK(t->offset % brisk_gguf_alignment(g) == 0);
  const unsigned char *base = brisk_gguf_bytes(g);
  const unsigned char *d = t->data;
  CHECK(d == base + brisk_gguf_data_offset(g) + t->offset);
  CHECK(t->n_bytes > 0 && t->n_bytes <= brisk_gguf_file_size(g) &&
        (uint64_t)(d - base) <= brisk_gguf_file_size(g) - t->n_bytes);
  touch(d, 1);
  touch(d + t->n_bytes - 1, 1); /* first and last byte: the extent is inside the input */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  brisk_gguf *g = NULL;
  brisk_status st = brisk_gguf_open_memory(data, size, &g);
  if (st != BRISK_OK) {
    CHECK(st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED || st == BRISK_E_OUT_OF_MEMORY);
    CHECK(g == NULL && brisk_last_error()[0] != 0 && !strchr(brisk_last_error(), '\n'));
    return 0;
  }
  uint32_t align = brisk_gguf_alignment(g);
  CHECK(align && !(align & (align - 1)));
  CHECK(brisk_gguf_version(g) == 2 || brisk_gguf_version(g) == 3);
  for (int64_t i = 0; i < brisk_gguf_n_kv(g); i++) walk_kv(g, i);
  for (int64_t i = 0; i < brisk_gguf_n_tensors(g); i++) walk_tensor(g, i);
  brisk_gguf_close(g);
  return 0;
}
