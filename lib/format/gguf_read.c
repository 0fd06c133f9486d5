/* GGUF reader: the validating parser, and opening a file (mmap, or read()
 * into memory) or a caller's buffer. Every count, length, offset and size
 * read from the file is checked with overflow-safe arithmetic before use;
 * counts are bounded by the bytes left, so a huge count fails before any
 * large allocation. Tensor data is never touched (opening is O(metadata)). */
#include "format/gguf_internal.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull; /* for printf */

/* Smallest possible encodings, to bound counts by the bytes left: a key
 * (length + 1 byte) with a type and a 1-byte value; a tensor info with a
 * 1-byte name and one dim. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)
#define MAX_SHOWN_NAME 64

typedef struct cursor {
  const unsigned char *base; /* [size] */
  uint64_t size;
  uint64_t pos;
} cursor;

static uint64_t bytes_left(const cursor *c) { return c->size - c->pos; }

/* The next n bytes, or NULL (and nothing consumed) if the file ends first. */
static const unsigned char *take(cursor *c, uint64_t n) {
  if (n > bytes_left(c)) return NULL;
  const unsigned char *p = c->base + c->pos;
  c->pos += n;
  return p;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static brisk_status truncated(const cursor *c, uint64_t need, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static brisk_status truncated(const cursor *c, uint64_t need, const char *fmt, ...) {
  char what[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return brisk_error(
      BRISK_E_FORMAT,
      "truncated file: %s at offset %llu needs %llu bytes, %llu left (file size %llu)", what,
      (ull)c->pos, (ull)need, (ull)bytes_left(c), (ull)c->size);
}

/* A name from the file for a message: printable ASCII kept, other bytes as
 * \xNN, cut after MAX_SHOWN_NAME bytes. */
static void show_bytes(char *dst, size_t cap, const unsigned char *s, uint64_t len) {
  size_t o = 0;
  for (uint64_t i = 0; i < len && i < MAX_SHOWN_NAME && o + 5 < cap; i++) {
    unsigned ch = s[i];
    if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
      dst[o++] = (char)ch;
    else
      o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
  }
  if (len > MAX_SHOWN_NAME && o + 4 < cap) memcpy(dst + o, "...", 3), o += 3;
  dst[o] = 0;
}

static void show_shape(char *dst, size_t cap, const uint64_t *ne, uint32_t n_dims) {
  size_t o = (size_t)snprintf(dst, cap, "[");
  for (uint32_t d = 0; d < n_dims && o < cap; d++)
    o += (size_t)snprintf(dst + o, cap - o, d ? ", %llu" : "%llu", (ull)ne[d]);
  if (o < cap) snprintf(dst + o, cap - o, "]");
}

/* A key or tensor name: u64 length, then that many bytes, which must be
 * non-empty UTF-8 without control characters. Copied NUL-terminated into
 * the arena. */
static brisk_status read_name(brisk_gguf *g, cursor *c, const char *what, uint64_t i,
                              const char **out) {
  uint64_t at = c->pos;
  const unsigned char *p = take(c, 8);
  if (!p) return truncated(c, 8, "%s #%llu: name length", what, (ull)i);
  uint64_t len = le64(p);
  if (len == 0)
    return brisk_error(BRISK_E_FORMAT, "%s #%llu at offset %llu: empty name", what, (ull)i,
                       (ull)at);
  const unsigned char *s = take(c, len);
  if (!s)
    return brisk_error(BRISK_E_FORMAT,
                       "%s #%llu at offset %llu: name length %llu exceeds the %llu bytes left in "
                       "the file",
                       what, (ull)i, (ull)at, (ull)len, (ull)bytes_left(c));
  if (!brisk_gguf_name_valid((const char *)s, len)) {
    char shown[MAX_SHOWN_NAME * 4 + 8];
    show_bytes(shown, sizeof shown, s, len);
    return brisk_error(BRISK_E_FORMAT,
                       "%s #%llu at offset %llu: name '%s' is not valid UTF-8 without control "
                       "characters",
                       what, (ull)i, (ull)at, shown);
  }
  char *copy = brisk_arena_strndup(&g->arena, (const char *)s, len);
  if (!copy) return brisk_error_oom();
  *out = copy;
  return BRISK_OK;
}

static brisk_status read_string_value(brisk_gguf *g, cursor *c, brisk_gguf_kv *kv) {
  const unsigned char *p = take(c, 8);
  if (!p) return truncated(c, 8, "key '%s': string length", kv->key);
  uint64_t len = le64(p);
  const unsigned char *s = take(c, len);
  if (!s)
    return brisk_error(BRISK_E_FORMAT,
                       "key '%s': string length %llu exceeds the %llu bytes left at offset %llu",
                       kv->key, (ull)len, (ull)bytes_left(c), (ull)c->pos);
  char *copy = brisk_arena_strndup(&g->arena, (const char *)s, len);
  if (!copy) return brisk_error_oom();
  kv->str = (brisk_gguf_str){copy, len};
  return BRISK_OK;
}

/* Two passes: validate every length and sum them, then copy all strings
 * into one arena block, so an array of n strings costs two allocations. */
static brisk_status read_string_array(brisk_gguf *g, cursor *c, brisk_gguf_kv *kv) {
  uint64_t n = kv->n;
  if (n > bytes_left(c) / 8)
    return brisk_error(BRISK_E_FORMAT,
                       "key '%s': array of %llu strings cannot fit in the %llu bytes left at "
                       "offset %llu",
                       kv->key, (ull)n, (ull)bytes_left(c), (ull)c->pos);
  if (n == 0) return BRISK_OK;
  uint64_t start = c->pos, total = 0;
  for (uint64_t j = 0; j < n; j++) {
    const unsigned char *p = take(c, 8);
    if (!p)
      return truncated(c, 8, "key '%s': length of string %llu of %llu", kv->key, (ull)j, (ull)n);
    uint64_t len = le64(p);
    if (!take(c, len))
      return brisk_error(BRISK_E_FORMAT,
                         "key '%s': string %llu of %llu has length %llu but only %llu bytes are "
                         "left at offset %llu",
                         kv->key, (ull)j, (ull)n, (ull)len, (ull)bytes_left(c), (ull)c->pos);
    total += len; /* cannot overflow: every len fits in the file */
  }
  size_t strs_bytes, chars_bytes;
  if (brisk_mul_overflow_size((size_t)n, sizeof(brisk_gguf_str), &strs_bytes) ||
      brisk_add_overflow_size((size_t)total, (size_t)n, &chars_bytes))
    return brisk_error_oom();
  brisk_gguf_str *strs = brisk_arena_alloc(&g->arena, strs_bytes); /* [n] */
  char *chars = brisk_arena_alloc(&g->arena, chars_bytes);         /* n NUL-terminated strings */
  if (!strs || !chars) return brisk_error_oom();
  cursor again = {c->base, c->size, start};
  for (uint64_t j = 0; j < n; j++) {
    uint64_t len = le64(take(&again, 8));
    memcpy(chars, take(&again, len), len);
    chars[len] = 0;
    strs[j] = (brisk_gguf_str){chars, len};
    chars += len + 1;
  }
  kv->strs = strs;
  return BRISK_OK;
}

static brisk_status read_array(brisk_gguf *g, cursor *c, brisk_gguf_kv *kv) {
  const unsigned char *p = take(c, 4 + 8);
  if (!p) return truncated(c, 12, "key '%s': array header", kv->key);
  uint32_t elem = le32(p);
  kv->n = le64(p + 4);
  if (elem == BRISK_GGUF_ARRAY)
    return brisk_error(BRISK_E_FORMAT, "key '%s': arrays of arrays are not supported", kv->key);
  if (elem > BRISK_GGUF_FLOAT64)
    return brisk_error(BRISK_E_FORMAT, "key '%s': unknown array element type %u", kv->key, elem);
  kv->elem_type = (brisk_gguf_type)elem;
  if (elem == BRISK_GGUF_STRING) return read_string_array(g, c, kv);
  size_t size = brisk_gguf_type_size(kv->elem_type);
  uint64_t bytes;
  if (brisk_mul_overflow_u64(kv->n, size, &bytes) || bytes > bytes_left(c))
    return brisk_error(BRISK_E_FORMAT,
                       "key '%s': array of %llu %s (%llu bytes each) exceeds the %llu bytes left "
                       "at offset %llu",
                       kv->key, (ull)kv->n, brisk_gguf_type_name(kv->elem_type), (ull)size,
                       (ull)bytes_left(c), (ull)c->pos);
  kv->arr = take(c, bytes);
  if (elem == BRISK_GGUF_BOOL)
    for (uint64_t j = 0; j < kv->n; j++)
      if (kv->arr[j] > 1)
        return brisk_error(BRISK_E_FORMAT,
                           "key '%s': element %llu of the bool array is %u, not 0 or 1", kv->key,
                           (ull)j, kv->arr[j]);
  return BRISK_OK;
}

static brisk_status read_kv(brisk_gguf *g, cursor *c, uint64_t i, brisk_gguf_kv *kv) {
  brisk_status st = read_name(g, c, "key", i, &kv->key);
  if (st) return st;
  const unsigned char *p = take(c, 4);
  if (!p) return truncated(c, 4, "key '%s': value type", kv->key);
  uint32_t type = le32(p);
  if (type > BRISK_GGUF_FLOAT64)
    return brisk_error(BRISK_E_FORMAT, "key '%s': unknown value type %u", kv->key, type);
  kv->type = (brisk_gguf_type)type;
  if (type == BRISK_GGUF_STRING) return read_string_value(g, c, kv);
  if (type == BRISK_GGUF_ARRAY) return read_array(g, c, kv);
  size_t size = brisk_gguf_type_size(kv->type);
  if (!(p = take(c, size)))
    return truncated(c, size, "key '%s': %s value", kv->key, brisk_gguf_type_name(kv->type));
  memcpy(kv->scalar, p, size);
  if (type == BRISK_GGUF_BOOL && p[0] > 1)
    return brisk_error(BRISK_E_FORMAT, "key '%s': bool value %u is not 0 or 1", kv->key, p[0]);
  return BRISK_OK;
}

const char *brisk_gguf_kv_name(const void *g, int64_t i) {
  return ((const brisk_gguf *)g)->kvs[i].key;
}
const char *brisk_gguf_tensor_name(const void *g, int64_t i) {
  return ((const brisk_gguf *)g)->tensors[i].name;
}

static brisk_status read_kvs(brisk_gguf *g, cursor *c, uint64_t n_kv) {
  for (uint64_t i = 0; i < n_kv; i++) {
    /* Grown as entries parse, so a lying n_kv costs no more than the file. */
    if (brisk_grow((void **)&g->kvs, &g->kv_cap, (size_t)i + 1, sizeof *g->kvs))
      return brisk_error_oom();
    brisk_gguf_kv *kv = &g->kvs[i];
    memset(kv, 0, sizeof *kv);
    g->n_kv = (size_t)i + 1;
    brisk_status st = read_kv(g, c, i, kv);
    if (st) return st;
  }
  if (brisk_gguf_index_reserve(&g->key_index, g->n_kv)) return brisk_error_oom();
  for (size_t i = 0; i < g->n_kv; i++) {
    uint64_t h = brisk_gguf_name_hash(g->kvs[i].key);
    int64_t prev = brisk_gguf_index_find(&g->key_index, g->kvs[i].key, h, brisk_gguf_kv_name, g);
    if (prev >= 0)
      return brisk_error(BRISK_E_FORMAT, "duplicate key '%s' (entries #%lld and #%llu)",
                         g->kvs[i].key, (long long)prev, (ull)i);
    brisk_gguf_index_put(&g->key_index, h, (int64_t)i);
  }
  return BRISK_OK;
}

static brisk_status read_alignment(brisk_gguf *g) {
  g->alignment = BRISK_GGUF_DEFAULT_ALIGNMENT;
  int64_t i = brisk_gguf_find_key(g, "general.alignment");
  if (i < 0) return BRISK_OK;
  const brisk_gguf_kv *kv = &g->kvs[i];
  if (kv->type != BRISK_GGUF_UINT32)
    return brisk_error(BRISK_E_FORMAT, "key 'general.alignment' has type %s, expected u32",
                       brisk_gguf_type_name(kv->type));
  uint32_t a = le32(kv->scalar);
  if (a == 0 || (a & (a - 1)))
    return brisk_error(BRISK_E_FORMAT, "key 'general.alignment': %u is not a power of two", a);
  g->alignment = a;
  return BRISK_OK;
}

static brisk_status read_tensor_info(brisk_gguf *g, cursor *c, uint64_t i, brisk_gguf_tensor *t) {
  brisk_status st = read_name(g, c, "tensor", i, &t->name);
  if (st) return st;
  const unsigned char *p = take(c, 4);
  if (!p) return truncated(c, 4, "tensor '%s': n_dims", t->name);
  t->n_dims = le32(p);
  if (t->n_dims < 1 || t->n_dims > BRISK_GGUF_MAX_DIMS)
    return brisk_error(BRISK_E_FORMAT, "tensor '%s': n_dims %u is not in 1..%d", t->name, t->n_dims,
                       BRISK_GGUF_MAX_DIMS);
  if (!(p = take(c, 8ull * t->n_dims)))
    return truncated(c, 8ull * t->n_dims, "tensor '%s': %u dims", t->name, t->n_dims);
  for (uint32_t d = 0; d < BRISK_GGUF_MAX_DIMS; d++) t->ne[d] = d < t->n_dims ? le64(p + 8 * d) : 1;
  if (!(p = take(c, 4 + 8))) return truncated(c, 12, "tensor '%s': type and offset", t->name);
  t->type = le32(p);
  t->offset = le64(p + 4);

  char shape[128];
  show_shape(shape, sizeof shape, t->ne, t->n_dims);
  uint64_t n_elems = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    if (t->ne[d] == 0)
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': dim %u of shape %s is 0", t->name, d, shape);
    if (brisk_mul_overflow_u64(n_elems, t->ne[d], &n_elems) || n_elems > (uint64_t)INT64_MAX)
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': shape %s has more than 2^63-1 elements",
                         t->name, shape);
  }
  const brisk_dtype_info *info = brisk_dtype_get(t->type);
  if (!info)
    return brisk_error(BRISK_E_UNSUPPORTED, "tensor '%s': unknown tensor type id %u", t->name,
                       t->type);
  uint64_t row_bytes;
  if (t->ne[0] % info->block_size)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s': row length %llu is not a multiple of the %s block size %u",
                       t->name, (ull)t->ne[0], info->name, info->block_size);
  if (!brisk_dtype_row_bytes(t->type, t->ne[0], &row_bytes) ||
      brisk_mul_overflow_u64(row_bytes, n_elems / t->ne[0], &t->n_bytes))
    return brisk_error(BRISK_E_FORMAT, "tensor '%s': %s data of shape %s overflows 64 bits",
                       t->name, info->name, shape);
  if (t->offset % g->alignment)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s': offset %llu is not a multiple of the alignment %u", t->name,
                       (ull)t->offset, g->alignment);
  return BRISK_OK;
}

static brisk_status read_tensors(brisk_gguf *g, cursor *c, uint64_t n_tensors) {
  for (uint64_t i = 0; i < n_tensors; i++) {
    if (brisk_grow((void **)&g->tensors, &g->tensor_cap, (size_t)i + 1, sizeof *g->tensors))
      return brisk_error_oom();
    brisk_gguf_tensor *t = &g->tensors[i];
    memset(t, 0, sizeof *t);
    g->n_tensors = (size_t)i + 1;
    brisk_status st = read_tensor_info(g, c, i, t);
    if (st) return st;
  }
  if (brisk_gguf_index_reserve(&g->tensor_index, g->n_tensors)) return brisk_error_oom();
  for (size_t i = 0; i < g->n_tensors; i++) {
    const char *name = g->tensors[i].name;
    uint64_t h = brisk_gguf_name_hash(name);
    int64_t prev = brisk_gguf_index_find(&g->tensor_index, name, h, brisk_gguf_tensor_name, g);
    if (prev >= 0)
      return brisk_error(BRISK_E_FORMAT, "duplicate tensor name '%s' (tensors #%lld and #%llu)",
                         name, (long long)prev, (ull)i);
    brisk_gguf_index_put(&g->tensor_index, h, (int64_t)i);
  }
  return BRISK_OK;
}

/* The data section follows the tensor infos at the next alignment boundary;
 * every tensor's bytes must lie inside the file. */
static brisk_status place_tensors(brisk_gguf *g, const cursor *c) {
  if (brisk_align_up_u64(c->pos, g->alignment, &g->data_offset))
    return brisk_error(BRISK_E_FORMAT, "data section offset overflows (alignment %u)",
                       g->alignment);
  if (g->n_tensors == 0) return BRISK_OK; /* writers need not pad a file without data */
  if (g->data_offset > g->size)
    return brisk_error(BRISK_E_FORMAT,
                       "data section starts at offset %llu (alignment %u), past the file size %llu",
                       (ull)g->data_offset, g->alignment, (ull)g->size);
  for (size_t i = 0; i < g->n_tensors; i++) {
    brisk_gguf_tensor *t = &g->tensors[i];
    uint64_t begin, end;
    if (brisk_add_overflow_u64(g->data_offset, t->offset, &begin) ||
        brisk_add_overflow_u64(begin, t->n_bytes, &end))
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': offset %llu + size %llu overflows 64 bits",
                         t->name, (ull)t->offset, (ull)t->n_bytes);
    if (end > g->size)
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': data [%llu, %llu) ends past file size %llu",
                         t->name, (ull)begin, (ull)end, (ull)g->size);
    t->data = g->base + begin;
  }
  return BRISK_OK;
}

static brisk_status read_header(brisk_gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
  const unsigned char *p = take(c, 4);
  if (!p)
    return brisk_error(BRISK_E_FORMAT, "not a GGUF file: %llu bytes, too short for the magic",
                       (ull)c->size);
  if (memcmp(p, "GGUF", 4) != 0)
    return brisk_error(BRISK_E_FORMAT,
                       "not a GGUF file: magic is %02x %02x %02x %02x, expected 'GGUF'", p[0], p[1],
                       p[2], p[3]);
  if (!(p = take(c, 4))) return truncated(c, 4, "header: version");
  g->version = le32(p);
  if (g->version != 2 && g->version != 3) {
    uint32_t swapped = __builtin_bswap32(g->version);
    if (swapped == 2 || swapped == 3)
      return brisk_error(BRISK_E_UNSUPPORTED, "big-endian GGUF (version %u) is not supported",
                         swapped);
    return brisk_error(BRISK_E_UNSUPPORTED, "GGUF version %u is not supported (only 2 and 3)",
                       g->version);
  }
  if (!(p = take(c, 16))) return truncated(c, 16, "header: n_tensors and n_kv");
  *n_tensors = le64(p);
  *n_kv = le64(p + 8);
  uint64_t left = bytes_left(c), kv_min, ti_min, sum;
  if (brisk_mul_overflow_u64(*n_kv, MIN_KV_BYTES, &kv_min) ||
      brisk_mul_overflow_u64(*n_tensors, MIN_TENSOR_INFO_BYTES, &ti_min) ||
      brisk_add_overflow_u64(kv_min, ti_min, &sum) || sum > left)
    return brisk_error(BRISK_E_FORMAT,
                       "header: n_kv %llu and n_tensors %llu cannot fit in the %llu bytes after "
                       "the header",
                       (ull)*n_kv, (ull)*n_tensors, (ull)left);
  return BRISK_OK;
}

static brisk_status parse(brisk_gguf *g) {
  cursor c = {g->base, g->size, 0};
  uint64_t n_tensors = 0, n_kv = 0;
  brisk_status st = read_header(g, &c, &n_tensors, &n_kv);
  if (!st) st = read_kvs(g, &c, n_kv);
  if (!st) st = read_alignment(g);
  if (!st) st = read_tensors(g, &c, n_tensors);
  if (!st) st = place_tensors(g, &c);
  return st;
}

/* Parses base[0, size); on success the handle takes over `storage`. */
static brisk_status open_bytes(const unsigned char *base, uint64_t size, brisk_gguf_storage storage,
                               brisk_gguf **out) {
  brisk_gguf *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  g->base = base;
  g->size = size;
  g->storage = BRISK_GGUF_STORAGE_CALLER; /* the caller frees the bytes on failure */
  brisk_arena_init(&g->arena, 0);
  brisk_status st = parse(g);
  if (st) {
    brisk_gguf_close(g);
    return st;
  }
  g->storage = storage;
  *out = g;
  return BRISK_OK;
}

brisk_status brisk_gguf_open_memory(const void *data, size_t size, brisk_gguf **out) {
  if (!out || (!data && size))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_gguf_open_memory: NULL %s",
                       out ? "data" : "out");
  return open_bytes(data, size, BRISK_GGUF_STORAGE_CALLER, out);
}

brisk_status brisk_gguf_open_owned(void *data, size_t size, brisk_gguf **out) {
  if (!out || !data)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_gguf_open_owned: NULL %s",
                       out ? "data" : "out");
  return open_bytes(data, size, BRISK_GGUF_STORAGE_HEAP, out);
}

static brisk_status read_whole(int fd, unsigned char *buf, uint64_t size, const char *path) {
  uint64_t done = 0;
  while (done < size) {
    size_t want = size - done > (1u << 30) ? (1u << 30) : (size_t)(size - done);
    ssize_t n = read(fd, buf + done, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return brisk_error(BRISK_E_IO, "cannot read '%s': %s", path, strerror(errno));
    if (n == 0)
      return brisk_error(BRISK_E_IO, "'%s' shrank while being read: %llu of %llu bytes", path,
                         (ull)done, (ull)size);
    done += (uint64_t)n;
  }
  return BRISK_OK;
}

/* Prefixes the last error with the path, keeping the status. */
static brisk_status with_path(brisk_status st, const char *path) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", brisk_last_error());
  return brisk_error(st, "%s: %s", path, msg);
}

brisk_status brisk_gguf_open_flags(const char *path, uint32_t flags, brisk_gguf **out) {
  if (!path || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_gguf_open: NULL %s", path ? "out" : "path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return brisk_error(BRISK_E_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return brisk_error(BRISK_E_IO, "cannot stat '%s': %s", path, strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return brisk_error(BRISK_E_IO, "cannot open '%s': not a regular file", path);
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (size > SIZE_MAX - 8192) {
    close(fd);
    return brisk_error(BRISK_E_IO, "cannot open '%s': %llu bytes do not fit in memory", path,
                       (ull)size);
  }
  brisk_status st;
  void *map = MAP_FAILED;
  if (!(flags & BRISK_GGUF_OPEN_NO_MMAP) && size > 0)
    map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map != MAP_FAILED) {
    close(fd); /* the mapping stays valid */
    st = open_bytes(map, size, BRISK_GGUF_STORAGE_MAPPED, out);
    if (st) munmap(map, (size_t)size);
    return st ? with_path(st, path) : st;
  }
  /* Page-aligned like a mapping, so tensor data keeps the file's alignment. */
  unsigned char *buf = brisk_aligned_alloc(4096, size ? (size_t)size : 1);
  if (!buf) {
    close(fd);
    return with_path(brisk_error_oom(), path);
  }
  st = read_whole(fd, buf, size, path);
  close(fd);
  if (st) {
    brisk_aligned_free(buf);
    return st;
  }
  st = open_bytes(buf, size, BRISK_GGUF_STORAGE_HEAP, out);
  if (st) {
    brisk_aligned_free(buf);
    return with_path(st, path);
  }
  return BRISK_OK;
}

brisk_status brisk_gguf_set_writable(brisk_gguf *g, const void *p, size_t n, bool writable) {
  const uintptr_t base = (uintptr_t)g->base, at = (uintptr_t)p;
  if (at < base || at - base > g->size || n > g->size - (at - base))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf: %zu bytes to rewrite at %p are not inside the file's bytes", n, p);
  if (g->storage == BRISK_GGUF_STORAGE_HEAP || n == 0) return BRISK_OK;
  if (g->storage != BRISK_GGUF_STORAGE_MAPPED)
    return brisk_error(BRISK_E_UNSUPPORTED, "gguf: the caller's buffer is not rewritten");
  const long page_size = sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_size > 0 ? (uintptr_t)page_size : 4096;
  const uintptr_t lo = at / page * page, hi = (at + n + page - 1) / page * page;
  if (mprotect((void *)lo, (size_t)(hi - lo), writable ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
    return brisk_error(BRISK_E_IO, "gguf: cannot change the protection of the mapping (%s)",
                       strerror(errno));
  return BRISK_OK;
}

brisk_status brisk_gguf_open(const char *path, brisk_gguf **out) {
  return brisk_gguf_open_flags(path, 0, out);
}

void brisk_gguf_close(brisk_gguf *g) {
  if (!g) return;
  if (g->storage == BRISK_GGUF_STORAGE_MAPPED)
    munmap((void *)g->base, (size_t)g->size);
  else if (g->storage == BRISK_GGUF_STORAGE_HEAP)
    brisk_aligned_free((void *)g->base);
  brisk_free(g->kvs);
  brisk_free(g->tensors);
  brisk_gguf_index_free(&g->key_index);
  brisk_gguf_index_free(&g->tensor_index);
  brisk_arena_free(&g->arena);
  brisk_free(g);
}
