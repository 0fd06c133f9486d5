/* Helper for test_gguf_py.py, which compares brisk's view of GGUF files
 * with gguf-py's (an independent reader and writer):
 *   test_gguf_dump dump FILE        prints FILE as brisk reads it
 *   test_gguf_dump write FILE SEED  writes a random file with brisk's writer
 * Dump lines: "version V", "alignment A", one "kv KEY TYPE VALUE" per key in
 * order, one "tensor NAME TYPE NE0,NE1,.. OFFSET BYTES HASH" per tensor.
 * Integers print in decimal, floats as their bit patterns in hex, strings as
 * hex bytes ("-" if empty), arrays as "ELEM N HASH". HASH is the weighted
 * byte sum below over the raw bytes (string arrays: each string then a 0). */
#include "core/dtype.h"
#include "format/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sum of byte[i] * (((i * 2654435761) mod 2^32) + 1) mod 2^64: order
 * sensitive and cheap to vectorize in numpy. `pos` carries i across calls. */
static uint64_t wsum(uint64_t h, const void *p, uint64_t n, uint64_t *pos) {
  const unsigned char *b = p;
  for (uint64_t k = 0; k < n; k++, (*pos)++) h += b[k] * (((*pos * 2654435761u) & 0xffffffffu) + 1);
  return h;
}

static void print_hex(const void *p, uint64_t n) {
  const unsigned char *b = p;
  if (n == 0) printf("-");
  for (uint64_t i = 0; i < n; i++) printf("%02x", b[i]);
}

static void print_scalar(brisk_gguf_type t, const unsigned char *v) {
  uint64_t raw = 0;
  for (int k = (int)brisk_gguf_type_size(t) - 1; k >= 0; k--) raw = raw << 8 | v[k];
  switch (t) {
  case BRISK_GGUF_INT8: printf("%d", (int8_t)raw); break;
  case BRISK_GGUF_INT16: printf("%d", (int16_t)raw); break;
  case BRISK_GGUF_INT32: printf("%" PRId32, (int32_t)raw); break;
  case BRISK_GGUF_INT64: printf("%" PRId64, (int64_t)raw); break;
  case BRISK_GGUF_FLOAT32: printf("0x%08" PRIx64, raw); break;
  case BRISK_GGUF_FLOAT64: printf("0x%016" PRIx64, raw); break;
  default: printf("%" PRIu64, raw); break;
  }
}

static int dump(const char *path) {
  brisk_gguf *g;
  if (brisk_gguf_open(path, &g) != BRISK_OK) {
    fprintf(stderr, "%s\n", brisk_last_error());
    return 1;
  }
  printf("version %u\nalignment %u\n", brisk_gguf_version(g), brisk_gguf_alignment(g));
  for (int64_t i = 0; i < brisk_gguf_n_kv(g); i++) {
    brisk_gguf_type t = brisk_gguf_kv_type(g, i);
    printf("kv %s %s ", brisk_gguf_key(g, i), brisk_gguf_type_name(t));
    if (t == BRISK_GGUF_STRING) {
      brisk_gguf_str s = brisk_gguf_kv_str(g, i);
      print_hex(s.ptr, s.len);
    } else if (t == BRISK_GGUF_ARRAY) {
      brisk_gguf_type et = brisk_gguf_kv_arr_type(g, i);
      uint64_t n = brisk_gguf_kv_arr_len(g, i), h = 0, pos = 0;
      if (et == BRISK_GGUF_STRING) {
        for (uint64_t j = 0; j < n; j++) {
          brisk_gguf_str s = brisk_gguf_arr_str(g, i, j);
          h = wsum(h, s.ptr, s.len + 1, &pos); /* the string and its NUL */
        }
      } else {
        h = wsum(h, brisk_gguf_arr_data(g, i), n * brisk_gguf_type_size(et), &pos);
      }
      printf("%s %" PRIu64 " %" PRIu64, brisk_gguf_type_name(et), n, h);
    } else {
      print_scalar(t, brisk_gguf_kv_scalar(g, i));
    }
    printf("\n");
  }
  for (int64_t i = 0; i < brisk_gguf_n_tensors(g); i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    uint64_t pos = 0;
    printf("tensor %s %u ", t->name, t->type);
    for (uint32_t d = 0; d < t->n_dims; d++) printf(d ? ",%" PRIu64 : "%" PRIu64, t->ne[d]);
    printf(" %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", t->offset, t->n_bytes,
           wsum(0, t->data, t->n_bytes, &pos));
  }
  brisk_gguf_close(g);
  return 0;
}

static uint64_t rng;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != BRISK_OK) {                                                                      \
      fprintf(stderr, "%s: %s\n", #call, brisk_last_error());                                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* Random bytes for a string value: ASCII, UTF-8, NUL and non-UTF-8 bytes. */
static size_t random_string(char *s) {
  size_t n = next() % 12;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next() % 8;
    s[i] = r == 0 ? 0 : r == 1 ? (char)(0x80 | next()) : (char)('a' + next() % 26);
  }
  return n;
}

static int write_random(const char *path, uint64_t seed) {
  rng = seed;
  static const uint32_t alignments[] = {32, 8, 64, 256};
  brisk_gguf_writer *w;
  CHECK(brisk_gguf_writer_create(2 + (uint32_t)(next() % 2), alignments[next() % 4], &w));
  CHECK(brisk_gguf_writer_set_str(w, "general.architecture", "llama"));
  for (int t = 0; t <= BRISK_GGUF_FLOAT64; t++) {
    if (t == BRISK_GGUF_STRING || t == BRISK_GGUF_ARRAY) continue;
    size_t size = brisk_gguf_type_size((brisk_gguf_type)t);
    unsigned char v[8 * 40];
    uint64_t n = 1 + next() % 40;
    for (size_t k = 0; k < n * size; k++)
      v[k] = t == BRISK_GGUF_BOOL ? next() & 1 : (unsigned char)next();
    char key[64];
    snprintf(key, sizeof key, "scalar.%s", brisk_gguf_type_name((brisk_gguf_type)t));
    CHECK(brisk_gguf_writer_set_scalar(w, key, (brisk_gguf_type)t, v));
    snprintf(key, sizeof key, "array.%s", brisk_gguf_type_name((brisk_gguf_type)t));
    CHECK(brisk_gguf_writer_set_arr(w, key, (brisk_gguf_type)t, v, n));
  }
  char buf[64][16];
  brisk_gguf_str strs[64];
  uint64_t n = 1 + next() % 64;
  for (uint64_t j = 0; j < n; j++) strs[j] = (brisk_gguf_str){buf[j], random_string(buf[j])};
  CHECK(brisk_gguf_writer_set_arr_strn(w, "tokenizer.ggml.tokens", strs, n));
  CHECK(brisk_gguf_writer_set_strn(w, "string.raw", buf[0], strs[0].len));
  CHECK(brisk_gguf_writer_set_str(w, "string.\xc3\xa9t\xc3\xa9", "\xe2\x82\xac"));
  for (uint32_t id = 0; id < BRISK_DTYPE_COUNT; id++) {
    const brisk_dtype_info *info = brisk_dtype_get(id);
    if (!info) continue;
    uint32_t n_dims = 1 + (uint32_t)(next() % 4);
    uint64_t ne[4] = {info->block_size * (1 + next() % 3), 1 + next() % 3, 1 + next() % 2, 2};
    uint64_t count = 1;
    for (uint32_t d = 0; d < n_dims; d++) count *= ne[d];
    uint64_t bytes = count / info->block_size * info->type_size;
    unsigned char *data = malloc(bytes);
    for (uint64_t k = 0; k < bytes; k++) data[k] = (unsigned char)next();
    char name[64];
    snprintf(name, sizeof name, "blk.%u.%s.weight", id, info->name);
    CHECK(brisk_gguf_writer_add_tensor(w, name, id, n_dims, ne, data, bytes));
    free(data);
  }
  CHECK(brisk_gguf_writer_write_file(w, path));
  brisk_gguf_writer_free(w);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
  if (argc == 4 && strcmp(argv[1], "write") == 0)
    return write_random(argv[2], strtoull(argv[3], NULL, 0));
  fprintf(stderr, "usage: %s dump FILE | write FILE SEED\n", argv[0]);
  return 2;
}
